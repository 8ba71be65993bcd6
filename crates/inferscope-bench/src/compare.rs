//! Compare a candidate run with a baseline and decide: keep or roll back. Pure.
//!
//! * Every metric gets a row: baseline, candidate, delta, relative delta and whether that is
//!   better or worse (latencies and error rate: lower is better; throughputs: higher is better).
//! * **Thresholds** (`ttft_p99=+5%,tpot_p50=+3%,throughput=-2%,e2e_p99=+20`) give the worsening
//!   each metric may show before it counts: a `%` value is relative to the baseline, a bare value
//!   is absolute in the metric's unit (ms for latencies, a fraction for `error_rate`). The sign is
//!   documentation; the magnitude is the allowed worsening in the metric's bad direction.
//!   Without `--threshold` a default set is used ([`DEFAULT_THRESHOLDS`]).
//! * **Significance**: when both runs have per-request traces, a latency metric only counts as
//!   a regression if the worsening is also statistically significant: a seeded bootstrap
//!   (500 resamples of both samples) of the metric's difference must have its one-sided 95 %
//!   lower bound above zero. Each latency family also shows a one-sided Mann–Whitney U p-value
//!   (normal approximation with tie correction) for "the candidate is slower". Throughputs and the
//!   error rate have one value per run, so they are judged on the threshold alone.
//! * **Verdict**: `roll back` when any thresholded metric regressed or the candidate run is not
//!   valid; otherwise `keep`. `inferscope compare` exits 1 on `roll back`, for CI.

use crate::record::RequestRecord;
use crate::result::BenchResult;
use crate::stats::per_request;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Thresholds used when none are given.
pub const DEFAULT_THRESHOLDS: &str = "ttft_p50=+10%,ttft_p99=+10%,tpot_p50=+5%,itl_p99=+10%,e2e_p99=+10%,throughput=-5%,error_rate=+0.01";

/// Resamples of the bootstrap.
pub const BOOTSTRAP_RESAMPLES: usize = 500;
const FIELDS: [&str; 6] = ["mean", "p50", "p90", "p95", "p99", "p999"];
/// Samples per side used by the bootstrap (larger samples are thinned deterministically).
pub const BOOTSTRAP_MAX_SAMPLES: usize = 10_000;

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

/// All metric names.
pub fn metric_names() -> Vec<String> {
    let mut v = Vec::new();
    for fam in ["ttft", "tpot", "itl", "e2e"] {
        for f in ["mean", "p50", "p90", "p95", "p99", "p999"] {
            v.push(format!("{fam}_{f}"));
        }
    }
    for m in ["throughput", "requests_per_s", "goodput", "error_rate"] {
        v.push(m.to_string());
    }
    v
}

/// Parse `name=+5%,name=-2%,name=+20`.
pub fn parse_thresholds(s: &str) -> Result<Vec<Threshold>, String> {
    let names = metric_names();
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("threshold `{part}`: expected METRIC=+N% or METRIC=+N"))?;
        let k = k.trim();
        if !names.iter().any(|n| n == k) {
            return Err(format!(
                "threshold `{part}`: unknown metric `{k}` (known: {})",
                names.join(", ")
            ));
        }
        let v = v.trim();
        let (num, pct) = match v.strip_suffix('%') {
            Some(n) => (n, true),
            None => (v.strip_suffix("ms").unwrap_or(v), false),
        };
        let x: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("threshold `{part}`: `{v}` is not a number"))?;
        if !x.is_finite() {
            return Err(format!("threshold `{part}`: not finite"));
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

/// Per-request samples (ms) from a trace: completed, measured requests of the first step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// TTFT per request.
    pub ttft: Vec<f64>,
    /// TPOT per request.
    pub tpot: Vec<f64>,
    /// Every inter-chunk gap.
    pub itl: Vec<f64>,
    /// E2E per request.
    pub e2e: Vec<f64>,
}

impl Samples {
    /// Extract from records.
    pub fn from_records(records: &[RequestRecord]) -> Self {
        let mut s = Samples::default();
        for r in records
            .iter()
            .filter(|r| r.is_ok() && !r.warmup && r.step == 0)
        {
            let m = per_request(r);
            if let Some(t) = m.ttft_us {
                s.ttft.push(t as f64 / 1000.0);
            }
            if let Some(t) = m.tpot_us {
                s.tpot.push(t as f64 / 1000.0);
            }
            s.e2e.push(m.e2e_us as f64 / 1000.0);
            for (a, b) in r.chunks.iter().zip(r.chunks.iter().skip(1)) {
                s.itl.push(b.0.saturating_sub(a.0) as f64 / 1000.0);
            }
        }
        s
    }

