//! SGLang's sizing inside the planner's pipeline: `--mem-fraction-static` of the free memory at
//! start holds weights and KV ([`super::kv`]), the Mamba pool ([`super::mamba`]) comes out of
//! the same budget, and DeepSeek sparse attention's indexer widens the cell.

use crate::arch::Dtype;
use crate::memory::{Shard, non_torch_bytes, stage_layers};
use crate::plan::{OwnSizing, SizingInput, Stage};

/// SGLang: `--mem-fraction-static` of the free memory at start holds weights and KV only
/// ([`super::kv`]); activations and CUDA graphs live outside it.
pub(crate) fn size(
    input: &SizingInput<'_>,
    first: &mut Stage,
    assumptions: &mut Vec<String>,
) -> OwnSizing {
    let SizingInput {
        req,
        arch,
        quant,
        tp,
        pp,
        total,
        cell,
    } = *input;
    // SGLang sizes from the free memory at start; default: all but the CUDA context
    let free = req.free_bytes_at_start.unwrap_or_else(|| {
        assumptions.push("SGLang: free memory at start = torch-visible total − 0.25 GiB CUDA context (pass the real figure on a shared GPU)".into());
        total.saturating_sub(non_torch_bytes(1, 1, true, None))
    });
    // loading costs more than the tensors (fp32 RoPE cache, allocator rounding)
    let (extra, load_rules) = super::kv::load_extra(
        arch,
        quant,
        Shard {
            tp,
            pp,
            stage: 0,
            expert_parallel: req.expert_parallel,
        },
        req.engine_version.as_deref(),
    );
    first.weights += extra;
    let mut nsa_rules = Vec::new();
    let at_0510 = req
        .engine_version
        .as_deref()
        .and_then(crate::memory::EngineVersion::parse)
        .is_none_or(|v| (v.major, v.minor, v.patch) >= (0, 5, 10));
    let cell = match (arch.nsa_index_head_dim, arch.mla, at_0510) {
        (Some(d), Some(m), true) => {
            let kv_bytes = match req.kv_cache_dtype.as_deref().filter(|k| *k != "auto") {
                Some(k) if k.starts_with("fp8") => 1,
                Some(_) => 2,
                None => super::kv::nsa_default_kv_bytes(req.compute_capability.map(|c| c.0)),
            };
            let layers = stage_layers(arch.num_layers, pp, 0).len() as u64;
            let c = super::kv::nsa_cell_size(&m, layers, d, kv_bytes);
            nsa_rules.push(crate::rules::Rule {
                rule: "nsa_indexer".into(),
                value: format!(
                    "DeepSeek sparse attention: {c} B per token = {layers} layers × (latent {} × {kv_bytes} B + indexer {d} + {d}/128 × 4 B){}",
                    m.kv_lora_rank + m.qk_rope_head_dim,
                    if req.kv_cache_dtype.is_none() {
                        " (KV dtype auto: fp8_e4m3 on compute capability ≥ 10, else bf16)"
                    } else {
                        ""
                    }
                ),
                source: "0.5.10.post1 sglang/srt/model_executor/model_runner_kv_cache_mixin.py get_cell_size_per_token; server_args.py _set_default_nsa_kv_cache_dtype".into(),
            });
            c
        }
        _ => cell,
    };
    // speculative decoding: the draft's weights and KV (`super::speculative`)
    let draft = super::speculative::draft(input, cell);
    let cell = match &draft {
        Some(d) if d.in_budget => cell + d.cell_extra,
        _ => cell,
    };
    if let Some(d) = draft.as_ref().filter(|d| d.in_budget) {
        first.weights += d.weights;
    }
    let mut r = super::kv::kv(&super::kv::SglangInputs {
        version: req.engine_version.as_deref(),
        gpu_mem_mib: total as f64 / f64::from(1u32 << 20),
        free_at_start: free,
        weights: first.weights,
        cell_size: cell,
        tp,
        pp,
        mem_fraction_static: req.gpu_memory_utilization,
        chunked_prefill_size: req.max_num_batched_tokens,
        cuda_graph_max_bs: None,
        disable_piecewise_cuda_graph: req.speculative.disable_piecewise_cuda_graph,
        mla: arch.mla.is_some(),
        dsa: arch.nsa_index_head_dim.is_some(),
        nemotron_h: arch.model_type == "nemotron_h",
        disable_cuda_graph: req.enforce_eager,
        max_running_requests: req.max_num_seqs.map(u64::from),
        speculative: req.speculative.speculative_algorithm.as_deref(),
        multimodal: arch.vision_params > 0,
    });
    r.info.rules.extend(load_rules);
    r.info.rules.extend(nsa_rules);
    if let Some(d) = &draft {
        r.info.rules.extend(d.rules.iter().cloned());
        assumptions.extend(d.assumptions.iter().cloned());
    }
    // hybrid models: the Mamba state pool comes out of the same budget first
    let range = stage_layers(arch.num_layers, pp, 0);
    let ssm = req
        .hybrid
        .mamba_ssm_cache_dtype
        .as_deref()
        .and_then(Dtype::parse)
        .or(arch.state_ssm_dtype)
        .unwrap_or(Dtype::F32);
    let ratio = req
        .hybrid
        .mamba_full_memory_ratio
        .unwrap_or(super::mamba::MAMBA_FULL_MEMORY_RATIO);
    let flags = super::mamba::PoolFlags {
        max_mamba_cache_size: req.hybrid.max_mamba_cache_size,
        disable_radix_cache: req.disable_radix_cache,
        max_running_requests: req.max_num_seqs.map(u64::from),
        ratio,
        charges_padding: super::kv::rules_release(req.engine_version.as_deref()).0
            >= crate::memory::EngineVersion {
                major: 0,
                minor: 5,
                patch: 17,
            },
    };
    if req.disable_radix_cache {
        r.info.rules.push(crate::rules::Rule {
            rule: "radix_cache".into(),
            value: "off (--disable-radix-cache): no prefix cache, a prompt's shared prefix is computed again for every request".into(),
            source: "0.5.10.post1 sglang/srt/server_args.py disable_radix_cache; managers/scheduler.py init_cache (a ChunkCache: no prefix matching)".into(),
        });
    }
    let mamba = super::mamba::per_request(arch, range, tp, ssm)
        .filter(|b| *b > 0)
        .map(|per_req| {
            let pool = super::mamba::pool(r.rest as f64, per_req, flags);
            // the token count is the engine's: rest − max_mamba_cache_size states
            let rest = r.rest - pool.bytes as i64;
            r.tokens = if rest > 0 && cell > 0 { rest as u64 / cell } else { 0 };
            r.rest = rest;
            r.info.rules.push(crate::rules::Rule {
                rule: "mamba_pool".into(),
                value: format!(
                    "{} B of state per request (conv bfloat16, SSM {ssm}); max_mamba_cache_size = {} requests{}; tokens = what is left // {cell} B; the pool allocates {} + 1 states ({} B, slot 0 is padding), the extra one outside the budget",
                    pool.per_request,
                    pool.requests,
                    match pool.sized_by {
                        super::mamba::PoolSize::Explicit => " (--max-mamba-cache-size)".to_string(),
                        super::mamba::PoolSize::RunningRequests =>
                            " (--max-running-requests, the radix cache being off)".to_string(),
                        super::mamba::PoolSize::Ratio => format!(" = rest × {ratio} / (1 + {ratio})"),
                    },
                    pool.requests,
                    pool.held,
                ),
                source: "0.5.10.post1 sglang/srt/model_executor/model_runner_kv_cache_mixin.py handle_max_mamba_cache; mem_cache/memory_pool.py MambaPool.__init__ (size + 1); sglang/srt/configs/mamba_utils.py mamba2_state_dtype, Mamba2StateShape.create; server_args.py mamba_full_memory_ratio".into(),
            });
            pool
        });
    let f = r.mem_fraction_static;
    // the padding slot is allocated beyond what handle_max_mamba_cache budgeted
    let padding = mamba.map_or(0, |m| m.held - m.bytes) as f64;
    // until 0.5.13 the draft's weights and KV pool (as many tokens as the target's) come out
    // of the 1 − mem_fraction_static share
    let draft_outside = draft.as_ref().filter(|d| !d.in_budget).map_or(0.0, |d| {
        d.weights as f64 + (r.tokens + 1) as f64 * d.cell_extra as f64
    });
    // activations and CUDA graphs live outside mem_fraction_static
    first.activation = 0;
    first.non_torch = 0;
    first.cuda_graph = 0;
    // page_size 1 by default
    OwnSizing {
        tokens: r.tokens,
        cell,
        kv: r.rest,
        budget: f * free as f64,
        outside: (1.0 - f) * free as f64 - padding - draft_outside,
        block: 1,
        rules: r.info,
        max_requests: mamba.map(|m| m.requests),
        state_per_seq: mamba.map(|m| m.per_request),
        // SGLang starts anyway; long requests wait or are cut
        starts_short: true,
        state_pool: mamba.map(|m| m.held),
    }
}
