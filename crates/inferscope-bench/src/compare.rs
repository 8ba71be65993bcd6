//! Compare a candidate run with a baseline and decide: keep, roll back or inconclusive. Pure.
//!
//! * Every metric gets a row: baseline, candidate, delta, relative delta, an interval of the
//!   delta, the method and samples behind it, and a status: `better`, `ok`, `worse`,
//!   `regression` or `inconclusive` (with the reason).
//! * **Thresholds** (`ttft_p50=+10%,tpot_p50=+10%,throughput=-5%,e2e_p50=+20`) give the worsening
//!   each metric may show before it counts: a `%` value is relative to the baseline, a bare value
//!   is absolute in the metric's unit (ms for latencies, a fraction for `error_rate`). The sign is
//!   documentation; the magnitude is the allowed worsening in the metric's bad direction.
//!   Without `--threshold` a default set is used ([`DEFAULT_THRESHOLDS`]).
//! * **Evidence** (see [`crate::significance`]): between-run variance when both results hold
//!   repeated runs (`bench --repeat K`, method `between_runs`); else a request-level cluster
//!   bootstrap when both traces exist (method `cluster_bootstrap`); else none (method `none`).
//! * **Status of a thresholded metric**: `regression` when the worsening is past the threshold
//!   *and* significant (one-sided, α = 5 % / number of judged thresholds); `inconclusive` when it
//!   is past the threshold but not significant, when there is no evidence to test it, when a
//!   percentile has fewer than [`crate::significance::MIN_TAIL_REQUESTS`] requests above it, or
//!   when a value is missing; otherwise `better` / `worse` when significantly so, else `ok`.
//! * **Verdict**: `roll back` when any thresholded metric is a regression or the candidate run is
//!   not valid; else `inconclusive` when any thresholded metric is; else `keep`. Each row says
//!   how many requests (or repeats) per run would let a worsening equal to its threshold be
//!   significant with 80 % power (`needed_requests`, `needed_repeats`).
//! * **SLOs first**: when both runs were recorded with the same `--slo`, the SLO states the
//!   intent. [`default_thresholds`] then drops the default thresholds of the latency families the
//!   SLO bounds (a TPOT of 0.5 → 1.6 ms against a 50 ms SLO is not a regression) and judges SLO
//!   attainment (`slo_attainment`, the fraction of requests meeting every objective) and
//!   `goodput` instead ([`SLO_THRESHOLDS`]). A significant drop in attainment rolls back whatever
//!   else improved; a change that is significantly better on some judged metrics and worse on
//!   others, attainment held, is a `trade-off` (listed with its numbers), never a roll back.

use crate::metric::{Family, Metric};
use crate::record::RequestRecord;
use crate::result::BenchResult;
use crate::significance::{self as sig, RequestSample};
use crate::stats::{Slo, Stats, per_request};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;

/// Thresholds used when none are given: medians and means only, because a 99th percentile of
/// ~100 requests is one or two requests (judging it needs ~1,000; see docs/bench.md). At 96
/// requests per run with per-request noise σ = 0.35, an A/A pair (nothing changed) was rolled
/// back in 1 of 48 synthesised pairs and 0 of 4 pairs through the real client
/// (tests/bench_aa.rs); Bonferroni over the thresholds keeps the expected rate at ≤ 5 %.
pub const DEFAULT_THRESHOLDS: &str =
    "ttft_p50=+10%,tpot_p50=+10%,itl_p50=+10%,e2e_p50=+10%,throughput=-5%,error_rate=+0.01";

/// Thresholds added when both runs carry the same SLO: attainment may drop by one percentage
/// point, goodput (requests/s meeting the SLO) by 5 %, as throughput may.
pub const SLO_THRESHOLDS: &str = "slo_attainment=-0.01,goodput=-5%";

/// The SLO both runs were recorded with, when they carry the same non-empty one.
pub fn shared_slo(base: &BenchResult, cand: &BenchResult) -> Option<Slo> {
    let (b, c) = (base.settings.slo, cand.settings.slo);
    (!b.is_empty() && b == c).then_some(b)
}

/// The SLO bound (ms) of a latency metric's family, if the SLO sets one: `ttft_*` by `ttft`,
/// `tpot_*` and `itl_*` (the same decode step, per chunk) by `tpot`, `e2e_*` by `e2e`.
pub fn slo_bound_ms(slo: &Slo, metric: &str) -> Option<f64> {
    let fam = metric.split_once('_').map_or(metric, |(f, _)| f);
    let d = Family::parse(fam)?.slo_bound(slo)?;
    Some(d.as_secs_f64() * 1000.0)
}

/// The thresholds used without `--threshold`: [`DEFAULT_THRESHOLDS`], except that where both runs
/// carry the same SLO the families it bounds are judged by it ([`SLO_THRESHOLDS`]) instead.
pub fn default_thresholds(base: &BenchResult, cand: &BenchResult) -> Vec<Threshold> {
    let mut t = parse_thresholds(DEFAULT_THRESHOLDS).unwrap_or_default();
    if let Some(slo) = shared_slo(base, cand) {
        t.retain(|x| slo_bound_ms(&slo, &x.metric).is_none());
        t.extend(parse_thresholds(SLO_THRESHOLDS).unwrap_or_default());
    }
    t
}

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Latencies, error rate.
    Lower,
    /// Throughputs.
    Higher,
}

/// Allowed worsening.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Relative to the baseline, in percent.
    Percent(f64),
    /// In the metric's unit.
    Absolute(f64),
}

/// One threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    /// Metric name (see [`metric_names`]).
    pub metric: String,
    /// Allowed worsening.
    pub limit: Limit,
}

/// All metric names ([`Metric::all`]).
pub fn metric_names() -> Vec<String> {
    Metric::all().iter().map(|m| m.name()).collect()
}

