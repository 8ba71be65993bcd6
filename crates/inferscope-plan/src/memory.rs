//! vLLM's memory accounting, per GPU, as the engine does it (see docs/planner.md).
//!
//! The engine loads weights, runs one profiling forward pass, and gives what is left of
//! `gpu_memory_utilization × total` to the KV cache:
//!
//! ```text
//! kv = util × total − weights − non_torch − activation_peak   (− cuda_graph when estimated)
//! ```
//!
//! Each term below is a pure function of the model, the parallel layout and the engine version.
//! The constants are calibrated against real start-up logs (`fixtures/tools/vllm-logs`) and each
//! one says where it comes from.

use crate::arch::{AttentionKind, Dtype, LayerAttention, MlpKind, ModelArch, Quantization};
use serde::{Deserialize, Serialize};

/// 2^30.
pub const GIB: f64 = (1u64 << 30) as f64;

/// A vLLM release, as printed in its banner or passed as `--engine-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EngineVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl EngineVersion {
    /// The newest accounting this planner models (used for `main`, `latest`, or no version).
    pub const LATEST: EngineVersion = EngineVersion {
        major: 0,
        minor: 34,
        patch: 0,
    };

    /// Parse `0.6.4`, `v0.11.0`, `0.8.5.post1`, `main@73c8d677 (between v0.4.1 and v0.4.2)`,
    /// `main` or `latest`. A `main@` build between two releases counts as the older one.
    pub fn parse(s: &str) -> Option<EngineVersion> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        if let Some(i) = lower.find("between") {
            return EngineVersion::parse_plain(lower[i + 7..].split_whitespace().next()?);
        }
        if lower.starts_with("main") || lower == "latest" || lower == "nightly" {
            return Some(EngineVersion::LATEST);
        }
        EngineVersion::parse_plain(&lower)
    }

    fn parse_plain(s: &str) -> Option<EngineVersion> {
        let s = s.trim_start_matches('v');
        let mut it = s.split(['.', '+', '-', ' ']);
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = it
            .next()
            .map(|p| {
                p.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        Some(EngineVersion {
            major,
            minor,
            patch,
        })
    }

    /// `(0, 8)` style comparison.
    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// The V1 engine is the default from 0.8.0.
    pub fn v1_default(self) -> bool {
        self.at_least(0, 8)
    }
}

impl std::fmt::Display for EngineVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Bytes of the weights one GPU holds, by component.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WeightBytes {
    /// Input embedding (and learned positions) on this GPU.
    pub embedding: u64,
    /// LM head on this GPU.
    pub lm_head: u64,
    /// Attention projections of this GPU's layers.
    pub attention: u64,
    /// Dense MLPs and shared experts.
    pub mlp: u64,
    /// Routed experts.
    pub experts: u64,
    /// Norms, routers, biases kept in the native dtype.
    pub other: u64,
    /// Vision/audio tower.
    pub vision: u64,
    /// RoPE cos/sin cache vLLM allocates for max_position_embeddings.
    pub rope_cache: u64,
    /// Copies made after loading (MLA's absorbed W_UK/W_UV), not in the checkpoint.
    pub runtime: u64,
}

impl WeightBytes {
    /// Sum.
    pub fn total(&self) -> u64 {
        self.embedding
            + self.lm_head
            + self.attention
            + self.mlp
            + self.experts
            + self.other
            + self.vision
            + self.rope_cache
            + self.runtime
    }
}

/// How one GPU takes part in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel size.
    pub pp: u32,
    /// This GPU's pipeline stage (0-based).
    pub stage: u32,
    /// Experts are split across the TP×DP group whole (expert parallelism) instead of each
    /// expert being sliced by TP.
    pub expert_parallel: bool,
}

impl Shard {
    /// One GPU, whole model.
    pub const SINGLE: Shard = Shard {
        tp: 1,
        pp: 1,
        stage: 0,
        expert_parallel: false,
    };
}

fn cdiv(a: u64, b: u64) -> u64 {
    if b == 0 { 0 } else { a.div_ceil(b) }
}

fn round_up(a: u64, m: u64) -> u64 {
    cdiv(a, m) * m
}

