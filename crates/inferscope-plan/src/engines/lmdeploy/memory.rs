//! LMDeploy's KV-cache accounting, per backend and release.
//!
//! **The fraction rule** (`--cache-max-entry-count F`, default 0.8):
//!
//! ```text
//! TurboMind 0.1.0–0.2.1:   blocks = ⌊total × F⌋ // block_bytes            (F < 1; F ≥ 1 is a block count)
//! TurboMind 0.2.2–0.14.x:  blocks = ⌊free × F⌋ // block_bytes             (free: min over TP ranks)
//! TurboMind ≥ 0.15.0:      cache  = ⌊free × F⌋ bytes, one object cache     (0 < F < 1 only)
//! PyTorch:                 blocks = ⌊(free − runtime) × F⌋ // block_bytes  (free after torch.cuda.empty_cache)
//!   runtime ≤ 0.9.x:  max_prefill_token_num × vocab × 7
//!   runtime ≥ 0.10.0: (max_prefill_token_num + 2 × max_batches) × vocab × 2
//! ```
//!
//! Sources: v0.2.1 `src/turbomind/models/llama/BlockManager.cc` `BlockManager::GetBlockCount`
//! (`cudaMemGetInfo` → `total * ratio`); v0.2.2 the same function (`get_free_size()` →
//! `free * ratio`) with `GetSyncFreeMemSize` (atomic min over ranks); v0.14.0
//! `src/turbomind/engine/engine.cc` `Engine::Impl::CreateSequenceManager` (`AllReduce(free,
//! kMin)`); v0.15.0+ `src/turbomind/turbomind.cc` `TurboMind::Impl::CreateEngine` ("Object cache
//! budget: … from free … and ratio …", refuses F ≥ 1); PyTorch v0.3.0
//! `lmdeploy/pytorch/engine/model_agent.py` `_update_cache_config`, v0.9.0/v0.16.0/0.18.0
//! `lmdeploy/pytorch/engine/executor/base.py` `ExecutorBase._get_runtime_size` and
//! `update_configs`. 0.18.0 `lmdeploy/messages.py` `TurbomindEngineConfig` docstring says the
//! same boundary: "between v0.2.0 and v0.2.1 … TOTAL GPU memory … greater than v0.2.1 … FREE".
//!
//! "free" is `cudaMemGetInfo`'s free memory when the cache is sized: after the weights, the
//! CUDA context and (TurboMind) the model's runtime buffers, so the KV cache a plan predicts
//! depends on what else is resident. Pure.

use super::{Backend, QuantPolicy};
use crate::arch::ModelArch;
use crate::memory::{EngineVersion, GIB};
use crate::rules::{Accounting, EngineRules, Rule};

/// What this room cannot size, said rather than guessed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("LMDeploy memory not modelled: {0}")]
pub struct NotModelled(pub String);

const fn v(major: u32, minor: u32, patch: u32) -> EngineVersion {
    EngineVersion {
        major,
        minor,
        patch,
    }
}

/// First release whose TurboMind takes F of the FREE memory (v0.2.2 `GetSyncFreeMemSize`).
pub const TM_FREE_SINCE: EngineVersion = v(0, 2, 2);
/// First release with TurboMind's single object cache (v0.15.0 `TurboMind::Impl::CreateEngine`).
pub const TM_OBJECT_CACHE_SINCE: EngineVersion = v(0, 15, 0);
/// First release with the block manager and a fractional `cache_max_entry_count` (v0.1.0).
pub const TM_BLOCKS_SINCE: EngineVersion = v(0, 1, 0);
/// First release whose PyTorch runtime reserve is `(prefill + 2 × batches) × vocab × 2`.
pub const PT_RUNTIME_V2_SINCE: EngineVersion = v(0, 10, 0);
/// Oldest PyTorch engine read (v0.3.0 `model_agent.py` `_update_cache_config`).
pub const PT_OLDEST_READ: EngineVersion = v(0, 3, 0);

