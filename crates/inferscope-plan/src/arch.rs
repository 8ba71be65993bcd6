//! Model architecture facts the memory model needs, read from a Hugging Face `config.json`.
//!
//! One [`ModelArch`] describes every family the catalog holds (Llama 2/3/4, Mistral, Mixtral,
//! Qwen 2/2.5/3 and their MoE, DeepSeek V2/V3 with MLA, Gemma 2/3/4, Phi, gpt-oss, OPT, ...).
//! The parser reads the text part of multimodal configs (`text_config`), applies the defaults
//! `transformers` applies when a key is absent (compact Gemma 3 configs list only non-defaults),
//! and rejects absurd sizes so that nothing downstream can overflow or allocate without bound.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Largest `config.json` accepted (real ones are under 100 KiB; quantized ones with long
/// ignore lists stay under 1 MiB).
pub const MAX_CONFIG_BYTES: usize = 8 << 20;

/// Errors from reading model facts or planning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The text is not JSON (or not a JSON object).
    #[error("config.json: malformed JSON: {0}")]
    Json(String),
    /// A required field is missing.
    #[error("config.json: missing {0}")]
    Missing(&'static str),
    /// A field has the wrong type or an impossible value.
    #[error("config.json: {field}: {detail}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The input is larger than [`MAX_CONFIG_BYTES`].
    #[error("config.json: {0} bytes is larger than the {MAX_CONFIG_BYTES}-byte limit")]
    TooLarge(usize),
    /// A catalog lookup failed.
    #[error(
        "unknown model {0:?}: not in the embedded catalog (pass a local folder or config.json)"
    )]
    UnknownModel(String),
}

/// Data type of weights or KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit float (e4m3/e5m2).
    Fp8,
}

/// The spelling users write (`--dtype bfloat16` / `--kv-cache-dtype fp8`), never the Rust name.
impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::Bf16 => "bfloat16",
            Dtype::Fp8 => "fp8",
        })
    }
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::Fp8 => 1,
        }
    }

    /// Parse `torch_dtype` / `--dtype` / `--kv-cache-dtype` spellings.
    pub fn parse(s: &str) -> Option<Dtype> {
        match s.trim().to_ascii_lowercase().trim_start_matches("torch.") {
            "float32" | "fp32" | "f32" | "float" => Some(Dtype::F32),
            "float16" | "fp16" | "f16" | "half" => Some(Dtype::F16),
            "bfloat16" | "bf16" => Some(Dtype::Bf16),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" | "float8_e4m3fn" | "int8" | "fp8_inc" => {
                Some(Dtype::Fp8)
            }
            _ => None,
        }
    }
}

/// What one decoder layer's attention keeps in the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "tokens")]
pub enum AttentionKind {
    /// Full (global) attention: every token of the context.
    Full,
    /// Sliding-window attention over the last `window` tokens.
    Sliding(u32),
    /// Chunked local attention (Llama 4): tokens of the current chunk only.
    ChunkedLocal(u32),
    /// Linear attention / Mamba / state-space layer: no per-token KV.
    NoKv,
}

/// One layer's attention shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerAttention {
    /// What the layer caches.
    pub kind: AttentionKind,
    /// KV heads of this layer (Gemma 4 global layers differ from local ones).
    pub kv_heads: u32,
    /// Head dimension of this layer.
    pub head_dim: u32,
    /// Key and value share one tensor (Gemma 4 `attention_k_eq_v` global layers).
    pub k_eq_v: bool,
}

/// Multi-head latent attention (DeepSeek V2/V3): the cache holds one compressed latent per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mla {
    /// `kv_lora_rank` (512 in DeepSeek V2/V3).
    pub kv_lora_rank: u32,
    /// `qk_rope_head_dim` (64).
    pub qk_rope_head_dim: u32,
    /// `qk_nope_head_dim` (128).
    pub qk_nope_head_dim: u32,
    /// `v_head_dim` (128).
    pub v_head_dim: u32,
    /// `q_lora_rank` (None in V2-Lite: queries are projected directly).
    pub q_lora_rank: Option<u32>,
}

/// Mixture of experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub experts_per_token: u32,
    /// Intermediate size of one routed expert.
    pub expert_intermediate: u64,
    /// Shared (always active) experts, as a total intermediate size (0 = none).
    pub shared_intermediate: u64,
    /// Which layers are MoE (`true`) or dense (`false`); length = layers.
    pub moe_layers: Vec<bool>,
    /// A dense MLP runs beside the MoE block in every MoE layer (Gemma 4 26B-A4B).
    pub dense_beside_moe: bool,
    /// Experts carry biases (gpt-oss).
    pub expert_bias: bool,
}

/// Quantization of the checkpoint's weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantization {
    /// Method as `quant_method` / `--quantization` names it (`awq`, `gptq`, `fp8`,
    /// `compressed-tensors`, `mxfp4`, `modelopt`, `bitsandbytes`, ...).
    pub method: String,
    /// Bits per quantized weight.
    pub bits: u32,
    /// Weights sharing one scale (0 = per channel or per tensor).
    pub group_size: u32,
    /// Floating-point format (fp8, fp4) rather than integers.
    pub float: bool,
    /// Attention projections stay in the native dtype.
    pub attention_unquantized: bool,
    /// Dense MLPs stay in the native dtype.
    pub dense_mlp_unquantized: bool,
    /// `lm_head` is quantized too (rare; default no).
    pub lm_head_quantized: bool,
    /// The checkpoint asks for an 8-bit KV cache (`kv_cache_scheme`).
    pub kv_cache_fp8: bool,
}

