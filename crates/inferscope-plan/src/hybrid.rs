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

/// How vLLM keeps a hybrid model's state under prefix caching (`CacheConfig.mamba_cache_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MambaCacheMode {
    /// No prefix caching: one state per running request.
    None,
    /// `align`: the running state plus the last cached one (and drafts, checkpoints).
    Align,
    /// `all`: one state page per block of tokens, like an attention layer.
    All,
}

/// Architectures that declare `SupportsMambaPrefixCaching` (0.12.0–0.31.0
/// `model_executor/models/*.py`; Bamba until its removal), the only ones `all` mode serves.
const MAMBA_PREFIX_CACHING: [&str; 8] = [
    "BambaForCausalLM",
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM",
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
    "NemotronHForCausalLM",
    "Zamba2ForCausalLM",
];

/// The mode a vLLM release runs a hybrid model's state in (`MambaModelConfig.
/// verify_and_update_config`, `model_executor/models/config.py`):
///
/// * prefix caching: not for hybrid models in 0.11; off by default from 0.12 to 0.25 ("Hybrid
///   models do not support prefix caching since the feature is still experimental",
///   `ModelConfig.is_prefix_caching_supported`), on by default from 0.26 ("Generative hybrid
///   models support prefix caching"); `--[no-]enable-prefix-caching` overrides the default.
/// * with it on: 0.12–0.14, `all` for the architectures in `MAMBA_PREFIX_CACHING`, prefix
///   caching turned off for the others ("Hybrid or mamba-based model detected without support
///   for prefix caching: disabling"); 0.15–0.27, `--mamba-cache-mode`, else `all` for those
///   architectures and `align` for the others; 0.28–0.31, `align` unless `--mamba-cache-mode
///   all` on one of them; from 0.32 only `align` (`MambaCacheMode = Literal["align", "none"]`).
pub fn mamba_cache_mode(
    arch: &ModelArch,
    version: EngineVersion,
    run: &HybridRun,
) -> MambaCacheMode {
    let on = version.at_least(0, 12) && run.prefix_caching.unwrap_or(version.at_least(0, 26));
    if !on {
        return MambaCacheMode::None;
    }
    let supports_all = arch
        .architecture
        .as_deref()
        .is_some_and(|a| MAMBA_PREFIX_CACHING.contains(&a));
    let asked = run.mamba_cache_mode;
    if !version.at_least(0, 15) {
        return if supports_all {
            MambaCacheMode::All
        } else {
            MambaCacheMode::None
        };
    }
    let all = if !version.at_least(0, 28) {
        supports_all && matches!(asked, None | Some("none" | "all"))
    } else {
        !version.at_least(0, 32) && supports_all && asked == Some("all")
    };
    if all {
        MambaCacheMode::All
    } else {
        MambaCacheMode::Align
    }
}

