//! TGI's sizing inside the planner's pipeline: a warm-up prefill, then the free memory
//! ([`super::kv`]).

use crate::plan::{OwnSizing, SizingInput, Stage};

/// TGI: a warm-up prefill, then the free memory ([`super::kv`]).
pub(crate) fn size(
    input: &SizingInput<'_>,
    first: &mut Stage,
    assumptions: &mut Vec<String>,
) -> OwnSizing {
    let SizingInput {
        req,
        arch,
        tp,
        total,
        cell,
        ..
    } = *input;
    let prefill = req.max_num_batched_tokens.unwrap_or_else(|| {
        let (d, src) = super::kv::default_prefill_tokens(
            req.engine_version.as_deref(),
            &arch.model_type,
            arch.vision_params > 0,
            arch.max_position_embeddings,
        );
        assumptions.push(format!(
            "TGI --max-batch-prefill-tokens {d} (default) [{src}]"
        ));
        d
    });
    let act = super::kv::warmup_activation(arch, prefill, tp);
    first.activation = act;
    let r = super::kv::kv(&super::kv::TgiInputs {
        version: req.engine_version.as_deref(),
        total,
        weights: first.weights,
        non_torch: first.non_torch,
        warmup_activation: act,
        bytes_per_token: cell,
        prefill_tokens: prefill,
        cuda_memory_fraction: req.gpu_memory_utilization,
        block_size: req.block_size,
    });
    let f = req.gpu_memory_utilization.unwrap_or(1.0);
    OwnSizing {
        tokens: r.tokens,
        cell,
        kv: r.kv,
        budget: f * total as f64,
        outside: (1.0 - f) * total as f64,
        block: r.block_size,
        rules: r.info,
        max_requests: None,
        state_per_seq: None,
        starts_short: false,
        state_pool: None,
    }
}
