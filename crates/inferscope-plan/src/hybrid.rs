//! vLLM's hybrid KV-cache manager for models with recurrent-state layers, and which engines
//! and releases the planner models them for.
//!
//! vLLM ≥ 0.11 pages attention KV and Mamba/linear-attention state out of one pool of equal
//! pages (0.11.0 `HybridAttentionMambaModelConfig.verify_and_update_config`; 0.34.0
//! `Platform._align_hybrid_block_size`):
//!
//! ```text
//! attn_page_1 = KV bytes of one token of one attention layer
//! state_page  = conv + ssm bytes of one state layer for one sequence (MambaSpec.page_size_bytes)
//! block       = a × ⌈state_page / (a × attn_page_1)⌉     (if larger than --block-size;
//!               a = 16, from 0.20 max(16, block size): 64 by default in 0.34)
//! page        = block × attn_page_1                       (the state page is padded to it)
//! ```
//!
//! Layers are grouped by spec (`_get_kv_cache_groups_uniform_page_size`); each group's layers
//! share block ids, one pool tensor per layer of a group (`get_kv_cache_config_from_groups`):
//! `num_blocks = kv_bytes / (page × group_size)`, printed tokens `num_blocks / groups × block`.
//! A request holds `⌈max_len / block⌉` blocks per attention group and one block per state
//! group (`MambaSpec.max_memory_usage_bytes` without prefix caching).

use crate::arch::{AttentionKind, Dtype, LayerAttention, ModelArch};
use crate::engine::Engine;
use crate::memory::{EngineVersion, KvGroupKind, KvLayout, kv_bytes_per_token_layer};
use crate::state::{StateKind, vllm_state_bytes};

/// The first vLLM release whose hybrid accounting was read (0.11.0); earlier ones are refused.
pub const VLLM_FIRST: EngineVersion = EngineVersion {
    major: 0,
    minor: 11,
    patch: 0,
};

/// Blocks one state group holds per request: two when prefix caching puts the Mamba layers in
/// `align` mode (`MambaSpec.max_memory_usage_bytes`: `page × (2 + speculative blocks)`), else
/// one. Prefix caching of hybrid models: not available before 0.17 (0.11.0
/// `MambaModelConfig.verify_and_update_config`); off by default in 0.17–0.25 and on by default
/// from 0.26 (`ModelConfig.is_prefix_caching_supported`: "Hybrid models do not support prefix
/// caching since the feature is still experimental" up to 0.25.0, "Generative hybrid models
/// support prefix caching" from 0.26.0), where `--enable-prefix-caching` /
/// `--no-enable-prefix-caching` (`prefix_caching`) override the default.
///
/// From 0.32 a Mamba-2 model's state groups hold one more block in `align` mode, the prefill
/// checkpoint (`MambaSpec.max_memory_usage_bytes`: `2 + speculative + prefill checkpoint
/// blocks`; 0.32.0 `layers/mamba/mamba_mixer2.py` `MambaMixer2.get_kv_cache_spec`:
/// `num_prefill_checkpoint_blocks=1`; not in 0.31.0). 0.34's Gated DeltaNet layers take one too
/// when their prefill kernel exports checkpoints (`qwen_gdn_linear_attn.py`
/// `_exports_checkpoints`, a choice of backend): not modelled.
pub fn state_blocks_per_request(
    arch: &ModelArch,
    version: EngineVersion,
    prefix_caching: Option<bool>,
) -> u64 {
    let on = version.at_least(0, 17) && prefix_caching.unwrap_or(version.at_least(0, 26));
    if !on {
        return 1;
    }
    // the scheduler checkpoints only when every Mamba layer can (`get_mamba_prefill_checkpoint_
    // alignment`): a model whose state layers are all Mamba-2
    let checkpoint = version.at_least(0, 32)
        && !arch.state_layers.is_empty()
        && arch
            .state_layers
            .iter()
            .all(|s| matches!(s.state, StateKind::Mamba2 { .. }));
    2 + u64::from(checkpoint)
}

/// How vLLM keeps a hybrid model's recurrent state: the conv and SSM dtypes
/// ([`vllm_state_dtypes`]) and the blocks a request holds in each state group
/// ([`state_blocks_per_request`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateCache {
    /// Conv and SSM state dtypes.
    pub dtypes: (Dtype, Dtype),
    /// Blocks per request in each state group.
    pub blocks_per_request: u64,
}