/// Layers of pipeline stage `stage` (vLLM `get_pp_indices`: equal split, the remainder to the
/// last stages).
pub fn stage_layers(layers: u32, pp: u32, stage: u32) -> std::ops::Range<usize> {
    let pp = pp.max(1);
    let stage = stage.min(pp - 1);
    let base = layers / pp;
    let rem = layers % pp;
    // vLLM gives the extra layers to the last `rem` partitions
    let extra_before = stage.saturating_sub(pp - rem);
    let start = stage * base + extra_before;
    let mine = base + u32::from(stage >= pp - rem && rem > 0);
    start as usize..(start + mine) as usize
}

/// How one GPU's share of a checkpoint is sized: the TP degree, which parts the quantization
/// covers, and whether this pipeline stage holds the embedding (first) or the head (last).
/// Shared by the weight total ([`weights_per_gpu`]) and the allocator's per-tensor list
/// ([`crate::allocator::parameter_tensors`]) so that both size a tensor alike. The tensor
/// shapes are still listed twice: the allocator's list covers the dense and MoE shapes an
/// engine sizing from the driver's free memory rounds (no `k_eq_v`, mxfp4 padding or learned positions), which only matters for the
/// allocator's per-tensor rounding, not for the weight total.
pub(crate) struct ShardSizing<'a> {
    quant: Option<&'a Quantization>,
    native_bytes_per_param: f64,
    pub tp: u64,
    pub attention_quantized: bool,
    pub mlp_quantized: bool,
    pub first_stage: bool,
    pub last_stage: bool,
}

impl<'a> ShardSizing<'a> {
    pub fn new(arch: &ModelArch, quant: Option<&'a Quantization>, shard: Shard) -> Self {
        ShardSizing {
            quant,
            native_bytes_per_param: arch.dtype.bytes() as f64,
            tp: u64::from(shard.tp.max(1)),
            attention_quantized: quant.is_some_and(|q| !q.attention_unquantized),
            mlp_quantized: quant.is_some_and(|q| !q.dense_mlp_unquantized),
            first_stage: shard.stage == 0,
            last_stage: shard.stage + 1 >= shard.pp.max(1),
        }
    }

    /// Bytes of `params` parameters: packed when `quantized` and a quantization applies,
    /// else the checkpoint's native dtype.
    pub fn bytes(&self, params: u64, quantized: bool) -> u64 {
        match self.quant {
            Some(q) if quantized => (params as f64 * q.bytes_per_weight()).ceil() as u64,
            _ => (params as f64 * self.native_bytes_per_param) as u64,
        }
    }
}

/// Weights held by one GPU. `quant` is the effective quantization (checkpoint or flag).
pub fn weights_per_gpu(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    shard: Shard,
) -> WeightBytes {
    weights_sized(arch, quant, shard, true)
}