impl Quantization {
    /// Bytes one quantized weight costs in GPU memory, scales and zero points included.
    pub fn bytes_per_weight(&self) -> f64 {
        // GGUF file types carry their tensor mix's mean (crate::gguf_quant::apply)
        if let Some(b) = self
            .method
            .strip_prefix("gguf:")
            .and_then(|m| m.rsplit(':').next())
            .and_then(|b| b.parse::<f64>().ok())
        {
            return b;
        }
        let base = f64::from(self.bits) / 8.0;
        if self.group_size == 0 {
            return base;
        }
        let g = f64::from(self.group_size);
        let scale = match self.method.as_str() {
            // one 8-bit shared exponent per 32 weights
            "mxfp4" => 1.0,
            // fp8 scale per 16 weights
            "modelopt" | "nvfp4" => 1.0,
            // fp16 scale + packed zero point per group
            "awq" | "gptq" | "gptq_marlin" | "awq_marlin" | "marlin" => {
                2.0 + f64::from(self.bits) / 8.0
            }
            // fp8 block scales: one fp32 per block (`weight_block_size`, 128 × 128 = 16384)
            "fp8" => 4.0,
            _ => 2.0,
        };
        base + scale / g
    }

    /// A quantization from a `--quantization` flag with the method's usual layout.
    pub fn from_method(method: &str) -> Option<Quantization> {
        let m = method.trim().to_ascii_lowercase();
        let (bits, group, float) = match m.as_str() {
            "fp8" | "fbgemm_fp8" | "ptpc_fp8" => (8, 0, true),
            "awq" | "awq_marlin" | "gptq" | "gptq_marlin" | "marlin" | "gptq_marlin_24" => {
                (4, 128, false)
            }
            "int8" | "w8a8" | "smoothquant" | "experts_int8" => (8, 0, false),
            "mxfp4" => (4, 32, true),
            "nvfp4" | "modelopt_fp4" => (4, 16, true),
            "bitsandbytes" | "bnb" => (4, 64, false),
            "gguf" => return None,
            _ => return None,
        };
        Some(Quantization {
            method: m,
            bits,
            group_size: group,
            float,
            attention_unquantized: false,
            dense_mlp_unquantized: false,
            lm_head_quantized: false,
            kv_cache_fp8: false,
        })
    }
}

/// Shape of the feed-forward block of dense layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    /// gate, up and down projections (SwiGLU/GeGLU: Llama, Qwen, Gemma, Mistral, Phi-3).
    Gated,
    /// up and down only (OPT, Phi-1.5, Phi-2).
    Plain,
}

/// Everything the memory model needs about one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelArch {
    /// `model_type` of the text model (`llama`, `qwen2`, `gemma3_text`, ...).
    pub model_type: String,
    /// `architectures[0]`, if given.
    pub architecture: Option<String>,
    /// Decoder layers.
    pub num_layers: u32,
    /// Hidden size.
    pub hidden_size: u64,
    /// Query heads.
    pub num_attention_heads: u32,
    /// KV heads (= query heads for MHA, fewer for GQA/MQA).
    pub num_kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// Dense MLP intermediate size.
    pub intermediate_size: u64,
    /// Dense MLP layout.
    pub mlp: MlpKind,
    /// Input embedding and LM head share one matrix.
    pub tie_word_embeddings: bool,
    /// `max_position_embeddings` (vLLM's default `max_model_len`).
    pub max_position_embeddings: u64,
    /// Rotary dimension (vLLM keeps a cos/sin cache of max_position × rotary_dim).
    pub rotary_dim: u32,
    /// Learned absolute position embeddings (OPT), rows.
    pub learned_positions: u64,
    /// Attention projections carry biases (Qwen2 q/k/v, OPT, Phi-2, gpt-oss).
    pub attention_bias: bool,
    /// Per-layer attention (length = `num_layers`).
    pub layers: Vec<LayerAttention>,
    /// Multi-head latent attention, if any.
    pub mla: Option<Mla>,
    /// Mixture of experts, if any.
    pub moe: Option<Moe>,
    /// Native (unquantized) dtype.
    pub dtype: Dtype,
    /// Quantization of the checkpoint, if any.
    pub quantization: Option<Quantization>,
    /// Parameters of a vision (or audio) tower and projector, estimated from its config.
    pub vision_params: u64,
    /// Multi-token-prediction layers in the checkpoint that vLLM does not load by default.
    pub mtp_layers: u32,
    /// Total parameters as published (overrides the estimate for display only).
    pub published_params: Option<u64>,
    /// Exact checkpoint size in bytes, when known (from file sizes or the catalog).
    pub checkpoint_bytes: Option<u64>,
    /// DeepSeek sparse attention (NSA/DSA, DeepSeek V3.2): the indexer's key size per token and
    /// layer (`index_head_dim`), which the engines cache beside the latent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nsa_index_head_dim: Option<u32>,
    /// Layers that keep a recurrent state per sequence (linear attention, Mamba), hybrid
    /// models only ([`crate::state`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_layers: Vec<crate::state::StateLayer>,
    /// The SSM state dtype the checkpoint asks for (`mamba_ssm_cache_dtype` /
    /// `mamba_ssm_dtype`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_ssm_dtype: Option<Dtype>,
    /// The Mamba kernel's chunk (`mamba_chunk_size`, else `chunk_size`), when the config says:
    /// vLLM aligns blocks to it when prefix caching keeps every state (`hybrid::StateBlocks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba_chunk_size: Option<u32>,
    /// Layers with no feed-forward block (Nemotron-H: each block is one mixer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ffn_free_layers: Vec<u32>,
}

// ---- limits -------------------------------------------------------------------------------

const MAX_LAYERS: u64 = 10_000;
const MAX_HIDDEN: u64 = 1 << 20;
const MAX_HEADS: u64 = 1 << 16;
const MAX_VOCAB: u64 = 1 << 24;
const MAX_INTERMEDIATE: u64 = 1 << 24;
const MAX_POSITIONS: u64 = 1 << 32;
const MAX_EXPERTS: u64 = 1 << 14;
/// Largest model accepted, in parameters (10^15: a thousand times the largest published).
const MAX_PARAMS: f64 = 1e15;

pub(crate) struct Cfg<'a> {
    text: &'a Map<String, Value>,
    top: &'a Map<String, Value>,
}

