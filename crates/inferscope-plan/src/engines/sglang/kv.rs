//! SGLang's own KV accounting, per release (read from the released wheels, `pip download
//! sglang==X --no-deps`: 0.3.3, 0.4.3.post4, 0.4.9, 0.5.10.post1).
//!
//! `ModelRunner.profile_max_num_token` (0.3–0.4: `model_executor/model_runner.py`; 0.5:
//! `model_executor/model_runner_kv_cache_mixin.py`):
//!
//! ```text
//! rest   = available_after_weights − free_at_start × (1 − mem_fraction_static)
//! tokens = rest × 2^30 // cell_size
//! ```
//!
//! `free_at_start` is the free memory measured when the runner starts (after the distributed
//! init, min over TP ranks), not the card size: on a shared card the budget follows what is
//! free. `--mem-fraction-static` therefore covers weights and KV only; activations and CUDA
//! graphs live in the rest. Pure: the caller supplies the memory figures.

use crate::allocator;
use crate::arch::{ModelArch, Quantization};
use crate::memory::{EngineVersion, GIB, Shard};
use crate::rules::{Accounting, EngineRules, Rule};

/// Inputs of SGLang's KV sizing on one GPU.
#[derive(Debug, Clone)]
pub struct SglangInputs<'a> {
    /// `--version` of SGLang, when known.
    pub version: Option<&'a str>,
    /// `nvidia-smi --query-gpu=memory.total` in MiB (SGLang's `get_device_memory_capacity`).
    pub gpu_mem_mib: f64,
    /// Free memory when the runner starts, bytes.
    pub free_at_start: u64,
    /// Weights on this GPU, bytes.
    pub weights: u64,
    /// KV bytes per token on this GPU (all layers).
    pub cell_size: u64,
    /// `--tp-size`.
    pub tp: u32,
    /// `--pp-size`.
    pub pp: u32,
    /// `--mem-fraction-static` when given.
    pub mem_fraction_static: Option<f64>,
    /// `--chunked-prefill-size` when given.
    pub chunked_prefill_size: Option<u64>,
    /// `--cuda-graph-max-bs` when given.
    pub cuda_graph_max_bs: Option<u64>,
    /// `--disable-piecewise-cuda-graph` (0.5.10).
    pub disable_piecewise_cuda_graph: bool,
    /// MLA model (piecewise graphs reserve 1.5 GiB instead of 8 MiB per size).
    pub mla: bool,
    /// Multimodal model (0.4.9: the fraction × 0.9).
    pub multimodal: bool,
}

/// SGLang's sizing of one start-up.
#[derive(Debug, Clone)]
pub struct SglangKv {
    /// `mem_fraction_static` in effect.
    pub mem_fraction_static: f64,
    /// Bytes left for KV (`rest`), may be negative (SGLang then refuses to start).
    pub rest: i64,
    /// `max_total_num_tokens`.
    pub tokens: u64,
    /// `chunked_prefill_size` in effect.
    pub chunked_prefill_size: u64,
    /// The rules applied, with sources.
    pub info: EngineRules,
}

/// Releases read, oldest first.
const READ: &[(u32, u32, u32)] = &[(0, 3, 3), (0, 4, 3), (0, 4, 9), (0, 5, 10)];

fn rule(rule: &str, value: String, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value,
        source: source.into(),
    }
}