    fn family(&self, fam: &str) -> Option<&[f64]> {
        match fam {
            "ttft" => Some(&self.ttft),
            "tpot" => Some(&self.tpot),
            "itl" => Some(&self.itl),
            "e2e" => Some(&self.e2e),
            _ => None,
        }
    }
}

/// How a metric moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Within threshold, or no threshold and not worse.
    Ok,
    /// Better than the baseline.
    Improved,
    /// Worse, but within its threshold (or unthresholded).
    Worse,
    /// Past its threshold, but not statistically significant: noise.
    Noise,
    /// Past its threshold (and significant when traces allow testing).
    Regression,
    /// A value is missing in one run.
    Unknown,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Metric name.
    pub metric: String,
    /// Baseline value.
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
    /// One-sided 95 % bootstrap interval of (cand − base), when traces allow.
    pub ci95: Option<[f64; 2]>,
    /// One-sided Mann–Whitney p-value that the candidate is worse (latency families).
    pub p_worse: Option<f64>,
    /// Outcome.
    pub status: Status,
}

/// Keep or roll back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No regression.
    Keep,
    /// At least one regression.
    RollBack,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Every metric.
    pub rows: Vec<Row>,
    /// Verdict.
    pub verdict: Verdict,
    /// Why (regressed metrics, invalid runs).
    pub reasons: Vec<String>,
    /// Notes (no traces, different settings).
    pub notes: Vec<String>,
    /// Whether significance tests were possible.
    pub significance_tested: bool,
}

fn value(r: &BenchResult, metric: &str) -> Option<f64> {
    let s = &r.stats;
    match metric {
        // Uncounted tokens are not a throughput of 0.
        "throughput" if s.token_count_source == "unknown" => None,
        "throughput" => Some(s.output_tokens_per_s),
        "requests_per_s" => Some(s.requests_per_s),
        "goodput" => s.goodput.map(|g| g.requests_per_s),
        "error_rate" => Some(s.error_rate),
        _ => {
            let (fam, field) = metric.split_once('_')?;
            let sum = match fam {
                "ttft" => &s.ttft_ms,
                "tpot" => &s.tpot_ms,
                "itl" => &s.itl_ms,
                "e2e" => &s.e2e_ms,
                _ => return None,
            };
            sum.get(field)
        }
    }
}

fn better(metric: &str) -> Better {
    match metric {
        "throughput" | "requests_per_s" | "goodput" => Better::Higher,
        _ => Better::Lower,
    }
}

fn thin(xs: &[f64], max: usize) -> Vec<f64> {
    if xs.len() <= max {
        return xs.to_vec();
    }
    let step = xs.len() as f64 / max as f64;
    (0..max)
        .filter_map(|i| xs.get((i as f64 * step) as usize).copied())
        .collect()
}

/// Statistic of a sorted sample: mean or a percentile (nearest rank).
fn sorted_statistic(field: &str, xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    if field == "mean" {
        return Some(xs.iter().sum::<f64>() / xs.len() as f64);
    }
    let q = match field {
        "p50" => 0.50,
        "p90" => 0.90,
        "p95" => 0.95,
        "p99" => 0.99,
        "p999" => 0.999,
        _ => return None,
    };
    let k = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs.get(k).copied()
}