impl<'a> Cfg<'a> {
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        match self.text.get(key) {
            Some(Value::Null) | None => match self.top.get(key) {
                Some(Value::Null) | None => None,
                v => v,
            },
            v => v,
        }
    }

    /// The top-level `architectures[0]` (a multimodal config's text part has none).
    pub(crate) fn architecture(&self) -> Option<&'a str> {
        self.top
            .get("architectures")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
    }

    fn first(&self, keys: &[&str]) -> Option<&'a Value> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// Unsigned integer under any of `keys`, bounded by `max`.
    pub(crate) fn uint(
        &self,
        field: &'static str,
        keys: &[&str],
        max: u64,
    ) -> Result<Option<u64>, PlanError> {
        let Some(v) = self.first(keys) else {
            return Ok(None);
        };
        let n = match v {
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    u
                } else if let Some(f) = n.as_f64() {
                    if f >= 0.0 && f.fract() == 0.0 && f <= max as f64 {
                        f as u64
                    } else {
                        return Err(PlanError::Invalid {
                            field,
                            detail: format!("expected a non-negative integer, got {n}"),
                        });
                    }
                } else {
                    return Err(PlanError::Invalid {
                        field,
                        detail: format!("expected a non-negative integer, got {n}"),
                    });
                }
            }
            other => {
                return Err(PlanError::Invalid {
                    field,
                    detail: format!("expected an integer, got {}", type_name(other)),
                });
            }
        };
        if n > max {
            return Err(PlanError::Invalid {
                field,
                detail: format!("{n} is larger than the {max} this planner accepts"),
            });
        }
        Ok(Some(n))
    }

    fn float(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    fn boolean(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    pub(crate) fn string(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }

    /// The keys set (not null, not `false`) in the text config or at the top.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'a String> + 'a {
        let set = |(k, v): (&'a String, &'a Value)| {
            (!matches!(v, Value::Null | Value::Bool(false))).then_some(k)
        };
        self.text
            .iter()
            .filter_map(set)
            .chain(self.top.iter().filter_map(set))
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The dense shape every model has (phase 2 of [`from_hf_config`]).
struct CoreShape {
    num_layers: u64,
    hidden_size: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    vocab_size: u64,
    intermediate_size: u64,
    max_position_embeddings: u64,
    tie_word_embeddings: bool,
    dtype: Dtype,
    rotary_dim: u32,
    learned_positions: u64,
    attention_bias: bool,
}

/// Phase 1: the text model's config (`text_config`/`llm_config` of a multimodal model, else
/// the top level).
fn text_config<'a>(
    top: &'a Map<String, Value>,
    empty: &'a Map<String, Value>,
) -> Result<&'a Map<String, Value>, PlanError> {
    match top.get("text_config").or_else(|| top.get("llm_config")) {
        Some(Value::Object(t)) => Ok(t),
        Some(Value::Null) | None => Ok(empty),
        Some(other) => Err(PlanError::Invalid {
            field: "text_config",
            detail: format!("expected an object, got {}", type_name(other)),
        }),
    }
}

/// Phase 2: layers, widths, heads, vocabulary, context, dtype, rotary (family defaults fill
/// what the config leaves out).
fn core_shape(cfg: &Cfg, family: Family) -> Result<CoreShape, PlanError> {
    let d = family.defaults();

    let num_layers = match cfg.uint(
        "num_hidden_layers",
        &["num_hidden_layers", "n_layer", "num_layers", "n_layers"],
        MAX_LAYERS,
    )? {
        Some(n) => n,
        None => d.layers.ok_or(PlanError::Missing("num_hidden_layers"))?,
    };
    if num_layers == 0 {
        return Err(PlanError::Invalid {
            field: "num_hidden_layers",
            detail: "must be at least 1".into(),
        });
    }
    let hidden_size = match cfg.uint(
        "hidden_size",
        &["hidden_size", "n_embd", "d_model"],
        MAX_HIDDEN,
    )? {
        Some(n) if n > 0 => n,
        Some(_) => {
            return Err(PlanError::Invalid {
                field: "hidden_size",
                detail: "must be at least 1".into(),
            });
        }
        None => d.hidden.ok_or(PlanError::Missing("hidden_size"))?,
    };
    let heads = match cfg.uint(
        "num_attention_heads",
        &["num_attention_heads", "n_head", "n_heads"],
        MAX_HEADS,
    )? {
        Some(n) if n > 0 => n,
        Some(_) => {
            return Err(PlanError::Invalid {
                field: "num_attention_heads",
                detail: "must be at least 1".into(),
            });
        }
        None => d.heads.ok_or(PlanError::Missing("num_attention_heads"))?,
    };
    let kv_heads = cfg
        .uint(
            "num_key_value_heads",
            &[
                "num_key_value_heads",
                "n_head_kv",
                "num_kv_heads",
                "multi_query_group_num",
            ],
            MAX_HEADS,
        )?
        .or(d.kv_heads)
        .unwrap_or(heads);
    // Each KV head serves a whole group of query heads: 0 or a count that does not divide the
    // heads describes no model (issue 33: 0 was silently read as 1).
    if kv_heads == 0 {
        return Err(PlanError::Invalid {
            field: "num_key_value_heads",
            detail: "must be at least 1".into(),
        });
    }
    if heads % kv_heads != 0 {
        return Err(PlanError::Invalid {
            field: "num_key_value_heads",
            detail: format!("{kv_heads} does not divide num_attention_heads {heads}"),
        });
    }
    let head_dim = match cfg.uint("head_dim", &["head_dim"], 1 << 16)? {
        Some(h) if h > 0 => h,
        _ => match d.head_dim {
            Some(h) => h.max(1),
            None if hidden_size % heads != 0 => {
                return Err(PlanError::Invalid {
                    field: "hidden_size",
                    detail: format!(
                        "{hidden_size} is not a multiple of num_attention_heads {heads} and no head_dim is given"
                    ),
                });
            }
            None => hidden_size / heads,
        },
    };
    let vocab_size = match cfg.uint(
        "vocab_size",
        &["vocab_size", "padded_vocab_size"],
        MAX_VOCAB,
    )? {
        Some(v) if v > 0 => v,
        _ => d.vocab.ok_or(PlanError::Missing("vocab_size"))?,
    };
    let intermediate_size = cfg
        .uint(
            "intermediate_size",
            &["intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size"],
            MAX_INTERMEDIATE,
        )?
        .or(d.intermediate)
        .unwrap_or(4 * hidden_size);
    let max_position_embeddings = cfg
        .uint(
            "max_position_embeddings",
            &[
                "max_position_embeddings",
                "n_positions",
                "max_seq_len",
                "seq_length",
                "max_sequence_length",
            ],
            MAX_POSITIONS,
        )?
        .or(d.max_pos)
        .unwrap_or(2048)
        .max(1);
    let tie_word_embeddings = cfg.boolean("tie_word_embeddings").unwrap_or(d.tie);

    // dtype
    let dtype = cfg
        .string("torch_dtype")
        .or_else(|| cfg.string("dtype"))
        .and_then(Dtype::parse)
        .filter(|d| *d != Dtype::Fp8)
        .unwrap_or(if family == Family::Opt || family == Family::Phi {
            Dtype::F16
        } else {
            Dtype::Bf16
        });

    // rotary
    let partial = cfg
        .float("partial_rotary_factor")
        .unwrap_or(1.0)
        .clamp(0.0, 1.0);
    let rotary_dim = match cfg.uint("rotary_dim", &["rotary_dim"], 1 << 16)? {
        Some(r) => r as u32,
        None if family == Family::Opt => 0,
        None => (head_dim as f64 * partial).round() as u32,
    };
    let learned_positions = if family == Family::Opt {
        max_position_embeddings + 2
    } else {
        0
    };
    let attention_bias = cfg
        .boolean("attention_bias")
        .or_else(|| cfg.boolean("qkv_bias"))
        .unwrap_or(matches!(
            family,
            Family::Qwen2 | Family::Opt | Family::Phi | Family::GptOss
        ));

    Ok(CoreShape {
        num_layers,
        hidden_size,
        heads,
        kv_heads,
        head_dim,
        vocab_size,
        intermediate_size,
        max_position_embeddings,
        tie_word_embeddings,
        dtype,
        rotary_dim,
        learned_positions,
        attention_bias,
    })
}

