//! Engine metrics recorded while a bench runs: the server's own Prometheus `/metrics`, scraped at
//! a fixed interval, kept as a time series and a `first`/`last`/`max` summary (issue 27 item 3).
//!
//! This module is pure: it parses an exposition body and folds samples into a
//! [`ServerMetrics`]. The scraping (a separate thread, so the bench's one-thread runtime never
//! waits on it) is in [`crate::run`].
//!
//! Which metrics, by engine, from their sources:
//!
//! * vLLM (`vllm/v1/metrics/loggers.py`; docs `design/metrics.md`): `vllm:kv_cache_usage_perc`
//!   (V1; V0 spelled it `vllm:gpu_cache_usage_perc`), `vllm:num_requests_running`,
//!   `vllm:num_requests_waiting`, `vllm:num_preemptions_total`, `vllm:prefix_cache_hits_total`,
//!   `vllm:prefix_cache_queries_total` (V0: `vllm:gpu_prefix_cache_hits_total`/`_queries_total`),
//!   histograms `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds` (older:
//!   `vllm:time_per_output_token_seconds`). Real exposition: `fixtures/server-metrics/vllm-0.10.0.metrics`.
//! * SGLang (`python/sglang/srt/metrics/collector.py`): `sglang:token_usage`,
//!   `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:cache_hit_rate`,
//!   `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`.
//! * LMDeploy (`lmdeploy/metrics/loggers.py` `PrometheusStatLogger`, 0.10.0–0.18.0; its room
//!   `inferscope_plan::engines::lmdeploy::env::METRICS`): `lmdeploy:gpu_cache_usage_perc` (a
//!   fraction, "1 means 100 percent usage"), `lmdeploy:num_requests_running`,
//!   `lmdeploy:num_requests_waiting`, `lmdeploy:prefix_cache_hit_rate`, histograms
//!   `lmdeploy:time_to_first_token_seconds`, `lmdeploy:time_per_output_token_seconds`.
//! * TGI (`router/src/`, `metrics::gauge!`): `tgi_queue_size`, `tgi_batch_current_size`.
//! * llama-server with `--metrics` (`tools/server/server.cpp`, handler of `/metrics`):
//!   `llamacpp:kv_cache_usage_ratio` (older builds), `llamacpp:requests_processing`,
//!   `llamacpp:requests_deferred`, `llamacpp:tokens_predicted_total`,
//!   `llamacpp:prompt_tokens_total`, `llamacpp:n_busy_slots_per_decode`. Real exposition:
//!   `fixtures/server-metrics/llama-server.metrics`.
//!
//! Histograms are kept as their `_sum` and `_count` (the engine-side mean over any window is
//! the difference of sums over the difference of counts); buckets are left out to bound the size.
//! Labels are folded: ratios (`*_perc`, `*_ratio`, `*_usage`, `*_rate`) take the largest labelled
//! value (the fullest engine of a data-parallel server), everything else the sum.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Gauges and counters recorded when present (exact names, as the servers spell them).
pub const KNOWN: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total",
    "sglang:token_usage",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:cache_hit_rate",
    "lmdeploy:gpu_cache_usage_perc",
    "lmdeploy:num_requests_running",
    "lmdeploy:num_requests_waiting",
    "lmdeploy:prefix_cache_hit_rate",
    "tgi_queue_size",
    "tgi_batch_current_size",
    "llamacpp:kv_cache_usage_ratio",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:tokens_predicted_total",
    "llamacpp:prompt_tokens_total",
    "llamacpp:n_busy_slots_per_decode",
];

/// Histograms whose `_sum` and `_count` are recorded (engine-side TTFT/ITL).
pub const HISTOGRAMS: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "lmdeploy:time_to_first_token_seconds",
    "lmdeploy:time_per_output_token_seconds",
];

/// Largest scrape body read (bigger bodies are cut here and the scrape counts as failed).
pub const MAX_BODY_BYTES: usize = 4 << 20;
/// Most points kept per series (one hour at 1 s); later points are dropped, counted in
/// [`ServerMetrics::dropped_points`].
pub const MAX_POINTS: usize = 3600;

/// `first`, `last` and `max` of one series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The first value scraped.
    pub first: f64,
    /// The last value scraped.
    pub last: f64,
    /// The largest value scraped.
    pub max: f64,
}

