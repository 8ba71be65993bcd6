//! The result file: every setting, the seed, the dataset, the server's model and version, the
//! machine, the client's CPU use, validity, and the statistics. Documented in `docs/bench.md`;
//! keys are stable within a `schema_version`.
//!
//! The statistics are flattened into the top level so the keys the issue promises
//! (`ttft_ms`, `tpot_ms`, `itl_ms`, `e2e_ms` with `mean/p50/p90/p95/p99/p999`, `requests`
//! `{completed, failed}`, `output_tokens_per_s`, `requests_per_s`) sit where scripts expect them.
//! A sweep adds `sweep.steps`, one full statistics block per step; the top level then describes
//! the saturation (closed-loop) step.
//!
//! Validity follows MLPerf LoadGen's idea: a run is `valid` only when it finished its plan (no
//! early stop), completed at least `min_requests` requests and, for a timed run, measured for at
//! least the duration asked. Everything else is still written, with `invalid_reasons`.

use crate::client::ServerInfo;
use crate::exec::{CpuUsage, StopReason};
use crate::schedule::{Limits, Schedule, Warmup};
use crate::stats::{Slo, Stats};
use inferscope_host::Snapshot;
use serde::{Deserialize, Serialize};

/// Layout version of the result file.
/// 2: `server_metrics` (issue 27).
pub const SCHEMA_VERSION: u32 = 2;

/// Every setting of the run, enough to reproduce it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Base URL of the server.
    pub url: String,
    /// Request settings (api, model, stream, ignore_eos, temperature, timeouts).
    pub request: crate::client::RequestSettings,
    /// Load pattern (for a sweep: the saturation step).
    pub schedule: Schedule,
    /// Requests and/or duration asked for.
    pub limits: Limits,
    /// Warm-up.
    pub warmup: Warmup,
    /// Hard cap on the sending phase, seconds.
    pub max_duration_s: f64,
    /// Open-loop in-flight cap.
    pub max_inflight: u32,
    /// Dataset description (`random:in=512,out=128,spread=0`).
    pub dataset: String,
    /// Seed of arrivals and synthetic prompts.
    pub seed: u64,
    /// SLOs for goodput.
    pub slo: Slo,
    /// Fewest completed requests for a valid run.
    pub min_requests: u64,
    /// Sweep steps asked for (0 = no sweep).
    #[serde(default)]
    pub sweep_steps: u32,
    /// The local tokenizer given with `--tokenizer`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerSetting>,
}

/// Which `tokenizer.json` counted tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenizerSetting {
    /// The path as given.
    pub path: String,
    /// Its vocabulary size (added tokens included).
    pub vocab_size: usize,
}

/// The machine, summarised from a Snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineSummary {
    /// Hostname.
    pub hostname: Option<String>,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// GPUs seen.
    pub gpu_count: usize,
    /// GPU product names (or PCI ids when the driver is unknown).
    pub gpus: Vec<String>,
    /// GPU driver version, if known.
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, if known.
    pub cuda_driver_version: Option<String>,
    /// NUMA nodes.
    pub numa_nodes: usize,
}

impl MachineSummary {
    /// Take what a benchmark record needs from a Snapshot.
    pub fn from_snapshot(s: &Snapshot) -> Self {
        let driver = s.driver.known();
        MachineSummary {
            hostname: s.host.hostname.known().cloned(),
            cpu_model: s.host.cpu_model.known().cloned(),
            gpu_count: s.gpus.len(),
            gpus: s
                .gpus
                .iter()
                .map(|g| {
                    g.details
                        .known()
                        .and_then(|d| d.name.known().cloned())
                        .unwrap_or_else(|| format!("{:?} GPU at {}", g.vendor, g.pci_bus_id))
                })
                .collect(),
            driver_version: driver.and_then(|d| d.driver_version.known().cloned()),
            cuda_driver_version: driver.and_then(|d| d.cuda_driver_version.known().cloned()),
            numa_nodes: s.numa_nodes.len(),
        }
    }
}

/// The client's own resource use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientUsage {
    /// User CPU seconds of the whole run (warm-up included).
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_system_s: f64,
    /// Wall seconds of the whole run.
    pub wall_s: f64,
    /// (user + system) / output tokens received (all requests, warm-up included).
    pub cpu_s_per_output_token: Option<f64>,
}

