//! Recurrent state of hybrid models: the layers that keep a fixed-size state per sequence
//! instead of a KV cache per token (Qwen3-Next's Gated DeltaNet, Mamba-2 in Nemotron-H,
//! Granite-4.0-H, Bamba and Falcon-H1, Mamba-1 in Jamba, LFM2's short convolutions,
//! MiniMax-M1's lightning attention), read from `config.json`, and the bytes vLLM allocates
//! for them.
//!
//! A config that marks recurrent layers in a way not read here (a key such as
//! `linear_attn_config`, `mamba_d_state` or `block_types` with no layer layout this module
//! knows) yields one [`StateKind::Unmodelled`] entry, so every engine refuses the model by
//! name instead of planning those layers as plain attention.
//!
//! Shapes follow vLLM's `MambaStateShapeCalculator`
//! (`vllm/model_executor/layers/mamba/mamba_utils.py`, 0.11.0 and 0.34.0 alike): per layer
//! and sequence on one TP rank,
//!
//! ```text
//! Gated DeltaNet  conv (kernel − 1) × (2·kh·kd + vh·vd)/tp      ssm vh/tp × kd × vd
//! Mamba-2         conv (kernel − 1) × (inter + 2·g'·state)/tp  ssm heads/tp × head_dim × state
//! Mamba-1         conv (kernel − 1) × inter/tp                  ssm inter/tp × state
//! Short conv      conv (L_cache − 1) × conv_dim/tp               (none)
//! Lightning       (none)                                         ssm heads/tp × head_dim²
//! ```
//!
//! The short-conv and lightning states are in the cache dtype (`--mamba-cache-dtype`, else the
//! model's: `short_conv_state_dtype`, `linear_attention_state_dtype`), not the SSM dtype.
//!
//! where `g'` is `n_groups` raised to `tp` when `n_groups` is not a multiple of it
//! (`extra_groups_for_head_shards`).

use crate::arch::{AttentionKind, Cfg, Dtype, PlanError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What one state layer keeps per sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StateKind {
    /// Gated DeltaNet linear attention (Qwen3-Next `linear_attention` layers).
    GatedDeltaNet {
        /// `linear_conv_kernel_dim`.
        conv_kernel: u32,
        /// `linear_num_key_heads`.
        key_heads: u32,
        /// `linear_num_value_heads`.
        value_heads: u32,
        /// `linear_key_head_dim`.
        key_head_dim: u32,
        /// `linear_value_head_dim`.
        value_head_dim: u32,
    },
    /// Mamba-2 mixer (Nemotron-H `M`, Granite-4.0-H and Bamba `mamba`, Falcon-H1).
    Mamba2 {
        /// Inner width (`mamba_num_heads × mamba_head_dim`, `mamba_d_ssm` or
        /// `mamba_expand × hidden_size`, as the engine's model file takes it).
        intermediate: u64,
        /// `n_groups` / `mamba_n_groups`.
        groups: u32,
        /// `mamba_num_heads` / `mamba_n_heads`.
        heads: u32,
        /// `mamba_head_dim` / `mamba_d_head`.
        head_dim: u32,
        /// `ssm_state_size` / `mamba_d_state`.
        state_size: u32,
        /// `conv_kernel` / `mamba_d_conv`.
        conv_kernel: u32,
    },
    /// Mamba-1 mixer (Jamba).
    Mamba1 {
        /// `mamba_expand × hidden_size`.
        intermediate: u64,
        /// `mamba_d_state`.
        state_size: u32,
        /// `mamba_d_conv`.
        conv_kernel: u32,
    },
    /// LFM2 short convolution (`conv` layers; vLLM `lfm2.py` `Lfm2ShortConv`).
    ShortConv {
        /// `conv_dim`.
        dim: u64,
        /// `conv_L_cache`.
        conv_kernel: u32,
    },
    /// MiniMax-M1 / Text-01 lightning (linear) attention (`attn_type_list` 0; vLLM
    /// `minimax_linear_attn.py` `MiniMaxText01LinearAttention`): one head_dim × head_dim
    /// state per head.
    Lightning {
        /// `num_attention_heads`.
        heads: u32,
        /// `head_dim`.
        head_dim: u32,
    },
    /// Kimi Delta Attention (Kimi-Linear `linear_attn_config.kda_layers`; vLLM
    /// `kimi_linear.py` / `gdn/kimi_gdn_linear_attn.py` `KimiGatedDeltaNetAttention`): short
    /// convolutions of q, k and v and one `head_dim × head_dim` state per head.
    Kda {
        /// `linear_attn_config.num_heads`.
        heads: u32,
        /// `linear_attn_config.head_dim`.
        head_dim: u32,
        /// `linear_attn_config.short_conv_kernel_size`.
        conv_kernel: u32,
    },
    /// A state layer this planner has no formula for.
    Unmodelled,
}

/// One decoder layer's recurrent state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateLayer {
    /// Decoder layer index.
    pub layer: u32,
    /// The layer type as the config names it (`linear_attention`, `mamba`, `M`, ...).
    pub layer_type: String,
    /// Its state shape.
    pub state: StateKind,
}