/// The `server_metrics` block of a result file (docs/bench.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// The URL scraped (credentials removed).
    pub source: String,
    /// Seconds between scrapes.
    pub interval_s: f64,
    /// `ok` when at least one known metric was read, else `unknown`.
    pub status: String,
    /// Why `unknown` (unreachable, not Prometheus text, no known metric), or the first failed
    /// scrape's error when some failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Scrapes attempted.
    pub scrapes: u64,
    /// Scrapes that failed (connection, status, body too large).
    pub failed_scrapes: u64,
    /// Points dropped past [`MAX_POINTS`].
    #[serde(default)]
    pub dropped_points: u64,
    /// Metric name → `[seconds since the run started, value]`.
    pub series: BTreeMap<String, Vec<[f64; 2]>>,
    /// Metric name → first/last/max.
    pub summary: BTreeMap<String, Summary>,
}

impl ServerMetrics {
    /// An empty record for `source`, status `unknown` until a known metric is read.
    pub fn new(source: &str, interval_s: f64) -> Self {
        ServerMetrics {
            source: source.to_string(),
            interval_s,
            status: "unknown".into(),
            reason: Some("no scrape finished".into()),
            ..Default::default()
        }
    }

    /// Record one successful scrape's body taken `t_s` seconds after the run started.
    pub fn add_body(&mut self, t_s: f64, body: &str) {
        self.scrapes += 1;
        for (name, v) in parse(body) {
            let points = self.series.entry(name).or_default();
            if points.len() >= MAX_POINTS {
                self.dropped_points += 1;
            } else {
                points.push([t_s, v]);
            }
        }
        self.refresh();
    }

    /// Record one failed scrape.
    pub fn add_failure(&mut self, why: String) {
        self.scrapes += 1;
        self.failed_scrapes += 1;
        if self.series.is_empty() || self.reason.is_none() {
            self.reason = Some(why);
        }
        self.refresh();
    }

    /// Recompute `summary` and `status` from the series.
    fn refresh(&mut self) {
        self.summary = self
            .series
            .iter()
            .filter_map(|(k, p)| Some((k.clone(), summarize(p)?)))
            .collect();
        if self.series.is_empty() {
            self.status = "unknown".into();
            if self.failed_scrapes == 0 && self.scrapes > 0 {
                self.reason = Some(format!(
                    "{} answered, but with none of the engine metrics inferscope knows (vLLM, SGLang, TGI, llama-server --metrics)",
                    self.source
                ));
            }
        } else {
            self.status = "ok".into();
            if self.failed_scrapes == 0 {
                self.reason = None;
            }
        }
    }

    /// Append another run's series, shifted by `offset_s` (for `--repeat`).
    pub fn append(&mut self, other: &ServerMetrics, offset_s: f64) {
        self.scrapes += other.scrapes;
        self.failed_scrapes += other.failed_scrapes;
        self.dropped_points += other.dropped_points;
        for (k, pts) in &other.series {
            let mine = self.series.entry(k.clone()).or_default();
            mine.extend(pts.iter().map(|[t, v]| [t + offset_s, *v]));
        }
        if self.reason.is_none() {
            self.reason.clone_from(&other.reason);
        }
        self.refresh();
    }

    /// The summary of `name`, if it was read.
    pub fn get(&self, name: &str) -> Option<&Summary> {
        self.summary.get(name)
    }
}

/// KV-cache usage as a fraction of 1, by engine.
const KV: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "lmdeploy:gpu_cache_usage_perc",
    "llamacpp:kv_cache_usage_ratio",
];
/// Preemption counters.
const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total"];
/// Requests queued in the engine.
const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "lmdeploy:num_requests_waiting",
    "tgi_queue_size",
    "llamacpp:requests_deferred",
];
/// Requests running in the engine.
const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "lmdeploy:num_requests_running",
    "tgi_batch_current_size",
    "llamacpp:requests_processing",
];

fn first_of<'m>(m: &'m ServerMetrics, names: &[&str]) -> Option<&'m Summary> {
    names.iter().find_map(|n| m.get(n))
}

/// Preemptions during the run (the counter's rise), KV peak (%), waiting and running peaks.
pub fn headline(m: &ServerMetrics) -> [Option<f64>; 4] {
    [
        first_of(m, PREEMPTIONS).map(|s| s.last - s.first),
        first_of(m, KV).map(|s| s.max * 100.0),
        first_of(m, WAITING).map(|s| s.max),
        first_of(m, RUNNING).map(|s| s.max),
    ]
}