/// Why a `--threshold` list cannot be parsed (each names the offending `part`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    /// No `=`.
    #[error("threshold `{part}`: expected METRIC=+N% or METRIC=+N")]
    NoEquals {
        /// The offending item.
        part: String,
    },
    /// A metric [`metric_names`] does not know.
    #[error("threshold `{part}`: unknown metric `{metric}` (known: {known})")]
    UnknownMetric {
        /// The offending item.
        part: String,
        /// Its metric name.
        metric: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// The limit is not a number.
    #[error("threshold `{part}`: `{value}` is not a number")]
    NotANumber {
        /// The offending item.
        part: String,
        /// Its value.
        value: String,
    },
    /// The limit is infinite or NaN.
    #[error("threshold `{part}`: not finite")]
    NotFinite {
        /// The offending item.
        part: String,
    },
}

/// Parse `name=+5%,name=-2%,name=+20`.
pub fn parse_thresholds(s: &str) -> Result<Vec<Threshold>, ThresholdError> {
    let names = metric_names();
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| ThresholdError::NoEquals { part: part.into() })?;
        let k = k.trim();
        if !names.iter().any(|n| n == k) {
            return Err(ThresholdError::UnknownMetric {
                part: part.into(),
                metric: k.into(),
                known: names.join(", "),
            });
        }
        let v = v.trim();
        let (num, pct) = match v.strip_suffix('%') {
            Some(n) => (n, true),
            None => (v.strip_suffix("ms").unwrap_or(v), false),
        };
        let x: f64 = num.trim().parse().map_err(|_| ThresholdError::NotANumber {
            part: part.into(),
            value: v.into(),
        })?;
        if !x.is_finite() {
            return Err(ThresholdError::NotFinite { part: part.into() });
        }
        out.push(Threshold {
            metric: k.to_string(),
            limit: if pct {
                Limit::Percent(x.abs())
            } else {
                Limit::Absolute(x.abs())
            },
        });
    }
    Ok(out)
}

/// Per-request samples of one run, from its trace: measured requests of the first step
/// (completed ones with their latencies, failed ones as failures; cut-short ones left out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// One entry per request.
    pub requests: Vec<RequestSample>,
}

impl Samples {
    /// Extract from records.
    pub fn from_records(records: &[RequestRecord]) -> Self {
        let mut requests = Vec::new();
        for r in records.iter().filter(|r| !r.warmup && r.step == 0) {
            match r.error {
                Some(crate::record::ErrorClass::Cancelled) => continue,
                Some(_) => requests.push(RequestSample {
                    failed: true,
                    ..RequestSample::default()
                }),
                None => {
                    let m = per_request(r);
                    let counted = r.output_tokens().1 != crate::record::TokenSource::Unknown;
                    requests.push(RequestSample {
                        ttft: m.ttft_us.map(|t| t as f64 / 1000.0),
                        tpot: m.tpot_us.map(|t| t as f64 / 1000.0),
                        e2e: Some(m.e2e_us as f64 / 1000.0),
                        gaps: r
                            .chunks
                            .iter()
                            .zip(r.chunks.iter().skip(1))
                            .map(|(a, b)| b.0.saturating_sub(a.0) as f64 / 1000.0)
                            .collect(),
                        tokens: counted.then_some(m.output_tokens),
                        failed: false,
                    });
                }
            }
        }
        Samples { requests }
    }

    /// Completed requests.
    pub fn completed(&self) -> u64 {
        self.requests.iter().filter(|r| !r.failed).count() as u64
    }

    /// Per-request values of a latency family (ITL: each request's mean gap).
    fn per_request(&self, fam: Family) -> Vec<f64> {
        self.requests
            .iter()
            .filter_map(|r| match fam {
                Family::Ttft => r.ttft,
                Family::Tpot => r.tpot,
                Family::E2e => r.e2e,
                Family::Itl if r.gaps.is_empty() => None,
                Family::Itl => Some(r.gaps.iter().sum::<f64>() / r.gaps.len() as f64),
            })
            .collect()
    }
}

/// How a metric moved (JSON: `better`, `ok`, `worse`, `regression`, `inconclusive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareStatus {
    /// Significantly better (or, without evidence, better).
    Better,
    /// Not significantly different, or within its threshold.
    Ok,
    /// Significantly worse (or, without evidence, worse) but not past its threshold.
    Worse,
    /// Past its threshold and significantly worse.
    Regression,
    /// Cannot be judged: see the row's `reason`.
    Inconclusive,
}

impl CompareStatus {
    /// The word used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareStatus::Better => "better",
            CompareStatus::Ok => "ok",
            CompareStatus::Worse => "worse",
            CompareStatus::Regression => "regression",
            CompareStatus::Inconclusive => "inconclusive",
        }
    }
}

/// Which evidence a row was judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Per-run values of repeated runs: Welch's standard error, Student-t critical values.
    BetweenRuns,
    /// Per-request traces: requests resampled (ITL gaps move with their request).
    ClusterBootstrap,
    /// Point values only: nothing to test significance with.
    None,
}

