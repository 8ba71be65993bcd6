//! Statistics over raw records: pure, no clock, no I/O.
//!
//! Definitions (the same as `vllm bench serve` and GuideLLM, so figures are comparable):
//!
//! * **TTFT** = first content chunk − *intended* send time (queueing in the client or the
//!   server counts; a request that could not be sent on time is charged for the wait).
//! * **E2E** = end of response − intended send time.
//! * **TPOT** = (end − first token) / (output tokens − 1), per request with > 1 output token.
//! * **ITL** = gap between consecutive content chunks, one sample per gap (a chunk with several
//!   tokens is one gap: that is what a user sees).
//! * **send lag** = actual − intended send time: how far the client fell behind its schedule.
//! * Output tokens come from the server's `usage` when it sent one, else one per content chunk;
//!   the result says which (`token_count_source`).
//! * Throughput divides by the **measured window**: from the first measured request's intended
//!   send time to the last measured response's end. Warm-up requests are excluded everywhere.
//! * **Goodput** counts completed requests meeting every SLO given (`--slo`); `fraction` is over
//!   all measured requests that finished (completed + failed).
//!
//! Latencies go into HDR histograms in microseconds (3 significant digits, up to one hour);
//! mean, min and max are computed exactly from the raw values.

use crate::record::{ErrorClass, RequestRecord, TokenSource};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Largest latency tracked: one hour in µs. Larger values saturate.
const MAX_US: u64 = 3_600_000_000;

/// Percentiles written for plots (`cdf`).
pub fn cdf_percentiles() -> Vec<f64> {
    let mut v: Vec<f64> = (0..=99).map(f64::from).collect();
    v.extend([99.5, 99.9, 99.99, 100.0]);
    v
}

/// Service-level objectives for goodput: a request is "good" when it meets all that are set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token.
    #[serde(default, with = "opt_ms", skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Duration>,
    /// Time per output token.
    #[serde(default, with = "opt_ms", skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Duration>,
    /// End-to-end latency.
    #[serde(default, with = "opt_ms", skip_serializing_if = "Option::is_none")]
    pub e2e: Option<Duration>,
}

mod opt_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64() * 1000.0),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<f64>::deserialize(d)? {
            None => Ok(None),
            Some(ms) => Duration::try_from_secs_f64(ms / 1000.0)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

impl Slo {
    /// True when no objective is set.
    pub fn is_empty(&self) -> bool {
        self.ttft.is_none() && self.tpot.is_none() && self.e2e.is_none()
    }
}

/// Why an `--slo` value cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SloError {
    /// An item without `=`.
    #[error("SLO `{0}`: expected NAME=DURATION")]
    NoEquals(String),
    /// An item whose duration does not parse.
    #[error("SLO `{part}`: {reason}")]
    BadDuration {
        /// The item.
        part: String,
        /// Why.
        reason: crate::DurationError,
    },
    /// A name other than ttft, tpot, e2e.
    #[error("unknown SLO `{0}`: expected ttft, tpot or e2e")]
    Unknown(String),
}

impl std::str::FromStr for Slo {
    type Err = SloError;
    /// `ttft=500ms,tpot=50ms,e2e=10s`.
    fn from_str(s: &str) -> Result<Self, SloError> {
        let mut slo = Slo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| SloError::NoEquals(part.into()))?;
            let d = crate::parse_duration(v).map_err(|reason| SloError::BadDuration {
                part: part.into(),
                reason,
            })?;
            match k.trim() {
                "ttft" => slo.ttft = Some(d),
                "tpot" => slo.tpot = Some(d),
                "e2e" => slo.e2e = Some(d),
                other => return Err(SloError::Unknown(other.into())),
            }
        }
        Ok(slo)
    }
}

/// Distribution summary in milliseconds; fields are `null` when there were no samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Exact mean.
    pub mean: Option<f64>,
    /// Exact minimum.
    pub min: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Exact maximum.
    pub max: Option<f64>,
}

impl Summary {
    /// Look a field up by name (`mean`, `p50`, ...).
    pub fn get(&self, field: &str) -> Option<f64> {
        match field {
            "mean" => self.mean,
            "min" => self.min,
            "p50" => self.p50,
            "p90" => self.p90,
            "p95" => self.p95,
            "p99" => self.p99,
            "p999" => self.p999,
            "max" => self.max,
            _ => None,
        }
    }
}