/// Bytes of one activation element: LMDeploy computes in fp16 or bf16 whatever the checkpoint
/// (`messages.py` `TurbomindEngineConfig.dtype` / `PytorchEngineConfig.dtype`: `auto`, `float16`,
/// `bfloat16`; fp32 checkpoints run in fp16), so the model dtype of the cache is 2 bytes.
const ACT_BYTES: u64 = 2;

/// KV bytes of one block on one GPU (all layers), and of one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockBytes {
    /// Tokens per block (`--cache-block-seq-len`, as the engine adjusts it).
    pub block_len: u32,
    /// Bytes of one block, all layers, this GPU's KV heads.
    pub block: u64,
}

impl BlockBytes {
    /// Bytes per token (block / block_len).
    pub fn per_token(&self) -> f64 {
        self.block as f64 / f64::from(self.block_len.max(1))
    }
}

fn kv_heads_here(arch: &ModelArch, tp: u32) -> u64 {
    u64::from(arch.num_kv_heads)
        .div_ceil(u64::from(tp.max(1)))
        .max(1)
}

fn check_shape(arch: &ModelArch) -> Result<(), NotModelled> {
    if arch.mla.is_some() {
        return Err(NotModelled(
            "multi-head latent attention (TurboMind and PyTorch size MLA caches with their own layouts)".into(),
        ));
    }
    if !arch.state_layers.is_empty() {
        return Err(NotModelled(
            "recurrent-state layers (linear attention / Mamba) need the state cache, which is sized apart".into(),
        ));
    }
    Ok(())
}

/// TurboMind's block: per layer, per local KV head, K and V of `block_len` tokens, each token
/// `head_dim × bits / 8` bytes plus, when quantized, a scale and a zero in the model dtype
/// (v0.9.0 `src/turbomind/kernels/attention/block.h` `Layout::layer_size`,
/// `token_data_size` = q_bits × head_dim / 8, `token_param_size` = t_bits × 2 / 8 with t_bits
/// 0 unquantized; `LlamaBatch::LlamaBatch` sets elem_bits = quant_policy). Every decoder layer
/// gets a full block, sliding-window layers included.
pub fn turbomind_block(
    arch: &ModelArch,
    tp: u32,
    block_len: u32,
    quant: QuantPolicy,
) -> Result<BlockBytes, NotModelled> {
    check_shape(arch)?;
    let (q_bits, t_bits) = match quant {
        QuantPolicy::None => (ACT_BYTES * 8, 0),
        QuantPolicy::Int8 => (8, ACT_BYTES * 8),
        QuantPolicy::Int4 => (4, ACT_BYTES * 8),
        other => {
            return Err(NotModelled(format!(
                "--quant-policy {} on TurboMind (0.18.0 messages.py TurbomindEngineConfig.__post_init__ refuses it)",
                other.value()
            )));
        }
    };
    let token = q_bits * u64::from(arch.head_dim) / 8 + t_bits * 2 / 8;
    // saturating: block_len comes from the command line
    let layer = kv_heads_here(arch, tp)
        .saturating_mul(2 * u64::from(block_len))
        .saturating_mul(token);
    Ok(BlockBytes {
        block_len,
        block: layer.saturating_mul(u64::from(arch.num_layers)),
    })
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a).saturating_mul(a)
}