/// A KDA layer's shape from `linear_attn_config` (`num_heads`, `head_dim`,
/// `short_conv_kernel_size`, 4 when absent as in `KimiLinearConfig`); unmodelled when the
/// head keys are missing or zero.
fn kda_state(lin: &Value) -> StateKind {
    let get = |k: &str| {
        lin.get(k)
            .and_then(Value::as_u64)
            .filter(|v| (1..=1 << 16).contains(v))
            .map(|v| v as u32)
    };
    match (get("num_heads"), get("head_dim")) {
        (Some(heads), Some(head_dim)) => StateKind::Kda {
            heads,
            head_dim,
            conv_kernel: get("short_conv_kernel_size").unwrap_or(4),
        },
        _ => StateKind::Unmodelled,
    }
}

/// Bytes of one state layer for one sequence on one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateBytes {
    /// Convolution state.
    pub conv: u64,
    /// SSM / recurrent (temporal) state.
    pub ssm: u64,
}

impl StateBytes {
    /// Both states.
    pub fn total(&self) -> u64 {
        self.conv + self.ssm
    }
}

/// Largest head count, head or state dimension, group count or convolution kernel accepted
/// (real ones are ≤ 256): bounds every state and mixer product far below `u64::MAX`.
const MAX_DIM: u64 = 1 << 16;

fn req(cfg: &Cfg, field: &'static str, keys: &[&str]) -> Result<u64, PlanError> {
    cfg.uint(field, keys, MAX_DIM)?
        .ok_or(PlanError::Missing(field))
}

fn opt(cfg: &Cfg, field: &'static str, keys: &[&str], default: u64) -> Result<u64, PlanError> {
    Ok(cfg.uint(field, keys, MAX_DIM)?.unwrap_or(default))
}

fn u32_of(n: u64) -> u32 {
    n.min(u64::from(u32::MAX)) as u32
}

/// Gated DeltaNet shape (vLLM `qwen3_next.py` `get_mamba_state_shape_from_config`).
fn gated_delta_net(cfg: &Cfg) -> Result<StateKind, PlanError> {
    Ok(StateKind::GatedDeltaNet {
        conv_kernel: u32_of(opt(
            cfg,
            "linear_conv_kernel_dim",
            &["linear_conv_kernel_dim"],
            4,
        )?),
        key_heads: u32_of(req(cfg, "linear_num_key_heads", &["linear_num_key_heads"])?),
        value_heads: u32_of(req(
            cfg,
            "linear_num_value_heads",
            &["linear_num_value_heads"],
        )?),
        key_head_dim: u32_of(req(cfg, "linear_key_head_dim", &["linear_key_head_dim"])?),
        value_head_dim: u32_of(req(
            cfg,
            "linear_value_head_dim",
            &["linear_value_head_dim"],
        )?),
    })
}

/// Mamba-2 shape; the inner width per the engine's model file: `nemotron_h.py` takes
/// `mamba_num_heads × mamba_head_dim`, `falcon_h1.py` `mamba_d_ssm` (else expand × hidden),
/// `granitemoehybrid.py`/`bamba.py` `mamba_expand × hidden_size`.
fn mamba2(cfg: &Cfg, model_type: &str, hidden: u64) -> Result<StateKind, PlanError> {
    let heads = req(
        cfg,
        "mamba_num_heads",
        &["mamba_n_heads", "mamba_num_heads"],
    )?;
    let head_dim = req(cfg, "mamba_head_dim", &["mamba_d_head", "mamba_head_dim"])?;
    let expand = cfg
        .get("mamba_expand")
        .or_else(|| cfg.get("expand"))
        .and_then(Value::as_f64)
        .filter(|e| *e > 0.0 && *e < 1024.0)
        .unwrap_or(2.0);
    let intermediate = if model_type == "nemotron_h" {
        heads * head_dim
    } else {
        match cfg.uint("mamba_d_ssm", &["mamba_d_ssm"], MAX_DIM * MAX_DIM)? {
            Some(d) => d,
            None => (expand * hidden as f64) as u64,
        }
    };
    Ok(StateKind::Mamba2 {
        intermediate,
        groups: u32_of(opt(cfg, "n_groups", &["mamba_n_groups", "n_groups"], 1)?.max(1)),
        heads: u32_of(heads),
        head_dim: u32_of(head_dim),
        state_size: u32_of(req(
            cfg,
            "ssm_state_size",
            &["mamba_d_state", "ssm_state_size"],
        )?),
        conv_kernel: u32_of(opt(
            cfg,
            "conv_kernel",
            &["mamba_d_conv", "conv_kernel"],
            4,
        )?),
    })
}

