//! Per-GPU memory of a [`Layout`]: weights (dense parts sliced by TP, routed experts whole over
//! EP, each pipeline stage its own layers) and the KV cache (heads sliced by TP; an MLA latent
//! replicated on every TP rank, but held once per sequence under data-parallel attention,
//! where each rank keeps only its own sequences). Pure arithmetic over `crate::memory`.

use super::Layout;
use crate::arch::{AttentionKind, Dtype, LayerAttention, ModelArch, Quantization};
use crate::memory::{Shard, kv_bytes_per_token_layer, stage_layers, weights_per_gpu};
use serde::Serialize;

/// One GPU's share of the model under a layout (the fullest pipeline stage).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuMemory {
    /// Pipeline stage these figures are for.
    pub stage: u32,
    /// Layers of that stage.
    pub layers: u32,
    /// Embedding, LM head, attention, dense MLP/shared experts and norms on this GPU, bytes.
    pub dense_bytes: u64,
    /// Routed experts on this GPU, bytes.
    pub expert_bytes: u64,
    /// Routed experts held whole on this GPU (EP), or all of them sliced by TP.
    pub experts_here: u32,
    /// KV-cache bytes per token of context of one sequence on this GPU.
    pub kv_bytes_per_token: u64,
    /// Whether the MLA latent is copied on every TP rank (TP > 1 over MLA attention).
    pub mla_latent_replicated: bool,
}

impl GpuMemory {
    /// Weight bytes on this GPU.
    pub fn weight_bytes(&self) -> u64 {
        self.dense_bytes + self.expert_bytes
    }

    /// KV-cache bytes of `seqs` sequences of `context` tokens on this GPU. Under TP every rank
    /// holds its share of every sequence of its replica; under DP attention a rank holds only
    /// the sequences it serves (pass that rank's count).
    pub fn kv_bytes(&self, seqs: u64, context: u64) -> u64 {
        self.kv_bytes_per_token
            .saturating_mul(seqs)
            .saturating_mul(context)
    }

    /// Weights plus the KV of `seqs` sequences of `context` tokens, bytes (no activations,
    /// CUDA graphs or communication buffers: the engine's own accounting adds those).
    pub fn bytes(&self, seqs: u64, context: u64) -> u64 {
        self.weight_bytes()
            .saturating_add(self.kv_bytes(seqs, context))
    }

    /// KV tokens (sequences × context) that fit in `budget` bytes left after the weights.
    pub fn kv_tokens(&self, budget: u64) -> u64 {
        budget
            .saturating_sub(self.weight_bytes())
            .checked_div(self.kv_bytes_per_token)
            .unwrap_or(0)
    }
}

fn layer_attention(arch: &ModelArch, i: usize) -> LayerAttention {
    arch.layers.get(i).copied().unwrap_or(LayerAttention {
        kind: AttentionKind::Full,
        kv_heads: arch.num_kv_heads,
        head_dim: arch.head_dim,
        k_eq_v: false,
    })
}

/// Memory of one GPU of pipeline stage `stage` under `layout`. `quant` is the effective
/// quantization (checkpoint or flag), `kv` the KV-cache dtype.
///
/// * Dense parts: `crate::memory::weights_per_gpu` with the layout's tp and pp (vLLM's
///   `get_pp_indices` stage split, embedding on the first stage, LM head on the last).
/// * Routed experts: with `ep > 1`, `experts / ep` whole experts per GPU (the engines' EP MoE
///   layers hold a contiguous block of whole experts per rank), i.e. the stage's unsliced
///   expert bytes × (experts/ep)/experts; with `ep = 1`, every expert sliced by TP.
/// * KV per token: Σ over the stage's layers of `kv_bytes_per_token_layer` at the layout's tp
///   (KV heads sliced, replicated when tp exceeds them; an MLA latent whole on every rank).
pub fn gpu_memory(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    kv: Dtype,
    layout: &Layout,
    stage: u32,
) -> GpuMemory {
    let pp = layout.pp.max(1);
    let stage = stage.min(pp - 1);
    let shard = Shard {
        tp: layout.tp.max(1),
        pp,
        stage,
        expert_parallel: false,
    };
    let w = weights_per_gpu(arch, quant, shard);
    let total_experts = arch.moe.as_ref().map_or(0, |m| m.experts);
    let (expert_bytes, experts_here) = if layout.ep > 1 && total_experts > 0 {
        let whole = weights_per_gpu(arch, quant, Shard { tp: 1, ..shard }).experts;
        let here = total_experts.div_ceil(layout.ep);
        (
            (whole as f64 * f64::from(here) / f64::from(total_experts)).round() as u64,
            here,
        )
    } else {
        (w.experts, total_experts)
    };
    let range = stage_layers(arch.num_layers, pp, stage);
    let layers = range.len() as u32;
    let kv_bytes_per_token = range
        .map(|i| kv_bytes_per_token_layer(arch, &layer_attention(arch, i), layout.tp, kv))
        .sum();
    GpuMemory {
        stage,
        layers,
        dense_bytes: w.total() - w.experts,
        expert_bytes,
        experts_here,
        kv_bytes_per_token,
        mla_latent_replicated: arch.mla.is_some() && layout.tp > 1,
    }
}