/// [`weights_per_gpu`], with or without the engine's load-time padding (`runtime`): the
/// checkpoint on disk holds the unpadded tensors.
fn weights_sized(
    arch: &ModelArch,
    quant: Option<&Quantization>,
    shard: Shard,
    runtime: bool,
) -> WeightBytes {
    let s = ShardSizing::new(arch, quant, shard);
    let (tp, h, first, last) = (s.tp, arch.hidden_size, s.first_stage, s.last_stage);
    let (attn_q, mlp_q) = (s.attention_quantized, s.mlp_quantized);
    let qb = |params: u64, quantized: bool| s.bytes(params, quantized);
    let mut w = WeightBytes::default();

    // Embedding and LM head: vocab padded to 64, sharded by TP.
    let vocab_rank = cdiv(round_up(arch.vocab_size, 64), tp);
    if first {
        w.embedding = qb(vocab_rank * h + arch.learned_positions * h, false);
    }
    if last && (!arch.tie_word_embeddings || shard.pp > 1) {
        w.lm_head = qb(vocab_rank * h, quant.is_some_and(|q| q.lm_head_quantized));
    }
    if last {
        w.other += qb(h, false); // final norm
    }

    let heads_rank = cdiv(u64::from(arch.num_attention_heads), tp);
    let range = stage_layers(arch.num_layers, shard.pp, shard.stage);
    for i in range {
        let layer: LayerAttention = arch.layers.get(i).copied().unwrap_or(LayerAttention {
            kind: AttentionKind::Full,
            kv_heads: arch.num_kv_heads,
            head_dim: arch.head_dim,
            k_eq_v: false,
        });
        // ---- attention ----
        let (attn, attn_bias) =
            if layer.kind == AttentionKind::NoKv && !arch.state_layers.is_empty() {
                // hybrid: a state mixer (below) or an MLP-only block, no attention projections
                // (MLA models' state layers too: Kimi-Linear)
                (0, 0)
            } else if let Some(m) = arch.mla {
                let qk = u64::from(m.qk_nope_head_dim + m.qk_rope_head_dim);
                let q = match m.q_lora_rank {
                    Some(r) => h * u64::from(r) + u64::from(r) * heads_rank * qk,
                    None => h * heads_rank * qk,
                };
                let kv_a = h * u64::from(m.kv_lora_rank + m.qk_rope_head_dim);
                let kv_b = u64::from(m.kv_lora_rank)
                    * heads_rank
                    * u64::from(m.qk_nope_head_dim + m.v_head_dim);
                let o = heads_rank * u64::from(m.v_head_dim) * h;
                // vLLM's MLA backends keep a second, absorbed copy of kv_b_proj (W_UK, W_UV) in
                // the model dtype after loading
                w.runtime += qb(kv_b, false);
                let norms = u64::from(m.kv_lora_rank) + u64::from(m.q_lora_rank.unwrap_or(0));
                (q + kv_a + kv_b + o, norms)
            } else if layer.kind == AttentionKind::NoKv {
                // a no-KV layer of unknown shape (GGUF): approximate with the same projection budget
                (4 * h * heads_rank * u64::from(layer.head_dim), 0)
            } else {
                let hd = u64::from(layer.head_dim);
                let kv_rank = cdiv(u64::from(layer.kv_heads), tp).max(1);
                let kv_mats = if layer.k_eq_v { 1 } else { 2 };
                let q = h * heads_rank * hd;
                let kv = kv_mats * h * kv_rank * hd;
                let o = heads_rank * hd * h;
                let bias = if arch.attention_bias {
                    heads_rank * hd + kv_mats * kv_rank * hd + h
                } else {
                    0
                };
                (q + kv + o, bias)
            };
        w.attention += qb(attn, attn_q);
        w.other += qb(attn_bias + 2 * h, false);
        // hybrid models: the layer's linear-attention / Mamba mixer
        if let Some(s) = arch.state_layers.iter().find(|s| s.layer as usize == i) {
            let (mats, small) = crate::state::mixer_params(&s.state, h, shard.tp);
            w.attention += qb(mats, attn_q);
            w.other += qb(small, false);
        }
        if arch.ffn_free_layers.contains(&(i as u32)) {
            continue;
        }

        // ---- feed-forward ----
        let dense_mlp = |inter: u64| -> (u64, u64) {
            let i_rank = cdiv(inter, tp);
            match arch.mlp {
                MlpKind::Gated => (3 * h * i_rank, 0),
                MlpKind::Plain => (2 * h * i_rank, i_rank + h),
            }
        };
        let is_moe = arch
            .moe
            .as_ref()
            .is_some_and(|m| m.moe_layers.get(i).copied().unwrap_or(false));
        if let (true, Some(moe)) = (is_moe, arch.moe.as_ref()) {
            let e = u64::from(moe.experts);
            let (experts_here, ei_rank) = if shard.expert_parallel {
                (cdiv(e, tp), moe.expert_intermediate)
            } else {
                (e, cdiv(moe.expert_intermediate, tp))
            };
            let mxfp4 = runtime && quant.is_some_and(|q| q.method == "mxfp4");
            let (eh, ei) = if mxfp4 {
                // vLLM's MXFP4 MoE kernels pad both expert dimensions to multiples of 256
                (round_up(h, 256), round_up(ei_rank, 256))
            } else {
                (h, ei_rank)
            };
            // gated experts hold gate, up and down; plain ones (relu2, Nemotron-H) up and down
            let up_mats = match arch.mlp {
                MlpKind::Gated => 2,
                MlpKind::Plain => 1,
            };
            let per_expert = (up_mats + 1) * eh * ei;
            w.experts += qb(experts_here * per_expert, quant.is_some());
            if moe.expert_bias {
                w.other += qb(experts_here * (up_mats * ei + eh), false);
            }
            if moe.shared_intermediate > 0 {
                let s_rank = cdiv(moe.shared_intermediate, tp);
                w.mlp += qb(
                    (up_mats + 1) * h * s_rank,
                    mlp_q || quant.is_some_and(|q| !q.dense_mlp_unquantized),
                );
            }
            w.other += qb(h * e, false); // router, replicated
            if moe.dense_beside_moe {
                let (m, b) = dense_mlp(arch.intermediate_size);
                w.mlp += qb(m, mlp_q);
                w.other += qb(b, false);
            }
        } else {
            let (m, b) = dense_mlp(arch.intermediate_size);
            w.mlp += qb(m, mlp_q);
            w.other += qb(b, false);
        }
    }

    if first {
        w.vision = qb(cdiv(arch.vision_params, tp), false);
    }
    // RoPE cos/sin cache: max_position × rotary_dim in the model dtype, on every GPU.
    w.rope_cache = arch.max_position_embeddings * u64::from(arch.rotary_dim) * arch.dtype.bytes();
    w
}