/// The samples behind a row: requests (bootstrap) or runs (between runs) per side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleCount {
    /// Baseline.
    pub base: u64,
    /// Candidate.
    pub cand: u64,
    /// `requests` or `runs`.
    pub unit: &'static str,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Metric name.
    pub metric: String,
    /// Baseline value (mean over runs for repeated results).
    pub base: Option<f64>,
    /// Candidate value.
    pub cand: Option<f64>,
    /// cand − base.
    pub delta: Option<f64>,
    /// Relative delta in percent.
    pub delta_pct: Option<f64>,
    /// Which way is better.
    pub better: Better,
    /// The threshold, if any.
    pub threshold: Option<Limit>,
    /// The SLO bound of this metric's family (ms) when both runs carry it: the family is judged
    /// through `slo_attainment`, and the row itself only as better / worse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_ms: Option<f64>,
    /// Interval of (cand − base) at the verdict's level: delta ± critical value × standard error,
    /// with `1 − alpha` on each side.
    pub interval: Option<[f64; 2]>,
    /// One-sided level of each test: 5 % / number of judged thresholds (Bonferroni).
    pub alpha: Option<f64>,
    /// Standard error of the delta.
    pub std_error: Option<f64>,
    /// Evidence used.
    pub method: Method,
    /// Samples used per side.
    pub samples: Option<SampleCount>,
    /// Percentiles: distinct requests above the value in [baseline, candidate].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail_requests: Option<[u64; 2]>,
    /// Requests per run for 80 % power at the threshold (bootstrap), and for the tail.
    pub needed_requests: Option<u64>,
    /// Runs per side for 80 % power at the threshold (between runs).
    pub needed_repeats: Option<u64>,
    /// One-sided 95 % interval of (cand − base) (delta ± 1.645 standard errors).
    pub ci95: Option<[f64; 2]>,
    /// One-sided Mann–Whitney p-value for "the candidate's per-request values tend to be
    /// larger" (latency families, from traces): small means larger is unlikely to be chance. Not a
    /// probability of being worse.
    pub mann_whitney_p_greater: Option<f64>,
    /// Deprecated: the same value as `mann_whitney_p_greater`, under its old, misleading name.
    pub p_worse: Option<f64>,
    /// Outcome of the comparison for this metric.
    pub status: CompareStatus,
    /// Why it is `inconclusive` (or what made it a regression).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Keep, roll back, trade-off or inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every thresholded metric was judged and none regressed.
    Keep,
    /// At least one regression, or the candidate run is not valid; with an SLO: attainment
    /// dropped, or a regression with nothing better.
    RollBack,
    /// No regression, but at least one thresholded metric could not be judged.
    Inconclusive,
    /// Both runs carry the same SLO, attainment held, and the candidate is significantly better
    /// on some judged metrics and worse on others (JSON `trade_off`): a choice, not a regression.
    TradeOff,
}

/// The judged metrics that moved each way, when the verdict is a trade-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TradeOff {
    /// Significantly better.
    pub better: Vec<String>,
    /// Significantly worse (within the SLO).
    pub worse: Vec<String>,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Every metric.
    pub rows: Vec<Row>,
    /// Verdict.
    pub verdict: Verdict,
    /// Why (regressed or inconclusive metrics, invalid runs).
    pub reasons: Vec<String>,
    /// Notes (no traces, different settings).
    pub notes: Vec<String>,
    /// Whether significance tests were possible.
    pub significance_tested: bool,
    /// The evidence used for the latency rows.
    pub method: Method,
    /// One-sided level of each threshold's test (5 % / judged thresholds).
    pub alpha: f64,
    /// The most requests per run any threshold needs (80 % power, tails supported).
    pub needed_requests: Option<u64>,
    /// The most runs per side any threshold needs (between runs).
    pub needed_repeats: Option<u64>,
    /// The SLO both runs carry (ms), when it was judged first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// What is better and what worse, for a `trade_off` verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trade_off: Option<TradeOff>,
    /// What the engines' own metrics say differed (preemptions, KV peak), shown beside the
    /// verdict; not judged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<String>,
    /// What else differs between the runs: server flags and version, machine, bench settings
    /// ([`crate::explain::differences`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

/// A metric's value in one run's statistics, by name ([`Metric::of`]); `None` for an unknown
/// name or value.
pub fn stats_value(s: &Stats, metric: &str) -> Option<f64> {
    Metric::parse(metric)?.of(s)
}

/// Which way is better for a metric named `metric` (names come from [`metric_names`] and
/// parsed thresholds; an unknown one is judged as a latency).
fn better(metric: &str) -> Better {
    Metric::parse(metric).map_or(Better::Lower, Metric::better)
}

/// Point value and standard error of one metric on one side.
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    value: Option<f64>,
    se: Option<f64>,
    /// Distinct requests above a percentile (traces), or its estimate (repeats).
    above: Option<u64>,
}

/// Evidence of one run for every metric.
struct Evidence {
    sides: BTreeMap<String, Side>,
    /// Requests (bootstrap) or runs.
    n: u64,
    /// Requests per run (for tails).
    requests: u64,
}

fn trace_evidence(r: &BenchResult, s: &Samples, seed: u64) -> Evidence {
    let slots = match r.settings.schedule {
        crate::schedule::Schedule::Closed { concurrency } => Some(concurrency),
        crate::schedule::Schedule::Open { .. } => None,
    };
    let point = sig::statistics(&s.requests, slots);
    let se = sig::bootstrap_se(&s.requests, slots, seed);
    // Relative error of the closed-loop throughput (replayed), for goodput.
    let rel_tp = point
        .get("replay_throughput")
        .zip(se.get("replay_throughput"))
        .map(|(x, e)| e / x.max(f64::MIN_POSITIVE));
    let att = attainment(s, &r.settings.slo);
    let mut sides = BTreeMap::new();
    for metric in Metric::all() {
        let mut side = Side::default();
        match metric {
            Metric::Throughput => {
                side.value = metric.of(&r.stats);
                // The replay's relative error carries over to the measured throughput.
                side.se = side
                    .value
                    .zip(point.get("replay_throughput"))
                    .and_then(|(v, x)| {
                        se.get("replay_throughput")
                            .map(|e| v * e / x.max(f64::MIN_POSITIVE))
                    });
            }
            Metric::ErrorRate => {
                side.value = point.get("error_rate").copied();
                side.se = se.get("error_rate").copied();
            }
            Metric::SloAttainment => {
                side.value = att.map(|a| a.0);
                side.se = att.map(|a| a.1);
            }
            Metric::Goodput => {
                // Goodput = requests/s × attainment: their relative errors add in quadrature.
                side.value = metric.of(&r.stats);
                side.se = side.value.zip(rel_tp).zip(att).map(|((v, rt), (p, e))| {
                    let ra = if p > 0.0 { e / p } else { 0.0 };
                    v * (rt * rt + ra * ra).sqrt()
                });
            }
            Metric::RequestsPerS => side.value = metric.of(&r.stats),
            Metric::Latency(fam, stat) => {
                let m = metric.name();
                side.value = point.get(&m).copied();
                side.se = se.get(&m).copied();
                if let Some(v) = side.value
                    && sig::quantile_of(stat.name()).is_some()
                {
                    side.above = Some(sig::tail_support(&s.requests, fam, stat.name(), v));
                }
            }
        }
        sides.insert(metric.name(), side);
    }
    let n = s.requests.len() as u64;
    Evidence {
        sides,
        n,
        requests: n,
    }
}

