//! What PyTorch's CUDA caching allocator reserves while a model's parameters are created one by
//! one, beyond the parameters' own bytes.
//!
//! Engines that size the KV cache from the *driver's* free memory (`torch.cuda.mem_get_info`
//! after `torch.cuda.empty_cache()`; the rooms say which engines do)
//! see every byte of every segment the allocator holds, not only the bytes of the tensors. The
//! rules are PyTorch's (`c10/cuda/CUDACachingAllocator.cpp`, unchanged from 1.x to 2.x):
//!
//! - a request is rounded up to 512 B (`kMinBlockSize`);
//! - ≤ 1 MiB (`kSmallSize`) is served from 2 MiB segments (`kSmallBuffer`);
//! - below 10 MiB (`kMinLargeAlloc`) from 20 MiB segments (`kLargeBuffer`);
//! - larger requests get a segment of their own, rounded up to 2 MiB (`kRoundLarge`);
//! - a cached free block is reused best-fit; its remainder is split off as a free block only
//!   when it exceeds 1 MiB (large pool) or 512 B (small pool), else it stays inside the block.
//!
//! A parameter whose size is not a multiple of 2 MiB therefore wastes up to 2 MiB, per tensor:
//! QwQ-32B at TP 4 (64 layers × four projections of 17.5, 12.5, 135 and 67.5 MiB) holds
//! 0.22 GiB that no tensor uses. `empty_cache()` only returns segments that are wholly free,
//! and every segment here holds a parameter, so nothing is returned. Temporaries freed during
//! model creation (RoPE's intermediates) are not simulated: where no parameter reuses them
//! their segments are returned by that `empty_cache()`.
//!
//! Pure: sizes in, bytes out.

use crate::arch::{AttentionKind, MlpKind, ModelArch, Quantization};
use crate::memory::{Shard, ShardSizing, stage_layers};

const MIN_BLOCK: u64 = 512;
const SMALL_SIZE: u64 = 1 << 20;
const SMALL_BUFFER: u64 = 2 << 20;
const LARGE_BUFFER: u64 = 20 << 20;
const MIN_LARGE_ALLOC: u64 = 10 << 20;
const ROUND_LARGE: u64 = 2 << 20;

fn round_up(a: u64, m: u64) -> u64 {
    a.div_ceil(m) * m
}

/// Bytes of segments the allocator holds after `sizes` are allocated in order and none freed.
pub fn reserved(sizes: impl IntoIterator<Item = u64>) -> u64 {
    // free blocks per pool (sizes only: the simulation never frees, so no coalescing)
    let mut small: Vec<u64> = Vec::new();
    let mut large: Vec<u64> = Vec::new();
    let mut total = 0u64;
    for raw in sizes {
        let size = round_up(raw.max(1), MIN_BLOCK);
        let is_small = size <= SMALL_SIZE;
        let (pool, min_split) = if is_small {
            (&mut small, MIN_BLOCK)
        } else {
            (&mut large, SMALL_SIZE + 1)
        };
        // best fit among cached free blocks
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, b)| **b >= size)
            .min_by_key(|(_, b)| **b)
            .map(|(i, b)| (i, *b));
        let block = match best {
            Some((i, b)) => {
                pool.swap_remove(i);
                b
            }
            None => {
                let seg = if is_small {
                    SMALL_BUFFER
                } else if size < MIN_LARGE_ALLOC {
                    LARGE_BUFFER
                } else {
                    round_up(size, ROUND_LARGE)
                };
                total += seg;
                seg
            }
        };
        let rest = block - size;
        if rest >= min_split {
            pool.push(rest);
        }
    }
    total
}

