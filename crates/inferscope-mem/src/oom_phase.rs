//! Phase-aware remedies for an OOM (issue 28 item 5): the term that grew in the phase the error
//! happened in, what it scales with, and the knob that shrinks it, put before the generic
//! remedies. Sizes follow the engines' code: vLLM's profile run is one forward pass over
//! `max_num_batched_tokens` tokens (`gpu_model_runner.py` `profile_run`); its sampler warm-up
//! holds `max_num_seqs × vocab` logits (`_dummy_sampler_run`, fp32, sorted for top-k/top-p
//! before 0.17); graph capture records one graph per batch size in `cudagraph_capture_sizes`
//! after the KV cache took its share (`capture_model`); TGI warms up with a prefill of
//! `max_batch_prefill_tokens` (`flash_causal_lm.py` `warmup`).

use crate::oom::Remedy;
use inferscope_formats::oom_phase::{Phase, PhaseHit};
use inferscope_plan::engines::{Engine, Knob, room};

/// The flags for `knob` of the engines whose rooms are named in OOM remedies beside vLLM's
/// ([`inferscope_plan::engines::EngineRoom::named_in_oom_remedies`]), each written by
/// `write(name, flag)`, in [`Engine::ALL`]'s order.
pub(crate) fn asides(knob: Knob, write: impl Fn(&str, &str) -> String) -> String {
    Engine::ALL
        .into_iter()
        .filter(|e| room(*e).named_in_oom_remedies())
        .filter_map(|e| Some(write(e.name(), room(e).flag(knob)?)))
        .collect()
}

/// How the phase reads in an explanation.
pub fn describe(p: Phase) -> &'static str {
    match p {
        Phase::WeightLoading => "weight loading",
        Phase::ProfileRun => "the profiling run (one forward pass at the batched-token limit)",
        Phase::SamplerWarmup => "the sampler warm-up (max_num_seqs dummy requests)",
        Phase::KvCacheAllocation => "KV-cache allocation",
        Phase::GraphCapture => "CUDA-graph capture (after the KV cache was allocated)",
        Phase::Warmup => "TGI's warm-up prefill",
    }
}

fn r(id: &'static str, action: String) -> Remedy {
    Remedy { id, action }
}

/// The term that grew and the remedies for this phase, most direct first.
pub fn remedies(hit: &PhaseHit) -> (String, Vec<Remedy>) {
    match hit.phase {
        Phase::SamplerWarmup => {
            let n = hit
                .dummy_requests
                .map_or_else(|| "max_num_seqs".to_string(), |n| n.to_string());
            (
                format!(
                    "sampler peak ≈ {n} requests × vocabulary × 4 bytes (fp32 logits), several \
                     copies while top-k/top-p sorts them (≈ 38 B per logit before vLLM 0.17): \
                     {n} × 152,064 (Qwen) ≈ {} at 38 B",
                    hit.dummy_requests.map_or_else(
                        || "max_num_seqs × 5.8 MB".to_string(),
                        |n| format!(
                            "{:.2} GiB",
                            n as f64 * 152_064.0 * 38.0 / (1u64 << 30) as f64
                        )
                    )
                ),
                vec![
                    r(
                        "lower_max_num_seqs",
                        format!(
                            "lower vLLM --max-num-seqs (now {n}): the sampler peak scales with it"
                        ),
                    ),
                    r(
                        "lower_gpu_memory_utilization",
                        "or lower --gpu-memory-utilization so the profile leaves the sampler \
                         its headroom"
                            .to_string(),
                    ),
                ],
            )
        }
        Phase::ProfileRun => (
            format!(
                "activation peak ∝ --max-num-batched-tokens (vLLM){}: one forward pass over \
                 that many tokens",
                asides(Knob::PrefillChunk, |n, f| format!(" / {f} ({n})"))
            ),
            vec![
                r(
                    "lower_max_num_batched_tokens",
                    format!(
                        "lower vLLM --max-num-batched-tokens{}: the profiling pass's activations \
                         scale with it",
                        asides(Knob::PrefillChunk, |n, f| format!(" ({n} {f})"))
                    ),
                ),
                r(
                    "lower_max_model_len",
                    "without chunked prefill the pass runs at --max-model-len: lower it"
                        .to_string(),
                ),
            ],
        ),
        Phase::GraphCapture => (
            "graph memory ≈ one graph per capture size (up to --max-num-seqs or \
             cudagraph_capture_sizes), allocated after the KV cache took its share"
                .to_string(),
            vec![
                r(
                    "enforce_eager",
                    format!(
                        "vLLM --enforce-eager{} skips capture; or capture fewer sizes (vLLM \
                         --max-num-seqs / compilation-config cudagraph_capture_sizes{})",
                        asides(Knob::NoCudaGraphs, |n, f| format!(" ({n} {f})")),
                        asides(Knob::GraphBatchCap, |n, f| format!(", {n} {f}"))
                    ),
                ),
                r(
                    "lower_gpu_memory_utilization",
                    format!(
                        "lower --gpu-memory-utilization{} so the KV cache leaves room for the \
                         graphs",
                        asides(Knob::MemoryFraction, |n, f| format!(" ({n} {f})"))
                    ),
                ),
            ],
        ),
        Phase::KvCacheAllocation => (
            "KV cache = utilisation × card − weights − activations: allocated in one go"
                .to_string(),
            vec![r(
                "lower_gpu_memory_utilization",
                format!(
                    "lower --gpu-memory-utilization{}: other memory appeared between profiling \
                     and allocation (another process, or a larger non-torch share)",
                    asides(Knob::MemoryFraction, |n, f| format!(" ({n} {f})"))
                ),
            )],
        ),
        Phase::Warmup => (
            "warm-up prefill activation ∝ --max-batch-prefill-tokens".to_string(),
            vec![r(
                "tgi_prefill_tokens",
                "lower TGI --max-batch-prefill-tokens (and --max-batch-total-tokens with it)"
                    .to_string(),
            )],
        ),
        Phase::WeightLoading => (
            "weights: the checkpoint's bytes over the tensor-parallel ranks".to_string(),
            vec![r(
                "more_gpus_or_smaller_weights",
                "the weights alone do not fit: --tensor-parallel-size N, or a quantized \
                 checkpoint (FP8/AWQ/GPTQ)"
                    .to_string(),
            )],
        ),
    }
}