/// The PyTorch engine's block (0.18.0 `lmdeploy/pytorch/engine/cache_engine/schema.py`
/// `build_k_cache_desc`/`build_v_cache_desc`/`build_quant_cache_descs`, each payload rounded
/// up to 256 bytes by `CacheDesc`): K and V of `block_len × local heads × head_dim` in the model
/// dtype (fp8: 1 byte; int8/int4: `uint8` with int4 packing two per byte, TurboQuant V four per
/// byte), plus for int4/int8/TurboQuant a scale-and-zero of 2 values per token and head in the
/// model dtype (TurboQuant V: 1). Heads of 512 or more get 32-token blocks
/// (`executor/base.py` `_adjust_block_size`).
pub fn pytorch_block(
    arch: &ModelArch,
    tp: u32,
    block_len: u32,
    quant: QuantPolicy,
) -> Result<BlockBytes, NotModelled> {
    check_shape(arch)?;
    let block_len = if arch.head_dim >= 512 && block_len > 32 {
        32
    } else {
        block_len
    };
    let heads = kv_heads_here(arch, tp);
    let hd = u64::from(arch.head_dim);
    let slots = u64::from(block_len).saturating_mul(heads);
    let (k, v, k_param, v_param) = match quant {
        QuantPolicy::None => {
            let b = slots.saturating_mul(hd * ACT_BYTES);
            (b, b, 0, 0)
        }
        QuantPolicy::Fp8 | QuantPolicy::Fp8E5m2 => {
            let b = slots.saturating_mul(hd);
            (b, b, 0, 0)
        }
        QuantPolicy::Int8 => (
            slots.saturating_mul(hd),
            slots.saturating_mul(hd),
            slots.saturating_mul(2 * ACT_BYTES),
            slots.saturating_mul(2 * ACT_BYTES),
        ),
        QuantPolicy::Int4 => (
            slots.saturating_mul(hd) / 2,
            slots.saturating_mul(hd) / 2,
            slots.saturating_mul(2 * ACT_BYTES),
            slots.saturating_mul(2 * ACT_BYTES),
        ),
        QuantPolicy::TurboQuant => (
            slots.saturating_mul(hd) / 2,
            slots.saturating_mul(hd) / 4,
            slots.saturating_mul(2 * ACT_BYTES),
            slots.saturating_mul(ACT_BYTES),
        ),
    };
    let layer = [k, v, k_param, v_param]
        .iter()
        .filter(|&&b| b > 0)
        .map(|&b| round_up(b, 256))
        .fold(0u64, u64::saturating_add);
    Ok(BlockBytes {
        block_len,
        block: layer.saturating_mul(u64::from(arch.num_layers)),
    })
}

/// Inputs of one KV sizing on one GPU.
#[derive(Debug, Clone)]
pub struct KvInputs<'a> {
    /// LMDeploy version, when known.
    pub version: Option<&'a str>,
    /// Which engine.
    pub backend: Backend,
    /// `cudaMemGetInfo` total, bytes (TurboMind ≤ 0.2.1 takes F of this).
    pub total: u64,
    /// `cudaMemGetInfo` free when the cache is sized (min over TP ranks), bytes.
    pub free: u64,
    /// The block ([`turbomind_block`] / [`pytorch_block`]).
    pub block: BlockBytes,
    /// `--cache-max-entry-count`.
    pub ratio: f64,
    /// Vocabulary (PyTorch runtime reserve).
    pub vocab_size: u64,
    /// `--max-prefill-token-num`.
    pub max_prefill_token_num: u64,
    /// Batch entries (`--max-batch-size` or the engine's default).
    pub max_batches: u64,
    /// `--num-gpu-blocks` (PyTorch; 0 = from memory).
    pub num_gpu_blocks: u64,
}

/// One KV sizing.
#[derive(Debug, Clone)]
pub struct LmdeployKv {
    /// KV bytes on this GPU.
    pub kv_bytes: u64,
    /// Blocks (TurboMind ≥ 0.15: the object cache expressed in blocks, an approximation).
    pub blocks: u64,
    /// Tokens the cache holds (`blocks × block_len`).
    pub tokens: u64,
    /// Tokens per block (`--cache-block-seq-len`, or the release's default when not given).
    pub block_len: u32,
    /// PyTorch's runtime reserve taken off free memory before F (0 for TurboMind).
    pub runtime_reserve: u64,
    /// The prefill budget after PyTorch's halving loop.
    pub max_prefill_token_num: u64,
    /// The rules applied.
    pub info: EngineRules,
}