/// From 0.20.1 vLLM prints `GPU KV cache size` as `int(max_concurrency × max_model_len)`
/// (0.20.1 `v1/core/kv_cache_utils.py` `_report_kv_cache_config`); up to 0.20.0 as
/// `num_blocks / groups × block`.
pub fn prints_concurrency_tokens(version: EngineVersion) -> bool {
    version
        >= EngineVersion {
            major: 0,
            minor: 20,
            patch: 1,
        }
}

/// Conv and SSM state dtypes vLLM uses: `--mamba-cache-dtype` (auto: the model dtype) for the
/// conv state, `--mamba-ssm-cache-dtype` (auto: the conv dtype) for the SSM state, except:
/// Nemotron-H takes the config's `mamba_ssm_cache_dtype`, else float16 (0.13–0.19) or float32
/// (from 0.20) (`NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype`); Qwen3.5-family
/// configs' `mamba_ssm_dtype` is used from 0.17 (`Qwen3_5ForConditionalGenerationConfig`).
pub fn vllm_state_dtypes(
    arch: &ModelArch,
    version: EngineVersion,
    mamba_cache_dtype: Option<Dtype>,
    mamba_ssm_cache_dtype: Option<Dtype>,
) -> (Dtype, Dtype) {
    let conv = mamba_cache_dtype.unwrap_or(arch.dtype);
    let model_default = if arch.model_type == "nemotron_h" {
        if version.at_least(0, 20) {
            Some(arch.state_ssm_dtype.unwrap_or(Dtype::F32))
        } else if version.at_least(0, 13) {
            Some(arch.state_ssm_dtype.unwrap_or(Dtype::F16))
        } else {
            None
        }
    } else if version.at_least(0, 17) {
        arch.state_ssm_dtype
    } else {
        None
    };
    let ssm = mamba_ssm_cache_dtype.or(model_default).unwrap_or(conv);
    (conv, ssm)
}

/// Per-sequence state bytes of the state layers in `range` on one TP rank (unpadded).
pub fn state_bytes_per_sequence(
    arch: &ModelArch,
    range: std::ops::Range<usize>,
    tp: u32,
    (conv, ssm): (Dtype, Dtype),
) -> u64 {
    arch.state_layers
        .iter()
        .filter(|s| range.contains(&(s.layer as usize)))
        .filter_map(|s| vllm_state_bytes(&s.state, tp, conv, ssm))
        .map(|b| b.total())
        .sum()
}

/// vLLM's layout of the layers in `range` of a hybrid model: attention groups plus state
/// groups (kind [`AttentionKind::NoKv`], `state.blocks_per_request` blocks per request), one
/// page size for all.
pub fn vllm_layout(
    arch: &ModelArch,
    range: std::ops::Range<usize>,
    tp: u32,
    kv: Dtype,
    block: u64,
    state: StateCache,
    version: EngineVersion,
) -> KvLayout {
    let dtypes = state.dtypes;
    let fallback = LayerAttention {
        kind: AttentionKind::Full,
        kv_heads: arch.num_kv_heads,
        head_dim: arch.head_dim,
        k_eq_v: false,
    };
    let mut kinds: Vec<KvGroupKind> = Vec::new();
    let mut attn_1 = 0;
    let mut bytes_per_token = 0;
    let add = |kinds: &mut Vec<KvGroupKind>, kind| match kinds.iter_mut().find(|k| k.kind == kind) {
        Some(k) => k.layers += 1,
        None => kinds.push(KvGroupKind {
            kind,
            layers: 1,
            groups: 1,
        }),
    };
    for i in range.clone() {
        let l = arch.layers.get(i).copied().unwrap_or(fallback);
        let b = kv_bytes_per_token_layer(arch, &l, tp, kv);
        if b == 0 {
            continue;
        }
        attn_1 = attn_1.max(b);
        bytes_per_token += b;
        add(
            &mut kinds,
            if arch.mla.is_some() {
                AttentionKind::Full
            } else {
                l.kind
            },
        );
    }
    let mut state_page = 0;
    let mut state_total = 0;
    for s in arch
        .state_layers
        .iter()
        .filter(|s| range.contains(&(s.layer as usize)))
    {
        let b = vllm_state_bytes(&s.state, tp, dtypes.0, dtypes.1).map_or(0, |b| b.total());
        state_page = state_page.max(b);
        state_total += b;
        add(&mut kinds, AttentionKind::NoKv);
    }
    // the attention block grows, in steps of the alignment, until one page holds one state:
    // 16 up to 0.19; from 0.20 the larger of the backend's smallest kernel block (16 for
    // FlashAttention/FlashInfer) and the configured block (`_align_hybrid_block_size`), which
    // is 64 by default in 0.34
    let align = if version.at_least(0, 20) {
        block.max(16)
    } else {
        16
    };
    let block = if attn_1 > 0 && state_page > 0 {
        block.max(align * state_page.div_ceil(align * attn_1))
    } else {
        block
    };
    let page = if attn_1 > 0 {
        attn_1 * block
    } else {
        state_page
    };
    // _get_kv_cache_groups_uniform_page_size: the smallest kind's layer count
    let group_size = kinds.iter().map(|k| k.layers).min().unwrap_or(1).max(1);
    for k in kinds.iter_mut() {
        k.groups = k.layers.div_ceil(group_size);
    }
    KvLayout {
        bytes_per_token,
        page_bytes: page,
        group_size,
        kinds,
        block_size: block,
        state_bytes_per_seq: state_total,
        state_blocks_per_request: state.blocks_per_request,
    }
}

