//! Several endpoints (`bench --url A --url B ...`): how requests are spread over replicas, and
//! the statistics of each. Benchmarks a deployment rather than one pod.
//!
//! * `round-robin` (default): request `seq` goes to endpoint `seq mod N`.
//! * `least-outstanding`: to the endpoint with the fewest requests in flight from this client
//!   (the lowest index on ties), what a load balancer with that policy does.

use crate::record::RequestRecord;
use crate::stats::{Latency, Summary, per_request};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// How requests are spread over the endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Endpoint `seq mod N`.
    #[default]
    RoundRobin,
    /// The endpoint with the fewest requests in flight.
    LeastOutstanding,
}

/// A `--balance` value other than round-robin or least-outstanding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown balance `{0}`: expected round-robin or least-outstanding")]
pub struct UnknownBalance(pub String);

impl std::str::FromStr for Balance {
    type Err = UnknownBalance;
    fn from_str(s: &str) -> Result<Self, UnknownBalance> {
        match s {
            "round-robin" => Ok(Balance::RoundRobin),
            "least-outstanding" => Ok(Balance::LeastOutstanding),
            _ => Err(UnknownBalance(s.into())),
        }
    }
}

/// The endpoints of one target and their in-flight counts.
#[derive(Debug)]
pub struct Spread {
    balance: Balance,
    outstanding: Vec<AtomicU64>,
}

impl Spread {
    /// `n` endpoints (at least 1).
    pub fn new(n: usize, balance: Balance) -> Self {
        Spread {
            balance,
            outstanding: (0..n.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The endpoint for request `seq`, counted as outstanding until [`Spread::done`].
    pub fn pick(&self, seq: u64) -> usize {
        let n = self.outstanding.len().max(1);
        let i = match self.balance {
            Balance::RoundRobin => (seq % n as u64) as usize,
            Balance::LeastOutstanding => self
                .outstanding
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.load(Ordering::Relaxed))
                .map_or(0, |(i, _)| i),
        };
        if let Some(c) = self.outstanding.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        i
    }

    /// Request on endpoint `i` ended.
    pub fn done(&self, i: usize) {
        if let Some(c) = self.outstanding.get(i) {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One endpoint's share of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointStats {
    /// The endpoint's base URL (credentials scrubbed).
    pub url: String,
    /// Measured requests sent to it.
    pub requests: u64,
    /// Of those, completed.
    pub completed: u64,
    /// Output tokens of its completed requests.
    pub output_tokens: u64,
    /// TTFT of its completed requests.
    pub ttft_ms: Summary,
    /// End-to-end latency of its completed requests.
    pub e2e_ms: Summary,
}

/// Per-endpoint statistics of the measured requests (records carry their endpoint's index).
pub fn per_endpoint(records: &[RequestRecord], urls: &[String]) -> Vec<EndpointStats> {
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            let (mut ttft, mut e2e) = (Latency::new(), Latency::new());
            let (mut requests, mut completed, mut tokens) = (0, 0, 0);
            for r in records
                .iter()
                .filter(|r| !r.warmup && r.endpoint.map_or(0, |e| e as usize) == i)
            {
                requests += 1;
                if r.is_ok() {
                    completed += 1;
                    let p = per_request(r);
                    tokens += p.output_tokens;
                    e2e.record(p.e2e_us);
                    if let Some(t) = p.ttft_us {
                        ttft.record(t);
                    }
                }
            }
            EndpointStats {
                url: inferscope_host::redact::scrub(url).into_owned(),
                requests,
                completed,
                output_tokens: tokens,
                ttft_ms: ttft.summary(),
                e2e_ms: e2e.summary(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_and_least_outstanding() {
        let s = Spread::new(3, Balance::RoundRobin);
        let picks: Vec<usize> = (0..6).map(|q| s.pick(q)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        let l = Spread::new(3, Balance::LeastOutstanding);
        assert_eq!((l.pick(0), l.pick(1), l.pick(2)), (0, 1, 2));
        l.done(1);
        // Endpoint 1 has nothing in flight now; the others one each.
        assert_eq!(l.pick(3), 1);
        assert_eq!(l.pick(4), 0);
        assert_eq!(
            "least-outstanding".parse::<Balance>(),
            Ok(Balance::LeastOutstanding)
        );
        assert!("random".parse::<Balance>().is_err());
    }
}
