//! GGUF quantisation types (`--quantization Q4_K_M`): the weight bytes of a catalog model as
//! llama.cpp's `llama-quantize` would write them, without the file.
//!
//! A GGUF "file type" is not one bit width: `llama-quantize` picks a type per tensor. The rules
//! below are those of the llama.cpp vendored in llama-cpp-python 0.3.36
//! (`src/llama-quant.cpp`: `llama_ftype_get_default_type`, `llama_tensor_get_type_impl`, no
//! imatrix, non-Falcon architectures), and the block sizes are `ggml/src/ggml-common.h`'s
//! `static_assert(sizeof(block_*))` with `ggml.c`'s `blck_size`:
//!
//! * every 2-D weight takes the file type's default type (`Q4_K` for `Q4_K_M`), except
//! * `output.weight` (and `token_embd` when tied to it): `Q6_K`, or `Q8_0` for `Q8_0` files and
//!   when the row length is not a multiple of the block;
//! * `attn_v`: `Q4_K_M`/`Q5_K_M` use `Q6_K` on `use_more_bits` layers (first and last eighth, and
//!   every third in between); `Q4_K_S` `Q5_K` on the first 4; `Q3_K_M` `Q5_K` on the first 2 then
//!   `Q4_K`; `Q3_K_L` `Q5_K`; `Q2_K` `Q4_K` with GQA ≥ 4 else `Q3_K`; 70B models (80 layers) bump
//!   `Q3_K`/`Q4_K` to `Q5_K`; 8-expert models `Q8_0`;
//! * `ffn_down`: `Q4_K_M`/`Q5_K_M` `Q6_K` on `use_more_bits` layers; `Q4_K_S` `Q5_K` on the
//!   first eighth; `Q3_K_M` `Q5_K` on the first sixteenth then `Q4_K`; `Q3_K_L` `Q5_K`; `Q2_K` `Q3_K`;
//! * `attn_output`: `Q2_K` → `Q3_K`, `Q3_K_M` → `Q4_K`, `Q3_K_L` → `Q5_K` (dense models);
//! * norms and other 1-D tensors stay F32; F16/BF16 files keep every weight in that type.

use crate::arch::{MlpKind, ModelArch};
use serde::Serialize;

/// A ggml tensor type with its block layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl GgmlType {
    /// (weights per block, bytes per block), from ggml-common.h.
    pub fn block(self) -> (u64, u64) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 | GgmlType::BF16 => (1, 2),
            GgmlType::Q4_0 => (32, 18),  // fp16 d + 16 B of nibbles
            GgmlType::Q4_1 => (32, 20),  // d, m + 16 B
            GgmlType::Q5_0 => (32, 22),  // d + 4 B high bits + 16 B
            GgmlType::Q5_1 => (32, 24),  // d, m + 4 B + 16 B
            GgmlType::Q8_0 => (32, 34),  // d + 32 B
            GgmlType::Q2_K => (256, 84), // 2 halves + 16 + 64
            GgmlType::Q3_K => (256, 110),
            GgmlType::Q4_K => (256, 144), // 2 halves + 12 scales + 128
            GgmlType::Q5_K => (256, 176),
            GgmlType::Q6_K => (256, 210),
        }
    }

    /// Bits per weight, scales included.
    pub fn bits_per_weight(self) -> f64 {
        let (w, b) = self.block();
        b as f64 * 8.0 / w as f64
    }

    fn is_quantized(self) -> bool {
        !matches!(self, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
    }
}

/// A `llama-quantize` file type (`LLAMA_FTYPE_MOSTLY_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[allow(non_camel_case_types)]
pub enum GgufFileType {
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2_K,
    Q3_K_S,
    Q3_K_M,
    Q3_K_L,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
}

/// Every file type [`GgufFileType::parse`] knows, as written on the command line.
pub const FILE_TYPES: [&str; 16] = [
    "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
    "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
];