/// SLO attainment of one run's requests (completed and failed; a failed one misses) and its
/// standard error. One success and one miss are added for the error (Agresti–Coull), so a run
/// where every request met the SLO still has an error bar. `None` without requests or SLO.
fn attainment(s: &Samples, slo: &Slo) -> Option<(f64, f64)> {
    let n = s.requests.len();
    if n == 0 || slo.is_empty() {
        return None;
    }
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let (lt, lp, le) = (ms(slo.ttft), ms(slo.tpot), ms(slo.e2e));
    // As in the statistics: an undefined value (TPOT of a one-token answer) does not miss.
    let ok = |v: Option<f64>, l: Option<f64>| !matches!((v, l), (Some(v), Some(l)) if v > l);
    let good = s
        .requests
        .iter()
        .filter(|r| !r.failed && ok(r.ttft, lt) && ok(r.tpot, lp) && ok(r.e2e, le))
        .count() as f64;
    let n = n as f64;
    let pt = (good + 1.0) / (n + 2.0);
    Some((good / n, (pt * (1.0 - pt) / n).sqrt()))
}

fn repeat_evidence(r: &BenchResult) -> Evidence {
    let k = r.repeats.len() as u64;
    let requests = r.repeats.iter().map(|s| s.requests.completed).sum::<u64>() / k.max(1);
    let mut sides = BTreeMap::new();
    for metric in metric_names() {
        let xs: Vec<f64> = r
            .repeats
            .iter()
            .filter_map(|s| stats_value(s, &metric))
            .collect();
        let mut side = Side::default();
        if xs.len() == r.repeats.len()
            && let Some((m, v, n)) = sig::mean_var(&xs)
        {
            side.value = Some(m);
            side.se = Some((v / n as f64).sqrt());
        }
        if let Some(q) = metric
            .split_once('_')
            .and_then(|(_, f)| sig::quantile_of(f))
        {
            // Each run's percentile stands on its own requests.
            side.above = Some((requests as f64 * (1.0 - q)).floor() as u64);
        }
        sides.insert(metric, side);
    }
    Evidence {
        sides,
        n: k,
        requests,
    }
}

fn point_evidence(r: &BenchResult) -> Evidence {
    let sides = metric_names()
        .into_iter()
        .map(|m| {
            let value = stats_value(&r.stats, &m);
            (
                m,
                Side {
                    value,
                    ..Side::default()
                },
            )
        })
        .collect();
    Evidence {
        sides,
        n: 1,
        requests: r.stats.requests.completed,
    }
}

/// Allowed worsening in the metric's unit.
fn allowed(limit: Limit, base: f64) -> f64 {
    match limit {
        Limit::Percent(p) => base.abs() * p / 100.0,
        Limit::Absolute(a) => a,
    }
}

/// Compare. `samples` are (baseline, candidate) per-request samples from traces, when both
/// exist. Results with ≥ 2 repeats on both sides are judged between runs instead.
pub fn compare(
    base: &BenchResult,
    cand: &BenchResult,
    samples: Option<(&Samples, &Samples)>,
    thresholds: &[Threshold],
) -> Comparison {
    let j = Judging::new(base, cand, samples, thresholds);
    let mut rows = Vec::new();
    let (mut regressions, mut unsure, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut needed_requests, mut needed_repeats) = (None::<u64>, None::<u64>);
    for metric in metric_names() {
        let row = j.row(metric);
        if row.threshold.is_some() {
            needed_requests = row.needed_requests.map_or(needed_requests, |r| {
                Some(needed_requests.map_or(r, |n| n.max(r)))
            });
            needed_repeats = row.needed_repeats.map_or(needed_repeats, |r| {
                Some(needed_repeats.map_or(r, |n| n.max(r)))
            });
            match row.status {
                CompareStatus::Regression => regressions.push(format!(
                    "{}: {} -> {} ({}), past its threshold {}{}",
                    row.metric,
                    fmt_num(row.base),
                    fmt_num(row.cand),
                    row.delta_pct.map_or("n/a".into(), |p| format!("{p:+.1}%")),
                    row.threshold.map_or("-".into(), fmt_limit),
                    row.reason
                        .as_ref()
                        .map_or(String::new(), |r| format!(", {r}"))
                )),
                CompareStatus::Inconclusive => unsure.push(format!(
                    "{}: {}",
                    row.metric,
                    row.reason.clone().unwrap_or_default()
                )),
                _ => {}
            }
        }
        rows.push(row);
    }
    // With an SLO, what no improvement elsewhere can excuse: attainment lost, an invalid run.
    let mut breaches: Vec<String> = rows
        .iter()
        .filter(|r| r.metric == "slo_attainment" && r.status == CompareStatus::Regression)
        .map(|r| {
            format!(
                "slo_attainment: {} -> {} of requests met the SLO: the candidate breaks it",
                fmt_pct(r.base),
                fmt_pct(r.cand)
            )
        })
        .collect();
    if !cand.valid {
        let why = format!(
            "the candidate run is not valid: {}",
            cand.invalid_reasons.join("; ")
        );
        regressions.push(why.clone());
        breaches.push(why);
    }
    if !base.valid {
        notes.push(format!(
            "the baseline run is not valid: {}",
            base.invalid_reasons.join("; ")
        ));
    }
    notes.push(method_note(j.method, &j.eb, &j.ec));
    let (bs, cs) = (&base.settings, &cand.settings);
    if bs.schedule != cs.schedule || bs.dataset != cs.dataset || bs.request.api != cs.request.api {
        notes.push("the runs used different schedules, datasets or APIs".into());
    }
    if !bs.slo.is_empty() && !cs.slo.is_empty() && bs.slo != cs.slo {
        notes.push(
            "the runs carry different SLOs: judged by the thresholds alone (record both with \
             the same --slo to judge against it)"
                .into(),
        );
    }
    let trade = j.slo.and_then(|_| trade_off(&rows));
    let (verdict, reasons) = if j.slo.is_some() && !breaches.is_empty() {
        regressions.retain(|r| !breaches.contains(r) && !r.starts_with("slo_attainment:"));
        breaches.extend(regressions);
        (Verdict::RollBack, breaches)
    } else if let Some(t) = &trade {
        let mut why = trade_lines(&rows, t);
        why.extend(unsure);
        (Verdict::TradeOff, why)
    } else if !regressions.is_empty() {
        (Verdict::RollBack, regressions)
    } else if !unsure.is_empty() {
        (Verdict::Inconclusive, unsure)
    } else {
        (Verdict::Keep, unsure)
    };
    Comparison {
        verdict,
        rows,
        reasons,
        notes,
        significance_tested: j.method != Method::None,
        method: j.method,
        alpha: j.alpha,
        needed_requests,
        needed_repeats,
        slo: j.slo,
        trade_off: trade.filter(|_| verdict == Verdict::TradeOff),
        server_metrics: crate::server_metrics::compare_lines(
            base.server_metrics.as_ref(),
            cand.server_metrics.as_ref(),
        ),
        differences: crate::explain::differences(base, cand),
    }
}