/// One-sided 95% bootstrap intervals `[lower, upper]` (5th and 95th percentiles) of
/// `stat(cand) - stat(base)` for the mean and every percentile field at once (one resample
/// serves all fields).
pub fn bootstrap_family(
    base: &[f64],
    cand: &[f64],
    seed: u64,
) -> Option<Vec<(&'static str, [f64; 2])>> {
    if base.len() < 2 || cand.len() < 2 {
        return None;
    }
    let (b, c) = (
        thin(base, BOOTSTRAP_MAX_SAMPLES),
        thin(cand, BOOTSTRAP_MAX_SAMPLES),
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut diffs: Vec<Vec<f64>> = vec![Vec::with_capacity(BOOTSTRAP_RESAMPLES); FIELDS.len()];
    let (mut rb, mut rc) = (vec![0.0; b.len()], vec![0.0; c.len()]);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for x in rb.iter_mut() {
            if let Some(&v) = b.get(rng.random_range(0..b.len())) {
                *x = v;
            }
        }
        for x in rc.iter_mut() {
            if let Some(&v) = c.get(rng.random_range(0..c.len())) {
                *x = v;
            }
        }
        rb.sort_unstable_by(f64::total_cmp);
        rc.sort_unstable_by(f64::total_cmp);
        for (f, d) in FIELDS.iter().zip(diffs.iter_mut()) {
            d.push(sorted_statistic(f, &rc)? - sorted_statistic(f, &rb)?);
        }
    }
    FIELDS
        .iter()
        .zip(diffs)
        .map(|(f, mut d)| {
            d.sort_by(f64::total_cmp);
            let last = d.len().saturating_sub(1);
            let at = |q: f64| {
                d.get(((q * last as f64).round() as usize).min(last))
                    .copied()
            };
            Some((*f, [at(0.05)?, at(0.95)?]))
        })
        .collect()
}