/// Mamba-1 shape (vLLM `jamba.py`: `mamba_expand × hidden_size`, `mamba_d_state`,
/// `mamba_d_conv`; `JambaConfig` defaults 2, 16, 4).
fn mamba1(cfg: &Cfg, hidden: u64) -> Result<StateKind, PlanError> {
    let expand = opt(cfg, "mamba_expand", &["mamba_expand"], 2)?;
    Ok(StateKind::Mamba1 {
        intermediate: expand * hidden,
        state_size: u32_of(opt(cfg, "mamba_d_state", &["mamba_d_state"], 16)?),
        conv_kernel: u32_of(opt(cfg, "mamba_d_conv", &["mamba_d_conv"], 4)?),
    })
}

/// LFM2 short-conv shape (vLLM `lfm2.py` `get_mamba_state_shape_from_config`: `conv_dim`,
/// `conv_L_cache`; `conv_dim` defaults to the hidden size as in `Lfm2Config`).
fn short_conv(cfg: &Cfg, hidden: u64) -> Result<StateKind, PlanError> {
    Ok(StateKind::ShortConv {
        dim: cfg
            .uint("conv_dim", &["conv_dim"], MAX_DIM * MAX_DIM)?
            .unwrap_or(hidden),
        conv_kernel: u32_of(req(cfg, "conv_L_cache", &["conv_L_cache"])?),
    })
}

/// Lightning-attention shape (vLLM 0.11–0.23 `minimax_text_01.py`
/// `get_mamba_state_shape_from_config`: `num_attention_heads`, `head_dim`).
fn lightning(cfg: &Cfg, hidden: u64) -> Result<StateKind, PlanError> {
    let heads = req(cfg, "num_attention_heads", &["num_attention_heads"])?.max(1);
    let head_dim = opt(cfg, "head_dim", &["head_dim"], hidden / heads)?;
    Ok(StateKind::Lightning {
        heads: u32_of(heads),
        head_dim: u32_of(head_dim),
    })
}

/// Config keys that mark recurrent or linear-attention layers. Seen with no layer layout read
/// here, they stop the model from being planned as plain attention.
const RECURRENT_HINTS: &[&str] = &[
    "mamba",
    "ssm_",
    "linear_attn",
    "linear_attention",
    "conv_l_cache",
    "short_conv",
    "shortconv",
    "lightning",
    "rwkv",
    "xlstm",
    "mlstm",
    "slstm",
    "delta_net",
    "deltanet",
    "kda_",
    "retention",
    "hyena",
    "lru_width",
    "block_types",
    "attention_type_list",
    "decoder_attention_types",
];

/// 2026 architectures whose caches have no formula here, with what vLLM 0.34.0 keeps for them
/// (`vllm/models/*`): refused by name on every engine, whatever their keys say.
const UNMODELLED_ARCHITECTURES: &[(&str, &str)] = &[
    (
        "DeepseekV4ForCausalLM",
        "compressed and sliding-window MLA with an indexer (vllm/models/deepseek_v4)",
    ),
    (
        "DeepseekV4ForConditionalGeneration",
        "compressed and sliding-window MLA with an indexer (vllm/models/deepseek_v4)",
    ),
    (
        "DeepseekV41ForCausalLM",
        "compressed, cross-layer-shared MLA and ring buffers (vllm/models/deepseek_v41)",
    ),
    (
        "Qwen4ExpForCausalLM",
        "sparse-attention indexer caches and per-layer short-conv state beside Gated DeltaNet (vllm/models/qwen4_exp)",
    ),
    (
        "Qwen4ExpForConditionalGeneration",
        "sparse-attention indexer caches and per-layer short-conv state beside Gated DeltaNet (vllm/models/qwen4_exp)",
    ),
    (
        "Glm5NextForCausalLM",
        "KDA, sparse attention with a pooled indexer and ring buffers (vllm/models/glm5next)",
    ),
    (
        "Glm5NextForConditionalGeneration",
        "KDA, sparse attention with a pooled indexer and ring buffers (vllm/models/glm5next)",
    ),
    (
        "HYV4ForCausalLM",
        "MLA with an indexer on some layers (vllm/models/hy_v4)",
    ),
    (
        "KimiK3ForConditionalGeneration",
        "KDA and MLA with caches of its own (vllm/models/kimi_k3)",
    ),
    (
        "KimiK31ForConditionalGeneration",
        "KDA, MLA and a sparse-attention indexer (vllm/models/kimi_k3)",
    ),
    (
        "MiniMaxM3SparseForCausalLM",
        "sparse layers with an index-key cache (vllm/models/minimax_m3)",
    ),
    (
        "MiniMaxM3SparseForConditionalGeneration",
        "sparse layers with an index-key cache (vllm/models/minimax_m3)",
    ),
    (
        "InklingForCausalLM",
        "local and global layers of different heads with short-conv state (vllm/models/inkling)",
    ),
    (
        "InklingForConditionalGeneration",
        "local and global layers of different heads with short-conv state (vllm/models/inkling)",
    ),
    (
        "MistralLarge4ForCausalLM",
        "MLA shared across layers with an indexer (vllm/models/mistral/mistral_large4)",
    ),
    (
        "Dots3NoteForCausalLM",
        "sliding-window MLA of its own rank with an indexer (vllm/models/dots3_note)",
    ),
    (
        "Step5ForCausalLM",
        "grouped KV heads (num_attention_groups) and sparse caches (vllm/models/step5)",
    ),
    (
        "Step5ForConditionalGeneration",
        "grouped KV heads (num_attention_groups) and sparse caches (vllm/models/step5)",
    ),
];