/// An HDR histogram in µs plus the exact sum, min and max.
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// Empty.
    pub fn new() -> Self {
        // cannot fail: constant, valid bounds (1 µs .. 1 h, 3 significant digits).
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_max(MAX_US, 3).expect("valid constant histogram bounds");
        Latency {
            hist,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Add one sample in µs (saturating at one hour).
    pub fn record(&mut self, us: u64) {
        let us = us.min(MAX_US);
        self.hist.saturating_record(us);
        self.sum += u128::from(us);
        self.min = self.min.min(us);
        self.max = self.max.max(us);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Value at percentile `p` (0–100) in ms.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        if self.count() == 0 {
            return None;
        }
        let v = if p >= 100.0 {
            self.max
        } else if p <= 0.0 {
            self.min
        } else {
            // Clamp to the exact extremes: HDR returns bucket-equivalent values.
            self.hist.value_at_percentile(p).clamp(self.min, self.max)
        };
        Some(v as f64 / 1000.0)
    }

    /// Summary in ms.
    pub fn summary(&self) -> Summary {
        let n = self.count();
        if n == 0 {
            return Summary::default();
        }
        Summary {
            count: n,
            mean: Some(self.sum as f64 / n as f64 / 1000.0),
            min: Some(self.min as f64 / 1000.0),
            p50: self.percentile_ms(50.0),
            p90: self.percentile_ms(90.0),
            p95: self.percentile_ms(95.0),
            p99: self.percentile_ms(99.0),
            p999: self.percentile_ms(99.9),
            max: Some(self.max as f64 / 1000.0),
        }
    }

    /// `[percentile, ms]` pairs at [`cdf_percentiles`].
    pub fn cdf(&self) -> Vec<[f64; 2]> {
        if self.count() == 0 {
            return Vec::new();
        }
        cdf_percentiles()
            .into_iter()
            .filter_map(|p| self.percentile_ms(p).map(|v| [p, v]))
            .collect()
    }
}

/// Request counts of the measured part of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Measured requests sent.
    pub sent: u64,
    /// Completed without error.
    pub completed: u64,
    /// Failed (any error class but `cancelled`).
    pub failed: u64,
    /// Cut short by the run's deadline (not counted as failed).
    pub incomplete: u64,
    /// Warm-up requests (excluded from everything else).
    pub warmup: u64,
    /// Measured requests re-sent once because a pooled connection had been closed by the server.
    #[serde(default)]
    pub retried: u64,
}

/// Goodput under the SLOs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// The objectives.
    pub slo: Slo,
    /// Requests that met them.
    pub good_requests: u64,
    /// Good requests per second of the measured window.
    pub requests_per_s: f64,
    /// Good output tokens per second of the measured window.
    pub output_tokens_per_s: f64,
    /// Good / (completed + failed).
    pub fraction: f64,
}

/// Everything computed from the records of one run (or one sweep step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Counts.
    pub requests: RequestCounts,
    /// Failed and incomplete requests by error class.
    pub errors: BTreeMap<String, u64>,
    /// Time to first token (ms).
    pub ttft_ms: Summary,
    /// Time per output token (ms).
    pub tpot_ms: Summary,
    /// Inter-token (inter-chunk) latency (ms).
    pub itl_ms: Summary,
    /// End-to-end latency (ms).
    pub e2e_ms: Summary,
    /// Actual − intended send time (ms).
    pub send_lag_ms: Summary,
    /// Measured window (s).
    pub duration_s: f64,
    /// Completed requests per second.
    pub requests_per_s: f64,
    /// Output tokens of completed requests per second.
    pub output_tokens_per_s: f64,
    /// Prompt tokens of completed requests per second; 0 when unknown.
    pub input_tokens_per_s: f64,
    /// Output tokens of completed requests.
    pub output_tokens: u64,
    /// Prompt tokens of completed requests (server usage, else the local tokenizer; requests with
    /// neither add nothing).
    pub input_tokens: u64,
    /// `usage`, `tokenizer`, `chunks`, `mixed`, `unknown` (no completed request could be
    /// counted: `output_tokens` and `output_tokens_per_s` are then 0 as placeholders) or `none`
    /// (no completed request).
    pub token_count_source: String,
    /// How the local tokenizer's output counts agree with the server's usage, over completed
    /// requests that have both (absent without `--tokenizer` or without usage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_vs_usage: Option<TokenizerAgreement>,
    /// Failed / (completed + failed).
    pub error_rate: f64,
    /// Goodput, when SLOs were given.
    pub goodput: Option<Goodput>,
    /// Completed requests whose server usage is impossible ([`implausible_usage`]): left out
    /// of the token sums, and any makes the run invalid.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implausible_token_counts: u64,
    /// Prefix reuse: what the workload could have served from a prefix cache, what the server
    /// says it did, TTFT of hits against misses (absent when neither is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_reuse: Option<crate::reuse::PrefixReuse>,
    /// `sessions:` workloads: TTFT per turn and its median against turn 1's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<crate::sessions::TurnTtft>,
    /// With several `--url`s: each endpoint's share (the top-level figures are overall).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<crate::replicas::EndpointStats>,
    /// `[percentile, ms]` pairs per metric, for plots.
    pub cdf: BTreeMap<String, Vec<[f64; 2]>>,
}