/// Rows that weigh in a trade-off: thresholded metrics and the medians of SLO-bound families
/// (the metrics the default thresholds would have judged), with evidence behind them.
fn weighs(r: &Row) -> bool {
    r.method != Method::None
        && (r.threshold.is_some() || r.slo_ms.is_some() && r.metric.ends_with("_p50"))
}

/// Judged metrics significantly better and worse; `None` unless there are both.
fn trade_off(rows: &[Row]) -> Option<TradeOff> {
    let pick = |f: fn(CompareStatus) -> bool| -> Vec<String> {
        rows.iter()
            .filter(|r| weighs(r) && f(r.status))
            .map(|r| r.metric.clone())
            .collect()
    };
    let better = pick(|s| s == CompareStatus::Better);
    let worse = pick(|s| matches!(s, CompareStatus::Worse | CompareStatus::Regression));
    (!better.is_empty() && !worse.is_empty()).then_some(TradeOff { better, worse })
}

/// The numbers of a trade-off: one line per metric that moved, and the attainment.
fn trade_lines(rows: &[Row], t: &TradeOff) -> Vec<String> {
    let line = |m: &String, word: &str| {
        rows.iter().find(|r| &r.metric == m).map(|r| {
            let within = r
                .slo_ms
                .map_or(String::new(), |b| format!(", within the SLO {b} ms"));
            format!(
                "{word}: {}: {} -> {} ({}){within}",
                r.metric,
                fmt_num(r.base),
                fmt_num(r.cand),
                r.delta_pct.map_or("n/a".into(), |p| format!("{p:+.1}%")),
            )
        })
    };
    let mut out: Vec<String> = t.better.iter().filter_map(|m| line(m, "better")).collect();
    out.extend(t.worse.iter().filter_map(|m| line(m, "worse")));
    if let Some(a) = rows.iter().find(|r| r.metric == "slo_attainment") {
        out.push(format!(
            "slo_attainment: {} -> {} of requests met the SLO (held)",
            fmt_pct(a.base),
            fmt_pct(a.cand)
        ));
    }
    out
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

/// What one comparison judges with: both sides' evidence, the thresholds and critical values.
struct Judging<'a> {
    method: Method,
    eb: Evidence,
    ec: Evidence,
    samples: Option<(&'a Samples, &'a Samples)>,
    /// The last threshold given for a metric wins.
    limits: BTreeMap<String, Limit>,
    /// The SLO both runs carry.
    slo: Option<Slo>,
    /// Per-metric significance level (family level split over the judged metrics).
    alpha: f64,
    z_a: f64,
    z_95: f64,
    z_power: f64,
}

impl<'a> Judging<'a> {
    fn new(
        base: &BenchResult,
        cand: &BenchResult,
        samples: Option<(&'a Samples, &'a Samples)>,
        thresholds: &[Threshold],
    ) -> Self {
        let (method, eb, ec) = if base.repeats.len() >= 2 && cand.repeats.len() >= 2 {
            (
                Method::BetweenRuns,
                repeat_evidence(base),
                repeat_evidence(cand),
            )
        } else if let Some((sb, sc)) = samples {
            (
                Method::ClusterBootstrap,
                trace_evidence(base, sb, 0x5eed),
                trace_evidence(cand, sc, 0x5eed_cafe),
            )
        } else {
            (Method::None, point_evidence(base), point_evidence(cand))
        };
        let mut limits: BTreeMap<String, Limit> = BTreeMap::new();
        for t in thresholds {
            limits.insert(t.metric.clone(), t.limit);
        }
        let slo = shared_slo(base, cand);
        if slo.is_some() {
            // The SLO is the intent: its attainment is always judged.
            for t in parse_thresholds(SLO_THRESHOLDS).unwrap_or_default() {
                if t.metric == "slo_attainment" {
                    limits.entry(t.metric).or_insert(t.limit);
                }
            }
        }
        let judged = limits
            .keys()
            .filter(|m| side(&eb, m).value.is_some() && side(&ec, m).value.is_some())
            .count()
            .max(1);
        let alpha = sig::FAMILY_ALPHA / judged as f64;
        let df = (eb.n + ec.n).saturating_sub(2).max(1) as f64;
        let crit = |a: f64| match method {
            Method::BetweenRuns => sig::t_upper(a, df),
            _ => sig::z_upper(a),
        };
        let (z_a, z_95, z_power) = (crit(alpha), crit(0.05), sig::z_upper(1.0 - sig::POWER));
        Judging {
            method,
            eb,
            ec,
            samples,
            limits,
            slo,
            alpha,
            z_a,
            z_95,
            z_power,
        }
    }