/// Config keys of attention layouts with no formula here (exact names; where vLLM 0.34.0 reads
/// them): no ordinary Llama, Qwen, Gemma or DeepSeek-V3 config carries one.
const UNMODELLED_ATTENTION_KEYS: &[&str] = &[
    // DeepSeek-V4 / V4.1 compression (transformers_utils/deepseek_v4_utils.py)
    "compress_rates",
    "compress_ratios",
    // cross-layer KV sharing (deepseek_v41/attention.py; mistral/common/layer_spec.py)
    "kv_source_layer_ids",
    "index_source_layer_ids",
    "kv_source_layers",
    "engram_layer_ids",
    // per-layer short convolutions (qwen4_exp/nvidia/ple_layer.py; inkling/nvidia/model.py)
    "ple_layer_ids",
    "sconv_kernel_size",
    "local_layer_ids",
    // sliding-window MLA of another rank (dots3_note/nvidia/model.py)
    "swa_kv_lora_rank",
    // Step5's grouped heads and sparse caches (step5/common/config.py)
    "num_attention_groups",
    "attention_other_setting",
    "sparse_config",
    // Kimi K3.1's sparse-attention layers (transformers_utils/configs/kimi_linear.py)
    "dsa_config",
];

/// `layer_types` values the planner has a formula for; any other is refused by name, never
/// planned as full attention.
pub(crate) const KNOWN_LAYER_TYPES: &[&str] = &[
    "full_attention",
    "attention",
    "global",
    "global_attention",
    "full",
    "sliding_attention",
    "local_attention",
    "sliding",
    "chunked_attention",
    "linear_attention",
    "mamba",
    "mamba2",
    "conv",
    "short_conv",
    "recurrent",
    "mlstm",
    "mlp",
    "moe",
];

/// Why this config's attention is not modelled, if it is not: an architecture named above, one
/// of the keys above, or an indexer (`index_*`, `indexer_*` keys) on an architecture that is
/// not DeepSeek sparse attention's.
fn unmodelled_attention(cfg: &Cfg) -> Option<String> {
    let arch = cfg.architecture().unwrap_or("");
    if let Some((_, what)) = UNMODELLED_ARCHITECTURES.iter().find(|(a, _)| *a == arch) {
        return Some(format!("attention ({what})"));
    }
    if let Some(k) = cfg
        .keys()
        .find(|k| UNMODELLED_ATTENTION_KEYS.contains(&k.as_str()))
    {
        return Some(format!("attention (config.json key {k})"));
    }
    // DeepSeek sparse attention with indexers on some layers only (GLM-5.2: vLLM 0.34.0
    // `model_executor/models/utils.py` `compute_skip_topk_layers`): the planner puts one on
    // every layer
    if crate::arch::is_dsa_architecture(arch) {
        let shared = cfg
            .get("indexer_types")
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().any(|x| x.as_str() == Some("shared")));
        let every_nth = cfg
            .get("index_topk_freq")
            .and_then(Value::as_u64)
            .is_some_and(|f| f > 1);
        let pattern = cfg.get("index_topk_pattern").is_some_and(|p| !p.is_null());
        if shared || every_nth || pattern {
            return Some(
                "sparse attention whose layers share indexers (indexer_types / index_topk_freq / index_topk_pattern)".into(),
            );
        }
    }
    if !crate::arch::is_dsa_architecture(arch)
        && let Some(k) = cfg
            .keys()
            .find(|k| k.starts_with("index_") || k.starts_with("indexer_"))
    {
        return Some(format!(
            "attention with an indexer (config.json key {k}, not a DeepSeek sparse-attention architecture)"
        ));
    }
    None
}