fn rule(rule: &str, value: impl Into<String>, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value: value.into(),
        source: source.into(),
    }
}

/// The `cache_max_entry_count` rule of a release and backend.
pub fn fraction_rule(ver: EngineVersion, backend: Backend) -> Rule {
    match backend {
        Backend::Turbomind if ver < TM_FREE_SINCE => rule(
            "cache_max_entry_count",
            "F < 1: fraction of TOTAL GPU memory; F ≥ 1: a block count",
            "v0.2.1 src/turbomind/models/llama/BlockManager.cc BlockManager::GetBlockCount (total * ratio); 0.18.0 lmdeploy/messages.py TurbomindEngineConfig docstring",
        ),
        Backend::Turbomind if ver < TM_OBJECT_CACHE_SINCE => rule(
            "cache_max_entry_count",
            "F < 1: fraction of the memory FREE after the weights (min over TP ranks); F ≥ 1: a block count",
            "v0.2.2 src/turbomind/models/llama/BlockManager.cc GetSyncFreeMemSize, BlockManager::GetBlockCount (free * ratio); v0.14.0 src/turbomind/engine/engine.cc CreateSequenceManager",
        ),
        Backend::Turbomind => rule(
            "cache_max_entry_count",
            "0 < F < 1: fraction of the memory FREE after the weights (min over TP ranks) for one object cache; block counts refused",
            "v0.15.0 src/turbomind/turbomind.cc TurboMind::Impl::CreateEngine ('Object cache budget'); 0.18.0 _turbomind.so strings",
        ),
        Backend::Pytorch => rule(
            "cache_max_entry_count",
            "0 < F < 1: fraction of the memory free after the weights, less the runtime reserve",
            "0.18.0 lmdeploy/pytorch/engine/executor/base.py ExecutorBase._get_runtime_size, _update_num_gpu_blocks; lmdeploy/messages.py PytorchEngineConfig.__post_init__ (0 < F < 1)",
        ),
    }
}

/// The block-size rule of a release and backend.
pub fn block_rule(ver: EngineVersion, backend: Backend) -> Rule {
    match backend {
        Backend::Turbomind if ver >= TM_OBJECT_CACHE_SINCE => rule(
            "block",
            "--cache-block-seq-len tokens (default 64) per block inside the object cache; K/V of every layer",
            "v0.15.0 src/turbomind/turbomind.cc CreateEngine; 0.18.0 lmdeploy/messages.py TurbomindEngineConfig.cache_block_seq_len",
        ),
        Backend::Turbomind => rule(
            "block",
            "--cache-block-seq-len tokens (default 64; 128 before v0.3.0) × every layer's K and V (+ scale/zero when quantized)",
            "v0.9.0 src/turbomind/kernels/attention/block.h Layout::block_size; src/turbomind/models/llama/SequenceManager.cc",
        ),
        Backend::Pytorch => rule(
            "block",
            "--cache-block-seq-len tokens (default 64; 32 for heads ≥ 512), payloads rounded to 256 bytes",
            "0.18.0 lmdeploy/pytorch/engine/cache_engine/schema.py CacheDesc; executor/base.py _adjust_block_size",
        ),
    }
}

/// The PyTorch runtime-reserve rule of a release.
pub fn runtime_rule(ver: EngineVersion) -> Rule {
    if ver >= PT_RUNTIME_V2_SINCE {
        rule(
            "runtime_reserve",
            "(max_prefill_token_num + 2 × max_batch_size) × vocab × 2 bytes off free memory before F; max_prefill_token_num halved until ≥ 16 blocks fit",
            "v0.10.0–0.18.0 lmdeploy/pytorch/engine/executor/base.py ExecutorBase._get_runtime_size",
        )
    } else {
        rule(
            "runtime_reserve",
            "max_prefill_token_num × vocab × 7 bytes (lm_head 2 + float 4 + misc 1) off free memory before F; halved until ≥ 16 blocks fit",
            "v0.3.0 lmdeploy/pytorch/engine/model_agent.py _update_cache_config __get_runtime_size; v0.9.0 executor/base.py _get_runtime_size",
        )
    }
}

