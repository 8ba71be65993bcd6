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
    /// Bytes `handle_max_mamba_cache` takes out of the KV budget: `requests × per_request`
    /// (what the token count is computed from).
    pub bytes: u64,
    /// Bytes `MambaPool.__init__` really allocates: `requests + 1` states, slot 0 being the
    /// padding slot; the extra state comes out of the memory left outside the budget.
    pub held: u64,
    /// Which branch of `handle_max_mamba_cache` set `requests`.
    pub sized_by: PoolSize,
}

/// The branch of `handle_max_mamba_cache` (0.5.10 and 0.5.10.post1, the same code) that sizes
/// the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// `--max-mamba-cache-size N`.
    Explicit,
    /// `--disable-radix-cache` with `--max-running-requests N` (and no `--max-mamba-cache-size`).
    RunningRequests,
    /// `rest × r / (1 + r)` of the KV budget (`--mamba-full-memory-ratio` r).
    Ratio,
}

/// The flags `handle_max_mamba_cache` reads, in the order its branches test them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolFlags {
    /// `--max-mamba-cache-size`.
    pub max_mamba_cache_size: Option<u64>,
    /// `--disable-radix-cache`.
    pub disable_radix_cache: bool,
    /// `--max-running-requests`.
    pub max_running_requests: Option<u64>,
    /// `--mamba-full-memory-ratio` ([`MAMBA_FULL_MEMORY_RATIO`] when not given).
    pub ratio: f64,
    /// From 0.5.17 the budget pays for the padding slot too (`KVCacheConfigurator.
    /// _handle_max_mamba_cache`: `K = ⌊(B − per_req) / per_req⌋`, `(K + 1) × per_req` charged).
    pub charges_padding: bool,
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
        if !matches!(
            s.state,
            StateKind::Mamba2 { .. } | StateKind::GatedDeltaNet { .. }
        ) {
            return None;
        }
        total = total.saturating_add(vllm_state_bytes(&s.state, tp, Dtype::Bf16, ssm)?.total());
    }
    Some(total)
}

/// The pool `handle_max_mamba_cache` carves out of `rest` bytes of KV budget: an explicit
/// `--max-mamba-cache-size`, else `--max-running-requests` when the radix cache is off, else the
/// ratio split. Speculative decoding's intermediate states and DP attention's split are not
/// modelled.
pub fn pool(rest: f64, per_request: u64, flags: PoolFlags) -> MambaPool {
    let (requests, sized_by) = match (
        flags.max_mamba_cache_size,
        flags.disable_radix_cache,
        flags.max_running_requests,
    ) {
        (Some(n), _, _) => (n, PoolSize::Explicit),
        (None, true, Some(n)) => (n, PoolSize::RunningRequests),
        _ if per_request > 0 && rest > 0.0 => {
            let raw = rest * flags.ratio / (1.0 + flags.ratio);
            let padding = if flags.charges_padding {
                per_request as f64
            } else {
                0.0
            };
            (
                ((raw - padding).max(0.0) / per_request as f64).floor() as u64,
                PoolSize::Ratio,
            )
        }
        _ => (0, PoolSize::Ratio),
    };
    let charged = requests.saturating_add(u64::from(flags.charges_padding));
    MambaPool {
        per_request,
        requests,
        bytes: charged.saturating_mul(per_request),
        // memory_pool.py MambaPool.__init__: torch.zeros((layers, size + 1) + shape), 0.5.10
        // to 0.5.23
        held: requests.saturating_add(1).saturating_mul(per_request),
        sized_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(explicit: Option<u64>, radix_off: bool, running: Option<u64>) -> PoolFlags {
        PoolFlags {
            max_mamba_cache_size: explicit,
            disable_radix_cache: radix_off,
            max_running_requests: running,
            ratio: MAMBA_FULL_MEMORY_RATIO,
            charges_padding: false,
        }
    }

    #[test]
    fn the_branches_of_handle_max_mamba_cache_in_its_order() {
        // 1.9 GB of rest: the ratio split gives 0.9 GB = 9 states of 100 MB
        let rest = 1.9e9;
        let per = 100_000_000;
        let p = pool(rest, per, flags(Some(5), true, Some(8)));
        assert_eq!((p.requests, p.sized_by), (5, PoolSize::Explicit));
        let p = pool(rest, per, flags(None, true, Some(8)));
        assert_eq!((p.requests, p.sized_by), (8, PoolSize::RunningRequests));
        // --max-running-requests alone, or the radix cache off alone: the ratio
        let p = pool(rest, per, flags(None, false, Some(8)));
        assert_eq!((p.requests, p.sized_by), (9, PoolSize::Ratio));
        let p = pool(rest, per, flags(None, true, None));
        assert_eq!((p.requests, p.sized_by), (9, PoolSize::Ratio));
        // budgeted: size states; allocated: size + 1 (the padding slot)
        assert_eq!(p.bytes, 9 * per);
        assert_eq!(p.held, 10 * per);
    }

    #[test]
    fn from_0_5_17_the_budget_pays_for_the_padding_slot() {
        // B = rest × 0.9 / 1.9 holds 10.5 states: 10 before 0.5.17, ⌊(B − 1) / 1⌋ = 9 after,
        // and (9 + 1) states are charged
        let per = 1_000_000u64;
        let rest = 10.5 * per as f64 * 1.9 / 0.9;
        let old = pool(rest, per, flags(None, false, None));
        assert_eq!((old.requests, old.bytes), (10, 10 * per));
        let mut f = flags(None, false, None);
        f.charges_padding = true;
        let new = pool(rest, per, f);
        assert_eq!((new.requests, new.bytes), (9, 10 * per));
        // an explicit size is kept, and its padding slot charged
        let mut f = flags(Some(32), false, None);
        f.charges_padding = true;
        assert_eq!(pool(rest, per, f).bytes, 33 * per);
    }
}
