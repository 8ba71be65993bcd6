//! Exact weights from a checkpoint's tensor headers (safetensors), split the way vLLM shards
//! them: pure, the binary reads the headers and hands over `(name, shape, bytes)`.
//!
//! Per tensor, by name: decoder layer `i` (`layers.i.`, `h.i.`, `blocks.i.`) belongs to the
//! pipeline stage that owns layer `i` ([`crate::memory::stage_layers`]); layers at or beyond
//! `num_hidden_layers` (MTP / next-token heads) are not loaded by the engine and are skipped;
//! embeddings and the vision tower go to the first stage, the LM head and the final norm to
//! the last. Under TP, norms, routers (`mlp.gate.weight`) and rotary buffers are replicated;
//! `k_proj`/`v_proj` (and their scales) split over `min(tp, kv_heads)` ranks (vLLM replicates
//! KV heads when TP exceeds them); every other matrix splits over `tp`
//! (`ColumnParallelLinear`, `RowParallelLinear`, `VocabParallelEmbedding`, fused experts).

use crate::memory::{Shard, stage_layers};
use serde::{Deserialize, Serialize};

/// One tensor of the checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Name as in the file (`model.layers.0.self_attn.q_proj.weight`).
    pub name: String,
    /// Bytes of its data.
    pub bytes: u64,
}

/// Bytes of one decoder layer by how TP splits them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerBytes {
    /// Split over `tp`.
    pub split: u64,
    /// K/V projections: split over `min(tp, kv_heads)`.
    pub kv: u64,
    /// Replicated on every rank (norms, routers).
    pub replicated: u64,
}

/// A checkpoint's weights, summarised for sharding (small whatever the tensor count).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointWeights {
    /// Per decoder layer.
    pub layers: Vec<LayerBytes>,
    /// Input embeddings (split over TP).
    pub embedding: u64,
    /// LM head (split over TP); 0 when tied.
    pub lm_head: u64,
    /// Vision/audio tower and projector (split over TP, first stage).
    pub vision: u64,
    /// Outside the layers and replicated (final norm, ...), last stage.
    pub other: u64,
    /// Layers the engine does not load (MTP), bytes.
    pub skipped: u64,
    /// Tensors read.
    pub tensors: u64,
}

impl CheckpointWeights {
    /// All bytes the engine loads (one copy, no sharding).
    pub fn loaded_bytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|l| l.split + l.kv + l.replicated)
            .sum::<u64>()
            + self.embedding
            + self.lm_head
            + self.vision
            + self.other
    }

    /// Bytes one GPU of `shard` holds. `kv_heads` bounds how far K/V projections split;
    /// `tied` adds the LM head (a copy of the embedding) on the last stage under PP.
    pub fn per_gpu(&self, shard: Shard, kv_heads: u32, tied: bool) -> u64 {
        let tp = u64::from(shard.tp.max(1));
        let kv_split = tp.min(u64::from(kv_heads.max(1)));
        let pp = shard.pp.max(1);
        let first = shard.stage == 0;
        let last = shard.stage + 1 >= pp;
        let range = stage_layers(self.layers.len() as u32, pp, shard.stage);
        let mut b: u64 = self
            .layers
            .get(range)
            .unwrap_or(&[])
            .iter()
            .map(|l| l.split.div_ceil(tp) + l.kv.div_ceil(kv_split) + l.replicated)
            .sum();
        if first {
            b += self.embedding.div_ceil(tp) + self.vision.div_ceil(tp);
        }
        if last {
            b += self.lm_head.div_ceil(tp) + self.other;
            if tied && pp > 1 && self.lm_head == 0 {
                b += self.embedding.div_ceil(tp);
            }
        }
        b
    }
}

/// Decoder layer index in a tensor name (`...layers.12.`, `h.12.`, `blocks.12.`, GGUF's
/// `blk.12.`).
fn layer_index(name: &str) -> Option<usize> {
    let parts: Vec<&str> = name.split('.').collect();
    parts.windows(3).find_map(|w| match w {
        [k, n, _] if matches!(*k, "layers" | "h" | "blocks" | "blk") => n.parse().ok(),
        _ => None,
    })
}