/// Size the KV cache of one start-up on one GPU.
pub fn kv(i: &KvInputs) -> Result<LmdeployKv, NotModelled> {
    let mut info = super::engine_rules(i.version, i.backend);
    let ver = EngineVersion::parse(&info.rules_of).unwrap_or(super::NEWEST_READ);
    let f = i.ratio;
    if !f.is_finite() || f <= 0.0 {
        return Err(NotModelled(format!("--cache-max-entry-count {f}")));
    }
    let block = i.block.block.max(1);
    let mut runtime = 0u64;
    let mut prefill = i.max_prefill_token_num;
    let (kv_bytes, blocks) = match i.backend {
        Backend::Turbomind if ver < TM_BLOCKS_SINCE => {
            return Err(NotModelled(format!(
                "TurboMind {ver}: before 0.1.0 cache_max_entry_count counted whole sequences of session_len"
            )));
        }
        Backend::Turbomind if f >= 1.0 && ver < TM_OBJECT_CACHE_SINCE => {
            let b = f as u64;
            (b.saturating_mul(block), b)
        }
        Backend::Turbomind if f >= 1.0 => {
            return Err(NotModelled(format!(
                "TurboMind {ver} refuses --cache-max-entry-count {f} (≥ 1 is no longer a block count)"
            )));
        }
        Backend::Turbomind => {
            let base = if ver < TM_FREE_SINCE { i.total } else { i.free };
            let budget = (base as f64 * f) as u64;
            if ver >= TM_OBJECT_CACHE_SINCE {
                (budget, budget / block)
            } else {
                let b = budget / block;
                (b.saturating_mul(block), b)
            }
        }
        Backend::Pytorch if i.num_gpu_blocks > 0 => {
            (i.num_gpu_blocks.saturating_mul(block), i.num_gpu_blocks)
        }
        Backend::Pytorch => {
            if f >= 1.0 {
                return Err(NotModelled(format!(
                    "the PyTorch engine refuses --cache-max-entry-count {f} (0 < F < 1)"
                )));
            }
            let reserve = |p: u64| -> u64 {
                if ver >= PT_RUNTIME_V2_SINCE {
                    p.saturating_add(i.max_batches.saturating_mul(2))
                        .saturating_mul(i.vocab_size)
                        .saturating_mul(2)
                } else {
                    p.saturating_mul(i.vocab_size).saturating_mul(7)
                }
            };
            let blocks_after = |r: u64| (i.free.saturating_sub(r) as f64 * f) as u64 / block;
            while prefill > 0 {
                runtime = reserve(prefill);
                if blocks_after(runtime) >= 16 {
                    break;
                }
                prefill /= 2;
            }
            let b = blocks_after(runtime);
            (b.saturating_mul(block), b)
        }
    };
    if ver >= TM_OBJECT_CACHE_SINCE && i.backend == Backend::Turbomind {
        // the budget is exact (CreateEngine); how the object allocator packs blocks was not read
        info.accounting = Accounting::Approximate;
        info.note = Some(format!(
            "TurboMind {ver}: one object cache of ⌊free × F⌋ bytes; blocks = budget / block bytes (allocator packing not modelled)"
        ));
    }
    if ver < PT_OLDEST_READ && i.backend == Backend::Pytorch {
        info.accounting = Accounting::Approximate;
        info.note = Some(format!(
            "PyTorch engine {ver} is older than the oldest read ({PT_OLDEST_READ}): its rules stand in"
        ));
    }
    info.rules.push(rule(
        "kv_cache",
        format!(
            "{blocks} blocks × {:.2} MiB = {:.2} GiB ({} tokens)",
            block as f64 / (1u64 << 20) as f64,
            kv_bytes as f64 / GIB,
            blocks.saturating_mul(u64::from(i.block.block_len))
        ),
        "the fraction rule above applied to the free memory given",
    ));
    Ok(LmdeployKv {
        kv_bytes,
        blocks,
        tokens: blocks.saturating_mul(u64::from(i.block.block_len)),
        block_len: i.block.block_len,
        runtime_reserve: runtime,
        max_prefill_token_num: prefill,
        info,
    })
}