/// Local tokenizer versus the server's usage: a wrong `tokenizer.json` shows here.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TokenizerAgreement {
    /// Requests with both counts.
    pub requests: u64,
    /// Of those, requests whose counts are equal.
    pub equal: u64,
    /// Sum over requests of (tokenizer − usage) / sum of usage: the relative error of token
    /// totals had the tokenizer been used (re-tokenizing text can merge or split a token at
    /// chunk boundaries, so a few tenths of a percent is normal).
    pub relative_difference: f64,
    /// Largest |tokenizer − usage| of one request.
    pub max_abs_difference: u64,
}

/// The histograms behind [`Stats`], for callers that want more percentiles.
#[derive(Debug, Clone, Default)]
pub struct Histograms {
    /// TTFT.
    pub ttft: Latency,
    /// TPOT.
    pub tpot: Latency,
    /// ITL.
    pub itl: Latency,
    /// E2E.
    pub e2e: Latency,
    /// Send lag.
    pub send_lag: Latency,
}

/// Per-request derived metrics in µs (`None` where undefined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerRequest {
    /// TTFT.
    pub ttft_us: Option<u64>,
    /// TPOT.
    pub tpot_us: Option<u64>,
    /// E2E.
    pub e2e_us: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// Derived metrics of one completed record.
pub fn per_request(r: &RequestRecord) -> PerRequest {
    let (out, _) = r.output_tokens();
    let ttft = r.first_token_us.map(|f| f.saturating_sub(r.intended_us));
    let tpot = match r.first_token_us {
        Some(f) if out > 1 => Some(r.end_us.saturating_sub(f) / (out - 1)),
        _ => None,
    };
    PerRequest {
        ttft_us: ttft,
        tpot_us: tpot,
        e2e_us: r.end_us.saturating_sub(r.intended_us),
        output_tokens: out,
    }
}

/// Most tokens one request can plausibly report (prompt or completion): no model has a context
/// of 2^32 tokens, so a larger count is a broken or hostile server, not a measurement.
pub const MAX_PLAUSIBLE_TOKENS: u64 = 1 << 32;