/// One line for `bench`'s summary.
pub fn describe(m: &ServerMetrics) -> String {
    if m.status != "ok" {
        return format!(
            "server metrics: unknown ({})",
            m.reason.as_deref().unwrap_or("no known metric")
        );
    }
    let [pre, kv, wait, run] = headline(m);
    let mut parts = Vec::new();
    if let Some(k) = kv {
        parts.push(format!("KV usage peaked at {k:.0} %"));
    }
    if let Some(p) = pre {
        parts.push(format!("{p:.0} preemptions"));
    }
    if let Some(r) = run {
        parts.push(format!("running peaked at {r:.0}"));
    }
    if let Some(w) = wait {
        parts.push(format!("waiting peaked at {w:.0}"));
    }
    if parts.is_empty() {
        parts.push(format!("{} series recorded", m.series.len()));
    }
    format!(
        "server metrics ({}, every {}s): {}",
        m.source,
        m.interval_s,
        parts.join(", ")
    )
}

/// The engine-side difference between two runs, for `compare` and `tune` to show beside the
/// verdict ("the candidate preempted 37 requests, the baseline 0; KV usage peaked at 100 % ...").
/// Empty when neither run recorded engine metrics.
pub fn compare_lines(base: Option<&ServerMetrics>, cand: Option<&ServerMetrics>) -> Vec<String> {
    let mut out = Vec::new();
    for (who, m) in [("baseline", base), ("candidate", cand)] {
        if let Some(m) = m.filter(|m| m.status != "ok") {
            out.push(format!(
                "the {who}'s engine metrics are unknown: {}",
                m.reason.as_deref().unwrap_or("no known metric")
            ));
        }
    }
    let ok = |m: Option<&ServerMetrics>| m.filter(|m| m.status == "ok").map(headline);
    let (Some(b), Some(c)) = (ok(base), ok(cand)) else {
        return out;
    };
    let [bp, bk, bw, br] = b;
    let [cp, ck, cw, cr] = c;
    let mut parts = Vec::new();
    if let (Some(c), Some(b)) = (cp, bp) {
        parts.push(format!(
            "the candidate preempted {c:.0} requests, the baseline {b:.0}"
        ));
    }
    if let (Some(c), Some(b)) = (ck, bk) {
        parts.push(format!(
            "KV usage peaked at {c:.0} % (candidate) and {b:.0} % (baseline)"
        ));
    }
    if let (Some(c), Some(b)) = (cw, bw) {
        parts.push(format!(
            "requests waiting peaked at {c:.0} (candidate) and {b:.0} (baseline)"
        ));
    }
    if let (Some(c), Some(b)) = (cr, br) {
        parts.push(format!(
            "requests running peaked at {c:.0} (candidate) and {b:.0} (baseline)"
        ));
    }
    if !parts.is_empty() {
        out.push(parts.join("; "));
    }
    out
}

fn summarize(p: &[[f64; 2]]) -> Option<Summary> {
    let first = p.first()?[1];
    let last = p.last()?[1];
    let max = p.iter().map(|x| x[1]).fold(f64::NEG_INFINITY, f64::max);
    Some(Summary { first, last, max })
}