/// Phase 3: each layer's attention kind (`layer_types`, else the family's sliding/chunked
/// pattern); a window covering the whole context is full attention.
fn attention_kinds(
    cfg: &Cfg,
    family: Family,
    n: usize,
    max_position_embeddings: u64,
) -> Result<Vec<AttentionKind>, PlanError> {
    let window = cfg.uint("sliding_window", &["sliding_window"], MAX_POSITIONS)?;
    let window = window
        .filter(|w| *w > 0)
        .map(|w| w.min(u64::from(u32::MAX)) as u32);
    let mut kinds = vec![AttentionKind::Full; n];
    let layer_types = cfg.get("layer_types").and_then(Value::as_array);
    if let Some(types) = layer_types {
        if types.len() != n {
            return Err(PlanError::Invalid {
                field: "layer_types",
                detail: format!("has {} entries for {} layers", types.len(), n),
            });
        }
        for (k, t) in kinds.iter_mut().zip(types) {
            let t = t.as_str().unwrap_or("");
            *k = match t {
                "sliding_attention" | "local_attention" | "sliding" => {
                    AttentionKind::Sliding(window.ok_or(PlanError::Missing("sliding_window"))?)
                }
                "chunked_attention" => AttentionKind::ChunkedLocal(
                    cfg.uint(
                        "attention_chunk_size",
                        &["attention_chunk_size"],
                        MAX_POSITIONS,
                    )?
                    .ok_or(PlanError::Missing("attention_chunk_size"))? as u32,
                ),
                "linear_attention" | "mamba" | "mamba2" | "conv" | "recurrent" | "mlstm" => {
                    AttentionKind::NoKv
                }
                _ => AttentionKind::Full,
            };
        }
    } else {
        match family {
            Family::Gemma2 => {
                if let Some(w) = window {
                    for (i, k) in kinds.iter_mut().enumerate() {
                        if i % 2 == 0 {
                            *k = AttentionKind::Sliding(w);
                        }
                    }
                }
            }
            Family::Gemma3 | Family::Gemma4 => {
                let w = window.unwrap_or(if family == Family::Gemma3 { 4096 } else { 1024 });
                let pattern = cfg
                    .uint(
                        "sliding_window_pattern",
                        &["sliding_window_pattern"],
                        MAX_LAYERS,
                    )?
                    .unwrap_or(6)
                    .max(1) as usize;
                for (i, k) in kinds.iter_mut().enumerate() {
                    if (i + 1) % pattern != 0 {
                        *k = AttentionKind::Sliding(w);
                    }
                }
            }
            Family::Llama4 => {
                if let Some(chunk) = cfg.uint(
                    "attention_chunk_size",
                    &["attention_chunk_size"],
                    MAX_POSITIONS,
                )? {
                    let nope = cfg.get("no_rope_layers").and_then(Value::as_array);
                    for (i, k) in kinds.iter_mut().enumerate() {
                        // no_rope_layers[i] == 1: RoPE layer, which uses chunked attention;
                        // default: every 4th layer is a global NoPE layer.
                        let rope = match nope {
                            Some(v) if v.len() == n => {
                                v.get(i).and_then(Value::as_u64).unwrap_or(1) != 0
                            }
                            _ => (i + 1) % 4 != 0,
                        };
                        if rope {
                            *k = AttentionKind::ChunkedLocal(chunk as u32);
                        }
                    }
                }
            }
            Family::Mistral => {
                if let Some(w) = window.filter(|w| u64::from(*w) < max_position_embeddings) {
                    kinds
                        .iter_mut()
                        .for_each(|k| *k = AttentionKind::Sliding(w));
                }
            }
            Family::Qwen2 if cfg.boolean("use_sliding_window") == Some(true) => {
                if let Some(w) = window.filter(|w| u64::from(*w) < max_position_embeddings) {
                    let from = cfg
                        .uint("max_window_layers", &["max_window_layers"], MAX_LAYERS)?
                        .unwrap_or(0) as usize;
                    for k in kinds.iter_mut().skip(from) {
                        *k = AttentionKind::Sliding(w);
                    }
                }
            }
            _ => {}
        }
    }
    // A window that covers the whole context is full attention.
    for k in kinds.iter_mut() {
        if let AttentionKind::Sliding(w) | AttentionKind::ChunkedLocal(w) = *k
            && u64::from(w) >= max_position_embeddings
        {
            *k = AttentionKind::Full;
        }
    }
    Ok(kinds)
}