/// The first config key that marks recurrent layers, if any.
fn recurrent_hint(cfg: &Cfg) -> Option<String> {
    cfg.keys()
        .find(|k| {
            let k = k.to_ascii_lowercase();
            RECURRENT_HINTS.iter().any(|h| k.contains(h))
        })
        .cloned()
}

/// The state of a layer named `t` in `layer_types`/`layers_block_type`, or `None` for an
/// attention or MLP-only layer.
fn named(
    cfg: &Cfg,
    model_type: &str,
    hidden: u64,
    t: &str,
) -> Result<Option<StateKind>, PlanError> {
    Ok(Some(match t {
        "linear_attention" if cfg.get("linear_num_value_heads").is_some() => gated_delta_net(cfg)?,
        // MiniMax's Hugging Face format names lightning layers in `layer_types` (vLLM 0.23.0
        // `minimax_text_01.py` maps "linear_attention" to 0)
        "linear_attention" if model_type.starts_with("minimax") => lightning(cfg, hidden)?,
        "mamba" | "mamba2" if model_type == "jamba" => mamba1(cfg, hidden)?,
        "mamba" | "mamba2"
            if cfg.get("mamba_n_heads").is_some() || cfg.get("mamba_num_heads").is_some() =>
        {
            mamba2(cfg, model_type, hidden)?
        }
        "conv" | "short_conv" if cfg.get("conv_L_cache").is_some() => short_conv(cfg, hidden)?,
        "linear_attention"
        | "mamba"
        | "mamba2"
        | "conv"
        | "short_conv"
        | "recurrent"
        | "mlstm"
        | "ssm"
        | "gated_delta_net"
        | "kimi_delta_attention" => StateKind::Unmodelled,
        _ => return Ok(None),
    }))
}

/// What [`parse`] finds.
pub(crate) struct Parsed {
    /// The state layers.
    pub layers: Vec<StateLayer>,
    /// Layers without a feed-forward block (Nemotron-H's attention and Mamba blocks).
    pub ffn_free: Vec<u32>,
}