    fn samples_of(&self, m: Method) -> Option<SampleCount> {
        match m {
            Method::BetweenRuns => Some(SampleCount {
                base: self.eb.n,
                cand: self.ec.n,
                unit: "runs",
            }),
            Method::ClusterBootstrap => Some(SampleCount {
                base: self.eb.n,
                cand: self.ec.n,
                unit: "requests",
            }),
            Method::None => None,
        }
    }

    /// One metric's row: the change, its interval, what more data would settle it, the status.
    fn row(&self, metric: String) -> Row {
        let (eb, ec, method) = (&self.eb, &self.ec, self.method);
        let (z_a, z_95, z_power) = (self.z_a, self.z_95, self.z_power);
        let (sb, sc) = (side(eb, &metric), side(ec, &metric));
        let (b, c) = (sb.value, sc.value);
        let dir = better(&metric);
        let delta = b.zip(c).map(|(b, c)| c - b);
        let delta_pct = b
            .zip(delta)
            .and_then(|(b, d)| (b.abs() > f64::EPSILON).then(|| d / b * 100.0));
        let threshold = self.limits.get(&metric).copied();
        let slo_ms = self.slo.and_then(|s| slo_bound_ms(&s, &metric));
        let se = sb.se.zip(sc.se).map(|(x, y)| (x * x + y * y).sqrt());
        let row_method = if se.is_some() { method } else { Method::None };
        let interval = delta.zip(se).map(|(d, e)| [d - z_a * e, d + z_a * e]);
        let ci95 = delta.zip(se).map(|(d, e)| [d - z_95 * e, d + z_95 * e]);
        let (fam, field) = metric.split_once('_').unwrap_or((&metric, ""));
        let q = sig::quantile_of(field);
        // Tail support: each run needs MIN_TAIL_REQUESTS requests above the percentile.
        let tail_requests = sb.above.zip(sc.above).map(|(x, y)| [x, y]);
        let tail_need = q.zip(tail_requests).and_then(|(q, [x, y])| {
            let need = sig::requests_for_tail(q, eb.requests, x).max(sig::requests_for_tail(
                q,
                ec.requests,
                y,
            ));
            (x.min(y) < sig::MIN_TAIL_REQUESTS).then_some(need)
        });
        // Run size at which a worsening equal to the threshold is significant with 80 % power.
        let power_need = match (threshold, b, se) {
            (Some(l), Some(b), Some(e)) if allowed(l, b) > 0.0 && e > 0.0 => {
                let k = ((z_a + z_power) * e / allowed(l, b)).powi(2);
                Some((eb.n.max(ec.n) as f64 * k).ceil().max(2.0) as u64)
            }
            _ => None,
        };
        let (mut row_req, mut row_rep) = (None, None);
        if threshold.is_some() {
            match row_method {
                Method::BetweenRuns => row_rep = power_need,
                Method::ClusterBootstrap => row_req = power_need,
                Method::None => {}
            }
            if let Some(t) = tail_need {
                row_req = Some(row_req.map_or(t, |r: u64| r.max(t)));
            }
        }
        // A family the SLO bounds may weigh in a trade-off: better / worse at the thresholds'
        // corrected level, not the 5 % one.
        let z_side = if slo_ms.is_some() && threshold.is_none() {
            z_a
        } else {
            z_95
        };
        let (status, reason) = judge(
            b.zip(c).zip(delta),
            dir,
            threshold,
            se,
            z_a,
            z_side,
            tail_need.filter(|_| threshold.is_some()),
            row_req.or(row_rep),
            row_method,
            q.map(|_| field),
        );
        let mw = match (method, self.samples) {
            (Method::ClusterBootstrap, Some((xb, xc))) => Family::parse(fam)
                .and_then(|f| mann_whitney_greater(&xb.per_request(f), &xc.per_request(f))),
            _ => None,
        };
        Row {
            metric,
            base: b,
            cand: c,
            delta,
            delta_pct,
            better: dir,
            threshold,
            slo_ms,
            interval,
            alpha: se.map(|_| self.alpha),
            std_error: se,
            method: row_method,
            samples: self.samples_of(row_method),
            tail_requests,
            needed_requests: row_req,
            needed_repeats: row_rep,
            ci95,
            mann_whitney_p_greater: mw,
            p_worse: mw,
            status,
            reason,
        }
    }
}

/// One metric's side of the evidence (empty when the metric is absent).
fn side(e: &Evidence, m: &str) -> Side {
    e.sides.get(m).copied().unwrap_or_default()
}

/// The note saying what the comparison was judged on, and what that cannot see.
fn method_note(method: Method, eb: &Evidence, ec: &Evidence) -> String {
    match method {
        Method::None => "no per-request traces or repeated runs for both: a metric past its \
                         threshold is inconclusive, not a regression (bench --trace FILE or \
                         --repeat K gives the evidence)"
            .into(),
        Method::BetweenRuns => format!(
            "judged on the variance between runs: {} baseline runs, {} candidate runs",
            eb.n, ec.n
        ),
        // Resampling requests covers request-to-request noise within each run, not what shifts a
        // whole run (neighbours' load, clocks, a cold cache): on a shared machine an A/A pair of
        // single runs can differ by more than any threshold (docs/bench.md, "Real-server runs").
        Method::ClusterBootstrap => "one run per side: the intervals cover request-to-request \
                                     noise, not drift between runs (load, clocks, caches); bench \
                                     --repeat K judges on the variance between runs"
            .into(),
    }
}

