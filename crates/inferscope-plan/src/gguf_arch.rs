//! A GGUF file as a [`ModelArch`]: llama.cpp writes the architecture into the file's metadata
//! (`{arch}.block_count`, `{arch}.attention.head_count_kv`, ...) and every tensor's type, so the
//! weights are known to the byte without a `config.json`.
//!
//! Quantized GGUF types (Q4_K, Q8_0, IQ*) mix block formats per tensor; the exact file bytes are
//! used as the checkpoint size, and the weights' average bits per weight describe the
//! quantization, so the memory model needs no per-type knowledge.

use crate::arch::{AttentionKind, Dtype, LayerAttention, MlpKind, ModelArch, Moe, Quantization};
use crate::state::{StateKind, StateLayer};
use inferscope_formats::gguf::{GgufHeader, GgufValue};

fn num(v: &GgufValue) -> Option<u64> {
    match v {
        GgufValue::U8(x) => Some(u64::from(*x)),
        GgufValue::U16(x) => Some(u64::from(*x)),
        GgufValue::U32(x) => Some(u64::from(*x)),
        GgufValue::U64(x) => Some(*x),
        GgufValue::I8(x) => u64::try_from(*x).ok(),
        GgufValue::I16(x) => u64::try_from(*x).ok(),
        GgufValue::I32(x) => u64::try_from(*x).ok(),
        GgufValue::I64(x) => u64::try_from(*x).ok(),
        // Per-layer arrays (some models store head counts per layer): the largest value.
        GgufValue::Array(items) => items.iter().filter_map(num).max(),
        _ => None,
    }
}

/// A GGUF whose metadata does not describe a model the planner can size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GGUF metadata: {0}")]
pub struct GgufArchError(pub String);

fn missing(key: &str) -> GgufArchError {
    GgufArchError(format!("missing {key}"))
}

/// Recurrent layers of a hybrid or state-space GGUF (`{arch}.ssm.*` keys): a layer with
/// `blk.N.ssm_*` tensors keeps llama.cpp's recurrent cells, shaped by `ssm.inner_size`,
/// `ssm.state_size`, `ssm.group_count` and `ssm.conv_kernel` (`n_embd_r`/`n_embd_s`,
/// `src/llama-hparams.cpp`); a layer with attention has `blk.N.attn_k.weight` (or `attn_qkv`).
/// Returns the state layers and, per layer, whether it has attention (all, without `ssm.*`).
fn recurrent_layers(
    h: &GgufHeader,
    arch: &str,
    layers: usize,
) -> Result<(Vec<StateLayer>, Vec<bool>), GgufArchError> {
    let get = |k: &str| h.get(&format!("{arch}.ssm.{k}")).and_then(num);
    let Some(state) = get("state_size") else {
        return Ok((Vec::new(), vec![true; layers]));
    };
    let inner = get("inner_size").unwrap_or(0);
    let groups = get("group_count").unwrap_or(0);
    let conv = get("conv_kernel").unwrap_or(4);
    for (name, v, limit) in [
        ("state_size", state, 1u64 << 16),
        ("inner_size", inner, 1 << 32),
        ("group_count", groups, 1 << 16),
        ("conv_kernel", conv, 1 << 16),
    ] {
        if v > limit {
            return Err(GgufArchError(format!(
                "{arch}.ssm.{name}: {v} is larger than the {limit} this planner accepts"
            )));
        }
    }
    let layer_of = |name: &str| -> Option<usize> {
        name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
    };
    let mut recurrent = vec![false; layers];
    let mut attention = vec![false; layers];
    for t in &h.tensors {
        let Some(i) = layer_of(&t.name) else { continue };
        let rest = t.name.splitn(3, '.').nth(2).unwrap_or("");
        let flag = if rest.starts_with("ssm_") {
            recurrent.get_mut(i)
        } else if rest.starts_with("attn_k.") || rest.starts_with("attn_qkv.") {
            attention.get_mut(i)
        } else {
            None
        };
        if let Some(f) = flag {
            *f = true;
        }
    }
    // llama.cpp's cells depend on d_inner, n_group, d_state and d_conv only: a Mamba-2 shape
    // (Mamba-1 when there are no groups) holds them
    let kind = if groups == 0 {
        StateKind::Mamba1 {
            intermediate: inner,
            state_size: state as u32,
            conv_kernel: conv as u32,
        }
    } else {
        StateKind::Mamba2 {
            intermediate: inner,
            groups: groups as u32,
            heads: 1,
            head_dim: inner.min(u64::from(u32::MAX)) as u32,
            state_size: state as u32,
            conv_kernel: conv as u32,
        }
    };
    let states = (0..layers)
        .filter(|i| recurrent.get(*i).copied().unwrap_or(false))
        .map(|i| StateLayer {
            layer: i as u32,
            layer_type: "ssm".into(),
            state: kind.clone(),
        })
        .collect();
    Ok((states, attention))
}

