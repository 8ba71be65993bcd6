//! vLLM's two sizing flags that replace a guess with the engine's own computation (issue 29
//! item 3), read from the released wheels:
//!
//! * `--max-model-len auto` / `-1` (0.14.0+; `vllm/engine/arg_utils.py`
//!   `human_readable_int_or_auto`): the length is derived from the model for profiling, then
//!   `vllm/v1/core/kv_cache_utils.py` `_auto_fit_max_model_len` binary-searches the largest
//!   length whose one request (`_max_memory_usage_bytes_from_groups`) fits the KV memory, keeping
//!   the model's full length when it fits; "Cannot auto-fit max_model_len" when not one token does.
//! * `--kv-cache-memory-bytes` (0.10.2+; `vllm/v1/worker/gpu_worker.py`
//!   `determine_available_memory`): returned as the KV memory after the profile run, without
//!   the utilisation budget ("This does not respect the gpu_memory_utilization config").
//!
//! Pure: the planner's layout and budget in, the length and its notes out.

use crate::memory::{GIB, KvLayout};

/// The largest `max_model_len` ≤ `max_len` whose one request fits the KV `blocks` (V1: the
/// blocks one request needs; V0: its tokens), with the note or problem vLLM would print.
/// `sizing` is `(blocks, block_size, batched_tokens, v1)`; `kv` the KV bytes.
pub fn auto_max_len(
    layout: &KvLayout,
    (blocks, block, batched_tokens, v1): (u64, u64, u64, bool),
    max_len: u64,
    kv: i64,
    (assumptions, problems): (&mut Vec<String>, &mut Vec<String>),
) -> u64 {
    let fits = |len: u64| {
        if v1 {
            layout.blocks_per_request(len, block, batched_tokens) <= blocks
        } else {
            len <= blocks.saturating_mul(block)
        }
    };
    const SRC: &str = "vLLM 0.14+ vllm/v1/core/kv_cache_utils.py _auto_fit_max_model_len";
    if kv <= 0 || !fits(1) {
        problems.push(
            "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a \
             single token (vLLM's words for --max-model-len auto)"
                .to_string(),
        );
        return max_len;
    }
    if fits(max_len) {
        assumptions.push(format!(
            "max_model_len auto: the model's full context length {max_len} fits ({SRC})"
        ));
        return max_len;
    }
    let (mut lo, mut hi) = (1u64, max_len);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    assumptions.push(format!(
        "max_model_len auto: reduced from {max_len} to {lo}, the largest length whose one request \
         fits the {:.2} GiB KV cache ({SRC})",
        kv as f64 / GIB
    ));
    lo
}

/// `--kv-cache-memory-bytes B`: the note that the KV budget is set directly, and the problem
/// when B with what else the GPU holds (`others`: weights, non-torch, activation peak, CUDA
/// graphs) exceeds the card, where vLLM, having skipped its profiling, runs out of memory.
pub fn kv_bytes_notes(
    bytes: u64,
    others: u64,
    total: u64,
    assumptions: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    let kv = bytes as f64 / GIB;
    assumptions.push(format!(
        "kv_cache_memory_bytes {bytes} ({kv:.2} GiB) per GPU: the KV cache is set directly and \
         gpu_memory_utilization is ignored (vLLM 0.10.2+ vllm/v1/worker/gpu_worker.py \
         determine_available_memory)"
    ));
    let need = others.saturating_add(bytes);
    if need > total {
        problems.push(format!(
            "the KV cache set by --kv-cache-memory-bytes ({kv:.2} GiB) plus weights, activations, \
             non-torch memory and CUDA graphs ({:.2} GiB) exceed the GPU's {:.2} GiB: vLLM skips \
             its memory profiling with this flag and runs out of memory allocating it",
            others as f64 / GIB,
            total as f64 / GIB
        ));
    }
}