/// Read the state layers of a hybrid model and mark them in `kinds` as layers without a KV
/// cache. Layer layouts, in the order tried: `layer_types` (Qwen3-Next, Granite-4.0-H),
/// `hybrid_override_pattern` (Nemotron-H: `M` Mamba-2, `*` attention, `-` MLP, `E` MoE),
/// `layers_block_type`, Jamba's `attn_layer_period`/`attn_layer_offset`, Qwen3-Next's
/// `full_attention_interval`, Bamba's `attn_layer_indices`, and Falcon-H1, whose every layer
/// runs attention and Mamba-2 side by side.
pub(crate) fn parse(
    cfg: &Cfg,
    model_type: &str,
    hidden: u64,
    kinds: &mut [AttentionKind],
) -> Result<Parsed, PlanError> {
    let n = kinds.len();
    let mut out = Vec::new();
    // caches no formula here covers: marked past the last layer, so every engine refuses the
    // model through `StateKind::Unmodelled` whatever layout is read below
    if let Some(what) = unmodelled_attention(cfg) {
        out.push(StateLayer {
            layer: u32::MAX,
            layer_type: what,
            state: StateKind::Unmodelled,
        });
    }
    let push = |out: &mut Vec<StateLayer>, i: usize, t: &str, s: StateKind| {
        out.push(StateLayer {
            layer: i as u32,
            layer_type: t.to_string(),
            state: s,
        })
    };
    let list = |key: &str| -> Option<Vec<String>> {
        cfg.get(key).and_then(Value::as_array).map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or("").to_ascii_lowercase())
                .collect()
        })
    };
    let lists = [
        ("layer_types", list("layer_types")),
        ("layers_block_type", list("layers_block_type")),
    ];
    if let Some((field, types)) = lists.iter().find_map(|(f, l)| l.as_ref().map(|l| (*f, l))) {
        if types.len() != n {
            return Err(PlanError::Invalid {
                field,
                detail: format!("has {} entries for {} layers", types.len(), n),
            });
        }
        for ((i, t), k) in types.iter().enumerate().zip(kinds.iter_mut()) {
            if let Some(s) = named(cfg, model_type, hidden, t)? {
                *k = AttentionKind::NoKv;
                push(&mut out, i, t, s);
            } else if matches!(t.as_str(), "mlp" | "moe") {
                *k = AttentionKind::NoKv;
            } else if !KNOWN_LAYER_TYPES.contains(&t.as_str()) {
                // a layer kind with no formula here: refused by name, not planned as attention
                push(&mut out, i, t, StateKind::Unmodelled);
            }
        }
        return Ok(Parsed {
            layers: out,
            ffn_free: Vec::new(),
        });
    }
    // MiniMax-M1 / Text-01: 0 lightning attention, 1 softmax attention (vLLM
    // `minimax_text_01.py` `MiniMaxText01Model.__init__` reads `attn_type_list`)
    if let Some(types) = cfg.get("attn_type_list").and_then(Value::as_array) {
        if types.len() != n {
            return Err(PlanError::Invalid {
                field: "attn_type_list",
                detail: format!("has {} entries for {} layers", types.len(), n),
            });
        }
        for ((i, t), k) in types.iter().enumerate().zip(kinds.iter_mut()) {
            match t.as_u64() {
                Some(1) => {}
                Some(0) => {
                    *k = AttentionKind::NoKv;
                    push(&mut out, i, "linear_attention", lightning(cfg, hidden)?);
                }
                _ => {
                    return Err(PlanError::Invalid {
                        field: "attn_type_list",
                        detail: format!("layer {i} is {t}; known: 0 (linear), 1 (softmax)"),
                    });
                }
            }
        }
        return Ok(Parsed {
            layers: out,
            ffn_free: Vec::new(),
        });
    }
    // Kimi-Linear: `linear_attn_config.kda_layers` (1-based: vLLM `KimiLinearConfig.
    // is_kda_layer` tests `layer_idx + 1`) are Kimi Delta Attention layers, the rest MLA.
    // Other models that carry KDA layers (Kimi K3, GLM-5-Next) add caches of their own: their
    // KDA layers stay unmodelled, so they are refused by name.
    if let Some(lin) = cfg.get("linear_attn_config").filter(|c| c.is_object())
        && let Some(kda) = lin.get("kda_layers").and_then(Value::as_array)
    {
        let state =
            if model_type == "kimi_linear" && cfg.architecture() == Some("KimiLinearForCausalLM") {
                kda_state(lin)
            } else {
                StateKind::Unmodelled
            };
        for l in kda.iter().filter_map(Value::as_u64) {
            let i = l.saturating_sub(1) as usize;
            if l >= 1
                && let Some(k) = kinds.get_mut(i)
            {
                *k = AttentionKind::NoKv;
                push(&mut out, i, "kda", state.clone());
            }
        }
        if !out.is_empty() {
            return Ok(Parsed {
                layers: out,
                ffn_free: Vec::new(),
            });
        }
    }
    if let Some(p) = cfg.string("hybrid_override_pattern") {
        if p.chars().count() != n {
            return Err(PlanError::Invalid {
                field: "hybrid_override_pattern",
                detail: format!(
                    "has {} layers for num_hidden_layers {}",
                    p.chars().count(),
                    n
                ),
            });
        }
        // a Nemotron-H block is one mixer: attention, Mamba-2, MLP or MoE, never two
        let mut ffn_free = Vec::new();
        for ((i, c), k) in p.chars().enumerate().zip(kinds.iter_mut()) {
            match c {
                '*' => ffn_free.push(i as u32),
                'M' => {
                    ffn_free.push(i as u32);
                    *k = AttentionKind::NoKv;
                    push(&mut out, i, "M", mamba2(cfg, model_type, hidden)?);
                }
                '-' | 'E' => *k = AttentionKind::NoKv,
                other => {
                    return Err(PlanError::Invalid {
                        field: "hybrid_override_pattern",
                        detail: format!("layer {i} is {other:?}; known: M, *, -, E"),
                    });
                }
            }
        }
        return Ok(Parsed {
            layers: out,
            ffn_free,
        });
    }
    let attention_at: Option<Box<dyn Fn(usize) -> bool>> = if model_type == "jamba" {
        let period = opt(cfg, "attn_layer_period", &["attn_layer_period"], 8)?.max(1) as usize;
        let offset = opt(cfg, "attn_layer_offset", &["attn_layer_offset"], 4)? as usize;
        Some(Box::new(move |i| i % period == offset))
    } else if cfg.get("linear_num_value_heads").is_some() {
        let every = opt(
            cfg,
            "full_attention_interval",
            &["full_attention_interval"],
            4,
        )?
        .max(1) as usize;
        Some(Box::new(move |i| (i + 1) % every == 0))
    } else if let Some(idx) = cfg.get("attn_layer_indices").and_then(Value::as_array) {
        let idx: Vec<u64> = idx.iter().filter_map(Value::as_u64).collect();
        Some(Box::new(move |i| idx.contains(&(i as u64))))
    } else {
        None
    };
    if let Some(attention) = attention_at {
        let t = if model_type == "jamba" {
            "mamba"
        } else if cfg.get("linear_num_value_heads").is_some() {
            "linear_attention"
        } else {
            "mamba2"
        };
        for (i, k) in kinds.iter_mut().enumerate() {
            if !attention(i) {
                *k = AttentionKind::NoKv;
                let s = named(cfg, model_type, hidden, t)?.unwrap_or(StateKind::Unmodelled);
                push(&mut out, i, t, s);
            }
        }
        return Ok(Parsed {
            layers: out,
            ffn_free: Vec::new(),
        });
    }
    if model_type == "falcon_h1" {
        for i in 0..n {
            push(&mut out, i, "mamba2", mamba2(cfg, model_type, hidden)?);
        }
    } else if let Some(key) = recurrent_hint(cfg) {
        // no layer is marked (layer index past the model): KV and weights stay as read, and
        // every engine refuses the model through `StateKind::Unmodelled`
        out.push(StateLayer {
            layer: u32::MAX,
            layer_type: format!("recurrent (config.json key {key}, no layer layout read)"),
            state: StateKind::Unmodelled,
        });
    }
    Ok(Parsed {
        layers: out,
        ffn_free: Vec::new(),
    })
}