/// Bytes of the whole checkpoint (all ranks, plus MTP layers vLLM does not load), computed from
/// the architecture. The catalog's published size wins when known.
pub fn checkpoint_bytes(arch: &ModelArch) -> u64 {
    if let Some(b) = arch.checkpoint_bytes {
        return b;
    }
    // on disk: no load-time padding (gpt-oss: 60.6 GiB unpadded vs the card's 60.8 GiB; the
    // padded MXFP4 experts would be 68.6 GiB)
    let mut w = weights_sized(arch, arch.quantization.as_ref(), Shard::SINGLE, false);
    w.rope_cache = 0;
    w.runtime = 0;
    let per_layer = (w.attention + w.mlp + w.experts + w.other) / u64::from(arch.num_layers.max(1));
    w.total() + per_layer * u64::from(arch.mtp_layers)
}

/// Parameters of the model (text + vision), estimated from the architecture.
pub fn parameter_count(arch: &ModelArch) -> u64 {
    if let Some(p) = arch.published_params {
        return p;
    }
    let mut a = arch.clone();
    a.dtype = Dtype::Fp8; // one byte per parameter
    a.quantization = None;
    let mut w = weights_per_gpu(&a, None, Shard::SINGLE);
    w.rope_cache = 0;
    w.runtime = 0;
    w.total()
}

/// KV bytes per token of one layer on one GPU.
pub fn kv_bytes_per_token_layer(
    arch: &ModelArch,
    layer: &LayerAttention,
    tp: u32,
    kv: Dtype,
) -> u64 {
    // recurrent-state layers keep no KV, MLA models' (Kimi-Linear) included
    if layer.kind == AttentionKind::NoKv {
        return 0;
    }
    if let Some(m) = arch.mla {
        // the latent (kv_lora_rank) plus the shared RoPE key, replicated on every TP rank
        return u64::from(m.kv_lora_rank + m.qk_rope_head_dim) * kv.bytes();
    }
    let kv_rank = cdiv(u64::from(layer.kv_heads), u64::from(tp.max(1))).max(1);
    let mats = if layer.k_eq_v { 1 } else { 2 };
    mats * kv_rank * u64::from(layer.head_dim) * kv.bytes()
}

/// Fitted constants (GiB unless said): least squares over the **calibration half** of
/// `fixtures/tools/vllm-logs/cases.jsonl` only (cases whose FNV-1a 64 hash of the id is even);
/// `tests/vllm_logs_accuracy.rs` re-runs the fit and fails if these drift from it.
pub mod fitted {
    /// V1 non-torch at TP 1 (median of the calibration rows with TP 1, PP 1).
    pub const NON_TORCH_TP1_GIB: f64 = 0.25;
    /// V1 non-torch with TP > 1: intercept of `a + b × tp` (NCCL and custom all-reduce buffers).
    pub const NON_TORCH_TP_BASE_GIB: f64 = 1.99;
    /// V1 non-torch with TP > 1: slope per rank.
    pub const NON_TORCH_TP_PER_RANK_GIB: f64 = 0.045;
    /// V1 non-torch with PP only (one calibration row).
    pub const NON_TORCH_PP_GIB: f64 = 0.07;
    /// V0 ≤ 0.6.4: everything beyond weights and the derived activation (CUDA context growth,
    /// torch's cache), fitted on the calibration A6000 rows of vLLM 0.4.
    pub const V0_OVERHEAD_GIB: f64 = 0.984;
    /// Bytes per logit of the dummy sampler run without a full sort ([`super::SamplerPath::Fused`]:
    /// the calibration rows are vLLM 0.19, whose top-k/top-p is a Triton kernel).
    pub const SAMPLER_BYTES_PER_LOGIT: f64 = 13.54;
    /// Fixed buffers of the V1 profile run.
    pub const V1_FIXED_GIB: f64 = 0.17;
    /// A vision encoder's profile run (one calibration row: Llama 4 Scout).
    pub const VISION_PROFILE_GIB: f64 = 0.223;
}