impl GgufFileType {
    /// `Q4_K_M`, `q4_k_m`, `Q4_K` (= `Q4_K_M`, llama-quantize's alias) ...; `None` otherwise.
    pub fn parse(s: &str) -> Option<GgufFileType> {
        use GgufFileType::*;
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "F16" | "FP16" => F16,
            "BF16" => BF16,
            "Q8_0" => Q8_0,
            "Q4_0" => Q4_0,
            "Q4_1" => Q4_1,
            "Q5_0" => Q5_0,
            "Q5_1" => Q5_1,
            "Q2_K" => Q2_K,
            "Q3_K_S" => Q3_K_S,
            "Q3_K_M" | "Q3_K" => Q3_K_M,
            "Q3_K_L" => Q3_K_L,
            "Q4_K_S" => Q4_K_S,
            "Q4_K_M" | "Q4_K" => Q4_K_M,
            "Q5_K_S" => Q5_K_S,
            "Q5_K_M" | "Q5_K" => Q5_K_M,
            "Q6_K" => Q6_K,
            _ => return None,
        })
    }

    /// `llama_ftype_get_default_type`.
    pub fn default_type(self) -> GgmlType {
        use GgufFileType as F;
        match self {
            F::F16 => GgmlType::F16,
            F::BF16 => GgmlType::BF16,
            F::Q8_0 => GgmlType::Q8_0,
            F::Q4_0 => GgmlType::Q4_0,
            F::Q4_1 => GgmlType::Q4_1,
            F::Q5_0 => GgmlType::Q5_0,
            F::Q5_1 => GgmlType::Q5_1,
            F::Q2_K => GgmlType::Q2_K,
            F::Q3_K_S | F::Q3_K_M | F::Q3_K_L => GgmlType::Q3_K,
            F::Q4_K_S | F::Q4_K_M => GgmlType::Q4_K,
            F::Q5_K_S | F::Q5_K_M => GgmlType::Q5_K,
            F::Q6_K => GgmlType::Q6_K,
        }
    }
}

/// Weight bytes of a model in one GGUF file type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GgufWeights {
    pub file_type: GgufFileType,
    /// All tensors, bytes.
    pub total_bytes: u64,
    /// Bytes of the repeating layers (what `-ngl` moves to the GPU), all layers together.
    pub layer_bytes: u64,
    /// token_embd + output + final norm.
    pub non_layer_bytes: u64,
    /// Routed-expert bytes (MoE), all layers.
    pub routed_expert_bytes: u64,
    /// Parameters of the repeating layers' 2-D weights (what the memory planner quantizes).
    pub layer_matrix_params: u64,
    /// Bytes of those weights.
    pub layer_matrix_bytes: u64,
    /// Parameters counted.
    pub params: u64,
    /// Bytes × 8 / params.
    pub bits_per_weight: f64,
    /// (type, parameters) in the file.
    pub mix: Vec<(GgmlType, u64)>,
    /// `token_embd.weight`, bytes (in its own type: the output's when tied).
    #[serde(skip)]
    pub embedding_bytes: u64,
    /// `output.weight`, bytes (0 when tied to the embeddings).
    #[serde(skip)]
    pub output_bytes: u64,
    /// Bytes of each repeating layer (`blk.i`), in order.
    #[serde(skip)]
    pub per_layer: Vec<u64>,
}

/// `use_more_bits` of llama-quant.cpp.
fn use_more_bits(i: u64, n: u64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64).rem_euclid(3) == 2
}

fn bytes(t: GgmlType, rows: u64, cols: u64) -> u64 {
    let (w, b) = t.block();
    // a row is whole blocks; llama-quantize falls back when it does not divide (see `fits`)
    rows * cols.div_ceil(w) * b
}