/// Blocks one state group holds per request (`MambaSpec.max_memory_usage_bytes`):
///
/// * no prefix caching: 1, plus one per draft token from 0.15 (`1 + num_speculative_blocks`;
///   0.12–0.14 count one page whatever the drafts);
/// * `align`: 2 + draft tokens + prefill-checkpoint blocks;
/// * `all`: one per block of tokens ([`StateBlocks::PerBlockOfTokens`]).
///
/// From 0.32 a Mamba-2 model's state groups hold one more block in `align` mode, the prefill
/// checkpoint (0.32.0 `layers/mamba/mamba_mixer2.py` `MambaMixer2.get_kv_cache_spec`:
/// `num_prefill_checkpoint_blocks=1`; not in 0.31.0). From 0.33 Gated DeltaNet layers take one
/// too when their prefill runs on FlashInfer's kernel, which emits mid-prefill states
/// ([`gdn_prefill_on_flashinfer`]). The scheduler checkpoints only when every state layer can
/// (`abstract.py` `get_mamba_prefill_checkpoint_alignment`: `None` unless every layer declares
/// an alignment), so a model mixing layer kinds takes the block only when all of them do.
pub fn state_blocks(arch: &ModelArch, version: EngineVersion, run: &HybridRun) -> StateBlocks {
    let drafts = if version.at_least(0, 15) {
        run.speculative_tokens
    } else {
        0
    };
    match mamba_cache_mode(arch, version, run) {
        MambaCacheMode::None => StateBlocks::PerRequest(1 + drafts),
        MambaCacheMode::All => StateBlocks::PerBlockOfTokens,
        MambaCacheMode::Align => {
            let gdn_checkpoints = gdn_prefill_on_flashinfer(arch, version, run) == Some(true);
            let checkpoint = !arch.state_layers.is_empty()
                && arch.state_layers.iter().all(|s| match s.state {
                    StateKind::Mamba2 { .. } => version.at_least(0, 32),
                    StateKind::GatedDeltaNet { .. } => gdn_checkpoints,
                    _ => false,
                });
            StateBlocks::PerRequest(2 + drafts + u64::from(checkpoint))
        }
    }
}

/// Blocks a request holds in one state group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBlocks {
    /// A fixed count per request.
    PerRequest(u64),
    /// `all` mode: `⌈max_model_len / block⌉`, like full attention.
    PerBlockOfTokens,
}

/// What a vLLM run decides about a hybrid model's state blocks beyond the release: prefix
/// caching, the GPU, and the GDN prefill backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HybridRun<'a> {
    /// `--enable-prefix-caching` / `--no-enable-prefix-caching` (`None`: the release default).
    pub prefix_caching: Option<bool>,
    /// `--mamba-cache-mode` (`None`: the release default).
    pub mamba_cache_mode: Option<&'a str>,
    /// `num_speculative_tokens` of `--speculative-config` (0 without drafts).
    pub speculative_tokens: u64,
    /// The GPU's CUDA compute capability (`None`: unknown, or not an NVIDIA GPU).
    pub compute_capability: Option<(u32, u32)>,
    /// `--gdn-prefill-backend` (`None`: auto).
    pub gdn_prefill_backend: Option<&'a str>,
}

/// Whether vLLM ≥ 0.33 runs a Gated DeltaNet model's prefill on FlashInfer's kernel (the only
/// backend that exports prefill checkpoints: `qwen_gdn_linear_attn.py`
/// `GatedDeltaNetAttention.__init__` sets a checkpoint alignment only for `flashinfer`).
/// 0.33.0/0.34.0 `_resolve_gdn_prefill_backend`: with `--gdn-prefill-backend` unset or
/// `flashinfer`, CUDA SM 9.0 always, SM 10.x and 12.x when `linear_key_head_dim` is 128 and the
/// CUDA runtime is ≥ 13 (the PyPI wheels' torch 2.13/2.14 are CUDA 13 builds, assumed); any
/// other backend or GPU (Ampere, Ada, SM 11.x, ROCm, XPU) runs Triton/FLA or its own kernel.
/// `Some(false)` when the model has no GDN layer or the release predates 0.33; `None` when
/// the answer hangs on a GPU capability that is not known.
pub fn gdn_prefill_on_flashinfer(
    arch: &ModelArch,
    version: EngineVersion,
    run: &HybridRun,
) -> Option<bool> {
    let key_head_dim = arch.state_layers.iter().find_map(|s| match s.state {
        StateKind::GatedDeltaNet { key_head_dim, .. } => Some(key_head_dim),
        _ => None,
    });
    let Some(key_head_dim) = key_head_dim else {
        return Some(false);
    };
    if !version.at_least(0, 33) {
        return Some(false);
    }
    if !matches!(run.gdn_prefill_backend, None | Some("flashinfer" | "auto")) {
        return Some(false);
    }
    let (major, _) = run.compute_capability?;
    Some(major == 9 || (matches!(major, 10 | 12) && key_head_dim == 128))
}