impl ClientUsage {
    /// From the run's CPU use and the tokens it received.
    pub fn new(cpu: CpuUsage, wall_s: f64, tokens: u64) -> Self {
        ClientUsage {
            cpu_user_s: cpu.user_s,
            cpu_system_s: cpu.system_s,
            wall_s,
            cpu_s_per_output_token: (tokens > 0)
                .then(|| (cpu.user_s + cpu.system_s) / tokens as f64),
        }
    }
}

/// One step of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// The step's schedule.
    pub schedule: Schedule,
    /// Why it stopped.
    pub stop: StopReason,
    /// Did it finish its plan.
    pub valid: bool,
    /// Its statistics.
    pub stats: Stats,
}

/// A sweep: the saturation throughput and the steps below it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Completed requests per second of the closed-loop saturation step.
    pub saturation_requests_per_s: f64,
    /// All steps, saturation first, then rising rates.
    pub steps: Vec<SweepStep>,
}

/// The result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `inferscope <version>`.
    pub tool: String,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// Settings.
    pub settings: Settings,
    /// What the server reported about itself.
    pub server: ServerInfo,
    /// The client machine, when a Snapshot was available.
    pub machine: Option<MachineSummary>,
    /// Client resource use.
    pub client: ClientUsage,
    /// The run met its plan (see module docs).
    pub valid: bool,
    /// Why not.
    pub invalid_reasons: Vec<String>,
    /// Why sending stopped.
    pub stop: StopReason,
    /// Stopped because the server could not keep up (or failed too often).
    pub saturated: bool,
    /// Where the per-request trace was written, if anywhere (as given on the command line).
    pub trace: Option<String>,
    /// Statistics of the measured requests.
    #[serde(flatten)]
    pub stats: Stats,
    /// Sweep steps, for `--sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// Statistics of each run of `bench --repeat K` (K ≥ 2), in order; the top-level statistics
    /// pool all runs. `compare` judges on the between-run variance of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Stats>,
    /// The server's own metrics scraped during the run (absent with `--no-server-metrics` and in
    /// schema 1 files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// GPU energy per output token, or why unknown (absent in files from before issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::Energy>,
}

/// Decide validity (pure): the reasons a run is not valid; empty means valid.
pub fn invalid_reasons(
    stop: &StopReason,
    stats: &Stats,
    limits: &Limits,
    min_requests: u64,
) -> Vec<String> {
    let mut why = Vec::new();
    match stop {
        StopReason::Requests | StopReason::Duration => {}
        StopReason::MaxDuration => why.push(
            "the --max-duration cap ended sending before the planned requests were sent".into(),
        ),
        StopReason::Saturated(d) => why.push(format!("stopped early, saturated: {d}")),
        StopReason::ErrorRate(d) => why.push(format!("stopped early, error rate: {d}")),
        StopReason::Interrupted => why.push("interrupted".into()),
    }
    let c = stats.requests.completed;
    if c == 0 {
        why.push("no request completed".into());
    } else if c < min_requests {
        why.push(format!(
            "only {c} requests completed; a valid run needs at least {min_requests} (--min-requests)"
        ));
    }
    if stats.implausible_token_counts > 0 {
        why.push(format!(
            "{} completed requests reported impossible token counts (more completion tokens than max_tokens, or over 2^32): the server's usage cannot be trusted",
            stats.implausible_token_counts
        ));
    }
    if let Some(d) = limits.duration
        && !stop.is_early()
        && stats.duration_s + 1e-3 < d.as_secs_f64() * 0.99
    {
        why.push(format!(
            "measured for {:.2}s, less than the {:.2}s asked",
            stats.duration_s,
            d.as_secs_f64()
        ));
    }
    why
}

/// Read a result file from JSON text.
pub fn from_json(text: &str) -> Result<BenchResult, serde_json::Error> {
    serde_json::from_str(text)
}

/// Write the result as pretty JSON with a trailing newline.
pub fn write_json(r: &BenchResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, r)?;
    out.write_all(b"\n")
}