/// The parameter tensors one GPU creates, in the order the model's `__init__` creates them
/// (embedding; per layer: fused QKV, its bias, O, the RoPE cache once, fused gate/up, down,
/// two norms; final norm; LM head), in bytes. Fused modules are one tensor each, as vLLM's
/// `QKVParallelLinear`/`MergedColumnParallelLinear` (and the engines that share its layers)
/// allocate them. Quantized
/// weights are counted as one tensor of their packed bytes (their scales are small-pool sized
/// or proportional). A vision tower's many tensors are not enumerated.
pub fn parameter_tensors(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    shard: Shard,
    rope_bytes: u64,
) -> Vec<u64> {
    let s = ShardSizing::new(arch, quant, shard);
    let (tp, h, first, last) = (s.tp, arch.hidden_size, s.first_stage, s.last_stage);
    let (attn_q, mlp_q) = (s.attention_quantized, s.mlp_quantized);
    let qb = |params: u64, quantized: bool| s.bytes(params, quantized);
    let vocab_rank = round_up(arch.vocab_size, 64).div_ceil(tp);
    let heads_rank = u64::from(arch.num_attention_heads).div_ceil(tp);
    let mut t = Vec::new();
    if first {
        t.push(qb(vocab_rank * h, false));
    }
    let mut rope_done = false;
    for i in stage_layers(arch.num_layers, shard.pp, shard.stage) {
        let layer = arch.layers.get(i).copied();
        let (kind, kv_heads, hd) = layer.map(|l| (l.kind, l.kv_heads, l.head_dim)).unwrap_or((
            AttentionKind::Full,
            arch.num_kv_heads,
            arch.head_dim,
        ));
        let hd = u64::from(hd);
        if let Some(m) = arch.mla {
            let qk = u64::from(m.qk_nope_head_dim + m.qk_rope_head_dim);
            match m.q_lora_rank {
                Some(r) => {
                    t.push(qb(h * u64::from(r), attn_q));
                    t.push(qb(u64::from(r), false));
                    t.push(qb(u64::from(r) * heads_rank * qk, attn_q));
                }
                None => t.push(qb(h * heads_rank * qk, attn_q)),
            }
            t.push(qb(
                h * u64::from(m.kv_lora_rank + m.qk_rope_head_dim),
                attn_q,
            ));
            t.push(qb(u64::from(m.kv_lora_rank), false));
            t.push(qb(
                u64::from(m.kv_lora_rank)
                    * heads_rank
                    * u64::from(m.qk_nope_head_dim + m.v_head_dim),
                attn_q,
            ));
            t.push(qb(heads_rank * u64::from(m.v_head_dim) * h, attn_q));
        } else if kind != AttentionKind::NoKv {
            let kv_rank = u64::from(kv_heads).div_ceil(tp).max(1);
            let qkv = (heads_rank + 2 * kv_rank) * hd;
            t.push(qb(h * qkv, attn_q));
            if arch.attention_bias {
                t.push(qb(qkv, false));
            }
            t.push(qb(heads_rank * hd * h, attn_q));
        }
        if !rope_done && rope_bytes > 0 {
            t.push(rope_bytes);
            rope_done = true;
        }
        let moe = arch
            .moe
            .as_ref()
            .filter(|m| m.moe_layers.get(i).copied().unwrap_or(false));
        match moe {
            Some(m) => {
                let e = u64::from(m.experts);
                let (here, ei) = if shard.expert_parallel {
                    (e.div_ceil(tp), m.expert_intermediate)
                } else {
                    (e, m.expert_intermediate.div_ceil(tp))
                };
                // plain (relu2) experts have no gate matrix
                let up_mats = match arch.mlp {
                    MlpKind::Gated => 2,
                    MlpKind::Plain => 1,
                };
                t.push(qb(h * e, false)); // router
                t.push(qb(here * up_mats * ei * h, quant.is_some()));
                t.push(qb(here * h * ei, quant.is_some()));
                if m.shared_intermediate > 0 {
                    let s = m.shared_intermediate.div_ceil(tp);
                    t.push(qb(up_mats * s * h, mlp_q));
                    t.push(qb(s * h, mlp_q));
                }
            }
            None => {
                let i_rank = arch.intermediate_size.div_ceil(tp);
                let up = match arch.mlp {
                    MlpKind::Gated => 2 * i_rank,
                    MlpKind::Plain => i_rank,
                };
                t.push(qb(up * h, mlp_q));
                t.push(qb(i_rank * h, mlp_q));
            }
        }
        t.push(qb(h, false));
        t.push(qb(h, false));
    }
    if last {
        t.push(qb(h, false));
        if !arch.tie_word_embeddings || shard.pp > 1 {
            t.push(qb(
                vocab_rank * h,
                quant.is_some_and(|q| q.lm_head_quantized),
            ));
        }
    }
    t
}