/// How the GPUs of a tensor-parallel group are linked, as far as NCCL's buffers go.
///
/// NCCL gives each channel of a P2P connection its own buffers in GPU memory, and opens many
/// channels where the link is fast: an SXM board (NVLink to every peer) measured ~1.8 GiB more
/// non-torch memory at TP 2 than at TP 1 (the H100 calibration rows). Over PCIe NCCL opens few
/// channels and, where PCIe P2P is off (GeForce cards, most cloud VMs), keeps the buffers in
/// host memory: an 8×L40S vLLM 0.10.2 start-up (TP 8) logged 0.21 GiB of non-torch memory, less
/// than the 0.25 GiB of a single H100. A bridged pair (NVLink bridge) behaves like a board: the
/// TGI 2×A6000 start-up with a bridge needs the full increment; whether a bridge is fitted is
/// not in the catalog, so bridged kinds are "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TpLink {
    /// NVLink (or Infinity Fabric) to every peer on the board: the fitted H100 increment.
    BoardLink,
    /// PCIe only: no NCCL increment in GPU memory.
    Pcie,
}

/// Non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) per GPU, as
/// `memory_profiling` measures it from vLLM 0.6.6 on (see [`crate::engines::vllm::rules::NonTorch`]).
///
/// Fitted on the calibration half ([`fitted`]): H100 with NVLink and custom all-reduce. Under
/// TP the NCCL increment depends on the link ([`TpLink`]): the fitted one on boards with GPU
/// links, none over PCIe; `None` (link unknown) keeps the fitted increment, the larger charge.
/// Releases ≤ 0.6.4 measured differently; their overhead is [`fitted::V0_OVERHEAD_GIB`].
///
/// `profiled` is true where `memory_profiling` measures the increase (vLLM ≥ 0.6.6, V0 or V1).
/// Older V0 releases counted everything since the worker started: [`fitted::V0_OVERHEAD_GIB`],
/// plus under TP the same NCCL/all-reduce increment the profiled releases measure.
pub fn non_torch_bytes(tp: u32, pp: u32, profiled: bool, link: Option<TpLink>) -> u64 {
    let tp_extra = if link == Some(TpLink::Pcie) {
        fitted::NON_TORCH_TP1_GIB
    } else {
        fitted::NON_TORCH_TP_BASE_GIB + fitted::NON_TORCH_TP_PER_RANK_GIB * f64::from(tp.min(64))
    };
    let gib = if !profiled {
        fitted::V0_OVERHEAD_GIB
            + if tp > 1 {
                tp_extra - fitted::NON_TORCH_TP1_GIB
            } else {
                0.0
            }
    } else if tp > 1 {
        tp_extra
    } else if pp > 1 {
        fitted::NON_TORCH_PP_GIB
    } else {
        fitted::NON_TORCH_TP1_GIB
    };
    (gib * GIB) as u64
}

/// How the dummy sampler run filters top-k/top-p, which sets its bytes per logit (the profile
/// run asks for both: vLLM's `_dummy_sampler_run` passes `top_k = vocab − 1`, `top_p = 0.9`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerPath {
    /// No full sort: vLLM ≥ 0.17's Triton top-k/top-p kernel (≥ 8 rows), FlashInfer's sampler
    /// where it is installed and on; also V0 ≤ 0.6.4, whose sampler is inside the fitted V0
    /// overhead. Bytes per logit fitted: [`fitted::SAMPLER_BYTES_PER_LOGIT`].
    Fused,
    /// PyTorch sorts the whole `seqs × vocab` logits: V1 0.8.5–0.16
    /// `vllm/v1/sample/ops/topk_topp_sampler.py` `apply_top_k_top_p` (its `cumsum` writes into
    /// `probs_sort`), by default. Derived, see [`SamplerPath::bytes_per_logit`].
    TorchSort,
    /// The same sort in V0's sampler, 0.6.6–0.10.2 `vllm/model_executor/layers/sampler.py`
    /// `_apply_top_k_top_p`: its `cumsum` makes a new tensor (4 more bytes after the sort).
    TorchSortV0,
}