/// Which layers use the sliding window, as llama.cpp decides: the GGUF's
/// `{arch}.attention.sliding_window_pattern` (one bool per layer, or a period), else the period
/// llama.cpp's loader hard-codes for the architecture (`load_swa_pattern` in src/models/*.cpp:
/// the last layer of every period is global). An architecture with a window but no known
/// pattern gets a window on every layer, as llama.cpp does for a period of 0.
fn swa_layers(h: &GgufHeader, arch: &str, layers: usize, window: u64) -> Vec<bool> {
    if window == 0 {
        return vec![false; layers];
    }
    let key = format!("{arch}.attention.sliding_window_pattern");
    let period = match h.get(&key) {
        Some(GgufValue::Array(items)) if items.len() == layers => {
            return items
                .iter()
                .map(|v| matches!(v, GgufValue::Bool(true)))
                .collect();
        }
        Some(v) => num(v).unwrap_or(0),
        None => match arch {
            "gemma2" | "gpt-oss" => 2,
            "gemma3" | "gemma-embedding" => 6,
            "gemma3n" => 5,
            "cohere2" | "exaone4" | "olmo2" | "afmoe" | "mellum" => 4,
            "plamo3" => 8,
            _ => 0,
        },
    };
    (0..layers as u64)
        .map(|il| period == 0 || il % period < period - 1)
        .collect()
}

/// The file's exact tensor bytes, summarised by layer for placement and sharding
/// (`token_embd`, `output`, `blk.N.*`: [`crate::checkpoint::summarize`]).
pub fn checkpoint(h: &GgufHeader, num_layers: u32) -> crate::checkpoint::CheckpointWeights {
    let tensors: Vec<crate::checkpoint::TensorInfo> = h
        .tensors
        .iter()
        .map(|t| crate::checkpoint::TensorInfo {
            name: t.name.clone(),
            bytes: t.bytes,
        })
        .collect();
    crate::checkpoint::summarize(&tensors, num_layers)
}