/// Bytes of one state layer per sequence on one TP rank, as vLLM sizes its `MambaSpec`
/// (`MambaStateShapeCalculator`, see the module docs). `None` for an unmodelled layer.
pub fn vllm_state_bytes(s: &StateKind, tp: u32, conv: Dtype, ssm: Dtype) -> Option<StateBytes> {
    let tp = u64::from(tp.max(1));
    let d = |x: u64| x.div_ceil(tp);
    Some(match *s {
        StateKind::GatedDeltaNet {
            conv_kernel,
            key_heads,
            value_heads,
            key_head_dim,
            value_head_dim,
        } => {
            let (kh, vh, kd, vd) = (
                u64::from(key_heads),
                u64::from(value_heads),
                u64::from(key_head_dim),
                u64::from(value_head_dim),
            );
            let conv_dim = kd * kh * 2 + vd * vh;
            StateBytes {
                conv: u64::from(conv_kernel.saturating_sub(1)) * d(conv_dim) * conv.bytes(),
                ssm: d(vh) * kd * vd * ssm.bytes(),
            }
        }
        StateKind::Mamba2 {
            intermediate,
            groups,
            heads,
            head_dim,
            state_size,
            conv_kernel,
        } => {
            let g = u64::from(groups);
            // extra_groups_for_head_shards adds `tp − n_groups` when n_groups is not a
            // multiple of tp: the groups become exactly tp
            let g = if g % tp == 0 { g } else { tp };
            let conv_dim = intermediate + 2 * g * u64::from(state_size);
            StateBytes {
                conv: u64::from(conv_kernel.saturating_sub(1)) * d(conv_dim) * conv.bytes(),
                ssm: d(u64::from(heads))
                    * u64::from(head_dim)
                    * u64::from(state_size)
                    * ssm.bytes(),
            }
        }
        StateKind::Mamba1 {
            intermediate,
            state_size,
            conv_kernel,
        } => StateBytes {
            conv: u64::from(conv_kernel.saturating_sub(1)) * d(intermediate) * conv.bytes(),
            ssm: d(intermediate) * u64::from(state_size) * ssm.bytes(),
        },
        StateKind::ShortConv { dim, conv_kernel } => StateBytes {
            conv: u64::from(conv_kernel.saturating_sub(1)) * d(dim) * conv.bytes(),
            ssm: 0,
        },
        // `MambaStateShapeCalculator.kda_state_shape`: conv over q, k and v (3 × heads ×
        // head_dim channels; three tensors up to 0.25, one from 0.26, the same bytes), state
        // `heads/tp × head_dim × head_dim`
        StateKind::Kda {
            heads,
            head_dim,
            conv_kernel,
        } => {
            let width = u64::from(heads) * u64::from(head_dim);
            StateBytes {
                conv: u64::from(conv_kernel.saturating_sub(1)) * 3 * d(width) * conv.bytes(),
                ssm: d(u64::from(heads)) * u64::from(head_dim) * u64::from(head_dim) * ssm.bytes(),
            }
        }
        StateKind::Lightning { heads, head_dim } => StateBytes {
            conv: 0,
            ssm: d(u64::from(heads)) * u64::from(head_dim) * u64::from(head_dim) * conv.bytes(),
        },
        StateKind::Unmodelled => return None,
    })
}

