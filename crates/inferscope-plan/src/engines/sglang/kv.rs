//! SGLang's own KV accounting, per release (read from the released wheels, `pip download
//! sglang==X --no-deps`: 0.3.3, 0.4.3.post4, 0.4.9, 0.5.10.post1, and every release from
//! 0.5.11 to 0.5.23, diffed release by release; each change names its first release).
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

/// Inputs of SGLang's KV sizing on one GPU (`Default`: nothing given, no GPU memory).
#[derive(Debug, Clone, Default)]
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
    /// DeepSeek sparse attention (an MLA model with the indexer): 0.5.17 keeps its prefill
    /// graph where it turns plain MLA's off.
    pub dsa: bool,
    /// A Nemotron-H hybrid (0.5.17 turns its prefill graph off).
    pub nemotron_h: bool,
    /// `--disable-cuda-graph`.
    pub disable_cuda_graph: bool,
    /// `--max-running-requests` when given.
    pub max_running_requests: Option<u64>,
    /// `--speculative-algorithm` as written (`NEXTN` not yet renamed: the memory settings see
    /// the raw name).
    pub speculative: Option<&'a str>,
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
const READ: &[(u32, u32, u32)] = &[
    (0, 3, 3),
    (0, 4, 3),
    (0, 4, 9),
    (0, 5, 10),
    (0, 5, 11),
    (0, 5, 12),
    (0, 5, 13),
    (0, 5, 14),
    (0, 5, 15),
    (0, 5, 16),
    (0, 5, 17),
    (0, 5, 18),
    (0, 5, 19),
    (0, 5, 20),
    (0, 5, 21),
    (0, 5, 22),
    (0, 5, 23),
];

/// The newest release read.
pub const NEWEST: EngineVersion = EngineVersion {
    major: 0,
    minor: 5,
    patch: 23,
};

/// Whether the prefill (piecewise, from 0.5.15 "breakable") CUDA graph is captured, and so
/// reserved for, and why not when it is not.
///
/// - `--disable-cuda-graph` turns it off from 0.5.14 (`parse_cuda_graph_config`); before, only
///   `--disable-piecewise-cuda-graph` did (0.5.10.post1 `ServerArgs`).
/// - 0.5.10: speculative decoding turns it off (`_handle_piecewise_cuda_graph` rule 2, removed in
///   0.5.11).
/// - from 0.5.15 the default on CUDA is the breakable graph, which turns itself off for
///   multimodal models, MLA models (0.5.15–0.5.16; 0.5.17 plain MLA but not DeepSeek sparse
///   attention; none from 0.5.18), Nemotron-H hybrids (0.5.17 only) and PP > 1 (from 0.5.19)
///   (`_disable_breakable_cudagraph_if_incompatible`, 0.5.19+ `apply_cuda_graph_compatibility`).
fn prefill_graph(ver: EngineVersion, i: &SglangInputs) -> Result<(), &'static str> {
    let at = |a: u32, b: u32, c: u32| (ver.major, ver.minor, ver.patch) >= (a, b, c);
    let only = |a: u32, b: u32, c: u32| (ver.major, ver.minor, ver.patch) == (a, b, c);
    if i.disable_piecewise_cuda_graph {
        return Err("--disable-piecewise-cuda-graph");
    }
    if i.disable_cuda_graph && at(0, 5, 14) {
        return Err("--disable-cuda-graph (from 0.5.14 it covers the prefill graph)");
    }
    if i.speculative.is_some() && only(0, 5, 10) {
        return Err("speculative decoding (0.5.10 turns the piecewise graph off)");
    }
    if at(0, 5, 15) {
        if i.multimodal {
            return Err("a multimodal model (the breakable graph is incompatible)");
        }
        if i.mla && !at(0, 5, 18) && !(only(0, 5, 17) && i.dsa) {
            return Err("an MLA model (0.5.15–0.5.17: the breakable graph is incompatible)");
        }
        if i.nemotron_h && only(0, 5, 17) {
            return Err("a Nemotron-H hybrid (0.5.17)");
        }
        if i.pp > 1 && at(0, 5, 19) {
            return Err("pipeline parallelism (from 0.5.19)");
        }
    }
    Ok(())
}

fn rule(rule: &str, value: String, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value,
        source: source.into(),
    }
}

