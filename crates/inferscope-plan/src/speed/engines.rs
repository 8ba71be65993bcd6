//! Per-engine efficiency: the share of the roofline each serving engine reaches, fitted on the
//! calibration half of `fixtures/speed/cases.jsonl` (see docs/speed.md and
//! tests/speed_accuracy.rs, which refits them and fails when this table drifts from the fit).

use serde::Serialize;

pub use inferscope_host::engine::Engine;

/// The engines whose speed is modelled (their rooms answer `speed()`), in [`Engine::ALL`]'s
/// order.
pub fn modelled() -> Vec<Engine> {
    Engine::ALL
        .into_iter()
        .filter(|e| crate::engines::room(*e).speed().is_ok())
        .collect()
}

/// Names `--engine` takes: the modelled engines' `--engine` spellings.
pub fn engine_names() -> Vec<&'static str> {
    modelled().into_iter().map(Engine::cli_id).collect()
}

/// An engine whose speed is modelled, from any of its spellings ([`Engine::parse`]); `None` for
/// an unknown name or an engine without a fit.
pub fn parse(s: &str) -> Option<Engine> {
    Engine::parse(s).filter(|e| crate::engines::room(*e).speed().is_ok())
}

/// Splits layers across GPUs instead of tensor parallelism (its room says).
pub fn splits_layers(engine: Engine) -> bool {
    crate::engines::room(engine).splits_layers()
}

/// The fitted efficiency of an engine (its room's); `None` where its speed is not modelled.
pub fn efficiency(engine: Engine) -> Option<EngineEfficiency> {
    crate::engines::room(engine).speed().ok()
}

/// Share of the roofline an engine reaches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineEfficiency {
    /// The engine (JSON: its `--engine` spelling, `llama.cpp`).
    #[serde(serialize_with = "inferscope_host::engine::cli_id")]
    pub engine: Engine,
    /// Share of datasheet memory bandwidth decode reaches (weights + KV reads).
    pub memory_bandwidth: f64,
    /// Share of datasheet dense tensor peak prefill (and compute-bound decode) reaches.
    pub compute: f64,
    /// Launch/host cost per kernel the GPU waits for, s (llama.cpp without graphs: µs each).
    pub per_kernel_s: f64,
    /// Host time per running sequence per decode step (scheduling, sampling, detokenizing), s.
    pub per_sequence_step_s: f64,
    /// What the numbers were fitted on.
    pub basis: String,
}

/// (memory bandwidth, compute, s per kernel, s per sequence per step, basis): one engine's fit,
/// kept in its room. Fitted by tests/speed_accuracy.rs on the calibration half (FNV-1a of the
/// case id, even) of fixtures/speed/cases.jsonl; a parameter an engine's calibration cases do not
/// determine takes the all-engine fit.
pub type Row = (f64, f64, f64, f64, &'static str);
const ALL_FIT: (f64, f64, f64, f64) = (0.9, 0.38, 1.20e-05, 0.00e+00);

/// An engine's efficiency from its room's [`Row`].
pub fn row(engine: Engine, (m, c, k, q, basis): Row) -> EngineEfficiency {
    EngineEfficiency {
        engine,
        memory_bandwidth: m,
        compute: c,
        per_kernel_s: k,
        per_sequence_step_s: q,
        basis: basis.to_string(),
    }
}

/// The all-engine fit (memory, compute, s per kernel, s per sequence per step), for parameters
/// an engine's own calibration cases leave open.
pub fn all_engine_fit() -> (f64, f64, f64, f64) {
    ALL_FIT
}