/// First and last release (exclusive) whose TurboMind buffers allocated before the cache is
/// sized were read ([`turbomind_presizing_bytes`]): v0.6.0 to v0.9.2.
pub const TM_PRESIZING_READ: (EngineVersion, EngineVersion) = (v(0, 6, 0), v(0, 10, 0));

/// The first release whose GEMM workspace also holds the tensor maps, and whose 4-bit weight
/// conversion was read (v0.9.0).
const TM_TENSORMAPS: EngineVersion = v(0, 9, 0);

/// Bytes TurboMind 0.6–0.9 allocates on each GPU after the weights and before
/// `BlockManager::GetBlockCount` reads the free memory, from the source (v0.9.0, v0.9.2; and
/// v0.6.0, v0.7.3, v0.8.0, where `LlamaTritonModel` likewise builds `LlamaV2`, whose
/// `UnifiedAttentionLayer` constructor calls `allocateWorkspace()`, before `LlamaBatch`'s
/// constructor creates the `SequenceManager`):
/// `LlamaTritonModel::createEngine` builds the `Context` and `LlamaV2` (whose `UnifiedDecoder`
/// builds the attention layer) before `LlamaBatch::LlamaBatch` creates the `SequenceManager`;
/// `LlamaBatch::AllocateBuffer` comes after it and does not count.
///
/// * `src/turbomind/models/llama/LlamaLinear.cu` `LlamaLinear::Impl::Impl`: GEMM barriers
///   (`Gemm::kBarriersSize` = 1 MiB), partials (`kPartialsSize` = 32 MiB) and, from v0.9.0,
///   tensor maps (allocated with `partials_size`, 32 MiB);
/// * `src/turbomind/models/llama/unified_attention_layer.cc` `UnifiedAttentionLayer::
///   UnifiedAttentionLayer`: `kMaxWorkspaceTokens` (4096) × local heads of float `partial_M`,
///   `partial_L`, `partial_O` (× head_dim) and int `barriers`, plus 4096 int `split_cnt`.
///
/// * from v0.9.0, with 4-bit (AWQ/GPTQ) weights of a dense model (`u4_group` = the group
///   size; earlier releases' conversion, through `utils/allocator.h`, was not read): what
///   `LlamaWeight`'s own memory pool keeps of the conversion temporaries. The weights are
///   allocated from that pool (`LlamaWeight::LlamaWeight`: `core::Allocator{stream_, false}`,
///   `core/allocator.cc` `CudaMemPoolAllocator`: release threshold −1, never given back), and
///   `LlamaWeight::prepare` converts each 4-bit weight (`LlamaDenseWeight.cc` `convert_u4`: a
///   transposed copy, in × out / 2 bytes; a u16 copy, in × out × 2; fused scales and zeros,
///   in / group × out × 4), gate and up fused first (`LlamaFfnWeight::prepare`). Freed
///   temporaries are reused by the next conversions, so the pool keeps the largest one's: on an
///   H200 (driver 580.159.04) the replay `fixtures/engines/lmdeploy/tools/turbomind_pool_probe.py`
///   of this sequence for Qwen3-8B-AWQ kept 0.245 GiB beyond the live weights, this formula
///   0.237 GiB.
///
/// Not counted (said in docs/engines/lmdeploy.md): the CUDA and PyTorch contexts beyond the
/// shared context figure. `None` outside the releases read.
pub fn turbomind_presizing_bytes(
    arch: &ModelArch,
    tp: u32,
    ver: EngineVersion,
    u4_group: Option<u32>,
) -> Option<u64> {
    if ver < TM_PRESIZING_READ.0 || ver >= TM_PRESIZING_READ.1 {
        return None;
    }
    const MIB: u64 = 1 << 20;
    let tensormaps = if ver >= TM_TENSORMAPS { 32 * MIB } else { 0 };
    let gemm = MIB + 32 * MIB + tensormaps;
    let tokens = 4096u64;
    let heads = u64::from(arch.num_attention_heads)
        .div_ceil(u64::from(tp.max(1)))
        .max(1);
    let per_head = 4 + 4 + 4 * u64::from(arch.head_dim) + 4;
    let attention = tokens
        .saturating_mul(heads)
        .saturating_mul(per_head)
        .saturating_add(tokens * 4);
    let conversion = match u4_group {
        Some(group) if arch.moe.is_none() && arch.mla.is_none() && ver >= TM_TENSORMAPS => {
            let tp = u64::from(tp.max(1));
            let (h, hd) = (arch.hidden_size, u64::from(arch.head_dim));
            let q = u64::from(arch.num_attention_heads) * hd;
            let kv = u64::from(arch.num_kv_heads) * hd;
            let i = arch.intermediate_size;
            // (in, out) of each 4-bit weight on one GPU: qkv, o, fused gate+up, down
            [
                (h, (q + 2 * kv) / tp),
                (q / tp, h),
                (h, 2 * i / tp),
                (i / tp, h),
            ]
            .iter()
            .map(|&(input, out)| {
                let n = input.saturating_mul(out);
                (n / 2)
                    .saturating_add(n.saturating_mul(2))
                    .saturating_add((input / u64::from(group.max(1))).saturating_mul(out) * 4)
            })
            .max()
            .unwrap_or(0)
        }
        _ => 0,
    };
    Some(gemm.saturating_add(attention).saturating_add(conversion))
}