/// Build the architecture from a parsed GGUF header.
///
/// One piece (~150 lines): each `{arch}.*` key read once, in the order the struct needs them.
pub fn from_gguf(h: &GgufHeader) -> Result<ModelArch, GgufArchError> {
    let arch = h
        .architecture()
        .ok_or_else(|| missing("general.architecture"))?
        .to_string();
    let key = |k: &str| format!("{arch}.{k}");
    let get = |k: &str| h.get(&key(k)).and_then(num);
    let need = |k: &str| get(k).ok_or_else(|| missing(&key(k)));
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    if layers == 0
        || layers > 10_000
        || hidden == 0
        || hidden > 1 << 20
        || heads == 0
        || heads > 1 << 16
    {
        return Err(GgufArchError(format!(
            "implausible shape (block_count {layers}, embedding_length {hidden}, head_count {heads})"
        )));
    }
    let kv_heads = get("attention.head_count_kv")
        .unwrap_or(heads)
        .clamp(1, heads);
    let head_dim = get("attention.key_length").unwrap_or(hidden / heads).max(1);
    let context = need("context_length")?;
    let window = get("attention.sliding_window");
    let vocab = get("vocab_size")
        .or_else(|| match h.get("tokenizer.ggml.tokens") {
            Some(GgufValue::Skipped { len, .. }) => Some(*len),
            Some(GgufValue::Array(a)) => Some(a.len() as u64),
            _ => None,
        })
        // The embedding matrix is [hidden, vocab] in GGUF's dimension order.
        .or_else(|| {
            h.tensors
                .iter()
                .find(|t| t.name == "token_embd.weight")
                .and_then(|t| t.dims.get(1).copied())
        })
        // Unknown vocabulary would silently shrink the embedding and sampler estimates.
        .ok_or_else(|| {
            missing(&key(
                "vocab_size (or tokenizer.ggml.tokens, token_embd.weight)",
            ))
        })?;
    let has = |suffix: &str| h.tensors.iter().any(|t| t.name.ends_with(suffix));
    // The same limits as for a config.json (fixtures/bad/plan/EXPECTED.md): a header may claim
    // anything, and the memory model multiplies these together.
    for (name, value, limit) in [
        ("vocab_size", Some(vocab), 1u64 << 24),
        ("attention.key_length", Some(head_dim), 1 << 16),
        ("feed_forward_length", get("feed_forward_length"), 1 << 24),
        (
            "expert_feed_forward_length",
            get("expert_feed_forward_length"),
            1 << 24,
        ),
        (
            "expert_shared_feed_forward_length",
            get("expert_shared_feed_forward_length"),
            1 << 24,
        ),
        ("expert_count", get("expert_count"), 1 << 14),
        ("context_length", Some(context), 1 << 32),
    ] {
        if let Some(v) = value.filter(|v| *v > limit) {
            return Err(GgufArchError(format!(
                "{}: {v} is larger than the {limit} this planner accepts",
                key(name)
            )));
        }
    }
    let experts = get("expert_count").unwrap_or(0);
    let moe = (experts > 1).then(|| Moe {
        experts: experts as u32,
        experts_per_token: get("expert_used_count").unwrap_or(1) as u32,
        expert_intermediate: get("expert_feed_forward_length")
            .or_else(|| get("feed_forward_length"))
            .unwrap_or(0),
        shared_intermediate: get("expert_shared_feed_forward_length").unwrap_or(0),
        moe_layers: vec![true; layers as usize],
        dense_beside_moe: false,
        expert_bias: false,
    });
    let sliding = swa_layers(h, &arch, layers as usize, window.unwrap_or(0));
    let (state_layers, attention) = recurrent_layers(h, &arch, layers as usize)?;
    let layer_at = |i: usize| LayerAttention {
        kind: match window {
            // a recurrent layer without attention tensors keeps no KV (llama_memory_hybrid)
            _ if !attention.get(i).copied().unwrap_or(true) => AttentionKind::NoKv,
            Some(w) if w > 0 && sliding.get(i).copied().unwrap_or(false) => {
                AttentionKind::Sliding(w.min(u64::from(u32::MAX)) as u32)
            }
            _ => AttentionKind::Full,
        },
        kv_heads: kv_heads as u32,
        head_dim: head_dim as u32,
        k_eq_v: false,
    };
    let params: u64 = h
        .tensors
        .iter()
        .map(|t| t.dims.iter().product::<u64>())
        .sum();
    let bits_per_weight = if params > 0 {
        (h.total_tensor_bytes as f64 * 8.0 / params as f64).round() as u32
    } else {
        16
    };
    let quantization = (bits_per_weight < 16).then(|| Quantization {
        method: "gguf".into(),
        bits: bits_per_weight.max(1),
        group_size: 0,
        float: false,
        attention_unquantized: false,
        dense_mlp_unquantized: false,
        lm_head_quantized: true,
        kv_cache_fp8: false,
    });
    Ok(ModelArch {
        model_type: arch.clone(),
        architecture: Some(format!("gguf:{arch}")),
        num_layers: layers as u32,
        hidden_size: hidden,
        num_attention_heads: heads as u32,
        num_kv_heads: kv_heads as u32,
        head_dim: head_dim as u32,
        vocab_size: vocab,
        intermediate_size: get("feed_forward_length").unwrap_or(0),
        mlp: if has("ffn_gate.weight") || has("ffn_gate_exps.weight") {
            MlpKind::Gated
        } else {
            MlpKind::Plain
        },
        tie_word_embeddings: !h.tensors.iter().any(|t| t.name == "output.weight"),
        max_position_embeddings: context,
        rotary_dim: get("rope.dimension_count").unwrap_or(head_dim) as u32,
        learned_positions: 0,
        attention_bias: has("attn_q.bias"),
        layers: (0..layers as usize).map(layer_at).collect(),
        mla: None,
        moe,
        dtype: if bits_per_weight >= 32 {
            Dtype::F32
        } else {
            Dtype::F16
        },
        quantization,
        vision_params: 0,
        mtp_layers: 0,
        published_params: Some(params),
        checkpoint_bytes: Some(h.total_tensor_bytes),
        nsa_index_head_dim: None,
        state_layers,
        state_ssm_dtype: None,
        mamba_chunk_size: None,
        ffn_free_layers: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str) -> GgufHeader {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/tools/gguf")
            .join(name);
        let bytes = std::fs::read(&path).unwrap();
        inferscope_formats::gguf::parse_header(&mut bytes.as_slice(), bytes.len() as u64).unwrap()
    }

    #[test]
    fn tiny_llama_from_the_recipe() {
        // make_tiny_gguf.py --layers 1 --embd 8 --heads 2 --ff 16 --ctx 256
        let a = from_gguf(&header("tiny-random-llama-recipe.gguf")).unwrap();
        assert_eq!(a.model_type, "llama");
        assert_eq!(
            (a.num_layers, a.hidden_size, a.num_attention_heads),
            (1, 8, 2)
        );
        assert_eq!(a.head_dim, 4);
        assert_eq!(a.max_position_embeddings, 256);
        assert_eq!(a.intermediate_size, 16);
        assert_eq!(a.checkpoint_bytes, Some(66464));
    }

    #[test]
    fn absurd_header_values_are_refused_and_sliding_windows_follow_the_pattern() {
        let mut h = header("tiny-random-llama-recipe.gguf");
        // A header claiming a 4-billion-token vocabulary.
        for (k, v) in h.metadata.iter_mut() {
            if k == "llama.vocab_size" {
                *v = GgufValue::U32(u32::MAX);
            }
        }
        let e = from_gguf(&h).unwrap_err();
        assert_eq!(
            e.to_string(),
            "GGUF metadata: llama.vocab_size: 4294967295 is larger than the 16777216 this planner accepts"
        );
        // A gemma3-named header with a 512-token window: 5 sliding layers of every 6.
        let mut h = header("tiny-random-llama-recipe.gguf");
        for (k, v) in h.metadata.iter_mut() {
            if let Some(rest) = k.strip_prefix("llama.") {
                *k = format!("gemma3.{rest}");
            }
            if k == "general.architecture" {
                *v = GgufValue::String("gemma3".into());
            }
            if k == "gemma3.block_count" {
                *v = GgufValue::U32(12);
            }
        }
        h.metadata.push((
            "gemma3.attention.sliding_window".into(),
            GgufValue::U32(512),
        ));
        let a = from_gguf(&h).unwrap();
        let sliding: Vec<bool> = a
            .layers
            .iter()
            .map(|l| l.kind == AttentionKind::Sliding(512))
            .collect();
        let expected: Vec<bool> = (0..12).map(|i| i % 6 != 5).collect();
        assert_eq!(sliding, expected);
    }

    #[test]
    fn hybrid_gguf_layers_keep_recurrent_cells_not_kv() {
        // Qwen3-Next's GGUF keys (llama.cpp PR 16095 print_info: ssm_d_conv 4, ssm_d_inner 4096,
        // ssm_d_state 128, ssm_n_group 16) on the tiny file, its one block renamed to the 4th
        // of 4; blocks 0-2 carry only ssm_* tensors
        let mut h = header("tiny-random-llama-recipe.gguf");
        for (k, v) in h.metadata.iter_mut() {
            if k == "llama.block_count" {
                *v = GgufValue::U32(4);
            }
        }
        for (k, v) in [
            ("state_size", 128),
            ("inner_size", 4096),
            ("group_count", 16),
            ("conv_kernel", 4),
        ] {
            h.metadata
                .push((format!("llama.ssm.{k}"), GgufValue::U32(v)));
        }
        let template = h.tensors[0].clone();
        for t in h.tensors.iter_mut() {
            t.name = t.name.replace("blk.0.", "blk.3.");
        }
        for i in 0..3 {
            let mut t = template.clone();
            t.name = format!("blk.{i}.ssm_conv1d.weight");
            h.tensors.push(t);
        }
        let a = from_gguf(&h).unwrap();
        let kinds: Vec<AttentionKind> = a.layers.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            vec![
                AttentionKind::NoKv,
                AttentionKind::NoKv,
                AttentionKind::NoKv,
                AttentionKind::Full
            ]
        );
        assert_eq!(a.state_layers.len(), 3);
        let (r, s) = crate::state::llama_cpp_state_elements(&a.state_layers[0].state).unwrap();
        assert_eq!((r, s), (3 * (4096 + 2 * 16 * 128), 128 * 4096));
    }

    #[test]
    fn quantized_file_reports_its_bits() {
        let a = from_gguf(&header("tiny-llama-v3-f32-f16-q8_0-q4_k.gguf")).unwrap();
        assert_eq!(a.checkpoint_bytes, Some(28672));
        assert!(a.quantization.is_some() || a.dtype == Dtype::F32);
    }
}
