//! Per-engine efficiency: the share of the roofline each serving engine reaches, fitted on the
//! calibration half of `fixtures/speed/cases.jsonl` (see docs/speed.md and
//! tests/speed_accuracy.rs, which refits them and fails when this table drifts from the fit).

use serde::Serialize;

/// An inference engine whose speed is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpeedEngine {
    Vllm,
    Sglang,
    Tgi,
    Trtllm,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    Mlc,
}

/// Names `--engine` takes.
pub const ENGINE_NAMES: [&str; 6] = ["vllm", "sglang", "tgi", "trtllm", "llama.cpp", "mlc"];

impl SpeedEngine {
    /// All engines.
    pub const ALL: [SpeedEngine; 6] = [
        SpeedEngine::Vllm,
        SpeedEngine::Sglang,
        SpeedEngine::Tgi,
        SpeedEngine::Trtllm,
        SpeedEngine::LlamaCpp,
        SpeedEngine::Mlc,
    ];

    /// `vllm`, `sglang`, `tgi`, `trtllm` (`tensorrt-llm`), `llama.cpp` (`llamacpp`, `llama-cpp`),
    /// `mlc` (`mlc-llm`); also the engine names the published benchmarks use (`vLLM (ROCm)`,
    /// `TensorRT-LLM`, `llama.cpp (CUDA)`, `MLC LLM`).
    pub fn parse(s: &str) -> Option<SpeedEngine> {
        let k: String = s
            .to_ascii_lowercase()
            .chars()
            .take_while(|c| *c != '(')
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        Some(match k.as_str() {
            "vllm" => SpeedEngine::Vllm,
            "sglang" => SpeedEngine::Sglang,
            "tgi" | "textgenerationinference" => SpeedEngine::Tgi,
            "trtllm" | "tensorrtllm" => SpeedEngine::Trtllm,
            "llamacpp" | "llamaserver" => SpeedEngine::LlamaCpp,
            "mlc" | "mlcllm" => SpeedEngine::Mlc,
            _ => return None,
        })
    }

    /// The name `--engine` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            SpeedEngine::Vllm => "vllm",
            SpeedEngine::Sglang => "sglang",
            SpeedEngine::Tgi => "tgi",
            SpeedEngine::Trtllm => "trtllm",
            SpeedEngine::LlamaCpp => "llama.cpp",
            SpeedEngine::Mlc => "mlc",
        }
    }

    /// From the serving command's engine.
    pub fn from_engine(e: crate::engine::Engine) -> SpeedEngine {
        match e {
            crate::engine::Engine::Vllm => SpeedEngine::Vllm,
            crate::engine::Engine::Sglang => SpeedEngine::Sglang,
            crate::engine::Engine::Tgi => SpeedEngine::Tgi,
            crate::engine::Engine::LlamaCpp => SpeedEngine::LlamaCpp,
        }
    }

    /// Splits layers across GPUs instead of tensor parallelism (llama.cpp's `--split-mode layer`).
    pub fn splits_layers(self) -> bool {
        self == SpeedEngine::LlamaCpp
    }

    /// The fitted efficiency of this engine.
    pub fn efficiency(self) -> EngineEfficiency {
        let (m, c, k, q, basis) = match self {
            SpeedEngine::Vllm => VLLM,
            SpeedEngine::Sglang => SGLANG,
            SpeedEngine::Tgi => TGI,
            SpeedEngine::Trtllm => TRTLLM,
            SpeedEngine::LlamaCpp => LLAMA_CPP,
            SpeedEngine::Mlc => MLC,
        };
        EngineEfficiency {
            engine: self,
            memory_bandwidth: m,
            compute: c,
            per_kernel_s: k,
            per_sequence_step_s: q,
            basis: basis.to_string(),
        }
    }
}

/// Share of the roofline an engine reaches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineEfficiency {
    pub engine: SpeedEngine,
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

// (memory bandwidth, compute, s per kernel, s per sequence per step, basis). Fitted by tests/speed_accuracy.rs
// on the calibration half (FNV-1a of the case id, even) of fixtures/speed/cases.jsonl; a
// parameter an engine's calibration cases do not determine takes the all-engine fit.
type Row = (f64, f64, f64, f64, &'static str);
const ALL_FIT: (f64, f64, f64, f64) = (0.9, 0.38, 1.20e-05, 0.00e+00);
const VLLM: Row = (
    0.98,
    0.53,
    1.40e-05,
    0.00e+00,
    "calibration half: 4 vllm case(s)",
);
const SGLANG: Row = (
    0.98,
    0.53,
    1.30e-05,
    0.00e+00,
    "calibration half: 2 sglang case(s)",
);
const TGI: Row = (
    0.74,
    0.25,
    1.50e-05,
    0.00e+00,
    "calibration half: 1 tgi case(s)",
);
const TRTLLM: Row = (
    1.0,
    0.6,
    1.60e-05,
    0.00e+00,
    "calibration half: 4 trtllm case(s)",
);
const LLAMA_CPP: Row = (
    0.58,
    0.26,
    0.00e+00,
    0.00e+00,
    "calibration half: 2 llama.cpp case(s)",
);
const MLC: Row = (
    0.68,
    0.38,
    1.00e-05,
    5.00e-05,
    "calibration half: 1 mlc case(s)",
);

/// The all-engine fit (memory, compute, s per kernel, s per sequence per step), for parameters
/// an engine's own calibration cases leave open.
pub fn all_engine_fit() -> (f64, f64, f64, f64) {
    ALL_FIT
}