/// Bootstrap intervals per field.
type Intervals = Vec<(&'static str, [f64; 2])>;

/// [`bootstrap_family`] for one field.
pub fn bootstrap_diff(base: &[f64], cand: &[f64], field: &str, seed: u64) -> Option<[f64; 2]> {
    bootstrap_family(base, cand, seed)?
        .into_iter()
        .find(|(f, _)| *f == field)
        .map(|(_, ci)| ci)
}

/// One-sided Mann–Whitney U test: p-value for "values in `cand` tend to be larger than in
/// `base`" (normal approximation, tie-corrected). `None` for tiny samples.
pub fn mann_whitney_greater(base: &[f64], cand: &[f64]) -> Option<f64> {
    let (b, c) = (thin(base, 200_000), thin(cand, 200_000));
    let (n1, n2) = (c.len() as f64, b.len() as f64);
    if c.len() < 3 || b.len() < 3 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = c
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
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
    Some(0.5 * erfc(z / std::f64::consts::SQRT_2))
}

/// Complementary error function (Numerical Recipes' erfcc, |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// Compare. `samples` are (baseline, candidate) per-request samples from traces, when both exist.
pub fn compare(
    base: &BenchResult,
    cand: &BenchResult,
    samples: Option<(&Samples, &Samples)>,
    thresholds: &[Threshold],
) -> Comparison {
    let mut rows = Vec::new();
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    let mut mw_cache: std::collections::BTreeMap<String, Option<f64>> = Default::default();
    let mut boot_cache: std::collections::BTreeMap<String, Option<Intervals>> = Default::default();
    for (i, metric) in metric_names().into_iter().enumerate() {
        let (b, c) = (value(base, &metric), value(cand, &metric));
        let dir = better(&metric);
        let delta = b.zip(c).map(|(b, c)| c - b);
        let delta_pct = b
            .zip(delta)
            .and_then(|(b, d)| (b.abs() > f64::EPSILON).then(|| d / b * 100.0));
        let threshold = thresholds
            .iter()
            .rev()
            .find(|t| t.metric == metric)
            .map(|t| t.limit);
        let (fam, field) = metric.split_once('_').unwrap_or((&metric, ""));
        let (mut ci95, mut p_worse) = (None, None);
        if let Some((sb, sc)) = samples
            && let (Some(xb), Some(xc)) = (sb.family(fam), sc.family(fam))
        {
            ci95 = boot_cache
                .entry(fam.to_string())
                .or_insert_with(|| bootstrap_family(xb, xc, 0x5eed + i as u64))
                .as_ref()
                .and_then(|v| v.iter().find(|(f, _)| *f == field).map(|(_, ci)| *ci));
            p_worse = *mw_cache
                .entry(fam.to_string())
                .or_insert_with(|| mann_whitney_greater(xb, xc));
        }
        let status = match (b, c, delta) {
            (Some(b), Some(_), Some(d)) => {
                // Worsening as a positive number in the metric's unit.
                let worse_by = match dir {
                    Better::Lower => d,
                    Better::Higher => -d,
                };
                let over = match threshold {
                    Some(Limit::Percent(p)) => worse_by > b.abs() * p / 100.0,
                    Some(Limit::Absolute(a)) => worse_by > a,
                    None => false,
                };
                // Significant when the interval of the worsening excludes zero.
                let significant = match ci95 {
                    Some([lo, hi]) => match dir {
                        Better::Lower => lo > 0.0,
                        Better::Higher => hi < 0.0,
                    },
                    None => true,
                };
                if over && significant {
                    Status::Regression
                } else if over {
                    Status::Noise
                } else if worse_by < 0.0 {
                    Status::Improved
                } else if worse_by > 0.0 && threshold.is_none() {
                    Status::Worse
                } else {
                    Status::Ok
                }
            }
            _ => Status::Unknown,
        };
        if status == Status::Regression {
            reasons.push(format!(
                "{metric}: {} -> {} ({}), past its threshold {}",
                fmt_num(b),
                fmt_num(c),
                delta_pct.map_or("n/a".into(), |p| format!("{p:+.1}%")),
                threshold.map_or("-".into(), fmt_limit)
            ));
        }
        if status == Status::Unknown && threshold.is_some() {
            notes.push(format!("{metric}: missing in one run, not judged"));
        }
        rows.push(Row {
            metric,
            base: b,
            cand: c,
            delta,
            delta_pct,
            better: dir,
            threshold,
            ci95,
            p_worse,
            status,
        });
    }
    if !cand.valid {
        reasons.push(format!(
            "the candidate run is not valid: {}",
            cand.invalid_reasons.join("; ")
        ));
    }
    if !base.valid {
        notes.push(format!(
            "the baseline run is not valid: {}",
            base.invalid_reasons.join("; ")
        ));
    }
    if samples.is_none() {
        notes.push(
            "no per-request traces for both runs: thresholds applied without a significance test \
             (bench --trace FILE records them)"
                .into(),
        );
    }
    let (bs, cs) = (&base.settings, &cand.settings);
    if bs.schedule != cs.schedule || bs.dataset != cs.dataset || bs.request.api != cs.request.api {
        notes.push("the runs used different schedules, datasets or APIs".into());
    }
    Comparison {
        verdict: if reasons.is_empty() {
            Verdict::Keep
        } else {
            Verdict::RollBack
        },
        rows,
        reasons,
        notes,
        significance_tested: samples.is_some(),
    }
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
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
        "{:<16} {:>12} {:>12} {:>12} {:>9} {:>10} {:>22} {:>8}  status",
        "metric", "base", "cand", "delta", "delta%", "threshold", "95% CI of delta", "p(worse)"
    )?;
    for r in &c.rows {
        if r.base.is_none() && r.cand.is_none() {
            continue;
        }
        let status = match r.status {
            Status::Ok => "ok",
            Status::Improved => "better",
            Status::Worse => "worse",
            Status::Noise => "noise",
            Status::Regression => "REGRESSION",
            Status::Unknown => "?",
        };
        writeln!(
            out,
            "{:<16} {:>12} {:>12} {:>12} {:>9} {:>10} {:>22} {:>8}  {}",
            r.metric,
            fmt_num(r.base),
            fmt_num(r.cand),
            r.delta.map_or("-".into(), |d| format!("{d:+.3}")),
            r.delta_pct.map_or("-".into(), |p| format!("{p:+.1}%")),
            r.threshold.map_or("-".into(), fmt_limit),
            r.ci95
                .map_or("-".into(), |[a, b]| format!("[{a:+.3}, {b:+.3}]")),
            r.p_worse.map_or("-".into(), |p| format!("{p:.3}")),
            status
        )?;
    }
    for n in &c.notes {
        writeln!(out, "note: {n}")?;
    }
    match c.verdict {
        Verdict::Keep => writeln!(out, "verdict: keep (no regression past the thresholds)")?,
        Verdict::RollBack => {
            writeln!(out, "verdict: roll back")?;
            for r in &c.reasons {
                writeln!(out, "  {r}")?;
            }
        }
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
    fn erfc_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-6);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
        assert!((erfc(-1.0) - 1.842_700_8).abs() < 1e-6);
    }

    #[test]
    fn bootstrap_interval_brackets_the_shift() {
        let base: Vec<f64> = (0..500).map(|i| 100.0 + f64::from(i % 20)).collect();
        let cand: Vec<f64> = base.iter().map(|x| x + 5.0).collect();
        let [lo, hi] = bootstrap_diff(&base, &cand, "mean", 1).unwrap();
        assert!(lo > 4.0 && hi < 6.0, "{lo} {hi}");
        let [lo, hi] = bootstrap_diff(&base, &base, "p99", 1).unwrap();
        assert!(lo <= 0.0 && hi >= 0.0);
    }
}