/// True when the server's usage for `r` cannot be right: more completion tokens than the
/// request's `max_tokens` allowed, or a count over [`MAX_PLAUSIBLE_TOKENS`].
pub fn implausible_usage(r: &RequestRecord) -> bool {
    let over_max = |n: u64| r.max_tokens > 0 && n > u64::from(r.max_tokens);
    r.usage_output_tokens
        .is_some_and(|n| n > MAX_PLAUSIBLE_TOKENS || over_max(n))
        || r.input_tokens.is_some_and(|n| n > MAX_PLAUSIBLE_TOKENS)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Compute statistics of the measured (non-warm-up) records.
pub fn compute(records: &[RequestRecord], slo: &Slo) -> (Stats, Histograms) {
    let mut h = Histograms::default();
    let mut counts = RequestCounts::default();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let (mut out_tokens, mut in_tokens) = (0u64, 0u64);
    let (mut by_usage, mut by_tokenizer, mut by_chunks, mut by_unknown) = (0u64, 0u64, 0u64, 0u64);
    let (mut both, mut equal, mut usage_sum, mut diff_sum, mut max_diff) =
        (0u64, 0u64, 0u64, 0i128, 0u64);
    let (mut start, mut end) = (u64::MAX, 0u64);
    let (mut good, mut good_tokens) = (0u64, 0u64);
    let mut implausible = 0u64;
    for r in records {
        if r.warmup {
            counts.warmup += 1;
            continue;
        }
        counts.sent += 1;
        counts.retried += u64::from(r.retries.min(1));
        start = start.min(r.intended_us);
        match r.error {
            Some(ErrorClass::Cancelled) => {
                counts.incomplete += 1;
                *errors.entry("cancelled".into()).or_default() += 1;
                continue;
            }
            Some(c) => {
                counts.failed += 1;
                *errors.entry(c.as_str().into()).or_default() += 1;
                end = end.max(r.end_us);
                continue;
            }
            None => counts.completed += 1,
        }
        end = end.max(r.end_us);
        if implausible_usage(r) {
            // Counted and reported (the run becomes invalid), never summed: three counts of
            // 2^64 - 1 would otherwise wrap to a small "valid" total.
            implausible += 1;
            continue;
        }
        let m = per_request(r);
        h.e2e.record(m.e2e_us);
        h.send_lag.record(r.sent_us.saturating_sub(r.intended_us));
        if let Some(t) = m.ttft_us {
            h.ttft.record(t);
        }
        if let Some(t) = m.tpot_us {
            h.tpot.record(t);
        }
        for (a, b) in r.chunks.iter().zip(r.chunks.iter().skip(1)) {
            h.itl.record(b.0.saturating_sub(a.0));
        }
        out_tokens = out_tokens.saturating_add(m.output_tokens);
        in_tokens = in_tokens.saturating_add(r.prompt_tokens().unwrap_or(0));
        match r.output_tokens().1 {
            TokenSource::Usage => by_usage += 1,
            TokenSource::Tokenizer => by_tokenizer += 1,
            TokenSource::Chunks => by_chunks += 1,
            TokenSource::Unknown => by_unknown += 1,
        }
        if let (Some(u), Some(t)) = (r.usage_output_tokens, r.tokenizer_output_tokens) {
            both += 1;
            equal += u64::from(u == t);
            usage_sum = usage_sum.saturating_add(u);
            diff_sum += i128::from(t) - i128::from(u);
            max_diff = max_diff.max(t.abs_diff(u));
        }
        let ok = |v: Option<u64>, lim: Option<Duration>| match (v, lim) {
            (_, None) | (None, _) => true,
            (Some(v), Some(l)) => u128::from(v) <= l.as_micros(),
        };
        if ok(m.ttft_us, slo.ttft) && ok(m.tpot_us, slo.tpot) && ok(Some(m.e2e_us), slo.e2e) {
            good += 1;
            good_tokens = good_tokens.saturating_add(m.output_tokens);
        }
    }
    let duration_s = if end > start {
        (end - start) as f64 / 1e6
    } else {
        0.0
    };
    let per_s = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };
    let finished = counts.completed + counts.failed;
    let goodput = (!slo.is_empty()).then(|| Goodput {
        slo: *slo,
        good_requests: good,
        requests_per_s: per_s(good),
        output_tokens_per_s: per_s(good_tokens),
        fraction: if finished > 0 {
            good as f64 / finished as f64
        } else {
            0.0
        },
    });
    // "unknown" when no completed request could be counted: output tokens and their rate are
    // then placeholders, not measurements (compare leaves throughput out).
    let source = match (by_usage, by_tokenizer, by_chunks, by_unknown) {
        (0, 0, 0, 0) => "none",
        (0, 0, 0, _) => "unknown",
        (_, 0, 0, 0) => "usage",
        (0, _, 0, 0) => "tokenizer",
        (0, 0, _, 0) => "chunks",
        _ => "mixed",
    };
    let tokenizer_vs_usage = (both > 0).then(|| TokenizerAgreement {
        requests: both,
        equal,
        relative_difference: if usage_sum > 0 {
            diff_sum as f64 / usage_sum as f64
        } else {
            0.0
        },
        max_abs_difference: max_diff,
    });
    let mut cdf = BTreeMap::new();
    for (name, l) in [
        ("ttft_ms", &h.ttft),
        ("tpot_ms", &h.tpot),
        ("itl_ms", &h.itl),
        ("e2e_ms", &h.e2e),
    ] {
        cdf.insert(name.to_string(), l.cdf());
    }
    let stats = Stats {
        requests: counts,
        errors,
        ttft_ms: h.ttft.summary(),
        tpot_ms: h.tpot.summary(),
        itl_ms: h.itl.summary(),
        e2e_ms: h.e2e.summary(),
        send_lag_ms: h.send_lag.summary(),
        duration_s,
        requests_per_s: per_s(counts.completed),
        output_tokens_per_s: per_s(out_tokens),
        input_tokens_per_s: per_s(in_tokens),
        output_tokens: out_tokens,
        input_tokens: in_tokens,
        token_count_source: source.to_string(),
        tokenizer_vs_usage,
        error_rate: if finished > 0 {
            counts.failed as f64 / finished as f64
        } else {
            0.0
        },
        goodput,
        implausible_token_counts: implausible,
        prefix_reuse: crate::reuse::prefix_reuse(records),
        turns: crate::sessions::turn_ttft(records),
        endpoints: Vec::new(),
        cdf,
    };
    (stats, h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RequestRecord;

    fn rec(seq: u64, intended: u64, first: u64, gaps: &[u64]) -> RequestRecord {
        let mut r = RequestRecord::new(seq, false, intended, intended + 10);
        let mut t = first;
        r.push_chunk(t, 1);
        for g in gaps {
            t += g;
            r.push_chunk(t, 1);
        }
        r.end_us = t + 100;
        r
    }

    #[test]
    fn definitions() {
        let r = rec(0, 1_000, 51_000, &[10_000, 10_000, 10_000]);
        let m = per_request(&r);
        assert_eq!(m.ttft_us, Some(50_000));
        assert_eq!(m.output_tokens, 4);
        assert_eq!(m.tpot_us, Some((81_100 - 51_000) / 3));
        assert_eq!(m.e2e_us, 80_100);
        let (s, _) = compute(&[r], &Slo::default());
        assert_eq!(s.requests.completed, 1);
        assert_eq!(s.itl_ms.count, 3);
        assert_eq!(s.itl_ms.p50, Some(10.0));
        assert_eq!(s.ttft_ms.mean, Some(50.0));
        assert_eq!(s.token_count_source, "chunks");
        assert!((s.duration_s - 0.0801).abs() < 1e-9);
        assert!((s.output_tokens_per_s - 4.0 / 0.0801).abs() < 1e-6);
    }

    #[test]
    fn warmup_failed_cancelled_and_goodput() {
        let mut w = rec(0, 0, 5_000, &[]);
        w.warmup = true;
        let good = rec(1, 0, 100_000, &[1_000]);
        let slow = rec(2, 0, 900_000, &[1_000]);
        let mut failed = RequestRecord::new(3, false, 0, 0);
        failed.fail(ErrorClass::HttpStatus, "503");
        let mut cut = RequestRecord::new(4, false, 0, 0);
        cut.fail(ErrorClass::Cancelled, "deadline");
        let slo: Slo = "ttft=500ms".parse().unwrap();
        let (s, _) = compute(&[w, good, slow, failed, cut], &slo);
        assert_eq!(
            s.requests,
            RequestCounts {
                sent: 4,
                completed: 2,
                failed: 1,
                incomplete: 1,
                warmup: 1,
                retried: 0
            }
        );
        assert_eq!(s.errors.get("http_status"), Some(&1));
        assert_eq!(s.errors.get("cancelled"), Some(&1));
        let g = s.goodput.unwrap();
        assert_eq!(g.good_requests, 1);
        assert!((g.fraction - 1.0 / 3.0).abs() < 1e-9);
        assert!((s.error_rate - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn empty_input_gives_nulls_not_nans() {
        let (s, _) = compute(&[], &Slo::default());
        assert_eq!(s.ttft_ms, Summary::default());
        assert_eq!(s.requests_per_s, 0.0);
        let j = serde_json::to_string(&s).unwrap();
        assert!(!j.contains("NaN"));
    }

    #[test]
    fn percentiles_are_close_and_bounded_by_extremes() {
        let mut l = Latency::new();
        for v in 1..=10_000u64 {
            l.record(v * 100);
        }
        let s = l.summary();
        assert!((s.p99.unwrap() - 990.0).abs() / 990.0 < 0.002, "{s:?}");
        assert_eq!(s.max, Some(1000.0));
        assert_eq!(s.min, Some(0.1));
        l.record(u64::MAX);
        assert_eq!(l.summary().max, Some(MAX_US as f64 / 1000.0));
    }

    #[test]
    fn slo_parsing() {
        let s: Slo = "ttft=500ms, tpot=50ms,e2e=2s".parse().unwrap();
        assert_eq!(s.ttft, Some(Duration::from_millis(500)));
        assert_eq!(s.e2e, Some(Duration::from_secs(2)));
        assert!("itl=5ms".parse::<Slo>().is_err());
        assert!("ttft".parse::<Slo>().is_err());
    }
}