/// CompareStatus and reason of one metric. `vals` = ((base, cand), delta).
#[allow(clippy::too_many_arguments)]
fn judge(
    vals: Option<((f64, f64), f64)>,
    dir: Better,
    threshold: Option<Limit>,
    se: Option<f64>,
    z_a: f64,
    z_95: f64,
    tail_need: Option<u64>,
    needed: Option<u64>,
    method: Method,
    percentile: Option<&str>,
) -> (CompareStatus, Option<String>) {
    let Some(((b, _), d)) = vals else {
        return (
            CompareStatus::Inconclusive,
            Some("missing in one run, not judged".into()),
        );
    };
    // Worsening as a positive number in the metric's unit.
    let worse_by = match dir {
        Better::Lower => d,
        Better::Higher => -d,
    };
    let unit = if method == Method::BetweenRuns {
        "runs per side"
    } else {
        "requests per run"
    };
    if let Some(n) = tail_need {
        return (
            CompareStatus::Inconclusive,
            Some(format!(
                "too few requests above {} (need >= {} in each run): inconclusive (need >= {n} requests)",
                percentile.unwrap_or("it"),
                sig::MIN_TAIL_REQUESTS
            )),
        );
    }
    let Some(se) = se else {
        return match threshold {
            Some(l) if worse_by > allowed(l, b) => (
                CompareStatus::Inconclusive,
                Some(
                    "past its threshold, but no traces or repeats to tell noise from change".into(),
                ),
            ),
            _ if worse_by < 0.0 => (CompareStatus::Better, None),
            _ if worse_by > 0.0 => (CompareStatus::Worse, None),
            _ => (CompareStatus::Ok, None),
        };
    };
    let Some(limit) = threshold else {
        return (
            if worse_by + z_95 * se < 0.0 {
                CompareStatus::Better
            } else if worse_by - z_95 * se > 0.0 {
                CompareStatus::Worse
            } else {
                CompareStatus::Ok
            },
            None,
        );
    };
    let t = allowed(limit, b);
    let lo = worse_by - z_a * se;
    if worse_by > t && lo > 0.0 {
        (CompareStatus::Regression, Some("significant".into()))
    } else if worse_by > t {
        (
            CompareStatus::Inconclusive,
            Some(match needed {
                Some(n) => format!(
                    "past its threshold but not significant: inconclusive (need >= {n} {unit})"
                ),
                None => "past its threshold but not significant".into(),
            }),
        )
    } else if worse_by + z_a * se < 0.0 {
        (CompareStatus::Better, None)
    } else if lo > 0.0 {
        (CompareStatus::Worse, None)
    } else {
        (CompareStatus::Ok, None)
    }
}

