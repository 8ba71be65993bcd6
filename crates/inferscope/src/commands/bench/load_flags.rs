//! The flags `bench` and `tune` share, declared once and flattened into both (issue 32: one
//! vocabulary, docs/cli.md): what is sent, how each request is bounded, the open-loop rate, the
//! SLOs, the seed, and the capacity search's target.

use inferscope_bench::client::Api;
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::stats::Slo;
use std::time::Duration;

use crate::commands::positive_duration_arg;

/// Prompts, requests and open-loop load: the same flags in `bench` and `tune`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadFlags {
    /// Prompts: random:in=512,out=128[,spread=0.1] | jsonl:FILE | sharegpt:FILE | trace:FILE
    /// (timestamped replay, Mooncake or plain JSONL) | shared-prefix:groups=G,prefix=P,suffix=S[,out=O]
    /// | sessions:turns=N,think=D,user=U,out=O[,system=S] (multi-turn chat; needs --api chat).
    /// `--workload` is the same flag (tune's first spelling).
    #[arg(
        long,
        alias = "workload",
        value_name = "SPEC",
        default_value = "random:in=512,out=128"
    )]
    pub dataset: DatasetSpec,
    /// OpenAI endpoint: completions (/v1/completions) or chat (/v1/chat/completions).
    #[arg(long, value_name = "API", default_value = "completions")]
    pub api: Api,
    /// Model name to request (default: the first model the server lists in /v1/models).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// max_tokens for jsonl entries that do not give output_tokens.
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_tokens: u32,
    /// Open loop: send R requests per second whatever the server does (bench: gaps per
    /// --arrival; tune: Poisson, for goodput and throughput).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Service-level objectives, e.g. ttft=500ms,tpot=50ms,e2e=10s (goodput and capacity count
    /// requests meeting all of them).
    #[arg(long, value_name = "LIST")]
    pub slo: Option<Slo>,
    /// Seed for arrivals and synthetic prompts (tune: the same for every candidate).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Total time allowed per request.
    #[arg(long, value_name = "D", default_value = "60s", value_parser = positive_duration_arg)]
    pub timeout: Duration,
    /// Longest silence allowed between bytes of a response.
    #[arg(long, value_name = "D", default_value = "30s", value_parser = positive_duration_arg)]
    pub idle_timeout: Duration,
}

/// The capacity search's target (bench --find-capacity, tune --objective capacity).
#[derive(Debug, Clone, clap::Args)]
pub struct CapacityFlags {
    /// Capacity search: share of requests that must meet every SLO.
    #[arg(long, value_name = "F", default_value_t = 0.99)]
    pub attainment: f64,
    /// Capacity search: most probe runs.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_probes: u32,
}