/// The release whose rules apply to `--version` `version`, why when it is not that release,
/// and how closely: none given or not understood → the newest read; newer than read → the
/// newest read (approximate); before 0.3 → 0.3.3 (approximate).
pub fn rules_release(version: Option<&str>) -> (EngineVersion, Option<String>, Accounting) {
    let newest = NEWEST;
    match (version, version.and_then(EngineVersion::parse)) {
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
        (Some(_), Some(v)) if v > newest => (
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
    }
}

/// Size SGLang's KV pool on one GPU.
///
/// One piece (~200 lines): the release's defaults (chunked prefill, graph batch), its
/// `mem_fraction_static` rule and `profile_max_num_token`, each pushed with its source in the
/// order SGLang applies them.
pub fn kv(i: &SglangInputs) -> SglangKv {
    let (ver, note, accounting) = rules_release(i.version);
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
        } else if g < 35.0 * 1024.0 && at(0, 5, 20) {
            (4096, if tp_small { 48 } else { 160 })
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
            if at(0, 5, 20) {
                "0.5.23 sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings (by GPU memory; the 20–35 GiB row is 4096 and 48/160 from 0.5.20)"
            } else {
                "0.5.10.post1 sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings"
            },
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
    // 0.5.22: the table's decode batch is capped at --max-running-requests
    let bs_default = match i.max_running_requests {
        Some(m) if at(0, 5, 22) => bs_default.min(m),
        _ => bs_default,
    };
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
        // from 0.5.15 the decode graph term goes with --disable-cuda-graph
        let decode_graph = !(i.disable_cuda_graph && at(0, 5, 15));
        let mut reserved = 512.0
            + (chunked.max(2048) as f64) * 1.5
            + if decode_graph { graph_bs * 2.0 } else { 0.0 }
            + ps / 8.0 * 1024.0;
        let prefill = prefill_graph(ver, i);
        if prefill.is_ok() {
            reserved += if i.mla {
                1.5 * 1024.0
            } else {
                piecewise_sizes(chunked) as f64 * 8.0
            };
        }
        if g > 60.0 * 1024.0 {
            reserved = reserved.max(10.0 * 1024.0);
        }
        // speculative decoding's draft lives outside the fraction until 0.5.13; the reserve
        // for it, added after the floor, is gone from 0.5.14 (draft weights and KV are priced
        // into the budget instead)
        let spec_reserve = match i.speculative {
            Some(_) if at(0, 5, 14) => 0.0,
            Some("STANDALONE") => 6.0 * 1024.0,
            Some("NGRAM") | None => 0.0,
            Some(_) => 4.0 * 1024.0,
        };
        reserved += spec_reserve;
        rules.push(rule(
            "prefill_cuda_graph",
            match prefill {
                Ok(()) => format!(
                    "captured: {} MiB reserved",
                    if i.mla {
                        1536
                    } else {
                        piecewise_sizes(chunked) * 8
                    }
                ),
                Err(why) => format!("not captured: {why}"),
            },
            "0.5.10.post1 sglang/srt/server_args.py _handle_piecewise_cuda_graph; 0.5.15–0.5.18 _disable_breakable_cudagraph_if_incompatible; 0.5.23 arg_groups/cuda_graph_hook.py",
        ));
        (
            round3((g - reserved) / g),
            format!(
                "(gpu_mem − reserved {reserved:.0} MiB{}) / gpu_mem: {} sglang/srt/{}",
                if spec_reserve > 0.0 {
                    format!(", {spec_reserve:.0} of them for the speculative draft")
                } else {
                    String::new()
                },
                if at(0, 5, 19) {
                    "0.5.23"
                } else {
                    "0.5.10.post1"
                },
                if at(0, 5, 19) {
                    "arg_groups/memory_hook.py handle_gpu_memory_settings"
                } else {
                    "server_args.py ServerArgs._handle_gpu_memory_settings"
                }
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
    let mut rest =
        i.free_at_start as f64 - i.weights as f64 - i.free_at_start as f64 * (1.0 - frac);
    // 0.5.18: multimodal models keep 100 MiB of the budget for the embedding cache
    // (`kv_cache_configurator.py` `mm_runtime_reservation_gb`, SGLANG_VLM_CACHE_SIZE_MB)
    if i.multimodal && at(0, 5, 18) {
        rest -= 100.0 * 1024.0 * 1024.0;
        rules.push(rule(
            "multimodal_reserve",
            "100 MiB of the KV budget for the multimodal embedding cache".into(),
            "0.5.18 sglang/srt/mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb",
        ));
    }
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
        if at(0, 5, 19) {
            "0.5.23 sglang/srt/mem_cache/kv_cache_configurator.py KVCacheConfigurator._profile_available_bytes"
        } else if at(0, 5, 0) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A Llama-shaped model on one GPU of `gpu_mem_mib` (the `nvidia-smi` totals of an RTX 4090,
    /// 24564 MiB, and an H100 SXM, 81559 MiB, as in fixtures/tools/nvidia-smi-q).
    fn inputs(version: &'static str, gpu_mem_mib: f64) -> SglangInputs<'static> {
        SglangInputs {
            version: Some(version),
            gpu_mem_mib,
            free_at_start: (gpu_mem_mib * 1024.0 * 1024.0 * 0.97) as u64,
            weights: 16 << 30,
            cell_size: 131_072,
            tp: 1,
            pp: 1,
            ..SglangInputs::default()
        }
    }

    const RTX_4090: f64 = 24564.0;
    const H100: f64 = 81559.0;

    #[test]
    fn the_20_to_35_gib_tier_doubles_its_prefill_chunk_in_0_5_20() {
        // 0.5.19: 512 + 2048 × 1.5 + 24 × 2 + 128 + 42 sizes × 8 = 4096 MiB reserved
        let old = kv(&inputs("0.5.19", RTX_4090));
        assert_eq!(old.chunked_prefill_size, 2048);
        assert_eq!(old.mem_fraction_static, 0.833);
        // 0.5.20: 512 + 4096 × 1.5 + 48 × 2 + 128 + 50 × 8 = 7280 MiB
        let new = kv(&inputs("0.5.20", RTX_4090));
        assert_eq!(new.chunked_prefill_size, 4096);
        assert_eq!(new.mem_fraction_static, 0.704);
        // an 80 GB card is not in that tier
        assert_eq!(kv(&inputs("0.5.23", H100)).mem_fraction_static, 0.830);
    }

    #[test]
    fn disable_cuda_graph_drops_the_graph_reserves_from_0_5_14_and_0_5_15() {
        let off = |v: &'static str| {
            let mut i = inputs(v, H100);
            i.disable_cuda_graph = true;
            kv(&i).mem_fraction_static
        };
        // 0.5.10–0.5.13 keep both terms: 13904 MiB
        assert_eq!(off("0.5.13"), 0.830);
        // 0.5.14 drops the prefill graph's 58 × 8 MiB, 0.5.15 the decode graph's 256 × 2
        assert_eq!(off("0.5.14"), 0.835);
        assert_eq!(off("0.5.15"), 0.841);
    }

    #[test]
    fn the_speculative_reserve_goes_in_0_5_14() {
        let eagle = |v: &'static str, algo: &'static str| {
            let mut i = inputs(v, H100);
            i.speculative = Some(algo);
            kv(&i).mem_fraction_static
        };
        // 0.5.10.post1: the piecewise graph is off with speculative decoding, +4096 after the
        // 10 GiB floor: 13440 + 4096 MiB
        assert_eq!(eagle("0.5.10", "EAGLE"), 0.785);
        assert_eq!(eagle("0.5.10", "NEXTN"), 0.785);
        // 0.5.11–0.5.13 keep the graph: 13904 + 4096
        assert_eq!(eagle("0.5.13", "EAGLE"), 0.779);
        // STANDALONE reserves 6 GiB, NGRAM nothing
        assert_eq!(eagle("0.5.13", "STANDALONE"), 0.754);
        assert_eq!(eagle("0.5.13", "NGRAM"), 0.830);
        // from 0.5.14 the draft is priced into the budget instead
        assert_eq!(eagle("0.5.14", "EAGLE"), 0.830);
    }

    #[test]
    fn the_breakable_prefill_graph_turns_itself_off_by_release() {
        let graph = |v: &'static str, f: fn(&mut SglangInputs)| {
            let mut i = inputs(v, H100);
            f(&mut i);
            kv(&i)
                .info
                .rules
                .iter()
                .find(|r| r.rule == "prefill_cuda_graph")
                .map(|r| r.value.starts_with("captured"))
                .unwrap()
        };
        let mla = |i: &mut SglangInputs| i.mla = true;
        assert!(graph("0.5.14", mla));
        assert!(!graph("0.5.15", mla));
        assert!(!graph("0.5.17", mla));
        assert!(graph("0.5.17", |i| {
            i.mla = true;
            i.dsa = true
        }));
        assert!(graph("0.5.18", mla));
        assert!(!graph("0.5.15", |i| i.multimodal = true));
        assert!(graph("0.5.18", |i| i.pp = 2));
        assert!(!graph("0.5.19", |i| i.pp = 2));
        assert!(!graph("0.5.17", |i| i.nemotron_h = true));
        assert!(graph("0.5.18", |i| i.nemotron_h = true));
    }

    #[test]
    fn multimodal_models_keep_100_mib_from_0_5_18() {
        let rest = |v: &'static str| {
            let mut i = inputs(v, H100);
            i.multimodal = true;
            i.mem_fraction_static = Some(0.8);
            kv(&i).rest
        };
        assert_eq!(rest("0.5.17") - rest("0.5.18"), 100 << 20);
    }

    #[test]
    fn newer_releases_than_read_say_so() {
        let r = kv(&inputs("0.5.24", H100));
        assert_eq!(r.info.rules_of, "0.5.23");
        assert_eq!(r.info.accounting, Accounting::Approximate);
        let r = kv(&SglangInputs {
            version: None,
            ..inputs("x", H100)
        });
        assert_eq!(r.info.rules_of, "0.5.23");
    }
}