/// Size SGLang's KV pool on one GPU.
///
/// One piece (~200 lines): the release's defaults (chunked prefill, graph batch), its
/// `mem_fraction_static` rule and `profile_max_num_token`, each pushed with its source in the
/// order SGLang applies them.
pub fn kv(i: &SglangInputs) -> SglangKv {
    let newest = EngineVersion {
        major: 0,
        minor: 5,
        patch: 10,
    };
    let parsed = i.version.and_then(EngineVersion::parse);
    let (ver, note, accounting) = match (i.version, parsed) {
        (None, _) => (
            newest,
            Some(format!(
                "SGLang version not given: rules of the newest modelled release, {newest}"
            )),
            Accounting::Modelled,
        ),
        (Some(t), None) => (
            newest,
            Some(format!(
                "SGLang version {t:?} not understood: rules of {newest}"
            )),
            Accounting::Approximate,
        ),
        (Some(_), Some(v)) if v > newest && (v.major, v.minor) > (0, 5) => (
            newest,
            Some(format!(
                "SGLang {v} is newer than modelled: rules of {newest}"
            )),
            Accounting::Approximate,
        ),
        (Some(_), Some(v)) if (v.major, v.minor) < (0, 3) => (
            EngineVersion {
                major: 0,
                minor: 3,
                patch: 3,
            },
            Some(format!("SGLang {v} is older than modelled: rules of 0.3.3")),
            Accounting::Approximate,
        ),
        (Some(_), Some(v)) => (v, None, Accounting::Modelled),
    };
    let at = |a: u32, b: u32, c: u32| (ver.major, ver.minor, ver.patch) >= (a, b, c);
    let _ = READ;
    let mut rules = Vec::new();
    let g = i.gpu_mem_mib;
    let ps = f64::from(i.tp.max(1) * i.pp.max(1));

    // chunked prefill and CUDA-graph batch defaults, by GPU memory
    let (chunk_default, bs_default, src) = if at(0, 5, 10) {
        let tp_small = i.tp < 4;
        let (c, b) = if g < 20.0 * 1024.0 {
            (2048, 8)
        } else if g < 35.0 * 1024.0 {
            (2048, if tp_small { 24 } else { 80 })
        } else if g < 60.0 * 1024.0 {
            (4096, if tp_small { 32 } else { 160 })
        } else if g < 160.0 * 1024.0 {
            (8192, if tp_small { 256 } else { 512 })
        } else {
            (16384, 512)
        };
        (
            c,
            b,
            "0.5.10.post1 sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings",
        )
    } else {
        let c = if g < 35.0 * 1024.0 {
            2048
        } else if g < 160.0 * 1024.0 {
            8192
        } else {
            16384
        };
        (
            c,
            160,
            "0.4.9 sglang/srt/server_args.py ServerArgs.__post_init__ (chunked_prefill_size by GPU memory)",
        )
    };
    let chunked = i.chunked_prefill_size.unwrap_or(chunk_default);
    let graph_bs = i.cuda_graph_max_bs.unwrap_or(bs_default) as f64;
    rules.push(rule(
        "chunked_prefill_size",
        format!(
            "{chunked}{}",
            if i.chunked_prefill_size.is_some() {
                " (given)"
            } else {
                ""
            }
        ),
        src,
    ));

    // mem_fraction_static
    let (frac, fsrc): (f64, String) = if let Some(f) = i.mem_fraction_static {
        (f, "--mem-fraction-static as given".into())
    } else if at(0, 5, 10) {
        let mut reserved =
            512.0 + (chunked.max(2048) as f64) * 1.5 + graph_bs * 2.0 + ps / 8.0 * 1024.0;
        if !i.disable_piecewise_cuda_graph {
            reserved += if i.mla {
                1.5 * 1024.0
            } else {
                piecewise_sizes(chunked) as f64 * 8.0
            };
        }
        if g > 60.0 * 1024.0 {
            reserved = reserved.max(10.0 * 1024.0);
        }
        (
            round3((g - reserved) / g),
            format!(
                "(gpu_mem − reserved {reserved:.0} MiB) / gpu_mem: 0.5.10.post1 sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings"
            ),
        )
    } else if at(0, 4, 9) {
        let reserved = if g < 35.0 * 1024.0 {
            (2.8 + ps / 10.0) * 1024.0
        } else if g < 90.0 * 1024.0 {
            (9.5 + ps / 2.0) * 1024.0
        } else if g < 160.0 * 1024.0 {
            (12.0 + ps / 2.0) * 1024.0
        } else {
            32.0 * 1024.0
        };
        let f = round3((g - reserved) / g);
        (
            if i.multimodal { f * 0.9 } else { f },
            format!(
                "(gpu_mem − reserved {reserved:.0} MiB) / gpu_mem{}: 0.4.9 sglang/srt/server_args.py ServerArgs.__post_init__",
                if i.multimodal {
                    " × 0.9 (multimodal)"
                } else {
                    ""
                }
            ),
        )
    } else {
        let tp = i.tp;
        let f = if tp >= 16 {
            0.79
        } else if tp >= 8 {
            if at(0, 4, 3) { 0.81 } else { 0.83 }
        } else if tp >= 4 {
            0.85
        } else if tp >= 2 {
            0.87
        } else {
            0.88
        };
        (
            f,
            format!(
                "by TP size: {} sglang/srt/server_args.py ServerArgs.__post_init__",
                if at(0, 4, 3) { "0.4.3.post4" } else { "0.3.3" }
            ),
        )
    };
    rules.push(rule("mem_fraction_static", format!("{frac}"), &fsrc));
    let rest = i.free_at_start as f64 - i.weights as f64 - i.free_at_start as f64 * (1.0 - frac);
    let tokens = if rest > 0.0 && i.cell_size > 0 {
        (rest / i.cell_size as f64).floor() as u64
    } else {
        0
    };
    rules.push(rule(
        "kv_pool",
        format!(
            "rest = free after weights − free at start × (1 − {frac}) = {:.2} GiB; tokens = rest // {} B per token",
            rest / GIB,
            i.cell_size
        ),
        if at(0, 5, 0) {
            "0.5.10.post1 sglang/srt/model_executor/model_runner_kv_cache_mixin.py profile_max_num_token"
        } else {
            "0.3.3/0.4.3.post4 sglang/srt/model_executor/model_runner.py ModelRunner.profile_max_num_token"
        },
    ));
    rules.push(rule(
        "outside_the_fraction",
        "activations and CUDA graphs use the 1 − mem_fraction_static share".into(),
        "sglang/srt/server_args.py (mem_fraction_static = (weights + KV pool) / GPU memory)",
    ));
    SglangKv {
        mem_fraction_static: frac,
        rest: rest as i64,
        tokens,
        chunked_prefill_size: chunked,
        info: EngineRules {
            engine: "sglang".into(),
            requested_version: i.version.map(str::to_string),
            rules_of: ver.to_string(),
            note,
            accounting,
            rules,
        },
    }
}