/// Phase 4: per-layer KV heads and head size (global layers may differ: Gemma 4).
fn layer_attention(
    cfg: &Cfg,
    kinds: &[AttentionKind],
    kv_heads: u64,
    head_dim: u64,
) -> Result<Vec<LayerAttention>, PlanError> {
    let global_kv = cfg.uint(
        "num_global_key_value_heads",
        &["num_global_key_value_heads"],
        MAX_HEADS,
    )?;
    let global_hd = cfg.uint("global_head_dim", &["global_head_dim"], 1 << 16)?;
    let k_eq_v = cfg.boolean("attention_k_eq_v").unwrap_or(false);
    Ok(kinds
        .iter()
        .map(|&kind| {
            let global = kind == AttentionKind::Full;
            LayerAttention {
                kind,
                kv_heads: if global {
                    global_kv.unwrap_or(kv_heads)
                } else {
                    kv_heads
                } as u32,
                head_dim: if global {
                    global_hd.unwrap_or(head_dim)
                } else {
                    head_dim
                } as u32,
                k_eq_v: global && k_eq_v && global_kv.is_some(),
            }
        })
        .collect())
}

/// Phase 5: multi-head latent attention (DeepSeek), when `kv_lora_rank` is set.
fn mla(cfg: &Cfg) -> Result<Option<Mla>, PlanError> {
    Ok(
        match cfg.uint("kv_lora_rank", &["kv_lora_rank"], MAX_HIDDEN)? {
            Some(r) if r > 0 => Some(Mla {
                kv_lora_rank: r as u32,
                qk_rope_head_dim: cfg
                    .uint("qk_rope_head_dim", &["qk_rope_head_dim"], 1 << 16)?
                    .ok_or(PlanError::Missing("qk_rope_head_dim"))?
                    as u32,
                qk_nope_head_dim: cfg
                    .uint("qk_nope_head_dim", &["qk_nope_head_dim"], 1 << 16)?
                    .unwrap_or(128) as u32,
                v_head_dim: cfg
                    .uint("v_head_dim", &["v_head_dim"], 1 << 16)?
                    .unwrap_or(128) as u32,
                q_lora_rank: cfg
                    .uint("q_lora_rank", &["q_lora_rank"], MAX_HIDDEN)?
                    .filter(|q| *q > 0)
                    .map(|q| q as u32),
            }),
            _ => None,
        },
    )
}

