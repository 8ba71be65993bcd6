//! The `speed` object of `plan --json`: decode and prefill, each as a roofline and an expected
//! figure for one engine, with the efficiency used and every assumption. The pre-issue-22 keys
//! (`tokens_per_s_per_sequence`, `ttft_s`, ...) stay as aliases of the expected figures.

use super::engines::{Engine, EngineEfficiency};
use super::estimate::{Estimate, Scenario, estimate};
use super::{Limit, SpeedError};
use serde::Serialize;

/// Decode at the running concurrency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodeSpeed {
    /// No real run is faster (100 % datasheet bandwidth and tensor peak, no overheads).
    pub roofline_tokens_per_s_per_sequence: f64,
    pub roofline_tokens_per_s_aggregate: f64,
    /// What the engine is expected to reach (its fitted efficiency and overheads).
    pub expected_tokens_per_s_per_sequence: f64,
    pub expected_tokens_per_s_aggregate: f64,
    /// Alias of `expected_tokens_per_s_per_sequence` (older key).
    pub tokens_per_s_per_sequence: f64,
    /// Alias of `expected_tokens_per_s_aggregate` (older key).
    pub tokens_per_s_aggregate: f64,
    /// Expected step and its parts, s.
    pub step_time_s: f64,
    pub roofline_step_time_s: f64,
    pub memory_time_s: f64,
    pub compute_time_s: f64,
    /// All-reduce (tensor parallel) or hand-over (layer split) time per step.
    pub allreduce_time_s: f64,
    pub launch_time_s: f64,
    pub weight_bytes_read_per_step: f64,
    pub kv_bytes_read_per_step: f64,
    pub limited_by: Limit,
    pub sequences: u64,
    pub context_tokens: u64,
    #[serde(serialize_with = "inferscope_host::engine::cli_id")]
    pub engine: Engine,
    pub efficiency: EngineEfficiency,
    pub assumptions: Vec<String>,
}

/// Prefill of one prompt alone (time to first token).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrefillSpeed {
    pub prompt_tokens: u64,
    pub roofline_ttft_s: f64,
    pub expected_ttft_s: f64,
    /// Alias of `expected_ttft_s` (older key).
    pub ttft_s: f64,
    /// FLOPs over all GPUs.
    pub flops: f64,
    pub compute_time_s: f64,
    pub memory_time_s: f64,
    pub allreduce_time_s: f64,
    #[serde(serialize_with = "inferscope_host::engine::cli_id")]
    pub engine: Engine,
    pub efficiency: EngineEfficiency,
    pub assumptions: Vec<String>,
}

/// Decode and prefill for a scenario.
pub fn speed(s: &Scenario<'_>, engine: Engine) -> Result<(DecodeSpeed, PrefillSpeed), SpeedError> {
    let eff = super::engines::efficiency(engine).ok_or(SpeedError::NotModelled(engine.name()))?;
    let Estimate {
        roofline: r,
        expected: e,
        efficiency,
        assumptions,
    } = estimate(s, &eff)?;
    let decode = DecodeSpeed {
        roofline_tokens_per_s_per_sequence: r.decode_tokens_per_s_per_sequence,
        roofline_tokens_per_s_aggregate: r.decode_tokens_per_s_aggregate,
        expected_tokens_per_s_per_sequence: e.decode_tokens_per_s_per_sequence,
        expected_tokens_per_s_aggregate: e.decode_tokens_per_s_aggregate,
        tokens_per_s_per_sequence: e.decode_tokens_per_s_per_sequence,
        tokens_per_s_aggregate: e.decode_tokens_per_s_aggregate,
        step_time_s: e.decode_step_s,
        roofline_step_time_s: r.decode_step_s,
        memory_time_s: e.memory_time_s,
        compute_time_s: e.compute_time_s,
        allreduce_time_s: e.communication_time_s,
        launch_time_s: e.launch_floor_s,
        weight_bytes_read_per_step: e.weight_bytes_read_per_step,
        kv_bytes_read_per_step: e.kv_bytes_read_per_step,
        limited_by: if e.compute_time_s > e.memory_time_s {
            Limit::Compute
        } else {
            Limit::MemoryBandwidth
        },
        sequences: s.batch,
        context_tokens: s.decode_context,
        engine,
        efficiency: efficiency.clone(),
        assumptions: assumptions.clone(),
    };
    let prefill = PrefillSpeed {
        prompt_tokens: s.prompt_tokens,
        roofline_ttft_s: r.ttft_s,
        expected_ttft_s: e.ttft_s,
        ttft_s: e.ttft_s,
        flops: e.prefill_flops,
        compute_time_s: e.prefill_compute_time_s,
        memory_time_s: e.prefill_memory_time_s,
        allreduce_time_s: e.prefill_communication_time_s,
        engine,
        efficiency,
        assumptions,
    };
    Ok((decode, prefill))
}