/// A short human summary (the default stdout of `inferscope bench`).
pub fn write_text(r: &BenchResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let s = &r.stats;
    let model = &r.settings.request.model;
    writeln!(
        out,
        "{} {} model {model} ({}), {}",
        r.settings.url,
        match r.settings.request.api {
            crate::client::Api::Completions => "completions",
            crate::client::Api::Chat => "chat",
        },
        r.server
            .version
            .as_deref()
            .unwrap_or("server version unknown"),
        // A trace replaces the schedule with its own timestamps.
        if r.settings.dataset.starts_with("trace:") {
            "trace replay at its timestamps".to_string()
        } else {
            describe_schedule(&r.settings.schedule)
        },
    )?;
    writeln!(
        out,
        "requests: {} completed, {} failed, {} incomplete in {:.2}s ({} warm-up excluded)",
        s.requests.completed,
        s.requests.failed,
        s.requests.incomplete,
        s.duration_s,
        s.requests.warmup
    )?;
    writeln!(
        out,
        "throughput: {:.2} req/s, {:.1} output tok/s (tokens from {})",
        s.requests_per_s, s.output_tokens_per_s, s.token_count_source
    )?;
    if let Some(e) = &r.energy {
        match (e.joules, &e.reason) {
            (Some(j), _) => writeln!(
                out,
                "energy: {j:.1} J on {} GPU(s), {} J per output token",
                e.gpus.unwrap_or(0),
                e.joules_per_output_token
                    .map_or("-".into(), |v| format!("{v:.4}"))
            )?,
            (None, why) => writeln!(
                out,
                "energy: unknown: {}",
                why.as_deref().unwrap_or("not measured")
            )?,
        }
    }
    for e in &s.endpoints {
        writeln!(
            out,
            "endpoint {}: {} of {} completed, {} output tokens, ttft p50 {} ms, e2e p50 {} ms",
            e.url,
            e.completed,
            e.requests,
            e.output_tokens,
            e.ttft_ms.p50.map_or("-".into(), |v| format!("{v:.1}")),
            e.e2e_ms.p50.map_or("-".into(), |v| format!("{v:.1}")),
        )?;
    }
    if !s.turns.is_empty() {
        let per: Vec<String> = s
            .turns
            .iter()
            .map(|t| {
                let p50 = t.ttft_ms.p50.map_or("-".into(), |v| format!("{v:.1} ms"));
                match t.p50_vs_turn1 {
                    Some(r) if t.turn > 1 => format!("{}: {p50} ({r:.2}× turn 1)", t.turn),
                    _ => format!("{}: {p50}", t.turn),
                }
            })
            .collect();
        writeln!(out, "ttft p50 by turn: {}", per.join(", "))?;
    }
    if let Some(p) = &s.prefix_reuse {
        let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
        writeln!(
            out,
            "prefix reuse: {} of {} requests could hit ({:.0} % of prompt {}); server cached {}; \
             ttft p50 hit {} ms vs miss {} ms (p = {})",
            p.requests_reusable,
            p.requests,
            p.reusable_share * 100.0,
            p.length_unit,
            p.server_cached_share
                .map_or("unknown: not reported".into(), |c| format!(
                    "{:.0} % of prompt tokens",
                    c * 100.0
                )),
            ms(p.ttft_ms_hit.p50),
            ms(p.ttft_ms_miss.p50),
            p.ttft_hit_lower_p.map_or("-".into(), |v| format!("{v:.3}")),
        )?;
    }
    if !r.repeats.is_empty() {
        let per_run: Vec<String> = r
            .repeats
            .iter()
            .map(|x| format!("{:.1}", x.output_tokens_per_s))
            .collect();
        writeln!(
            out,
            "repeats: {} runs pooled above; output tok/s per run: {}",
            r.repeats.len(),
            per_run.join(", ")
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "ms", "mean", "p50", "p90", "p95", "p99", "p99.9"
    )?;
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for (name, m) in [
        ("TTFT", &s.ttft_ms),
        ("TPOT", &s.tpot_ms),
        ("ITL", &s.itl_ms),
        ("E2E", &s.e2e_ms),
        ("send lag", &s.send_lag_ms),
    ] {
        writeln!(
            out,
            "{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            name,
            f(m.mean),
            f(m.p50),
            f(m.p90),
            f(m.p95),
            f(m.p99),
            f(m.p999)
        )?;
    }
    if let Some(a) = &s.tokenizer_vs_usage {
        writeln!(
            out,
            "tokenizer vs server usage: {} of {} requests equal, totals differ by {:+.2}% (largest {} tokens)",
            a.equal,
            a.requests,
            a.relative_difference * 100.0,
            a.max_abs_difference
        )?;
    }
    if let Some(g) = &s.goodput {
        writeln!(
            out,
            "\ngoodput: {:.2} req/s ({:.1}% of requests met the SLOs)",
            g.requests_per_s,
            g.fraction * 100.0
        )?;
    }
    if !s.errors.is_empty() {
        let list: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(out, "errors: {}", list.join(", "))?;
    }
    if let Some(sw) = &r.sweep {
        writeln!(
            out,
            "\nsweep (saturation {:.2} req/s):",
            sw.saturation_requests_per_s
        )?;
        writeln!(
            out,
            "{:<22} {:>10} {:>12} {:>10} {:>10} {:>6}",
            "step", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "valid"
        )?;
        for st in &sw.steps {
            writeln!(
                out,
                "{:<22} {:>10.2} {:>12.1} {:>10} {:>10} {:>6}",
                describe_schedule(&st.schedule),
                st.stats.requests_per_s,
                st.stats.output_tokens_per_s,
                f(st.stats.ttft_ms.p50),
                f(st.stats.ttft_ms.p99),
                if st.valid { "yes" } else { "no" }
            )?;
        }
    }
    if let Some(c) = r.client.cpu_s_per_output_token {
        writeln!(
            out,
            "client CPU: {:.2}s user + {:.2}s system, {:.1} µs per output token",
            r.client.cpu_user_s,
            r.client.cpu_system_s,
            c * 1e6
        )?;
    }
    if let Some(m) = &r.server_metrics {
        writeln!(out, "{}", crate::server_metrics::describe(m))?;
    }
    if r.valid {
        writeln!(out, "run: valid")?;
    } else {
        writeln!(out, "run: NOT valid: {}", r.invalid_reasons.join("; "))?;
    }
    Ok(())
}

/// `concurrency 8` or `poisson 5/s`.
pub fn describe_schedule(s: &Schedule) -> String {
    match s {
        Schedule::Closed { concurrency } => format!("concurrency {concurrency}"),
        Schedule::Open { rate, arrival, .. } => format!("{arrival} {rate:.3}/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Slo, compute};

    #[test]
    fn validity_rules() {
        let (stats, _) = compute(&[], &Slo::default());
        let limits = Limits {
            requests: Some(10),
            duration: None,
        };
        let why = invalid_reasons(&StopReason::Requests, &stats, &limits, 1);
        assert_eq!(why, vec!["no request completed".to_string()]);
        let why = invalid_reasons(&StopReason::Saturated("x".into()), &stats, &limits, 1);
        assert!(why[0].contains("saturated"));
    }

    /// Issue 33: a server reporting 2^64 - 1 completion tokens three times once wrapped to a
    /// "valid" total of 2^64 - 3; now those requests are left out of the sums and the run is
    /// invalid, as is one claiming more tokens than its max_tokens allowed.
    #[test]
    fn impossible_usage_invalidates_the_run() {
        use crate::record::RequestRecord;
        let rec = |seq: u64, out: u64, prompt: u64| {
            let mut r = RequestRecord::new(seq, false, seq * 1000, seq * 1000 + 10);
            r.push_chunk(seq * 1000 + 500, 1);
            r.end_us = seq * 1000 + 900;
            r.max_tokens = 16;
            r.usage_output_tokens = Some(out);
            r.input_tokens = Some(prompt);
            r
        };
        let limits = Limits {
            requests: Some(4),
            duration: None,
        };
        let honest = rec(0, 16, 5);
        let wrapping: Vec<RequestRecord> = (1..4).map(|i| rec(i, u64::MAX, 5)).collect();
        let mut records = vec![honest.clone()];
        records.extend(wrapping);
        let (stats, _) = compute(&records, &Slo::default());
        assert_eq!(stats.requests.completed, 4);
        assert_eq!(stats.implausible_token_counts, 3);
        assert_eq!(stats.output_tokens, 16);
        let why = invalid_reasons(&StopReason::Requests, &stats, &limits, 1);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("3 completed requests reported impossible token counts"),
            "{why:?}"
        );
        // More than max_tokens allows, or a prompt over 2^32 tokens.
        for bad in [rec(1, 17, 5), rec(1, 16, (1 << 32) + 1)] {
            let (stats, _) = compute(&[honest.clone(), bad], &Slo::default());
            assert_eq!(stats.implausible_token_counts, 1);
            assert!(!invalid_reasons(&StopReason::Requests, &stats, &limits, 1).is_empty());
        }
        // The honest run alone is valid.
        let (stats, _) = compute(&[honest], &Slo::default());
        assert!(invalid_reasons(&StopReason::Requests, &stats, &limits, 1).is_empty());
    }
}
