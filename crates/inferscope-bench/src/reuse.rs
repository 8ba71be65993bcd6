//! Prefix reuse of a run (pure): how much of the prompts the workload could have served from a
//! prefix cache (its shared blocks or prefixes sent earlier), how much the server says it did
//! (per response: `usage.prompt_tokens_details.cached_tokens` or llama-server's
//! `timings.cache_n`), and TTFT of the requests that could hit against those that could not,
//! with a one-sided Mann-Whitney test that the first are faster.

use crate::record::RequestRecord;
use crate::stats::{Latency, Summary, per_request};
use serde::{Deserialize, Serialize};

/// The `prefix_reuse` object of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefixReuse {
    /// Unit of `reusable_share`'s lengths: `words` for synthesised prompts (about one token
    /// each; a trace's lengths are tokens, sent as that many words).
    pub length_unit: String,
    /// Completed measured requests whose reusable prefix the workload knows.
    pub requests: u64,
    /// Of those, requests with a reusable prefix (`hit` below).
    pub requests_reusable: u64,
    /// Reusable prompt length over all prompt length (dataset units: words unless
    /// `--tokenizer` sized them).
    pub reusable_share: f64,
    /// Requests whose response said how many prompt tokens came from the server's cache.
    pub server_reported: u64,
    /// Cached over prompt tokens of those requests, per the server; `null` when none said.
    pub server_cached_share: Option<f64>,
    /// TTFT of requests with a reusable prefix.
    pub ttft_ms_hit: Summary,
    /// TTFT of requests without one.
    pub ttft_ms_miss: Summary,
    /// The engine's own prefix-cache hit rate over the run, from its scraped metrics: vLLM's
    /// `prefix_cache_hits_total` rise over `prefix_cache_queries_total` rise (tokens), or the
    /// last value of a room's hit-rate gauge; absent when not scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics_hit_rate: Option<f64>,
    /// The metric it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics_hit_rate_source: Option<String>,
    /// One-sided Mann-Whitney p-value that hit TTFTs are lower than miss TTFTs (normal
    /// approximation with tie correction, `compare`'s test); `null` with fewer than 3 of either.
    pub ttft_hit_lower_p: Option<f64>,
}

/// The prefix reuse of the measured, completed requests; `None` when the workload knows no
/// request's reusable prefix and no server reported cache hits.
pub fn prefix_reuse(records: &[RequestRecord]) -> Option<PrefixReuse> {
    let done: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup && r.is_ok()).collect();
    let known: Vec<&&RequestRecord> = done
        .iter()
        .filter(|r| r.reusable_prefix.is_some())
        .collect();
    let reported: Vec<&&RequestRecord> = done
        .iter()
        .filter(|r| r.cached_tokens.is_some() && r.input_tokens.is_some_and(|n| n > 0))
        .collect();
    if known.is_empty() && reported.is_empty() {
        return None;
    }
    let (mut hit, mut miss) = (Latency::new(), Latency::new());
    let (mut hit_v, mut miss_v) = (Vec::new(), Vec::new());
    let (mut reusable, mut total) = (0u64, 0u64);
    for r in &known {
        let re = u64::from(r.reusable_prefix.unwrap_or(0));
        reusable += re;
        total += u64::from(r.prompt_len).max(re);
        if let Some(t) = per_request(r).ttft_us {
            if re > 0 {
                hit.record(t);
                hit_v.push(t as f64);
            } else {
                miss.record(t);
                miss_v.push(t as f64);
            }
        }
    }
    let cached: u64 = reported.iter().filter_map(|r| r.cached_tokens).sum();
    let prompt: u64 = reported.iter().filter_map(|r| r.input_tokens).sum();
    Some(PrefixReuse {
        length_unit: "words".into(),
        requests: known.len() as u64,
        requests_reusable: known
            .iter()
            .filter(|r| r.reusable_prefix.unwrap_or(0) > 0)
            .count() as u64,
        reusable_share: if total > 0 {
            reusable as f64 / total as f64
        } else {
            0.0
        },
        server_reported: reported.len() as u64,
        server_cached_share: (prompt > 0).then(|| cached as f64 / prompt as f64),
        ttft_ms_hit: hit.summary(),
        ttft_ms_miss: miss.summary(),
        // p that the misses' TTFTs are larger than the hits'.
        ttft_hit_lower_p: crate::compare::mann_whitney_greater(&hit_v, &miss_v),
        server_metrics_hit_rate: None,
        server_metrics_hit_rate_source: None,
    })
}

