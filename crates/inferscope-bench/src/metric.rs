//! Bench's metrics as one type: each [`Metric`] knows its name (the JSON spelling, a contract:
//! `ttft_p99`, `throughput`, ...), its unit, which way is better, and how it is computed from a
//! run's [`Stats`]. A new metric is one variant plus its arms here; the compiler finds every
//! match that must learn it, and no name falls through a catch-all arm.

use crate::compare::Better;
use crate::stats::{Slo, Stats, Summary};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;

/// A latency family with per-request samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// Inter-token (inter-chunk) latency.
    Itl,
    /// End-to-end request latency.
    E2e,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 4] = [Family::Ttft, Family::Tpot, Family::Itl, Family::E2e];

    /// Its name (the metric prefix, `ttft`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Ttft => "ttft",
            Family::Tpot => "tpot",
            Family::Itl => "itl",
            Family::E2e => "e2e",
        }
    }

    /// The family named `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Its summary in a run's statistics (milliseconds).
    pub fn summary(self, s: &Stats) -> &Summary {
        match self {
            Family::Ttft => &s.ttft_ms,
            Family::Tpot => &s.tpot_ms,
            Family::Itl => &s.itl_ms,
            Family::E2e => &s.e2e_ms,
        }
    }

    /// The SLO bound that judges it: ITL is the same decode step as TPOT, so `tpot` bounds it.
    pub fn slo_bound(self, slo: &Slo) -> Option<Duration> {
        match self {
            Family::Ttft => slo.ttft,
            Family::Tpot | Family::Itl => slo.tpot,
            Family::E2e => slo.e2e,
        }
    }
}

/// A statistic of a latency family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stat {
    /// Mean.
    Mean,
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 95th percentile.
    P95,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
}

impl Stat {
    /// Every statistic, in report order.
    pub const ALL: [Stat; 6] = [
        Stat::Mean,
        Stat::P50,
        Stat::P90,
        Stat::P95,
        Stat::P99,
        Stat::P999,
    ];

    /// Its name (the metric suffix, `p99`).
    pub fn name(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P95 => "p95",
            Stat::P99 => "p99",
            Stat::P999 => "p999",
        }
    }

    /// Its value in a summary.
    pub fn of(self, s: &Summary) -> Option<f64> {
        match self {
            Stat::Mean => s.mean,
            Stat::P50 => s.p50,
            Stat::P90 => s.p90,
            Stat::P95 => s.p95,
            Stat::P99 => s.p99,
            Stat::P999 => s.p999,
        }
    }
}

/// One bench metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// A statistic of a latency family (`ttft_p99`), in ms.
    Latency(Family, Stat),
    /// Output tokens per second (unknown when tokens were not counted).
    Throughput,
    /// Completed requests per second.
    RequestsPerS,
    /// Requests per second meeting every SLO.
    Goodput,
    /// Share of requests meeting every SLO.
    SloAttainment,
    /// Share of requests that failed.
    ErrorRate,
}

impl Metric {
    /// Every metric: each family's statistics, then the rates and shares.
    pub fn all() -> Vec<Metric> {
        let mut v: Vec<Metric> = Family::ALL
            .into_iter()
            .flat_map(|f| Stat::ALL.into_iter().map(move |s| Metric::Latency(f, s)))
            .collect();
        v.extend([
            Metric::Throughput,
            Metric::RequestsPerS,
            Metric::Goodput,
            Metric::SloAttainment,
            Metric::ErrorRate,
        ]);
        v
    }

    /// Its name in thresholds, comparison rows and JSON.
    pub fn name(self) -> String {
        match self {
            Metric::Latency(f, s) => format!("{}_{}", f.name(), s.name()),
            Metric::Throughput => "throughput".into(),
            Metric::RequestsPerS => "requests_per_s".into(),
            Metric::Goodput => "goodput".into(),
            Metric::SloAttainment => "slo_attainment".into(),
            Metric::ErrorRate => "error_rate".into(),
        }
    }

    /// The metric named `name`.
    pub fn parse(name: &str) -> Option<Metric> {
        Metric::all().into_iter().find(|m| m.name() == name)
    }