/// A K-quant needs rows that are a multiple of 256; llama-quantize falls back otherwise
/// (`Q8_0` for output, the legacy 32-block type of similar size for others).
fn fits(t: GgmlType, cols: u64) -> GgmlType {
    let (w, _) = t.block();
    if cols.is_multiple_of(w) {
        return t;
    }
    match t {
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K => GgmlType::Q4_0,
        GgmlType::Q5_K => GgmlType::Q5_0,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    }
}

/// Weight bytes of `arch` quantized to `ft`, tensor by tensor.
///
/// One piece (~160 lines): it mirrors `llama_tensor_get_type_impl`'s per-tensor decision, which
/// reads best beside the source as one block.
pub fn size(arch: &ModelArch, ft: GgufFileType) -> GgufWeights {
    use GgufFileType as F;
    let base = ft.default_type();
    let h = arch.hidden_size;
    let n = u64::from(arch.num_layers);
    let q_dim = u64::from(arch.num_attention_heads) * u64::from(arch.head_dim);
    let kv_dim = u64::from(arch.num_kv_heads) * u64::from(arch.head_dim);
    let gqa = arch.num_attention_heads / arch.num_kv_heads.max(1);
    let n_expert = arch.moe.as_ref().map_or(0, |m| m.experts);
    let is_70b = arch.model_type == "llama" && arch.num_layers == 80;
    let mut mix: std::collections::BTreeMap<GgmlType, u64> = Default::default();
    let mut total = 0u64;
    let mut layer_total = 0u64;
    let mut experts_total = 0u64;
    let mut matrix = (0u64, 0u64);
    let mut add = |t: GgmlType, rows: u64, cols: u64, layer: bool, expert: bool| -> u64 {
        let t = fits(t, cols);
        let b = bytes(t, rows, cols);
        *mix.entry(t).or_default() += rows * cols;
        total += b;
        if layer {
            layer_total += b;
            if t != GgmlType::F32 {
                matrix.0 += rows * cols;
                matrix.1 += b;
            }
        }
        if expert {
            experts_total += b;
        }
        b
    };
    // output / tied embeddings
    let output_t = if !base.is_quantized() {
        base
    } else if base == GgmlType::Q8_0 || !h.is_multiple_of(base.block().0) {
        GgmlType::Q8_0
    } else {
        GgmlType::Q6_K
    };
    let embd_t = if arch.tie_word_embeddings {
        output_t
    } else {
        base
    };
    let embedding_bytes = add(embd_t, arch.vocab_size, h, false, false);
    let output_bytes = if arch.tie_word_embeddings {
        0
    } else {
        add(output_t, arch.vocab_size, h, false, false)
    };
    add(GgmlType::F32, 1, h, false, false); // output_norm
    let mut per_layer = Vec::with_capacity(n.min(1 << 16) as usize);
    for i in 0..n {
        let mut lb = 0u64;
        let v_t = if !base.is_quantized() {
            base
        } else {
            let mut t = match ft {
                F::Q2_K => {
                    if gqa >= 4 {
                        GgmlType::Q4_K
                    } else {
                        GgmlType::Q3_K
                    }
                }
                F::Q3_K_M if i < 2 => GgmlType::Q5_K,
                F::Q3_K_M => GgmlType::Q4_K,
                F::Q3_K_L => GgmlType::Q5_K,
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => GgmlType::Q6_K,
                F::Q4_K_S if i < 4 => GgmlType::Q5_K,
                _ => base,
            };
            if is_70b && matches!(t, GgmlType::Q3_K | GgmlType::Q4_K) {
                t = GgmlType::Q5_K;
            }
            if n_expert == 8 {
                t = GgmlType::Q8_0;
            }
            t
        };
        let down_t = if !base.is_quantized() {
            base
        } else {
            match ft {
                F::Q2_K => GgmlType::Q3_K,
                F::Q3_K_M if i < n / 16 => GgmlType::Q5_K,
                F::Q3_K_M => GgmlType::Q4_K,
                F::Q3_K_L => GgmlType::Q5_K,
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => GgmlType::Q6_K,
                F::Q4_K_S if i < n / 8 => GgmlType::Q5_K,
                _ => base,
            }
        };
        let o_t = match ft {
            _ if !base.is_quantized() => base,
            _ if n_expert == 8
                && matches!(ft, F::Q2_K | F::Q3_K_S | F::Q3_K_M | F::Q4_K_S | F::Q4_K_M) =>
            {
                GgmlType::Q5_K
            }
            _ if n_expert == 8 => base,
            F::Q2_K => GgmlType::Q3_K,
            F::Q3_K_M => GgmlType::Q4_K,
            F::Q3_K_L => GgmlType::Q5_K,
            _ => base,
        };
        lb += add(base, q_dim, h, true, false); // attn_q
        lb += add(base, kv_dim, h, true, false); // attn_k
        lb += add(v_t, kv_dim, h, true, false); // attn_v
        lb += add(o_t, h, q_dim, true, false); // attn_output
        lb += add(GgmlType::F32, 2, h, true, false); // attn_norm, ffn_norm
        let moe_layer = arch.moe.as_ref().and_then(|m| {
            let is_moe = m.moe_layers.get(i as usize).copied().unwrap_or(true);
            is_moe.then_some(m)
        });
        match moe_layer {
            Some(m) => {
                let e = u64::from(m.experts);
                lb += add(base, e * m.expert_intermediate, h, true, true); // gate_exps
                lb += add(base, e * m.expert_intermediate, h, true, true); // up_exps
                lb += add(down_t, e * h, m.expert_intermediate, true, true); // down_exps
                lb += add(GgmlType::F32, e, h, true, false); // router
                if m.shared_intermediate > 0 {
                    lb += add(base, 2 * m.shared_intermediate, h, true, false);
                    lb += add(down_t, h, m.shared_intermediate, true, false);
                }
            }
            None => {
                let up_mats = if arch.mlp == MlpKind::Gated { 2 } else { 1 };
                lb += add(base, up_mats * arch.intermediate_size, h, true, false);
                lb += add(down_t, h, arch.intermediate_size, true, false);
            }
        }
        per_layer.push(lb);
    }
    let mix: Vec<(GgmlType, u64)> = mix.into_iter().collect();
    let params: u64 = mix.iter().map(|(_, p)| p).sum();
    GgufWeights {
        file_type: ft,
        total_bytes: total,
        layer_bytes: layer_total,
        non_layer_bytes: total - layer_total,
        routed_expert_bytes: experts_total,
        layer_matrix_params: matrix.0,
        layer_matrix_bytes: matrix.1,
        params,
        bits_per_weight: if params > 0 {
            total as f64 * 8.0 / params as f64
        } else {
            0.0
        },
        mix,
        embedding_bytes,
        output_bytes,
        per_layer,
    }
}