/// The engine's prefix-cache hit rate over a run from its scraped metrics, and the metric's
/// name: vLLM (V1 names, then V0's `gpu_` ones) as the rise of hits over the rise of queries,
/// another engine as the last value of the hit-rate gauge its room registers
/// (`ServerMetricNames::prefix_hit_rate`). `None` when neither was scraped or no query was made.
pub fn metrics_hit_rate(m: &crate::server_metrics::ServerMetrics) -> Option<(f64, String)> {
    for (hits, queries) in [
        (
            "vllm:prefix_cache_hits_total",
            "vllm:prefix_cache_queries_total",
        ),
        (
            "vllm:gpu_prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_queries_total",
        ),
    ] {
        if let (Some(h), Some(q)) = (m.summary.get(hits), m.summary.get(queries)) {
            let dq = q.last - q.first;
            if dq > 0.0 {
                return Some(((h.last - h.first) / dq, hits.to_string()));
            }
        }
    }
    crate::server_metrics::registered()
        .filter_map(|r| r.prefix_hit_rate)
        .find_map(|g| m.summary.get(g).map(|s| (s.last, g.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, ttft_ms: u64, reusable: Option<u32>, cached: Option<u64>) -> RequestRecord {
        let mut r = RequestRecord::new(seq, false, 0, 0);
        r.first_token_us = Some(ttft_ms * 1000);
        r.push_chunk(ttft_ms * 1000, 1);
        r.end_us = ttft_ms * 1000 + 10;
        r.prompt_len = 100;
        r.input_tokens = Some(100);
        r.reusable_prefix = reusable;
        r.cached_tokens = cached;
        r
    }

    #[test]
    fn split_by_reusable_prefix() {
        let recs: Vec<RequestRecord> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    rec(i, 10 + i, Some(60), Some(60))
                } else {
                    rec(i, 50 + i, Some(0), Some(0))
                }
            })
            .collect();
        let p = prefix_reuse(&recs).unwrap();
        assert_eq!((p.requests, p.requests_reusable), (10, 5));
        assert!((p.reusable_share - 0.3).abs() < 1e-9);
        assert_eq!(p.server_reported, 10);
        assert!((p.server_cached_share.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(p.ttft_ms_hit.count, 5);
        assert!(p.ttft_ms_hit.p50.unwrap() < p.ttft_ms_miss.p50.unwrap());
        assert!(p.ttft_hit_lower_p.unwrap() < 0.01);
        let mut m = crate::server_metrics::ServerMetrics::new("http://x/metrics", 1.0);
        let sum = |first, last| crate::server_metrics::Summary {
            first,
            last,
            max: last,
        };
        assert_eq!(metrics_hit_rate(&m), None);
        m.summary
            .insert("vllm:prefix_cache_hits_total".into(), sum(100.0, 400.0));
        m.summary.insert(
            "vllm:prefix_cache_queries_total".into(),
            sum(1000.0, 2000.0),
        );
        assert_eq!(
            metrics_hit_rate(&m),
            Some((0.3, "vllm:prefix_cache_hits_total".into()))
        );
        // Unknown is not zero: a workload that does not know reports nothing.
        assert_eq!(prefix_reuse(&[rec(0, 1, None, None)]), None);
    }
}