    /// Its unit.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Latency(..) => "ms",
            Metric::Throughput => "output tokens/s",
            Metric::RequestsPerS => "requests/s",
            Metric::Goodput => "good requests/s",
            Metric::SloAttainment | Metric::ErrorRate => "fraction",
        }
    }

    /// Which way is better.
    pub fn better(self) -> Better {
        match self {
            Metric::Latency(..) | Metric::ErrorRate => Better::Lower,
            Metric::Throughput | Metric::RequestsPerS | Metric::Goodput | Metric::SloAttainment => {
                Better::Higher
            }
        }
    }

    /// Its latency family, if it is a latency.
    pub fn family(self) -> Option<Family> {
        match self {
            Metric::Latency(f, _) => Some(f),
            Metric::Throughput
            | Metric::RequestsPerS
            | Metric::Goodput
            | Metric::SloAttainment
            | Metric::ErrorRate => None,
        }
    }

    /// Its value in a run's statistics; unknown is `None`, never 0.
    pub fn of(self, s: &Stats) -> Option<f64> {
        match self {
            Metric::Latency(f, st) => st.of(f.summary(s)),
            // Uncounted tokens are not a throughput of 0.
            Metric::Throughput if s.token_count_source == "unknown" => None,
            Metric::Throughput => Some(s.output_tokens_per_s),
            Metric::RequestsPerS => Some(s.requests_per_s),
            Metric::Goodput => s.goodput.map(|g| g.requests_per_s),
            Metric::SloAttainment => s.goodput.map(|g| g.fraction),
            Metric::ErrorRate => Some(s.error_rate),
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Metric::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown metric `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::BenchResult;

    /// A real run (fixtures/bench/llama-server-np1-np4/README.md: llama-server `-np 1`, with an
    /// SLO, so goodput and attainment are known).
    fn np1() -> (BenchResult, serde_json::Value) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/bench/llama-server-np1-np4/np1.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        (
            serde_json::from_str(&text).unwrap(),
            serde_json::from_str(&text).unwrap(),
        )
    }

    #[test]
    fn every_metric_has_a_name_unit_direction_and_computation() {
        let (r, json) = np1();
        let all = Metric::all();
        assert_eq!(all.len(), 4 * 6 + 5);
        for m in &all {
            assert!(!m.unit().is_empty(), "{m}");
            let v = m
                .of(&r.stats)
                .unwrap_or_else(|| panic!("{m}: no value in a complete run"));
            // The value is the one the result file holds under its documented key.
            let key = match m {
                Metric::Latency(f, s) => json[format!("{}_ms", f.name())][s.name()].clone(),
                Metric::Throughput => json["output_tokens_per_s"].clone(),
                Metric::RequestsPerS => json["requests_per_s"].clone(),
                Metric::Goodput => json["goodput"]["requests_per_s"].clone(),
                Metric::SloAttainment => json["goodput"]["fraction"].clone(),
                Metric::ErrorRate => json["error_rate"].clone(),
            };
            assert_eq!(Some(v), key.as_f64(), "{m}");
            let expected = match m {
                Metric::Latency(..) | Metric::ErrorRate => Better::Lower,
                _ => Better::Higher,
            };
            assert_eq!(m.better(), expected, "{m}");
        }
    }

    #[test]
    fn names_are_the_json_spellings_and_round_trip() {
        // The contract: the names thresholds, rows and JSON have always used.
        let mut before = Vec::new();
        for fam in ["ttft", "tpot", "itl", "e2e"] {
            for f in ["mean", "p50", "p90", "p95", "p99", "p999"] {
                before.push(format!("{fam}_{f}"));
            }
        }
        for m in [
            "throughput",
            "requests_per_s",
            "goodput",
            "slo_attainment",
            "error_rate",
        ] {
            before.push(m.to_string());
        }
        let names: Vec<String> = Metric::all().iter().map(|m| m.name()).collect();
        assert_eq!(names, before);
        for m in Metric::all() {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Metric>(&json).unwrap(), m);
            assert_eq!(Metric::parse(&m.name()), Some(m));
        }
        assert!(serde_json::from_str::<Metric>("\"ttft_p42\"").is_err());
        assert_eq!(Metric::parse("ttft"), None);
    }

    #[test]
    fn uncounted_tokens_are_no_throughput() {
        let (mut r, _) = np1();
        r.stats.token_count_source = "unknown".into();
        assert_eq!(Metric::Throughput.of(&r.stats), None);
    }
}