/// The hook the memory planner uses: `arch` with the file type's weights. Its quantization
/// carries the layer weights' mean bytes per weight (`gguf:<TYPE>:<bytes>`, read by
/// [`crate::arch::Quantization::bytes_per_weight`]) and its checkpoint the exact file bytes
/// (which llama.cpp plans scale to); embeddings in vLLM-style plans stay in the model dtype.
pub fn apply(arch: &ModelArch, ft: GgufFileType) -> (ModelArch, GgufWeights) {
    let g = size(arch, ft);
    let per_weight = if g.layer_matrix_params > 0 {
        g.layer_matrix_bytes as f64 / g.layer_matrix_params as f64
    } else {
        2.0
    };
    let base = ft.default_type();
    let mut a = arch.clone();
    a.quantization = base.is_quantized().then(|| crate::arch::Quantization {
        method: format!("gguf:{ft:?}:{per_weight:.5}"),
        bits: (base.bits_per_weight().floor() as u32).max(1),
        group_size: 0,
        float: false,
        attention_unquantized: false,
        dense_mlp_unquantized: false,
        lm_head_quantized: true,
        kv_cache_fp8: false,
    });
    if !base.is_quantized() {
        a.dtype = crate::arch::Dtype::F16;
    }
    a.checkpoint_bytes = Some(g.total_bytes);
    (a, g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn arch(id: &str) -> ModelArch {
        match catalog::lookup(id) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        }
    }

    fn gib(b: u64) -> f64 {
        b as f64 / (1u64 << 30) as f64
    }

    // Sizes printed by llama-bench for real files (fixtures/speed/cases.jsonl raw rows):
    // Meta-Llama-3-70B Q4_K_M 39.59 GiB, Meta-Llama-3-8B Q4_K_M 4.58 GiB, LLaMA-7B Q4_0 3.56 GiB.
    #[test]
    fn sizes_match_real_gguf_files() {
        let l70 = size(
            &arch("meta-llama/Meta-Llama-3-70B-Instruct"),
            GgufFileType::Q4_K_M,
        );
        assert!(
            (gib(l70.total_bytes) - 39.59).abs() < 0.2,
            "{}",
            gib(l70.total_bytes)
        );
        let l8 = size(&arch("meta-llama/Meta-Llama-3-8B"), GgufFileType::Q4_K_M);
        assert!(
            (gib(l8.total_bytes) - 4.58).abs() < 0.03,
            "{}",
            gib(l8.total_bytes)
        );
        let l7 = size(&arch("meta-llama/Llama-2-7b-hf"), GgufFileType::Q4_0);
        assert!(
            (gib(l7.total_bytes) - 3.56).abs() < 0.03,
            "{}",
            gib(l7.total_bytes)
        );
        // F16 is two bytes per weight (norms F32).
        let f = size(&arch("meta-llama/Llama-2-7b-hf"), GgufFileType::F16);
        assert!((f.bits_per_weight - 16.0).abs() < 0.01);
        assert!(l7.bits_per_weight > 4.5 && l7.bits_per_weight < 4.7);
    }

    #[test]
    fn memory_planner_sees_the_same_bytes() {
        // Llama-3-8B Q4_K_M through the planner hook: the quantized layers cost the mix's mean
        // bytes per weight, and the checkpoint is the file's exact size.
        let a = arch("meta-llama/Meta-Llama-3-8B");
        let (q, g) = apply(&a, GgufFileType::Q4_K_M);
        assert_eq!(crate::memory::checkpoint_bytes(&q), g.total_bytes);
        let bpw = q
            .quantization
            .as_ref()
            .map_or(0.0, |x| x.bytes_per_weight());
        assert!((bpw * 8.0 - 4.89).abs() < 0.1, "{}", bpw * 8.0);
        let w = crate::memory::weights_per_gpu(
            &q,
            q.quantization.as_ref(),
            crate::memory::Shard::SINGLE,
        );
        let layers = (w.attention + w.mlp) as f64;
        assert!((layers - g.layer_matrix_bytes as f64).abs() / layers < 0.01);
    }

    #[test]
    fn parse_names() {
        assert_eq!(GgufFileType::parse("q4_k_m"), Some(GgufFileType::Q4_K_M));
        assert_eq!(GgufFileType::parse("Q8_0"), Some(GgufFileType::Q8_0));
        assert_eq!(GgufFileType::parse("awq"), None);
        for n in FILE_TYPES {
            assert!(GgufFileType::parse(n).is_some(), "{n}");
        }
    }

    #[test]
    fn use_more_bits_matches_llama_cpp() {
        // 32 layers: first 4, last 4, and i where (i - 4) % 3 == 2 → 6, 9, ..., 27 (8 of them).
        let n: usize = (0..32).filter(|i| use_more_bits(*i, 32)).count();
        assert_eq!(n, 16);
        assert!(use_more_bits(0, 32) && use_more_bits(6, 32) && !use_more_bits(5, 32));
    }
}