/// How vLLM keeps a hybrid model's recurrent state: the conv and SSM dtypes
/// ([`vllm_state_dtypes`]) and the blocks a request holds in each state group
/// ([`state_blocks`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateCache {
    /// Conv and SSM state dtypes.
    pub dtypes: (Dtype, Dtype),
    /// Blocks per request in each state group.
    pub blocks: StateBlocks,
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
    // KDA's recurrent state is float32 whatever the flags (`kda_state_dtype`; from 0.30 it
    // takes `--mamba-ssm-cache-dtype`, but `KimiGatedDeltaNetAttention.get_state_dtype` does
    // not pass it)
    if arch
        .state_layers
        .iter()
        .any(|s| matches!(s.state, StateKind::Kda { .. }))
    {
        return (conv, Dtype::F32);
    }
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
/// groups (kind [`AttentionKind::NoKv`], `state.blocks` blocks per request), one page size
/// for all.
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
    // is 64 by default in 0.34. In `all` mode the step is the Mamba kernel's chunk made a
    // multiple of the alignment (0.12.0 `HybridAttentionMambaModelConfig`, 0.26.0
    // `Platform._align_hybrid_block_size`: `lcm(get_mamba_chunk_size(), alignment)`; the
    // chunk is `mamba_chunk_size`, else `chunk_size`, else 2048).
    let align = if version.at_least(0, 20) {
        block.max(16)
    } else {
        16
    };
    let step = match state.blocks {
        StateBlocks::PerBlockOfTokens => lcm(
            u64::from(arch.mamba_chunk_size.unwrap_or(2048)).max(1),
            align,
        ),
        StateBlocks::PerRequest(_) => align,
    };
    let block = if attn_1 > 0 && state_page > 0 {
        match state.blocks {
            StateBlocks::PerBlockOfTokens => {
                block.max(step * state_page.div_ceil(attn_1).div_ceil(step))
            }
            StateBlocks::PerRequest(_) => block.max(step * state_page.div_ceil(step * attn_1)),
        }
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
        state_blocks_per_request: match state.blocks {
            StateBlocks::PerRequest(n) => n,
            StateBlocks::PerBlockOfTokens => 0,
        },
        state_blocks_follow_length: state.blocks == StateBlocks::PerBlockOfTokens,
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut x: u64, mut y: u64| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    a / gcd(a, b).max(1) * b
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
            ": the planner has no formula for what it caches, or its parameters are missing",
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

    fn v(s: &str) -> EngineVersion {
        EngineVersion::parse(s).unwrap()
    }

    fn fixture(name: &str) -> ModelArch {
        let path = format!(
            "{}/../../fixtures/hub/{name}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        crate::arch::from_hf_config(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn run(pc: Option<bool>) -> HybridRun<'static> {
        HybridRun {
            prefix_caching: pc,
            ..HybridRun::default()
        }
    }

    #[test]
    fn prefix_caching_decides_the_state_blocks() {
        let gdn = fixture("Qwen--Qwen3.5-9B");
        let blocks = |ver, pc| state_blocks(&gdn, v(ver), &run(pc));
        // 0.12–0.14 turn prefix caching off for a model without `all` support
        assert_eq!(blocks("0.13.0", Some(true)), StateBlocks::PerRequest(1));
        // off by default until 0.25
        assert_eq!(blocks("0.19.0", None), StateBlocks::PerRequest(1));
        assert_eq!(blocks("0.25.0", None), StateBlocks::PerRequest(1));
        assert_eq!(blocks("0.24.0", Some(true)), StateBlocks::PerRequest(2));
        // on by default from 0.26, unless turned off
        assert_eq!(blocks("0.26.0", None), StateBlocks::PerRequest(2));
        assert_eq!(blocks("0.34.0", Some(false)), StateBlocks::PerRequest(1));
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

    #[test]
    fn gated_deltanet_checkpoints_on_flashinfer_gpus_from_0_33() {
        let gdn = fixture("Qwen--Qwen3.5-9B");
        let on = |ver, cc, backend| {
            let r = HybridRun {
                compute_capability: cc,
                gdn_prefill_backend: backend,
                ..HybridRun::default()
            };
            state_blocks(&gdn, v(ver), &r)
        };
        // Hopper runs FlashInfer's GDN prefill: a checkpoint block from 0.33
        assert_eq!(on("0.32.0", Some((9, 0)), None), StateBlocks::PerRequest(2));
        assert_eq!(on("0.33.0", Some((9, 0)), None), StateBlocks::PerRequest(3));
        assert_eq!(on("0.34.0", Some((9, 0)), None), StateBlocks::PerRequest(3));
        // Blackwell with 128-wide key heads too; Ampere and Ada run Triton
        assert_eq!(
            on("0.34.0", Some((10, 0)), None),
            StateBlocks::PerRequest(3)
        );
        assert_eq!(on("0.34.0", Some((8, 0)), None), StateBlocks::PerRequest(2));
        assert_eq!(on("0.34.0", Some((8, 9)), None), StateBlocks::PerRequest(2));
        // the backend flag decides; an unknown GPU is not assumed to checkpoint
        assert_eq!(
            on("0.34.0", Some((9, 0)), Some("triton")),
            StateBlocks::PerRequest(2)
        );
        assert_eq!(on("0.34.0", None, None), StateBlocks::PerRequest(2));
        let r = HybridRun {
            compute_capability: Some((9, 0)),
            ..HybridRun::default()
        };
        assert_eq!(gdn_prefill_on_flashinfer(&gdn, v("0.34.0"), &r), Some(true));
        assert_eq!(
            gdn_prefill_on_flashinfer(&gdn, v("0.34.0"), &HybridRun::default()),
            None
        );
    }

    #[test]
    fn mamba2_models_page_every_state_in_all_mode_until_0_28() {
        let m2 = fixture("ibm-granite--granite-4.0-h-tiny");
        let mode = |ver, pc, asked| {
            let r = HybridRun {
                prefix_caching: pc,
                mamba_cache_mode: asked,
                ..HybridRun::default()
            };
            mamba_cache_mode(&m2, v(ver), &r)
        };
        assert_eq!(mode("0.11.0", Some(true), None), MambaCacheMode::None);
        assert_eq!(mode("0.13.0", Some(true), None), MambaCacheMode::All);
        assert_eq!(mode("0.20.0", None, None), MambaCacheMode::None);
        assert_eq!(mode("0.20.0", Some(true), None), MambaCacheMode::All);
        // prefix caching on by default from 0.26: `all` for this architecture in 0.26–0.27
        assert_eq!(mode("0.26.0", None, None), MambaCacheMode::All);
        assert_eq!(mode("0.27.1", None, None), MambaCacheMode::All);
        assert_eq!(mode("0.26.0", None, Some("align")), MambaCacheMode::Align);
        // `align` by default from 0.28, `all` on request until 0.31
        assert_eq!(mode("0.28.0", None, None), MambaCacheMode::Align);
        assert_eq!(mode("0.28.0", None, Some("all")), MambaCacheMode::All);
        assert_eq!(mode("0.32.0", None, Some("all")), MambaCacheMode::Align);
        // a model without `all` support falls back to `align`
        let gdn = fixture("Qwen--Qwen3.5-9B");
        let r = HybridRun {
            mamba_cache_mode: Some("all"),
            ..HybridRun::default()
        };
        assert_eq!(
            mamba_cache_mode(&gdn, v("0.26.0"), &r),
            MambaCacheMode::Align
        );
        let blocks = |ver, pc| state_blocks(&m2, v(ver), &run(pc));
        assert_eq!(blocks("0.26.0", None), StateBlocks::PerBlockOfTokens);
        assert_eq!(blocks("0.28.0", None), StateBlocks::PerRequest(2));
        assert_eq!(blocks("0.31.0", None), StateBlocks::PerRequest(2));
        // the prefill checkpoint from 0.32
        assert_eq!(blocks("0.32.0", None), StateBlocks::PerRequest(3));
        assert_eq!(blocks("0.34.0", Some(false)), StateBlocks::PerRequest(1));
    }

    #[test]
    fn draft_tokens_take_state_blocks_from_0_15() {
        let gdn = fixture("Qwen--Qwen3.5-9B");
        let drafts = |ver, pc| {
            let r = HybridRun {
                prefix_caching: pc,
                speculative_tokens: 2,
                compute_capability: Some((9, 0)),
                ..HybridRun::default()
            };
            state_blocks(&gdn, v(ver), &r)
        };
        assert_eq!(drafts("0.14.0", None), StateBlocks::PerRequest(1));
        assert_eq!(drafts("0.15.0", None), StateBlocks::PerRequest(3));
        assert_eq!(drafts("0.34.0", Some(false)), StateBlocks::PerRequest(3));
        assert_eq!(drafts("0.34.0", None), StateBlocks::PerRequest(5));
    }

    #[test]
    fn all_mode_aligns_the_block_to_the_mamba_chunk() {
        // granite-4.0-h-tiny at TP 1, bf16: 1,536 attention bytes per token and layer; a
        // Mamba-2 state of 3,200,000 B + conv; `mamba_chunk_size` 256
        let m2 = fixture("ibm-granite--granite-4.0-h-tiny");
        let n = m2.num_layers as usize;
        let dtypes = vllm_state_dtypes(&m2, v("0.26.0"), None, None);
        let layout = |blocks| {
            vllm_layout(
                &m2,
                0..n,
                1,
                m2.dtype,
                16,
                StateCache { dtypes, blocks },
                v("0.26.0"),
            )
        };
        let align = layout(StateBlocks::PerRequest(2));
        let all = layout(StateBlocks::PerBlockOfTokens);
        let attn_1 = align.page_bytes / align.block_size;
        let state = align.state_bytes_per_seq / 36;
        // align: 16-token steps; all: 256-token steps, each large enough for one state
        assert_eq!(align.block_size, 16 * state.div_ceil(16 * attn_1));
        assert_eq!(all.block_size, 256 * state.div_ceil(attn_1).div_ceil(256));
        assert_eq!(all.block_size % 256, 0);
        assert!(all.state_blocks_follow_length && !align.state_blocks_follow_length);
        // a 32k request: 2 state blocks per group in align mode, ⌈32768 / block⌉ in all mode
        let per_req = |l: &KvLayout| l.blocks_per_request(32768, l.block_size, 8192);
        let groups = u64::from(all.num_groups());
        assert_eq!(per_req(&all), groups * 32768u64.div_ceil(all.block_size));
        assert!(per_req(&all) > 10 * per_req(&align) / 2);
    }

    #[test]
    fn state_cache_flags_are_read_from_the_command() {
        let parse = |cmd: &str| {
            let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            parse_command(&words)
        };
        let s = parse(
            "vllm serve m --mamba-cache-mode all --gdn-prefill-backend FlashInfer \
             --speculative-config {\"method\":\"qwen3_next_mtp\",\"num_speculative_tokens\":3}",
        )
        .unwrap();
        assert_eq!(s.hybrid.mamba_cache_mode.as_deref(), Some("all"));
        assert_eq!(s.hybrid.gdn_prefill_backend.as_deref(), Some("flashinfer"));
        assert_eq!(s.hybrid.speculative_tokens, Some(3));
        let err = parse("vllm serve m --mamba-cache-mode sometimes").unwrap_err();
        assert!(
            err.to_string().contains("expected none, align or all"),
            "{err}"
        );
    }
}