/// The engine's default `--max-batch-size` for a GPU name (0.18.0 `lmdeploy/utils.py`
/// `get_max_batch_size('cuda')`: substring match on `torch.cuda.get_device_name(0).lower()`).
pub fn default_max_batch_size(gpu_name: &str) -> u32 {
    let n = gpu_name.to_ascii_lowercase();
    for (key, size) in [
        ("a100", 384),
        ("a800", 384),
        ("h100", 1024),
        ("h800", 1024),
        ("l20y", 1024),
        ("h200", 1024),
    ] {
        if n.contains(key) {
            return size;
        }
    }
    128
}

/// The `session_len` the engine ends up with: TurboMind ≤ 0.14 cuts it to the tokens the
/// cache holds (`LlamaBatch::LlamaBatch` / `CreateSequenceManager`: `min(max_block_count ×
/// block_len, session_len)`); other engines keep it.
pub fn effective_session_len(session_len: u64, kv: &LmdeployKv, backend: Backend) -> u64 {
    match backend {
        Backend::Turbomind => session_len.min(kv.tokens),
        Backend::Pytorch => session_len,
    }
}

/// One plan: a parsed command, the model and one GPU → the KV cache LMDeploy will size.
/// `weights` is the planner's per-GPU weight bytes (`crate::memory::weights_per_gpu`, without
/// vLLM's RoPE cache) and `context` what else is resident when the cache is sized (the CUDA
/// context; the caller states where its figure comes from). `gpu_name` picks the default
/// `--max-batch-size`. With no `--backend`, TurboMind is assumed (its default; the rule says so).
pub fn plan(
    arch: &ModelArch,
    a: &super::args::LmdeployArgs,
    version: Option<&str>,
    gpu_name: &str,
    total: u64,
    weights: u64,
    context: u64,
) -> Result<LmdeployKv, NotModelled> {
    let backend = a.backend.unwrap_or(Backend::Turbomind);
    let ver = EngineVersion::parse(&super::resolve_version(version).0.to_string())
        .unwrap_or(super::NEWEST_READ);
    // the release's defaults for what the command did not give: 0.5 and 128-token blocks up to
    // v0.2.1 (v0.2.1 lmdeploy/messages.py TurbomindEngineConfig, cli/utils.py; v0.1.0
    // turbomind/deploy/target_model/base.py config.ini), 0.8 from v0.2.2; 128-token blocks
    // until v0.2.6, 64 from v0.3.0 (messages.py TurbomindEngineConfig.cache_block_seq_len)
    let (given_ratio, given_block) = a.cache_flags_given;
    let ratio = if !given_ratio && ver < TM_FREE_SINCE {
        0.5
    } else {
        a.cache_max_entry_count
    };
    let block_len = if !given_block && ver < v(0, 3, 0) {
        128
    } else {
        a.cache_block_seq_len
    };
    let block = match backend {
        Backend::Turbomind => turbomind_block(arch, a.tp, block_len, a.quant_policy)?,
        Backend::Pytorch => pytorch_block(arch, a.tp, block_len, a.quant_policy)?,
    };
    let max_batches = a
        .max_batch_size
        .unwrap_or_else(|| default_max_batch_size(gpu_name));
    // 4-bit integer weights: --model-format awq/gptq, else the checkpoint's own config
    let u4_group = a
        .model_format
        .as_deref()
        .and_then(crate::arch::Quantization::from_method)
        .or_else(|| arch.quantization.clone())
        .filter(|q| q.bits == 4 && !q.float)
        .map(|q| q.group_size);
    let buffers = match backend {
        Backend::Turbomind => turbomind_presizing_bytes(arch, a.tp, ver, u4_group).unwrap_or(0),
        Backend::Pytorch => 0,
    };
    let mut kv = kv(&KvInputs {
        version,
        backend,
        total,
        free: total
            .saturating_sub(weights)
            .saturating_sub(context)
            .saturating_sub(buffers),
        block,
        ratio,
        vocab_size: arch.vocab_size,
        max_prefill_token_num: a.max_prefill_token_num,
        max_batches: u64::from(max_batches),
        num_gpu_blocks: a.num_gpu_blocks,
    })?;
    kv.info.rules.insert(
        1,
        rule(
            "free_memory",
            format!(
                "{:.2} GiB total − {:.2} GiB weights − {:.2} GiB context (estimated: LMDeploy does not print it before TurboMind 0.15)",
                total as f64 / GIB,
                weights as f64 / GIB,
                context as f64 / GIB
            ),
            "cudaMemGetInfo at sizing: v0.14.0 src/turbomind/engine/engine.cc CreateSequenceManager; 0.18.0 lmdeploy/pytorch/engine/model_agent/agent.py get_free_mem",
        ),
    );
    if buffers > 0 {
        kv.info.rules.insert(
            2,
            rule(
                "turbomind_buffers",
                format!(
                    "{:.3} GiB allocated before the cache is sized (GEMM workspace, attention partials, 4-bit weight conversion temporaries kept by the weights' pool), also taken off free memory",
                    buffers as f64 / GIB
                ),
                "v0.9.2 src/turbomind/models/llama/LlamaLinear.cu LlamaLinear::Impl::Impl; unified_attention_layer.cc UnifiedAttentionLayer::UnifiedAttentionLayer (kMaxWorkspaceTokens 4096); LlamaWeight.cc LlamaWeight::LlamaWeight/prepare, LlamaDenseWeight.cc convert_u4, core/allocator.cc CudaMemPoolAllocator (threshold -1); LlamaBatch.cc LlamaBatch::LlamaBatch (SequenceManager before AllocateBuffer)",
            ),
        );
    }
    if a.backend.is_none()
        && let Some(r) = kv.info.rules.iter_mut().find(|r| r.rule == "backend")
    {
        r.value = "turbomind (assumed: the default when TurboMind supports the model)".into();
    }
    Ok(kv)
}