/// Why the planner cannot plan this model on this engine and release, naming the layer type,
/// the architecture, the engine and the release; `None` when it can. Which state layers an
/// engine models is its room's answer ([`crate::engines::EngineRoom::state_layers`]).
pub fn unmodelled(arch: &ModelArch, engine: Engine, version: Option<&str>) -> Option<String> {
    arch.state_layers.first()?;
    let name = arch.architecture.as_deref().unwrap_or(&arch.model_type);
    let room = crate::engines::room(engine);
    let say = |t: &str, why: &str| {
        format!(
            "layer type `{t}` of {name} is not modelled for {} {}{why}",
            engine.name(),
            room.release_label(version)
        )
    };
    if let Some(s) = arch
        .state_layers
        .iter()
        .find(|s| s.state == StateKind::Unmodelled)
    {
        return Some(say(
            &s.layer_type,
            ": no state formula for it or its parameters are missing",
        ));
    }
    room.state_layers(arch, version)
        .err()
        .map(|(layer, why)| say(&layer, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::parse_command;

    #[test]
    fn prefix_caching_decides_the_state_blocks_per_request() {
        let v = |s| EngineVersion::parse(s).unwrap();
        let gdn = crate::arch::from_hf_config(include_str!(
            "../../../fixtures/hub/Qwen--Qwen3.5-9B/config.json"
        ))
        .unwrap();
        let blocks = |ver, pc| state_blocks_per_request(&gdn, v(ver), pc);
        // before 0.17 no prefix caching for hybrid models; off by default until 0.25
        assert_eq!(blocks("0.13.0", Some(true)), 1);
        assert_eq!(blocks("0.19.0", None), 1);
        assert_eq!(blocks("0.25.0", None), 1);
        assert_eq!(blocks("0.24.0", Some(true)), 2);
        // on by default from 0.26, unless turned off
        assert_eq!(blocks("0.26.0", None), 2);
        assert_eq!(blocks("0.34.0", None), 2);
        assert_eq!(blocks("0.34.0", Some(false)), 1);
        // Mamba-2 models: a prefill-checkpoint block from 0.32
        let m2 = crate::arch::from_hf_config(include_str!(
            "../../../fixtures/hub/ibm-granite--granite-4.0-h-tiny/config.json"
        ))
        .unwrap();
        assert_eq!(state_blocks_per_request(&m2, v("0.31.0"), None), 2);
        assert_eq!(state_blocks_per_request(&m2, v("0.32.0"), None), 3);
        assert_eq!(state_blocks_per_request(&m2, v("0.34.0"), Some(false)), 1);
        let flag = |cmd: &str| {
            let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            parse_command(&words).unwrap().hybrid.enable_prefix_caching
        };
        assert_eq!(flag("vllm serve m"), None);
        assert_eq!(flag("vllm serve m --enable-prefix-caching"), Some(true));
        assert_eq!(flag("vllm serve m --no-enable-prefix-caching"), Some(false));
        assert_eq!(
            flag("vllm serve m --enable-prefix-caching=false"),
            Some(false)
        );
    }
}