impl SamplerPath {
    /// Peak bytes per logit of the dummy sampler run. Fitted for [`SamplerPath::Fused`];
    /// where PyTorch sorts, derived from what is alive at once, per logit:
    ///
    /// * the model-dtype logits `_dummy_sampler_run` holds (`dtype_bytes`) and the fp32 copy
    ///   `Sampler.forward` makes (4);
    /// * inside `logits.sort()`: its outputs (fp32 values 4, int64 indices 8) and the sort's
    ///   own buffers (PyTorch `aten/src/ATen/native/cuda/SortStable.cu`): with ≥ 128 rows
    ///   `segmented_sort_pairs`, int64 reverse indices (8) and cub `DeviceSegmentedRadixSort::
    ///   SortPairs`'s alternate key and value buffers (4 + 8); with 2–127 rows
    ///   `segmented_sort_pairs_by_full_sort`, two int2 index/segment arrays (16), a key output
    ///   (4) and cub's alternates (4 + 8); one row sorts in place of its own small buffers;
    /// * after the sort: values and indices (12), the top-k mask (1), `probs_sort` (4), V0's
    ///   separate `cumsum` (4), the top-p mask (1) and the scattered result (4).
    ///
    /// The peak is the larger of the sort and the after-sort sets: 38 bytes for bf16 logits and
    /// 256 or more rows.
    pub fn bytes_per_logit(self, dtype_bytes: u64, seqs: u64) -> f64 {
        let cumsum = match self {
            SamplerPath::Fused => return fitted::SAMPLER_BYTES_PER_LOGIT,
            SamplerPath::TorchSort => 0.0,
            SamplerPath::TorchSortV0 => 4.0,
        };
        let held = dtype_bytes as f64 + 4.0;
        let outputs = 4.0 + 8.0;
        let sort_buffers = match seqs {
            0 | 1 => 0.0,
            2..=127 => 16.0 + 4.0 + 12.0,
            _ => 8.0 + 12.0,
        };
        let in_sort = held + outputs + sort_buffers;
        let after_sort = held + outputs + 1.0 + 4.0 + cumsum + 1.0 + 4.0;
        in_sort.max(after_sort)
    }
}

/// Inputs of the activation estimate.
#[derive(Debug, Clone, Copy)]
pub struct ProfileShape {
    /// Tokens of the profiling forward pass.
    pub tokens: u64,
    /// Sequences whose logits the dummy sampler run computes.
    pub seqs: u64,
    /// `memory_profiling` era (vLLM ≥ 0.6.6, V0 or V1): the fixed buffers count as activation;
    /// before, they are inside [`fitted::V0_OVERHEAD_GIB`].
    pub v1: bool,
    /// Tensor-parallel size.
    pub tp: u32,
    /// How the dummy sampler run sorts (the rule table's `sampler`).
    pub sampler: SamplerPath,
}

/// The derived (not fitted) parts of the profile run's peak, bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationTerms {
    /// Largest transient of one layer's forward pass at `tokens`: the MLP's gate/up output
    /// (2·I/tp) with the activation output (I/tp), or attention's q/k/v and output, plus the
    /// layer input, in the model dtype.
    pub forward: f64,
    /// Kept while the sampler runs: the hidden states (tokens × hidden) and the fused-MoE
    /// workspaces (tokens × top-k × (max(2·I/tp, H) + I/tp), vLLM caches them).
    pub persistent: f64,
    /// Logits of the dummy sampler run: `seqs × vocab`.
    pub logits: f64,
    /// The model has a vision encoder that the profile runs.
    pub vision: bool,
}

/// Shape terms of the profiling run (see [`activation_bytes`]).
pub fn activation_terms(arch: &ModelArch, p: ProfileShape) -> ActivationTerms {
    let tp = p.tp.max(1) as f64;
    let dt = arch.dtype.bytes() as f64;
    let h = arch.hidden_size as f64;
    let t = p.tokens as f64;
    let inter = arch
        .moe
        .as_ref()
        .filter(|_| arch.intermediate_size == 0)
        .map_or(arch.intermediate_size as f64, |m| {
            m.expert_intermediate as f64
        });
    let mlp = 3.0 * (inter / tp).ceil();
    let hd = arch.head_dim as f64;
    let heads = (f64::from(arch.num_attention_heads) / tp).ceil();
    let kv = (f64::from(arch.num_kv_heads) / tp).ceil().max(1.0);
    let attn = (2.0 * heads + 2.0 * kv) * hd;
    let forward = t * dt * (mlp.max(attn) + h);
    let moe_ws = arch.moe.as_ref().map_or(0.0, |m| {
        let ei = (m.expert_intermediate as f64 / tp).ceil();
        t * f64::from(m.experts_per_token) * ((2.0 * ei).max(h) + ei) * 2.0
    });
    ActivationTerms {
        forward,
        persistent: t * h * dt + moe_ws,
        logits: p.seqs as f64 * arch.vocab_size as f64,
        vision: arch.vision_params > 0,
    }
}