/// Whether labelled samples of `name` fold by maximum (ratios) rather than by sum.
fn folds_by_max(name: &str) -> bool {
    ["_perc", "_ratio", "_usage", "_rate"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// The known metrics of one exposition body, labels folded (pure; malformed lines are skipped:
/// a scrape is evidence, not input the user wrote).
pub fn parse(body: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for line in body.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        if !wanted(name) {
            continue;
        }
        // Skip the label set (label values may hold spaces, never an unescaped `}` at the end).
        let rest = match rest.strip_prefix('{') {
            Some(r) => match r.rfind('}') {
                Some(i) => r.get(i + 1..).unwrap_or(""),
                None => continue,
            },
            None => rest,
        };
        // `value [timestamp]`.
        let Some(v) = rest.split_whitespace().next().and_then(parse_value) else {
            continue;
        };
        let slot = out.entry(name.to_string());
        if folds_by_max(name) {
            slot.and_modify(|x| *x = x.max(v)).or_insert(v);
        } else {
            slot.and_modify(|x| *x += v).or_insert(v);
        }
    }
    out
}

fn parse_value(s: &str) -> Option<f64> {
    let v: f64 = s.parse().ok()?;
    v.is_finite().then_some(v)
}

fn wanted(name: &str) -> bool {
    KNOWN.contains(&name)
        || HISTOGRAMS.iter().any(|h| {
            name.strip_prefix(h)
                .is_some_and(|s| s == "_sum" || s == "_count")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/server-metrics/"
        );
        std::fs::read_to_string(format!("{p}{name}")).unwrap()
    }

    #[test]
    fn real_llama_server_exposition() {
        let m = parse(&fixture("llama-server.metrics"));
        assert_eq!(m["llamacpp:requests_processing"], 0.0);
        assert_eq!(m["llamacpp:requests_deferred"], 0.0);
        assert_eq!(m["llamacpp:tokens_predicted_total"], 16.0);
        assert_eq!(m["llamacpp:prompt_tokens_total"], 5.0);
        assert_eq!(m["llamacpp:n_busy_slots_per_decode"], 1.0);
        // Not known: recorded nowhere.
        assert!(!m.contains_key("llamacpp:prompt_seconds_total"));
    }

    #[test]
    fn real_vllm_exposition_labels_folded() {
        let m = parse(&fixture("vllm-0.10.0.metrics"));
        assert_eq!(m["vllm:kv_cache_usage_perc"], 9.75010481363281e-06);
        assert_eq!(m["vllm:prefix_cache_queries_total"], 32.0);
        assert_eq!(m["vllm:gpu_prefix_cache_hits_total"], 0.0);
        assert!(!m.contains_key("vllm:gpu_prefix_cache_queries_created"));
    }

    #[test]
    fn folding_histograms_and_garbage() {
        let body = "vllm:num_preemptions_total{engine=\"0\"} 3\n\
                    vllm:num_preemptions_total{engine=\"1\"} 4\n\
                    vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n\
                    vllm:kv_cache_usage_perc{engine=\"1\"} 0.9\n\
                    vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 7\n\
                    vllm:time_to_first_token_seconds_sum{a=\"x y}\"} 1.5 1700000000\n\
                    vllm:num_requests_running{ NaN\n\
                    vllm:num_requests_waiting +Inf\n\
                    tgi_queue_size 2\n";
        let m = parse(body);
        assert_eq!(m["vllm:num_preemptions_total"], 7.0);
        assert_eq!(m["vllm:kv_cache_usage_perc"], 0.9);
        assert_eq!(m["vllm:time_to_first_token_seconds_sum"], 1.5);
        assert_eq!(m["tgi_queue_size"], 2.0);
        assert_eq!(m.len(), 4, "{m:?}");
    }

    #[test]
    fn series_summary_and_unknown() {
        let mut s = ServerMetrics::new("http://h/metrics", 1.0);
        s.add_failure("connection refused".into());
        assert_eq!(s.status, "unknown");
        assert_eq!(s.reason.as_deref(), Some("connection refused"));
        s.add_body(1.0, "vllm:kv_cache_usage_perc 0.2\n");
        s.add_body(2.0, "vllm:kv_cache_usage_perc 1\n");
        s.add_body(3.0, "vllm:kv_cache_usage_perc 0.4\n");
        assert_eq!(s.status, "ok");
        assert_eq!(
            s.series["vllm:kv_cache_usage_perc"],
            vec![[1.0, 0.2], [2.0, 1.0], [3.0, 0.4]]
        );
        let sum = s.get("vllm:kv_cache_usage_perc").unwrap();
        assert_eq!((sum.first, sum.last, sum.max), (0.2, 0.4, 1.0));
        let mut other = ServerMetrics::new("http://h/metrics", 1.0);
        other.add_body(0.5, "python_gc_objects_collected_total 3\n");
        assert_eq!(other.status, "unknown");
        assert!(
            other
                .reason
                .as_deref()
                .unwrap()
                .contains("none of the engine metrics")
        );
    }

    #[test]
    fn compare_names_the_preemption_and_kv_difference() {
        let mut base = ServerMetrics::new("http://b/metrics", 1.0);
        base.add_body(
            0.0,
            "vllm:num_preemptions_total 5\nvllm:kv_cache_usage_perc 0.1\n",
        );
        base.add_body(
            1.0,
            "vllm:num_preemptions_total 5\nvllm:kv_cache_usage_perc 0.42\n",
        );
        let mut cand = ServerMetrics::new("http://c/metrics", 1.0);
        cand.add_body(
            0.0,
            "vllm:num_preemptions_total 2\nvllm:kv_cache_usage_perc 0.3\n",
        );
        cand.add_body(
            1.0,
            "vllm:num_preemptions_total 39\nvllm:kv_cache_usage_perc 1\n",
        );
        let lines = compare_lines(Some(&base), Some(&cand));
        assert_eq!(
            lines,
            vec![
                "the candidate preempted 37 requests, the baseline 0; KV usage peaked at 100 % (candidate) and 42 % (baseline)"
                    .to_string()
            ]
        );
        let dead = ServerMetrics::new("http://d/metrics", 1.0);
        let lines = compare_lines(Some(&base), Some(&dead));
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("the candidate's engine metrics are unknown"));
        assert!(compare_lines(None, None).is_empty());
    }
}
