//! The start-up phase an out-of-memory error happened in, from the message and whatever was
//! pasted with it (traceback frames, the log lines before it), for vLLM, TGI and the engines
//! that register their phrases as data ([`inferscope_host::engine::Engine::log_dialect`])
//! (issue 28 item 5). Most real serving OOMs happen in a known phase, and each phase has its own knob.
//!
//! Phrases and where the engines print them:
//! * vLLM `gpu_model_runner.py` `profile_run` / `_dummy_run` (the profiling forward pass at
//!   `max_num_batched_tokens`), `_dummy_sampler_run` (`max_num_seqs` dummy requests through the
//!   sampler; 0.8+ wraps its OOM as "CUDA out of memory occurred when warming up sampler with N
//!   dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when
//!   initializing the engine."), `capture_model` ("Capturing CUDA graph shapes"), V0
//!   `worker.py` `determine_num_available_blocks`, `initialize_kv_cache` /
//!   `_allocate_kv_cache_tensors`;
//! * the registered dialects' `oom_phases`, cited beside their tables (checked after the
//!   phrases here, phase by phase);
//! * TGI `flash_causal_lm.py` `warmup` ("Method Warmup encountered an error").

/// A phase of an engine's start-up (or of serving).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Weights being loaded.
    WeightLoading,
    /// The profiling forward pass that sizes activations (vLLM `profile_run`, and the
    /// dialects' profiling functions).
    ProfileRun,
    /// vLLM's dummy sampler run: `max_num_seqs` × vocab logits.
    SamplerWarmup,
    /// The KV cache being allocated.
    KvCacheAllocation,
    /// CUDA-graph capture (right after the KV cache is allocated).
    GraphCapture,
    /// TGI's warm-up prefill of `max_batch_prefill_tokens`.
    Warmup,
}

impl Phase {
    /// Stable name for JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::WeightLoading => "weight_loading",
            Phase::ProfileRun => "profile_run",
            Phase::SamplerWarmup => "sampler_warmup",
            Phase::KvCacheAllocation => "kv_cache_allocation",
            Phase::GraphCapture => "graph_capture",
            Phase::Warmup => "warmup",
        }
    }
}

/// The phase and the phrase that named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseHit {
    /// The phase.
    pub phase: Phase,
    /// The phrase found (a traceback frame or a log line's words).
    pub evidence: &'static str,
    /// vLLM's sampler warm-up: the dummy requests (its `max_num_seqs`).
    pub dummy_requests: Option<u64>,
}

/// Phrases by phase, most specific phase first: a traceback names the outer frames too
/// (`profile_run` calls `_dummy_sampler_run`), so the inner phase wins.
const PHRASES: &[(Phase, &[&str])] = &[
    (
        Phase::SamplerWarmup,
        &[
            "warming up sampler with",
            "_dummy_sampler_run",
            "sampling_metadata=dummy_metadata",
        ],
    ),
    (
        Phase::GraphCapture,
        &[
            "capture_model",
            "Capturing CUDA graph",
            "Capturing cudagraphs",
            "CUDAGraphRunner",
        ],
    ),
    (
        Phase::KvCacheAllocation,
        &[
            "_allocate_kv_cache",
            "initialize_kv_cache",
            "allocate_kv_cache",
        ],
    ),
    (
        Phase::ProfileRun,
        &[
            "profile_run",
            "_dummy_run",
            "determine_available_memory",
            "determine_num_available_blocks",
        ],
    ),
    (
        Phase::Warmup,
        &[
            "Method Warmup encountered an error",
            "in warmup",
            ".warmup(",
        ],
    ),
    (
        Phase::WeightLoading,
        &[
            "load_model",
            "load_weights",
            "Loading safetensors checkpoint shards",
            "Loading model weights",
        ],
    ),
];

/// The phase `text` names, if any.
pub fn detect(text: &str) -> Option<PhaseHit> {
    for (phase, phrases) in PHRASES {
        let registered = inferscope_host::engine::Engine::ALL
            .into_iter()
            .filter_map(|e| e.log_dialect())
            .flat_map(|d| d.oom_phases)
            .filter(|(name, _)| *name == phase.as_str())
            .flat_map(|(_, p)| p.iter());
        if let Some(p) = phrases.iter().chain(registered).find(|p| text.contains(*p)) {
            let dummy_requests = if *phase == Phase::SamplerWarmup {
                text.find("warming up sampler with").and_then(|i| {
                    let rest = text
                        .get(i + "warming up sampler with".len()..)?
                        .trim_start();
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
            } else {
                None
            };
            return Some(PhaseHit {
                phase: *phase,
                evidence: p,
                dummy_requests,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inner_phase_wins_and_the_requests_are_read() {
        let hit = detect(
            "File \"gpu_model_runner.py\", line 2400, in profile_run\n  self._dummy_sampler_run(hidden_states)\nRuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests.",
        )
        .unwrap();
        assert_eq!(hit.phase, Phase::SamplerWarmup);
        assert_eq!(hit.dummy_requests, Some(1024));
        assert_eq!(detect("nothing here"), None);
    }
}