/// Peak torch memory of the profiling run beyond the weights:
///
/// ```text
/// fixed + persistent + max(forward, bytes per logit × seqs × vocab) (+ vision encoder)
/// ```
///
/// The forward pass ends before the sampler runs, so the peak is the larger of the two over
/// what both keep (hidden states, MoE workspaces). The shape terms are derived
/// ([`activation_terms`]); the sampler's bytes per logit are derived where PyTorch sorts the
/// logits ([`SamplerPath::bytes_per_logit`]) and fitted otherwise, and the fixed part is fitted
/// ([`fitted`]). V0 without chunked prefill profiles a whole `max_model_len` sequence, so its
/// forward term grows with the context; its fixed part is inside [`fitted::V0_OVERHEAD_GIB`].
/// It does not shrink with TP: the logits are gathered on every rank.
pub fn activation_bytes(arch: &ModelArch, p: ProfileShape) -> u64 {
    let a = activation_terms(arch, p);
    let sampler = p.sampler.bytes_per_logit(arch.dtype.bytes(), p.seqs) * a.logits;
    let vision = if a.vision {
        fitted::VISION_PROFILE_GIB * GIB
    } else {
        0.0
    };
    let fixed = if p.v1 {
        fitted::V1_FIXED_GIB * GIB
    } else {
        0.0
    };
    (fixed + a.persistent + a.forward.max(sampler) + vision) as u64
}

/// CUDA-graph memory when graphs are captured (not with `--enforce-eager`).
///
/// Rough fit to the H100 logs (0.65–1.79 GiB): 0.5 GiB + 0.013 GiB per layer on this GPU, less
/// a little under TP. Up to 0.19 it does not move the KV figure, only whether the remaining
/// `1 − util` share holds the graphs; from 0.20 the estimate is taken out of the budget
/// ([`crate::rules`], `cuda_graph_in_budget`).
pub fn cuda_graph_bytes(layers_here: u32, tp: u32) -> u64 {
    let tp_factor = if tp > 1 { 0.85 } else { 1.0 };
    ((0.5 + 0.013 * f64::from(layers_here)) * tp_factor * GIB) as u64
}

/// One KV-cache group's kind, as vLLM V1 builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvGroupKind {
    /// Attention kind shared by the group's layers.
    pub kind: AttentionKind,
    /// Layers of this kind on the GPU.
    pub layers: u32,
    /// Groups of this kind.
    pub groups: u32,
}

/// How vLLM V1 lays the KV cache out on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvLayout {
    /// Bytes per token summed over this GPU's layers (full context, windows ignored).
    pub bytes_per_token: u64,
    /// Bytes of one block of one layer (page size; the largest when layers differ).
    pub page_bytes: u64,
    /// Layers sharing one block id (group size).
    pub group_size: u32,
    /// Kinds and their group counts; a [`AttentionKind::NoKv`] kind is a group of
    /// recurrent-state layers (hybrid models, [`crate::hybrid`]).
    pub kinds: Vec<KvGroupKind>,
    /// Tokens per block (vLLM raises it for hybrid models so a page holds one state).
    #[serde(default)]
    pub block_size: u64,
    /// Recurrent-state bytes of one sequence over this GPU's state layers (unpadded).
    #[serde(default)]
    pub state_bytes_per_seq: u64,
    /// Blocks a request holds in each state group ([`crate::hybrid::state_blocks`]).
    #[serde(default)]
    pub state_blocks_per_request: u64,
    /// vLLM's `all` state mode: a state group holds one block per block of tokens, like full
    /// attention, instead of `state_blocks_per_request`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub state_blocks_follow_length: bool,
}

impl KvLayout {
    /// Total groups.
    pub fn num_groups(&self) -> u32 {
        self.kinds.iter().map(|k| k.groups).sum::<u32>().max(1)
    }

    /// Bytes one block id costs across the group's layers.
    pub fn bytes_per_block(&self) -> u64 {
        self.page_bytes * u64::from(self.group_size.max(1))
    }