fn is_vision(name: &str) -> bool {
    [
        "vision",
        "visual",
        "image_newline",
        "multi_modal_projector",
        "mm_projector",
        "audio",
    ]
    .iter()
    .any(|k| name.contains(k))
}

fn replicated(name: &str) -> bool {
    name.contains("norm")
        || name.contains("rotary_emb")
        || name.ends_with("mlp.gate.weight")
        || name.ends_with("e_score_correction_bias")
        || name.contains("router")
        || name.contains("ffn_gate_inp")
}

/// Summarise the tensors of a checkpoint whose text model has `num_layers` decoder layers.
pub fn summarize(tensors: &[TensorInfo], num_layers: u32) -> CheckpointWeights {
    let mut c = CheckpointWeights {
        layers: vec![LayerBytes::default(); num_layers as usize],
        ..CheckpointWeights::default()
    };
    for t in tensors {
        c.tensors += 1;
        let n = t.name.as_str();
        if is_vision(n) {
            c.vision += t.bytes;
            continue;
        }
        if let Some(i) = layer_index(n) {
            match c.layers.get_mut(i) {
                Some(l) => {
                    if replicated(n) {
                        l.replicated += t.bytes;
                    } else if n.contains("k_proj")
                        || n.contains("v_proj")
                        || n.contains("attn_k.")
                        || n.contains("attn_v.")
                    {
                        l.kv += t.bytes;
                    } else {
                        l.split += t.bytes;
                    }
                }
                None => c.skipped += t.bytes,
            }
            continue;
        }
        if n.contains("lm_head") || n.ends_with("output.weight") {
            c.lm_head += t.bytes;
        } else if n.contains("embed")
            || n.contains("token_embd")
            || n.contains("wte")
            || n.contains("wpe")
        {
            c.embedding += t.bytes;
        } else {
            c.other += t.bytes;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, bytes: u64) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            bytes,
        }
    }

    #[test]
    fn shards_by_name_like_vllm() {
        let tensors = vec![
            t("model.embed_tokens.weight", 800),
            t("lm_head.weight", 800),
            t("model.norm.weight", 8),
            t("model.layers.0.self_attn.q_proj.weight", 400),
            t("model.layers.0.self_attn.k_proj.weight", 100),
            t("model.layers.0.input_layernorm.weight", 8),
            t("model.layers.1.mlp.down_proj.weight", 400),
            t("model.layers.2.mlp.down_proj.weight", 999), // MTP layer beyond num_layers
        ];
        let c = summarize(&tensors, 2);
        assert_eq!(c.skipped, 999);
        assert_eq!(c.loaded_bytes(), 800 + 800 + 8 + 400 + 100 + 8 + 400);
        let tp4 = Shard {
            tp: 4,
            pp: 1,
            stage: 0,
            expert_parallel: false,
        };
        // one KV head: k_proj replicated on all four ranks
        assert_eq!(
            c.per_gpu(tp4, 1, false),
            200 + 200 + 8 + 100 + 100 + 8 + 100
        );
        let pp0 = Shard {
            tp: 1,
            pp: 2,
            stage: 0,
            expert_parallel: false,
        };
        assert_eq!(c.per_gpu(pp0, 8, false), 800 + 400 + 100 + 8);
        assert_eq!(
            layer_index("model.layers.17.mlp.experts.3.w1.weight"),
            Some(17)
        );
        assert_eq!(layer_index("transformer.h.5.attn.c_attn.weight"), Some(5));
        assert_eq!(layer_index("model.norm.weight"), None);
        // GGUF names (llama.cpp's tensor map)
        let g = summarize(
            &[
                t("token_embd.weight", 50),
                t("output.weight", 60),
                t("output_norm.weight", 4),
                t("blk.0.attn_k.weight", 10),
                t("blk.0.attn_output.weight", 20),
                t("blk.1.ffn_gate_inp.weight", 3),
            ],
            2,
        );
        assert_eq!((g.embedding, g.lm_head, g.other), (50, 60, 4));
        assert_eq!(
            g.layers[0],
            LayerBytes {
                split: 20,
                kv: 10,
                replicated: 0
            }
        );
        assert_eq!(g.layers[1].replicated, 3);
    }
}