/// Phase 6: mixture of experts: routed/shared experts and which layers are sparse.
fn moe(
    cfg: &Cfg,
    family: Family,
    n: usize,
    intermediate_size: u64,
) -> Result<Option<Moe>, PlanError> {
    let experts = cfg
        .uint(
            "num_experts",
            &[
                "n_routed_experts",
                "num_local_experts",
                "num_experts",
                "moe_num_experts",
            ],
            MAX_EXPERTS,
        )?
        .unwrap_or(0);
    Ok(if experts > 1 {
        let per_tok = cfg
            .uint(
                "num_experts_per_tok",
                &[
                    "num_experts_per_tok",
                    "experts_per_token",
                    "top_k_experts",
                    "moe_topk",
                ],
                MAX_EXPERTS,
            )?
            .unwrap_or(2)
            .clamp(1, experts);
        let expert_intermediate = cfg
            .uint(
                "moe_intermediate_size",
                &["moe_intermediate_size", "expert_intermediate_size"],
                MAX_INTERMEDIATE,
            )?
            .unwrap_or(intermediate_size);
        let shared_intermediate = if let Some(s) = cfg.uint(
            "shared_expert_intermediate_size",
            &["shared_expert_intermediate_size"],
            MAX_INTERMEDIATE,
        )? {
            s
        } else if let Some(s) = cfg.uint(
            "moe_shared_expert_intermediate_size",
            &["moe_shared_expert_intermediate_size"],
            MAX_INTERMEDIATE,
        )? {
            // Nemotron-H: one shared expert of this size per n_shared_experts (vLLM
            // nemotron_h.py: size × n_shared_experts)
            let k = cfg
                .uint("n_shared_experts", &["n_shared_experts"], 64)?
                .unwrap_or(1);
            s * k
        } else if let Some(k) = cfg.uint(
            "n_shared_experts",
            &["n_shared_experts", "num_shared_experts"],
            64,
        )? {
            k * expert_intermediate
        } else if family == Family::Llama4 {
            intermediate_size
        } else {
            0
        };
        let first_dense = cfg
            .uint(
                "first_k_dense_replace",
                &["first_k_dense_replace"],
                MAX_LAYERS,
            )?
            .unwrap_or(0) as usize;
        let step = cfg
            .uint(
                "decoder_sparse_step",
                &[
                    "decoder_sparse_step",
                    "interleave_moe_layer_step",
                    "moe_layer_freq",
                ],
                MAX_LAYERS,
            )?
            .unwrap_or(1)
            .max(1) as usize;
        let mlp_only: Vec<u64> = cfg
            .get("mlp_only_layers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        // Jamba: experts every `expert_layer_period` layers from `expert_layer_offset`
        // (JambaConfig defaults 2 and 1)
        let jamba = cfg.string("model_type") == Some("jamba");
        let jamba_period = cfg
            .uint("expert_layer_period", &["expert_layer_period"], MAX_LAYERS)?
            .unwrap_or(2)
            .max(1) as usize;
        let jamba_offset = cfg
            .uint("expert_layer_offset", &["expert_layer_offset"], MAX_LAYERS)?
            .unwrap_or(1) as usize;
        let moe_layers = (0..n)
            .map(|i| {
                if jamba {
                    return i % jamba_period == jamba_offset;
                }
                let sparse = if family == Family::Llama4 {
                    (i + 1) % step == 0
                } else {
                    (i + 1) % step == 0 || step == 1
                };
                i >= first_dense && sparse && !mlp_only.contains(&(i as u64))
            })
            .collect();
        Some(Moe {
            experts: experts as u32,
            experts_per_token: per_tok as u32,
            expert_intermediate,
            shared_intermediate,
            moe_layers,
            dense_beside_moe: cfg.boolean("enable_moe_block") == Some(true),
            expert_bias: family == Family::GptOss,
        })
    } else {
        None
    })
}

/// Phase 7: bound the whole model so that byte arithmetic downstream cannot overflow.
fn check_size(
    c: &CoreShape,
    intermediate_size: u64,
    moe: Option<&Moe>,
    vision_params: u64,
) -> Result<(), PlanError> {
    let est = {
        let h = c.hidden_size as f64;
        let per_layer = 4.0 * h * (c.heads.max(c.kv_heads) * c.head_dim) as f64
            + 3.0 * h * intermediate_size as f64
            + moe.map_or(0.0, |m| {
                f64::from(m.experts) * 3.0 * h * m.expert_intermediate as f64
                    + 3.0 * h * m.shared_intermediate as f64
            });
        c.num_layers as f64 * per_layer + 2.0 * c.vocab_size as f64 * h + vision_params as f64
    };
    if est > MAX_PARAMS {
        return Err(PlanError::Invalid {
            field: "num_hidden_layers",
            detail: format!(
                "the sizes describe about {est:.3e} parameters, more than the {MAX_PARAMS:e} this planner accepts"
            ),
        });
    }
    Ok(())
}

/// Read a Hugging Face `config.json` into the planner's model description. Phases: the text
/// config ([`text_config`]), the dense shape ([`core_shape`]), attention per layer
/// ([`attention_kinds`], [`layer_attention`]), MLA, MoE, quantization and vision, a size bound
/// ([`check_size`]), then the assembly.
pub fn from_hf_config(json: &str) -> Result<ModelArch, PlanError> {
    if json.len() > MAX_CONFIG_BYTES {
        return Err(PlanError::TooLarge(json.len()));
    }
    let root: Value = serde_json::from_str(json).map_err(|e| PlanError::Json(e.to_string()))?;
    let Value::Object(top) = &root else {
        return Err(PlanError::Json(format!(
            "expected an object at the top level, got {}",
            type_name(&root)
        )));
    };
    let empty = Map::new();
    let text = text_config(top, &empty)?;
    let cfg = Cfg { text, top };
    let model_type = cfg.string("model_type").unwrap_or("").to_ascii_lowercase();
    let top_type = top
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let architecture = top
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_string);
    let family = Family::of(&model_type, &top_type);
    let architecture_is_dsa = architecture.as_deref().is_some_and(is_dsa_architecture);
    let c = core_shape(&cfg, family)?;
    let n = c.num_layers as usize;
    let mut kinds = attention_kinds(&cfg, family, n, c.max_position_embeddings)?;
    // hybrid models: state layers keep no KV cache (crate::state)
    let crate::state::Parsed {
        layers: state_layers,
        ffn_free: ffn_free_layers,
    } = crate::state::parse(&cfg, &model_type, c.hidden_size, &mut kinds)?;
    let state_ssm_dtype = cfg
        .string("mamba_ssm_cache_dtype")
        .or_else(|| cfg.string("mamba_ssm_dtype"))
        .and_then(Dtype::parse);
    // `chunk_size` means other things in other models: read for hybrid models only
    let mamba_chunk_size = if state_layers.is_empty() {
        None
    } else {
        cfg.uint(
            "mamba_chunk_size",
            &["mamba_chunk_size", "chunk_size"],
            1 << 20,
        )?
        .filter(|c| *c > 0)
        .map(|c| c as u32)
    };
    let layers = layer_attention(&cfg, &kinds, c.kv_heads, c.head_dim)?;
    let mla = mla(&cfg)?;
    let moe = moe(&cfg, family, n, c.intermediate_size)?;
    let intermediate_size = c.intermediate_size;
    // Llama 4 dense layers use intermediate_size_mlp; experts use intermediate_size.
    let intermediate_size = if family == Family::Llama4 {
        cfg.uint(
            "intermediate_size_mlp",
            &["intermediate_size_mlp"],
            MAX_INTERMEDIATE,
        )?
        .unwrap_or(intermediate_size)
    } else {
        intermediate_size
    };

    let quantization = match top
        .get("quantization_config")
        .or_else(|| text.get("quantization_config"))
    {
        Some(Value::Object(q)) => parse_quantization(q, n)?,
        _ => None,
    };
    let vision_params = top
        .get("vision_config")
        .and_then(Value::as_object)
        .map(|v| vision_params(v, c.hidden_size))
        .unwrap_or(0);
    // DeepSeek/GLM `num_nextn_predict_layers`, Qwen3-Next/Qwen3.5 `mtp_num_hidden_layers`
    let mtp_layers = cfg
        .uint(
            "num_nextn_predict_layers",
            &["num_nextn_predict_layers", "mtp_num_hidden_layers"],
            64,
        )?
        .unwrap_or(0) as u32;

    check_size(&c, intermediate_size, moe.as_ref(), vision_params)?;
    // MLA applies RoPE to the qk_rope_head_dim part only.
    let rotary_dim = mla.map_or(c.rotary_dim, |m| m.qk_rope_head_dim);
    let mlp = if matches!(family, Family::Opt | Family::Phi)
        || cfg.string("mlp_hidden_act") == Some("relu2")
    {
        MlpKind::Plain
    } else {
        MlpKind::Gated
    };

    Ok(ModelArch {
        model_type,
        architecture,
        num_layers: c.num_layers as u32,
        hidden_size: c.hidden_size,
        num_attention_heads: c.heads as u32,
        num_kv_heads: c.kv_heads as u32,
        head_dim: c.head_dim as u32,
        vocab_size: c.vocab_size,
        intermediate_size,
        mlp,
        tie_word_embeddings: c.tie_word_embeddings,
        max_position_embeddings: c.max_position_embeddings,
        rotary_dim,
        learned_positions: c.learned_positions,
        attention_bias: c.attention_bias,
        layers,
        mla,
        moe,
        dtype: c.dtype,
        quantization,
        vision_params,
        mtp_layers,
        published_params: None,
        checkpoint_bytes: None,
        nsa_index_head_dim: nsa_index_head_dim(&cfg, architecture_is_dsa)?,
        state_layers,
        state_ssm_dtype,
        mamba_chunk_size,
        ffn_free_layers,
    })
}