    /// Blocks one request of `max_len` tokens needs (vLLM `max_memory_usage_bytes` per spec).
    pub fn blocks_per_request(&self, max_len: u64, block: u64, batched_tokens: u64) -> u64 {
        let mut total = 0;
        for k in &self.kinds {
            let per = match k.kind {
                AttentionKind::Full => cdiv(max_len, block),
                AttentionKind::Sliding(w) => {
                    cdiv(
                        (u64::from(w).saturating_sub(1) + batched_tokens).min(max_len),
                        block,
                    ) + 1
                }
                AttentionKind::ChunkedLocal(c) => {
                    cdiv((u64::from(c) + batched_tokens).min(max_len), block)
                }
                // MambaSpec.max_memory_usage_bytes: `all` mode pages the state per block of
                // tokens; otherwise a fixed count per request
                AttentionKind::NoKv if self.state_blocks_follow_length => cdiv(max_len, block),
                AttentionKind::NoKv => self.state_blocks_per_request.max(1),
            };
            total += per * u64::from(k.groups);
        }
        total.max(1)
    }
}

/// The V1 KV layout of the layers in `range`.
pub fn kv_layout(
    arch: &ModelArch,
    range: std::ops::Range<usize>,
    tp: u32,
    kv: Dtype,
    block: u64,
) -> KvLayout {
    let mut kinds: Vec<KvGroupKind> = Vec::new();
    let mut bytes_per_token = 0;
    let mut page = 0;
    let fallback = LayerAttention {
        kind: AttentionKind::Full,
        kv_heads: arch.num_kv_heads,
        head_dim: arch.head_dim,
        k_eq_v: false,
    };
    for i in range {
        let l = arch.layers.get(i).copied().unwrap_or(fallback);
        let kind = if arch.mla.is_some() {
            AttentionKind::Full
        } else {
            l.kind
        };
        let b = kv_bytes_per_token_layer(arch, &l, tp, kv);
        if b == 0 {
            continue;
        }
        bytes_per_token += b;
        page = page.max(b * block);
        match kinds.iter_mut().find(|k| k.kind == kind) {
            Some(k) => k.layers += 1,
            None => kinds.push(KvGroupKind {
                kind,
                layers: 1,
                groups: 1,
            }),
        }
    }
    // vLLM `_get_kv_cache_groups_uniform_page_size`: group size = the smallest kind's layer
    // count, or the largest when all are within 25 % of each other (avoids padding).
    let min = kinds.iter().map(|k| k.layers).min().unwrap_or(1);
    let max = kinds.iter().map(|k| k.layers).max().unwrap_or(1);
    let group_size = if kinds.len() <= 1 || (max as f64) < 1.25 * min as f64 {
        max
    } else {
        min
    };
    for k in kinds.iter_mut() {
        k.groups = k.layers.div_ceil(group_size.max(1));
    }
    KvLayout {
        bytes_per_token,
        page_bytes: page,
        group_size: group_size.max(1),
        kinds,
        block_size: block,
        state_bytes_per_seq: 0,
        state_blocks_per_request: 0,
        state_blocks_follow_length: false,
    }
}

/// Round to two decimals of GiB.
pub fn gib2(bytes: f64) -> f64 {
    (bytes / GIB * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_sort_sampler_peak_per_logit() {
        let v1 = |dt, seqs| SamplerPath::TorchSort.bytes_per_logit(dt, seqs);
        let v0 = |dt, seqs| SamplerPath::TorchSortV0.bytes_per_logit(dt, seqs);
        // bf16 logits, ≥ 128 rows: 2 + 4 held, 12 sort outputs, 8 + 12 sort buffers
        assert_eq!(v1(2, 256), 38.0);
        assert_eq!(v1(2, 1024), 38.0);
        // 2–127 rows sort by a full sort with two index/segment arrays: 2 + 4 + 12 + 32
        assert_eq!(v1(2, 64), 50.0);
        // one row: the after-sort set is the peak (masks, probs_sort, scatter's output)
        assert_eq!(v1(2, 1), 28.0);
        // fp32 models hold fp32 logits
        assert_eq!(v1(4, 256), 40.0);
        // V0: the same sort; its cumsum is a new tensor, which matters only for one row
        assert_eq!(v0(2, 256), 38.0);
        assert_eq!(v0(2, 1), 32.0);
        assert_eq!(
            SamplerPath::Fused.bytes_per_logit(2, 256),
            fitted::SAMPLER_BYTES_PER_LOGIT
        );
    }
}