/// One-sided Mann–Whitney U test: p-value for "values in `cand` tend to be larger than in
/// `base`" (normal approximation, tie-corrected). `None` for tiny samples.
pub fn mann_whitney_greater(base: &[f64], cand: &[f64]) -> Option<f64> {
    let (n1, n2) = (cand.len() as f64, base.len() as f64);
    if cand.len() < 3 || base.len() < 3 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = cand
        .iter()
        .map(|&x| (x, true))
        .chain(base.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum_c, mut tie_term) = (0.0f64, 0.0f64);
    // Runs of tied values (`==` is transitive on the sorted non-NaN values; a NaN is a run of
    // its own), each starting at index `i`.
    let mut i = 0;
    for run in all.chunk_by(|a, b| a.0 == b.0) {
        let j = i + run.len() - 1;
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        let t = run.len() as f64;
        tie_term += t * t * t - t;
        for item in run {
            if item.1 {
                rank_sum_c += avg_rank;
            }
        }
        i = j + 1;
    }
    let u = rank_sum_c - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let nn = n1 + n2;
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if var <= 0.0 {
        return Some(0.5);
    }
    let z = (u - mean - 0.5) / var.sqrt(); // continuity correction
    Some(sig::normal_sf(z))
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// `ttft <= 500 ms, tpot <= 50 ms`.
fn slo_text(slo: &Slo) -> String {
    [("ttft", slo.ttft), ("tpot", slo.tpot), ("e2e", slo.e2e)]
        .iter()
        .filter_map(|(n, d)| d.map(|d| format!("{n} <= {} ms", d.as_secs_f64() * 1000.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_limit(l: Limit) -> String {
    match l {
        Limit::Percent(p) => format!("{p}%"),
        Limit::Absolute(a) => format!("{a}"),
    }
}

/// Render the table and verdict.
pub fn write_text(c: &Comparison, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<16} {:>12} {:>12} {:>12} {:>9} {:>10} {:>24} {:>8}  status",
        "metric", "base", "cand", "delta", "delta%", "threshold", "interval of delta", "MW p"
    )?;
    for r in &c.rows {
        if r.base.is_none() && r.cand.is_none() {
            continue;
        }
        let status = match r.status {
            CompareStatus::Regression => "REGRESSION",
            s => s.as_str(),
        };
        writeln!(
            out,
            "{:<16} {:>12} {:>12} {:>12} {:>9} {:>10} {:>24} {:>8}  {}",
            r.metric,
            fmt_num(r.base),
            fmt_num(r.cand),
            r.delta.map_or("-".into(), |d| format!("{d:+.3}")),
            r.delta_pct.map_or("-".into(), |p| format!("{p:+.1}%")),
            match (r.threshold, r.slo_ms) {
                (Some(l), _) => fmt_limit(l),
                (None, Some(b)) => format!("SLO {b}"),
                (None, None) => "-".into(),
            },
            r.interval
                .map_or("-".into(), |[a, b]| format!("[{a:+.3}, {b:+.3}]")),
            r.mann_whitney_p_greater
                .map_or("-".into(), |p| format!("{p:.3}")),
            status
        )?;
    }
    let method = match c.method {
        Method::BetweenRuns => "between-run variance (Welch, Student t)",
        Method::ClusterBootstrap => "request-level cluster bootstrap",
        Method::None => "none (point values only)",
    };
    writeln!(
        out,
        "intervals: {method}; each threshold tested one-sided at alpha = {:.4} (5% / thresholds judged)",
        c.alpha
    )?;
    if c.rows.iter().any(|r| r.mann_whitney_p_greater.is_some()) {
        writeln!(
            out,
            "MW p: one-sided Mann-Whitney p-value that the candidate's per-request values are larger \
             (small: larger is unlikely to be chance); not a probability of being worse"
        )?;
    }
    if let Some(slo) = &c.slo {
        writeln!(
            out,
            "SLO (both runs): {}; judged first by slo_attainment; families it bounds are judged by it, not by thresholds",
            slo_text(slo)
        )?;
    }
    for n in &c.notes {
        writeln!(out, "note: {n}")?;
    }
    match c.verdict {
        Verdict::Keep => writeln!(out, "verdict: keep (no regression past the thresholds)")?,
        Verdict::RollBack => writeln!(out, "verdict: roll back")?,
        Verdict::TradeOff => writeln!(
            out,
            "verdict: trade-off (SLO attainment held; better on some metrics, worse on others: choose by what matters)"
        )?,
        Verdict::Inconclusive => writeln!(
            out,
            "verdict: inconclusive (no regression shown, but not every threshold could be judged)"
        )?,
    }
    for r in &c.reasons {
        writeln!(out, "  {r}")?;
    }
    for l in &c.server_metrics {
        writeln!(out, "engine: {l}")?;
    }
    for d in &c.differences {
        writeln!(out, "differs: {d}")?;
    }
    if c.differences.len() > 1 {
        writeln!(
            out,
            "warning: the runs differ in {} ways (above), not only in the change being judged: \
             the verdict cannot say which of them made the difference",
            c.differences.len()
        )?;
    }
    Ok(())
}

/// `compare --explain`: for each threshold, the evidence, the observed standard error and the
/// run size that gives 80 % power to detect a worsening equal to it.
pub fn write_explain(c: &Comparison, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "sizing (80% power to call a worsening equal to the threshold significant, one-sided alpha {:.4}; \
         percentiles need >= {} requests above them in each run):",
        c.alpha,
        sig::MIN_TAIL_REQUESTS
    )?;
    for r in c.rows.iter().filter(|r| r.threshold.is_some()) {
        let have = r.samples.map_or("no traces or repeats".to_string(), |s| {
            format!("{}/{} {}", s.base, s.cand, s.unit)
        });
        let need = match (r.needed_requests, r.needed_repeats) {
            (Some(n), _) => format!("needs >= {n} requests per run"),
            (None, Some(k)) => format!("needs >= {k} runs per side"),
            (None, None) => "cannot size without traces or repeats".into(),
        };
        writeln!(
            out,
            "  {:<16} threshold {:>7}  std error {:>9}  have {have}: {need}",
            r.metric,
            r.threshold.map_or("-".into(), fmt_limit),
            fmt_num(r.std_error),
        )?;
    }
    if let Some(n) = c.needed_requests {
        writeln!(
            out,
            "overall: run >= {n} requests per run (bench --requests {n})"
        )?;
    }
    if let Some(k) = c.needed_repeats {
        writeln!(
            out,
            "overall: repeat >= {k} runs per side (bench --repeat {k})"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse() {
        let t =
            parse_thresholds("ttft_p99=+5%, throughput=-2%,e2e_p50=+20ms,error_rate=0.01").unwrap();
        assert_eq!(t[0].limit, Limit::Percent(5.0));
        assert_eq!(t[1].limit, Limit::Percent(2.0));
        assert_eq!(t[2].limit, Limit::Absolute(20.0));
        assert_eq!(t[3].limit, Limit::Absolute(0.01));
        assert!(parse_thresholds("ttft_p42=+5%").is_err());
        assert!(parse_thresholds("ttft_p99=fast").is_err());
        assert!(parse_thresholds(DEFAULT_THRESHOLDS).is_ok());
    }

    #[test]
    fn mann_whitney_detects_shift_and_not_noise() {
        let base: Vec<f64> = (0..200).map(|i| f64::from(i % 50)).collect();
        let same: Vec<f64> = (0..200).map(|i| f64::from((i * 7) % 50)).collect();
        let slower: Vec<f64> = base.iter().map(|x| x + 10.0).collect();
        assert!(mann_whitney_greater(&base, &slower).unwrap() < 0.001);
        assert!(mann_whitney_greater(&base, &same).unwrap() > 0.2);
        assert!(mann_whitney_greater(&slower, &base).unwrap() > 0.99);
        assert!(mann_whitney_greater(&[1.0], &[2.0]).is_none());
    }

    #[test]
    fn judge_three_ways() {
        let pct = Some(Limit::Percent(10.0));
        let j = |d: f64, se: f64| {
            judge(
                Some(((100.0, 100.0 + d), d)),
                Better::Lower,
                pct,
                Some(se),
                2.0,
                1.645,
                None,
                Some(500),
                Method::ClusterBootstrap,
                None,
            )
        };
        assert_eq!(j(30.0, 5.0).0, CompareStatus::Regression);
        let (s, why) = j(12.0, 10.0);
        assert_eq!(s, CompareStatus::Inconclusive);
        assert!(why.unwrap().contains("need >= 500 requests per run"));
        assert_eq!(j(5.0, 1.0).0, CompareStatus::Worse);
        assert_eq!(j(1.0, 1.0).0, CompareStatus::Ok);
        assert_eq!(j(-10.0, 1.0).0, CompareStatus::Better);
        // An unsupported tail is inconclusive whatever the delta.
        let (s, why) = judge(
            Some(((100.0, 200.0), 100.0)),
            Better::Lower,
            pct,
            Some(1.0),
            2.0,
            1.645,
            Some(1000),
            None,
            Method::ClusterBootstrap,
            Some("p99"),
        );
        assert_eq!(s, CompareStatus::Inconclusive);
        assert!(
            why.unwrap()
                .contains("inconclusive (need >= 1000 requests)")
        );
        // Throughput: lower is worse.
        let (s, _) = judge(
            Some(((100.0, 50.0), -50.0)),
            Better::Higher,
            Some(Limit::Percent(5.0)),
            None,
            2.0,
            1.645,
            None,
            None,
            Method::None,
            None,
        );
        assert_eq!(s, CompareStatus::Inconclusive);
    }
}