/// The GPU of the layout holding the most weights (the stage that bounds the KV cache).
pub fn fullest_gpu(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    kv: Dtype,
    layout: &Layout,
) -> GpuMemory {
    let mut best = gpu_memory(arch, quant, kv, layout, 0);
    for s in 1..layout.pp.max(1) {
        let m = gpu_memory(arch, quant, kv, layout, s);
        if m.weight_bytes() + m.kv_bytes_per_token > best.weight_bytes() + best.kv_bytes_per_token {
            best = m;
        }
    }
    best
}

/// KV tokens the whole deployment holds: per DP replica, the fullest GPU's free bytes (its
/// `budget` less weights) over its per-token KV, times `dp` replicas.
pub fn deployment_kv_tokens(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    kv: Dtype,
    layout: &Layout,
    budget_per_gpu: u64,
) -> u64 {
    let m = fullest_gpu(arch, quant, kv, layout);
    m.kv_tokens(budget_per_gpu)
        .saturating_mul(u64::from(layout.dp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(tp: u32, pp: u32, dp: u32, ep: u32, nodes: u32, gpn: u32) -> Layout {
        Layout {
            tp,
            pp,
            dp,
            ep,
            nodes,
            gpus_per_node: gpn,
        }
    }

    #[test]
    fn dense_weights_split_by_tp_and_pp() {
        let a = crate::catalog::lookup("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        let one = gpu_memory(&a, None, Dtype::Bf16, &layout(1, 1, 1, 1, 1, 1), 0);
        let tp8 = gpu_memory(&a, None, Dtype::Bf16, &layout(8, 1, 1, 1, 1, 8), 0);
        let pp2 = fullest_gpu(&a, None, Dtype::Bf16, &layout(8, 2, 1, 1, 2, 8));
        // 70.6 B parameters in bf16 = ~141 GB whole
        assert!(
            (one.weight_bytes() as f64 / 1e9 - 141.1).abs() < 1.5,
            "{one:?}"
        );
        let r = one.weight_bytes() as f64 / tp8.weight_bytes() as f64;
        assert!((r - 8.0).abs() < 0.1, "{r}");
        let r = tp8.weight_bytes() as f64 / pp2.weight_bytes() as f64;
        assert!(r > 1.8 && r < 2.1, "{r}");
        // 8 KV heads x 128 x 2 (K,V) x 2 B x 80 layers = 327,680 B/token whole; /8 at TP8
        assert_eq!(one.kv_bytes_per_token, 327_680);
        assert_eq!(tp8.kv_bytes_per_token, 40_960);
        // TP16 replicates the 8 KV heads: still one head per rank
        let tp16 = gpu_memory(&a, None, Dtype::Bf16, &layout(16, 1, 1, 1, 2, 8), 0);
        assert_eq!(tp16.kv_bytes_per_token, 40_960);
        assert_eq!(pp2.layers, 40);
        // 32 sequences of 4096 tokens at TP8: 32 × 4096 × 40,960 B = 5 GiB beside the weights
        assert_eq!(tp8.kv_bytes(32, 4096), 5 << 30);
        assert_eq!(tp8.bytes(32, 4096), tp8.weight_bytes() + (5 << 30));
        assert_eq!(tp8.kv_tokens(tp8.weight_bytes() + (5 << 30)), 32 * 4096);
    }

    #[test]
    fn experts_whole_under_ep_and_mla_latent_under_dp_attention() {
        let a = crate::catalog::lookup("deepseek-ai/DeepSeek-V3").unwrap();
        let q = a.quantization.clone();
        let ep32 = gpu_memory(&a, q.as_ref(), Dtype::Bf16, &layout(1, 1, 32, 32, 4, 8), 0);
        assert_eq!(ep32.experts_here, 8);
        let whole = gpu_memory(&a, q.as_ref(), Dtype::Bf16, &layout(1, 1, 1, 1, 1, 1), 0);
        let r = whole.expert_bytes as f64 / ep32.expert_bytes as f64;
        assert!((r - 32.0).abs() < 0.01, "{r}");
        // dense parts whole on every DP-attention rank
        assert_eq!(ep32.dense_bytes, whole.dense_bytes);
        // MLA: (512 + 64) x 2 B x 61 layers = 70,272 B/token, the same on a TP8 rank (replicated)
        assert_eq!(ep32.kv_bytes_per_token, 70_272);
        assert!(!ep32.mla_latent_replicated);
        let tp8 = gpu_memory(&a, q.as_ref(), Dtype::Bf16, &layout(8, 1, 1, 1, 1, 8), 0);
        assert_eq!(tp8.kv_bytes_per_token, 70_272);
        assert!(tp8.mla_latent_replicated);
        // the same 8 GPUs as TP8 hold 8x fewer KV tokens per GPU's worth of sequences than DP8
        let budget = 130u64 << 30;
        let dp8 = layout(1, 1, 8, 8, 1, 8);
        let t_tp = deployment_kv_tokens(
            &a,
            q.as_ref(),
            Dtype::Bf16,
            &layout(8, 1, 1, 1, 1, 8),
            budget,
        );
        let t_dp = deployment_kv_tokens(&a, q.as_ref(), Dtype::Bf16, &dp8, budget);
        assert!(t_dp > 4 * t_tp, "{t_dp} vs {t_tp}");
    }
}