/// Bytes the allocator holds beyond the parameters' own: [`reserved`] of
/// [`parameter_tensors`] minus their sum.
pub fn load_slack(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    shard: Shard,
    rope_bytes: u64,
) -> u64 {
    let t = parameter_tensors(arch, quant, shard, rope_bytes);
    let live: u64 = t.iter().sum();
    reserved(t).saturating_sub(live)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn rounding_per_pool() {
        // a 17.5 MiB tensor takes an 18 MiB segment; the 0.5 MiB stays inside the block
        assert_eq!(reserved([17 * MIB + MIB / 2]), 18 * MIB);
        // 12.5 MiB → 14 MiB segment; the 1.5 MiB remainder is split off but nothing fits it
        assert_eq!(reserved([12 * MIB + MIB / 2, 2 * MIB]), 14 * MIB + 20 * MIB);
        // three 6 MiB tensors share one 20 MiB segment; a fourth needs another
        assert_eq!(reserved([6 * MIB; 3]), 20 * MIB);
        assert_eq!(reserved([6 * MIB; 4]), 40 * MIB);
        // small tensors pack into 2 MiB segments
        assert_eq!(reserved([10 * 1024; 100]), 2 * MIB);
        assert_eq!(reserved([]), 0);
    }

    #[test]
    fn best_fit_reuses_a_split_remainder() {
        // 12.5 MiB leaves a 1.5 MiB free block; a 1.25 MiB tensor lands there
        assert_eq!(reserved([12 * MIB + MIB / 2, MIB + MIB / 4]), 14 * MIB);
    }

    #[test]
    fn qwq_32b_at_tp4_holds_the_unexplained_quarter_gib() {
        // 64 layers × (0.5 + 1.5 + 1 + 0.5) MiB of rounding + the embeddings' 0.75 MiB each:
        // the gap between a recorded start-up log's measured 15.54 GiB of weights and the
        // tensors' 15.29 (tests/engine_logs_accuracy.rs)
        let a = crate::catalog::lookup("Qwen/QwQ-32B").unwrap();
        let shard = Shard {
            tp: 4,
            pp: 1,
            stage: 0,
            expert_parallel: false,
        };
        let slack = load_slack(&a, None, shard, 40960 * 128 * 4);
        let mib = slack as f64 / MIB as f64;
        assert!((mib - 225.5).abs() < 1.0, "{mib}");
        // Llama-3-8B's projections are whole 2 MiB multiples: only the 4 MiB RoPE cache's
        // 20 MiB segment (16 MiB) and the norms' 2 MiB small segment are slack
        let l = crate::catalog::lookup("meta-llama/Meta-Llama-3-8B-Instruct").unwrap();
        let s8 = load_slack(&l, None, Shard::SINGLE, 8192 * 128 * 4) as f64 / MIB as f64;
        assert!((s8 - 17.5).abs() < 0.5, "{s8}");
        // MoE/MLA: fused expert tensors round once each; bounded by 2 MiB per tensor
        let d = crate::catalog::lookup("deepseek-ai/DeepSeek-V3").unwrap();
        let tp8 = Shard { tp: 8, ..shard };
        let t = parameter_tensors(&d, d.quantization.as_ref(), tp8, 0);
        let sd = load_slack(&d, d.quantization.as_ref(), tp8, 0);
        assert!(sd <= 20 * MIB * t.len() as u64 / 8, "{sd}");
    }
}