/// What SGLang's weight loading takes on one GPU beyond the planner's weights, with the
/// rules applied: the bytes to add to the planner's per-GPU weights.
///
/// - From 0.4.3 on CUDA the RoPE cos/sin cache stays in fp32 (`RotaryEmbedding.__init__`,
///   "cache needs to be in FP32 for numerical stability": 0.4.3.post4
///   `sglang/srt/layers/rotary_embedding.py`, 0.5.10.post1 `layers/rotary_embedding/base.py`);
///   the planner's weights count it in the model dtype. 0.3.3 uses vLLM's `get_rope`, which
///   casts it to the model dtype.
/// - "Load weight end. mem usage" and `profile_max_num_token` read the driver's free memory
///   (`get_available_gpu_memory`: `torch.cuda.empty_cache()` then `torch.cuda.mem_get_info`),
///   so the caching allocator's rounding of each parameter is charged too ([`allocator`]).
pub fn load_extra(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    shard: Shard,
    version: Option<&str>,
) -> (u64, Vec<Rule>) {
    let ver = version
        .and_then(EngineVersion::parse)
        .unwrap_or(EngineVersion {
            major: 0,
            minor: 5,
            patch: 10,
        });
    let positions_dim = arch.max_position_embeddings * u64::from(arch.rotary_dim);
    let counted = positions_dim * arch.dtype.bytes();
    let fp32 = (ver.major, ver.minor, ver.patch) >= (0, 4, 3);
    let rope = if fp32 { positions_dim * 4 } else { counted };
    let slack = allocator::load_slack(arch, quant, shard, rope);
    let mut rules = Vec::new();
    if fp32 {
        rules.push(rule(
            "rope_cache",
            format!("fp32 on CUDA: {:.3} GiB", rope as f64 / GIB),
            "0.4.3.post4 sglang/srt/layers/rotary_embedding.py RotaryEmbedding.__init__ (cache kept in FP32 when CUDA)",
        ));
    }
    rules.push(rule(
        "load_allocator_slack",
        format!(
            "{:.3} GiB the CUDA caching allocator holds beyond the parameters (2 MiB rounding per tensor)",
            slack as f64 / GIB
        ),
        "sglang/srt/utils.py get_available_gpu_memory (empty_cache, mem_get_info); PyTorch c10/cuda/CUDACachingAllocator.cpp (kRoundLarge, kLargeBuffer)",
    ));
    (rope.saturating_sub(counted) + slack, rules)
}

/// KV bytes per token SGLang budgets for a DeepSeek sparse-attention (NSA/DSA) model (which
/// it detects with `is_deepseek_nsa`, 0.5.10.post1 `sglang/srt/configs/model_config.py`: a
/// DeepSeek V3-family architecture with `index_topk` set, as `arch` reads it):
/// `get_cell_size_per_token` (0.5.10.post1 `model_executor/model_runner_kv_cache_mixin.py`)
/// counts the latent `(kv_lora_rank + qk_rope_head_dim) × kv_bytes` per layer, plus the
/// indexer's keys with their fp32 scale per 128 values, `index_head_dim + index_head_dim / 128 ×
/// 4` bytes (`NSATokenToKVPool.quant_block_size`, `index_k_with_scale_buffer_dtype` uint8).
/// Releases before 0.5.10 are not read: the indexer was left out of the budget before SGLang
/// PR #11309 (see the DeepSeek V3.2-Exp row of `fixtures/tools/engine-logs/sglang.jsonl`).
pub fn nsa_cell_size(
    mla: &crate::arch::Mla,
    layers: u64,
    index_head_dim: u32,
    kv_bytes: u64,
) -> u64 {
    let latent = u64::from(mla.kv_lora_rank + mla.qk_rope_head_dim) * kv_bytes;
    let d = u64::from(index_head_dim);
    layers * (latent + d + d / 128 * 4)
}

/// The KV dtype SGLang 0.5.10 picks for an NSA model when `--kv-cache-dtype` is `auto`
/// (`ServerArgs._set_default_nsa_kv_cache_dtype`): fp8_e4m3 on compute capability ≥ 10
/// (Blackwell), else bfloat16. Returns the bytes per value.
pub fn nsa_default_kv_bytes(sm_major: Option<u32>) -> u64 {
    if sm_major.is_some_and(|m| m >= 10) {
        1
    } else {
        2
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// How many piecewise CUDA-graph sizes 0.5.10 captures up to `max_tokens`
/// (`ServerArgs._generate_piecewise_cuda_graph_tokens`).
fn piecewise_sizes(max_tokens: u64) -> usize {
    let ranges: [(u64, u64, u64); 6] = [
        (4, 33, 4),
        (48, 257, 16),
        (288, 513, 32),
        (576, 1025, 64),
        (1280, 4097, 256),
        (4608, max_tokens + 1, 512),
    ];
    ranges
        .iter()
        .map(|&(a, b, s)| {
            (a..b)
                .step_by(s as usize)
                .filter(|x| *x <= max_tokens)
                .count()
        })
        .sum()
}