/// Parameters of one state mixer on one TP rank, as its model file builds it: (projection
/// matrices, small tensors kept in the native dtype: conv weights, A, D, dt bias, norms).
/// Gated DeltaNet (`qwen3_next.py` `Qwen3NextGatedDeltaNet`): in_proj_qkvz, in_proj_ba,
/// conv1d, out_proj; Mamba-2 (`mamba_mixer2.py` `MambaMixer2`): in_proj to
/// `2·inter + 2·g·state + heads`, conv1d, out_proj; Mamba-1 (`mamba_mixer.py` `MambaMixer`):
/// in_proj, x_proj (dt_rank = ⌈hidden/16⌉), dt_proj, A, D, out_proj; short conv (`lfm2.py`
/// `Lfm2ShortConv`): in_proj to 3·conv_dim, conv1d, out_proj; lightning attention
/// (`MiniMaxText01LinearAttention`): qkv_proj to 3·heads·head_dim, output_gate, out_proj, norm.
pub fn mixer_params(s: &StateKind, hidden: u64, tp: u32) -> (u64, u64) {
    let tp = u64::from(tp.max(1));
    let h = hidden;
    match *s {
        StateKind::GatedDeltaNet {
            conv_kernel,
            key_heads,
            value_heads,
            key_head_dim,
            value_head_dim,
        } => {
            let (k, v) = (
                u64::from(key_heads) * u64::from(key_head_dim),
                u64::from(value_heads) * u64::from(value_head_dim),
            );
            let vh = u64::from(value_heads);
            let mats = (h * (2 * k + 2 * v) + h * 2 * vh + v * h) / tp;
            let small =
                (2 * k + v) * u64::from(conv_kernel) / tp + 2 * vh / tp + u64::from(value_head_dim);
            (mats, small)
        }
        StateKind::Mamba2 {
            intermediate,
            groups,
            heads,
            state_size,
            conv_kernel,
            ..
        } => {
            let gs = 2 * u64::from(groups) * u64::from(state_size);
            let heads = u64::from(heads);
            let mats = (h * (2 * intermediate + gs + heads) + intermediate * h) / tp;
            let small =
                ((intermediate + gs) * u64::from(conv_kernel) + 3 * heads + intermediate) / tp;
            (mats, small)
        }
        StateKind::Mamba1 {
            intermediate,
            state_size,
            conv_kernel,
        } => {
            let dt_rank = h.div_ceil(16);
            let st = u64::from(state_size);
            let mats = (h * 2 * intermediate
                + intermediate * (dt_rank + 2 * st)
                + dt_rank * intermediate
                + intermediate * h)
                / tp;
            let small = intermediate * (u64::from(conv_kernel) + st + 2) / tp;
            (mats, small)
        }
        StateKind::ShortConv { dim, conv_kernel } => (
            (h * 3 * dim + dim * h) / tp,
            dim * u64::from(conv_kernel) / tp,
        ),
        // `KimiGatedDeltaNetAttention`: q/k/v and o projections, the low-rank forget and
        // output gates (f_a/g_a replicated, f_b/g_b split), b_proj; three conv1d, A_log,
        // dt_bias, o_norm
        StateKind::Kda {
            heads,
            head_dim,
            conv_kernel,
        } => {
            let (hd, d) = (u64::from(heads), u64::from(head_dim));
            let width = hd * d;
            let mats = (4 * width * h + 2 * width * d + hd * h) / tp + 2 * d * h;
            let small = (3 * width * u64::from(conv_kernel) + hd + width) / tp + d;
            (mats, small)
        }
        StateKind::Lightning { heads, head_dim } => {
            let inner = u64::from(heads) * u64::from(head_dim);
            ((h * 3 * inner + h * inner + inner * h) / tp, inner / tp)
        }
        StateKind::Unmodelled => (0, 0),
    }
}

/// llama.cpp's recurrent cells of one state layer for one sequence, in elements: the conv row
/// `n_embd_r = (ssm_d_conv − 1) × (ssm_d_inner + 2 × ssm_n_group × ssm_d_state)` and the state
/// row `n_embd_s = ssm_d_state × ssm_d_inner` (`src/llama-hparams.cpp`), with the GGUF keys
/// `convert_hf_to_gguf.py` writes: Gated DeltaNet d_inner = value heads × value dim, d_state =
/// key dim, n_group = key heads; Mamba-2 its own; Mamba-1 n_group 0. `None` when unmodelled.
pub fn llama_cpp_state_elements(s: &StateKind) -> Option<(u64, u64)> {
    let (k, inner, groups, state) = match *s {
        StateKind::GatedDeltaNet {
            conv_kernel,
            key_heads,
            value_heads,
            key_head_dim,
            value_head_dim,
        } => (
            conv_kernel,
            u64::from(value_heads) * u64::from(value_head_dim),
            u64::from(key_heads),
            u64::from(key_head_dim),
        ),
        StateKind::Mamba2 {
            intermediate,
            groups,
            state_size,
            conv_kernel,
            ..
        } => (
            conv_kernel,
            intermediate,
            u64::from(groups),
            u64::from(state_size),
        ),
        StateKind::Mamba1 {
            intermediate,
            state_size,
            conv_kernel,
        } => (conv_kernel, intermediate, 0, u64::from(state_size)),
        StateKind::ShortConv { .. }
        | StateKind::Lightning { .. }
        | StateKind::Kda { .. }
        | StateKind::Unmodelled => {
            return None;
        }
    };
    let r = u64::from(k.saturating_sub(1)) * (inner + 2 * groups * state);
    Some((r, state * inner))
}