/// Architectures whose `index_*` keys mean DeepSeek sparse attention's indexer (the engines'
/// `is_deepseek_nsa` lists: vLLM `deepseek_v2.py`, and the other rooms').
pub(crate) fn is_dsa_architecture(a: &str) -> bool {
    matches!(
        a,
        "DeepseekV3ForCausalLM"
            | "DeepseekV32ForCausalLM"
            | "DeepseekV3ForCausalLMNextN"
            | "MistralLarge3ForCausalLM"
            | "PixtralForConditionalGeneration"
            | "GlmMoeDsaForCausalLM"
    )
}

/// DeepSeek sparse attention: a DeepSeek V3-family architecture with `index_topk` set (the
/// test the engines apply to the config; each room cites its own); the indexer caches
/// `index_head_dim` per token.
fn nsa_index_head_dim(cfg: &Cfg, dsa_architecture: bool) -> Result<Option<u32>, PlanError> {
    if !dsa_architecture || cfg.get("index_topk").is_none_or(Value::is_null) {
        return Ok(None);
    }
    Ok(Some(
        cfg.uint("index_head_dim", &["index_head_dim"], 1 << 16)?
            .ok_or(PlanError::Missing("index_head_dim"))? as u32,
    ))
}

fn parse_quantization(
    q: &Map<String, Value>,
    layers: usize,
) -> Result<Option<Quantization>, PlanError> {
    let method = q
        .get("quant_method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let int = |k: &str| q.get(k).and_then(Value::as_u64);
    let patterns: Vec<&str> = [
        "modules_to_not_convert",
        "ignore",
        "ignored_layers",
        "exclude_modules",
    ]
    .iter()
    .filter_map(|k| q.get(*k).and_then(Value::as_array))
    .flatten()
    .filter_map(Value::as_str)
    .collect();
    let covers = |needle: &str| {
        let hits = patterns.iter().filter(|p| p.contains(needle)).count();
        hits > 0
            && (patterns
                .iter()
                .any(|p| p.contains(needle) && p.contains(".*."))
                || hits >= layers)
    };
    let attention_unquantized = covers("self_attn") || covers(".attn");
    let dense_mlp_unquantized = patterns
        .iter()
        .filter(|p| p.ends_with("mlp*") || p.ends_with(".mlp"))
        .count()
        >= layers
        && layers > 0;
    let lm_head_quantized = false;
    let mut out = match method.as_str() {
        "fp8" | "fbgemm_fp8" => Quantization::from_method("fp8").map(|mut b| {
            // DeepSeek/Qwen3 FP8 checkpoints: `weight_block_size` [128, 128]
            if let Some([r, c]) = q
                .get("weight_block_size")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_u64).collect::<Vec<_>>())
                .as_deref()
            {
                b.group_size = (r.saturating_mul(*c)).min(1 << 20) as u32;
            }
            b
        }),
        "awq" | "gptq" | "marlin" | "gptq_marlin" | "awq_marlin" => {
            let mut base = Quantization::from_method(&method);
            if let Some(b) = base.as_mut() {
                if let Some(bits) = int("bits").or_else(|| int("w_bit")) {
                    b.bits = bits.clamp(1, 16) as u32;
                }
                match q
                    .get("group_size")
                    .or_else(|| q.get("q_group_size"))
                    .and_then(Value::as_i64)
                {
                    Some(g) if g > 0 => b.group_size = g.min(1 << 20) as u32,
                    Some(_) => b.group_size = 0,
                    None => {}
                }
            }
            base
        }
        "mxfp4" => Quantization::from_method("mxfp4"),
        "bitsandbytes" => {
            let mut b = Quantization::from_method("bitsandbytes");
            if q.get("load_in_8bit").and_then(Value::as_bool) == Some(true)
                && let Some(b) = b.as_mut()
            {
                b.bits = 8;
                b.group_size = 0;
            }
            b
        }
        "modelopt" => {
            let algo = q
                .get("quant_algo")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_ascii_uppercase();
            if algo.contains("FP4") {
                Quantization::from_method("nvfp4").map(|mut b| {
                    b.method = "modelopt".into();
                    b
                })
            } else {
                Quantization::from_method("fp8")
            }
        }
        "compressed-tensors" | "compressed_tensors" => {
            let w = q
                .get("config_groups")
                .and_then(Value::as_object)
                .and_then(|g| g.values().next())
                .and_then(|g| g.get("weights"));
            match w {
                Some(w) => {
                    let bits = w
                        .get("num_bits")
                        .and_then(Value::as_u64)
                        .unwrap_or(8)
                        .clamp(1, 16) as u32;
                    let float = w.get("type").and_then(Value::as_str) == Some("float");
                    let group = w
                        .get("group_size")
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                        .min(1 << 20) as u32;
                    Some(Quantization {
                        method: "compressed-tensors".into(),
                        bits,
                        group_size: group,
                        float,
                        attention_unquantized: false,
                        dense_mlp_unquantized: false,
                        lm_head_quantized: false,
                        kv_cache_fp8: false,
                    })
                }
                None => None,
            }
        }
        "" => None,
        other => Some(Quantization {
            method: other.to_string(),
            bits: int("bits").unwrap_or(8).clamp(1, 16) as u32,
            group_size: int("group_size").unwrap_or(0).min(1 << 20) as u32,
            float: false,
            attention_unquantized: false,
            dense_mlp_unquantized: false,
            lm_head_quantized: false,
            kv_cache_fp8: false,
        }),
    };
    if let Some(o) = out.as_mut() {
        o.attention_unquantized = attention_unquantized;
        o.dense_mlp_unquantized = dense_mlp_unquantized;
        o.lm_head_quantized = lm_head_quantized;
        o.kv_cache_fp8 = q
            .get("kv_cache_scheme")
            .and_then(|k| k.get("num_bits"))
            .and_then(Value::as_u64)
            == Some(8)
            || q.get("kv_cache_quant_algo")
                .and_then(Value::as_str)
                .is_some();
    }
    Ok(out)
}

