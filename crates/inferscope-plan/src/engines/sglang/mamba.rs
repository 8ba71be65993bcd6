//! SGLang's Mamba state pool for hybrid models (0.5.10.post1), beside its token KV pool.
//!
//! `model_runner_kv_cache_mixin.py` `profile_max_num_token`: the KV cell counts the full
//! attention layers only; `handle_max_mamba_cache` takes `rest × r / (1 + r)` of the KV budget
//! for Mamba states (`--mamba-full-memory-ratio` r, 0.9 by default, `server_args.py`), as
//! `max_mamba_cache_size = ⌊that / mamba_cache_per_req⌋` whole requests, unless
//! `--max-mamba-cache-size` is set; the rest holds tokens. A request's state
//! (`configs/mamba_utils.py` `BaseLinearStateParams.mamba_cache_per_req`) has vLLM's shapes
//! (`Mamba2StateShape.create`, the same group replication) with the conv state in bfloat16
//! (`SGLANG_MAMBA_CONV_DTYPE`) and the SSM state in the config's `mamba_ssm_dtype`, else
//! float32 (`mamba2_state_dtype`). Running requests are capped by the Mamba pool.

use crate::arch::{Dtype, ModelArch};
use crate::state::{StateKind, vllm_state_bytes};

/// `--mamba-full-memory-ratio` default (0.5.10.post1 `ServerArgs`).
pub const MAMBA_FULL_MEMORY_RATIO: f64 = 0.9;

/// What the Mamba pool takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MambaPool {
    /// Bytes of one request's states over this GPU's state layers.
    pub per_request: u64,
    /// `max_mamba_cache_size`: requests whose state fits.
    pub requests: u64,
    /// Bytes the pool takes.
    pub bytes: u64,
}

/// One request's state bytes on one GPU over the state layers in `range`; `None` when a layer
/// has no SGLang state formula here (Mamba-1, unknown kinds).
/// `ssm` is the SSM state dtype in force (`--mamba-ssm-dtype`, else the config's, else float32).
pub fn per_request(
    arch: &ModelArch,
    range: std::ops::Range<usize>,
    tp: u32,
    ssm: Dtype,
) -> Option<u64> {
    let mut total = 0u64;
    for s in arch
        .state_layers
        .iter()
        .filter(|s| range.contains(&(s.layer as usize)))
    {
        if matches!(s.state, StateKind::Mamba1 { .. } | StateKind::Unmodelled) {
            return None;
        }
        total = total.saturating_add(vllm_state_bytes(&s.state, tp, Dtype::Bf16, ssm)?.total());
    }
    Some(total)
}

/// The pool `handle_max_mamba_cache` carves out of `rest` bytes of KV budget, with
/// `--max-mamba-cache-size` when given, else `ratio` (`--mamba-full-memory-ratio`).
pub fn pool(
    rest: f64,
    per_request: u64,
    max_mamba_cache_size: Option<u64>,
    ratio: f64,
) -> MambaPool {
    let requests = match max_mamba_cache_size {
        Some(n) => n,
        None if per_request > 0 && rest > 0.0 => {
            let raw = rest * ratio / (1.0 + ratio);
            (raw / per_request as f64).floor() as u64
        }
        None => 0,
    };
    MambaPool {
        per_request,
        requests,
        bytes: requests.saturating_mul(per_request),
    }
}