/// Parameters of a ViT-like tower from its config (attention 4·h², MLP 2·h·i per layer), plus
/// a projector into the text hidden size.
fn vision_params(v: &Map<String, Value>, text_hidden: u64) -> u64 {
    let g = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let h = g("hidden_size").min(MAX_HIDDEN);
    let i = g("intermediate_size").min(MAX_INTERMEDIATE);
    let l = g("num_hidden_layers").min(MAX_LAYERS);
    let per_layer = 4 * h * h + 2 * h * i;
    let patch = g("patch_size").min(1024);
    let embed = 3 * patch * patch * h;
    let out = g("projector_output_dim").min(MAX_HIDDEN).max(text_hidden);
    l * per_layer + embed + h * out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Llama,
    Llama4,
    Mistral,
    Qwen2,
    Gemma,
    Gemma2,
    Gemma3,
    Gemma4,
    Phi,
    Opt,
    GptOss,
    Other,
}

#[derive(Default)]
struct Defaults {
    layers: Option<u64>,
    hidden: Option<u64>,
    heads: Option<u64>,
    kv_heads: Option<u64>,
    head_dim: Option<u64>,
    vocab: Option<u64>,
    intermediate: Option<u64>,
    max_pos: Option<u64>,
    tie: bool,
}

impl Family {
    fn of(model_type: &str, top: &str) -> Family {
        let t = if model_type.is_empty() {
            top
        } else {
            model_type
        };
        match t {
            "llama4" | "llama4_text" => Family::Llama4,
            "mistral" | "mixtral" => Family::Mistral,
            "qwen2" | "qwen2_moe" => Family::Qwen2,
            "gemma" => Family::Gemma,
            "gemma2" => Family::Gemma2,
            "gemma3" | "gemma3_text" => Family::Gemma3,
            "gemma4" | "gemma4_text" => Family::Gemma4,
            "phi" | "phi-msft" | "phi1" => Family::Phi,
            "opt" => Family::Opt,
            "gpt_oss" => Family::GptOss,
            "llama" => Family::Llama,
            _ => Family::Other,
        }
    }

    /// `transformers` defaults for keys compact configs leave out.
    fn defaults(self) -> Defaults {
        match self {
            // Gemma3TextConfig defaults (transformers 4.50).
            Family::Gemma3 => Defaults {
                layers: Some(26),
                hidden: Some(2304),
                heads: Some(8),
                kv_heads: Some(4),
                head_dim: Some(256),
                vocab: Some(262_208),
                intermediate: Some(9216),
                max_pos: Some(131_072),
                tie: true,
            },
            Family::Gemma | Family::Gemma2 | Family::Gemma4 => Defaults {
                head_dim: Some(256),
                max_pos: Some(8192),
                tie: true,
                ..Defaults::default()
            },
            Family::Opt => Defaults {
                tie: true,
                ..Defaults::default()
            },
            _ => Defaults::default(),
        }
    }
}

impl ModelArch {
    /// The model with its multi-token-prediction layers loaded as a draft (vLLM
    /// `--speculative-config '{"method": "mtp"}'`, `v1/spec_decode/eagle.py`
    /// `EagleProposer.load_model`): each MTP layer is one more decoder layer, shaped like the last
    /// one (attention of the model's full-attention shape; MoE where the last layer is), whose
    /// weights load and whose attention gets KV pages in the same cache as the model's; the
    /// embedding and LM head are shared with the model, and the small `eh_proj` is not counted.
    /// `None` when the config declares no MTP layer.
    pub fn with_mtp_layers(&self) -> Option<ModelArch> {
        if self.mtp_layers == 0 {
            return None;
        }
        let mut a = self.clone();
        let n = self.mtp_layers as usize;
        let full = self
            .layers
            .iter()
            .rev()
            .find(|l| l.kind == AttentionKind::Full)
            .copied()
            .unwrap_or(LayerAttention {
                kind: AttentionKind::Full,
                kv_heads: self.num_kv_heads,
                head_dim: self.head_dim,
                k_eq_v: false,
            });
        a.layers.extend(std::iter::repeat_n(full, n));
        if let Some(m) = a.moe.as_mut() {
            let last = m.moe_layers.last().copied().unwrap_or(true);
            m.moe_layers.extend(std::iter::repeat_n(last, n));
        }
        a.num_layers = self.num_layers.saturating_add(self.mtp_layers);
        a.mtp_layers = 0;
        Some(a)
    }

    /// Layers whose attention keeps a KV cache.
    pub fn kv_layers(&self) -> usize {
        if self.mla.is_some() {
            return self.num_layers as usize;
        }
        self.layers
            .iter()
            .filter(|l| l.kind != AttentionKind::NoKv)
            .count()
    }

    /// The model mixes attention kinds (sliding + full, chunked + full): vLLM V1 builds one KV
    /// cache group per kind and reports tokens from concurrency.
    pub fn is_hybrid(&self) -> bool {
        let mut kinds = self.layers.iter().map(|l| std::mem::discriminant(&l.kind));
        let Some(first) = kinds.next() else {
            return false;
        };
        kinds.any(|k| k != first)
            || self.layers.iter().any(|l| {
                matches!(
                    l.kind,
                    AttentionKind::Sliding(_) | AttentionKind::ChunkedLocal(_)
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_minimal() {
        let a = from_hf_config(
            r#"{"model_type":"llama","num_hidden_layers":32,"hidden_size":4096,
            "num_attention_heads":32,"num_key_value_heads":8,"vocab_size":128256,
            "intermediate_size":14336,"max_position_embeddings":8192,"torch_dtype":"bfloat16"}"#,
        )
        .unwrap();
        assert_eq!(a.head_dim, 128);
        assert_eq!(a.num_kv_heads, 8);
        assert_eq!(a.layers.len(), 32);
        assert!(!a.is_hybrid());
    }

    #[test]
    fn missing_layers_is_named() {
        let e = from_hf_config(r#"{"hidden_size":4096,"num_attention_heads":32,"vocab_size":10}"#)
            .unwrap_err();
        assert_eq!(e.to_string(), "config.json: missing num_hidden_layers");
    }
}
