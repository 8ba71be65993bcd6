//! Step time of a multi-GPU / multi-node layout: the single-node roofline per GPU (weights and
//! KV read at the GPU's bandwidth, FLOPs at its tensor rate, the engine's fitted efficiency from
//! `crate::speed::engines`) plus communication costed by size, bandwidth and latency:
//!
//! * TP: 2 all-reduces per layer, each `α + 2(n−1)/n × bytes / bw` (nccl-tests
//!   `doc/PERFORMANCE.md` @ 03a204a: all-reduce bus bandwidth factor 2(n−1)/n, "independent of
//!   the algorithm used (ring, tree …)"); α per call from gpus.toml `[[link_latency]]` (NVLink),
//!   [`Constants::pcie_call_s`] over PCIe inside CUDA graphs, [`Constants::pcie_eager_hop_s`] ×
//!   (n−1) when launched eagerly, the network's latency across nodes.
//! * EP: dispatch + combine per MoE layer. Across nodes in decode, DeepEP's low-latency kernel
//!   times (README @ 0aaa674, H800 + CX7 400 Gb/s, 128 tokens, hidden 7168, top-8) scaled by
//!   tokens, hidden, top-k and NIC speed; otherwise `α + tokens × top_k × hidden × 3 B ×
//!   remote share / bandwidth` (FP8 dispatch 1 B + BF16 combine 2 B) at a fitted share of the
//!   link ([`Constants::ep_share`]). With two-batch overlap (the engines' TBO/DBO) it overlaps
//!   the compute of the other micro-batch.
//! * PP: one hand-over of the hidden state per stage boundary (`α + tokens × hidden × 2 B /
//!   bw`), `m` micro-batches in flight (the engines keep `pp` of them), and an exposed bubble
//!   of [`Constants::pp_bubble`] × (pp−1) stage times per round without send/recv overlap
//!   (GPipe's (p−1)/(m+p−1), Huang et al. 2019).
//!
//! The constants marked fitted are fitted on the `half: calibration` records of
//! `fixtures/speed/multi-gpu.jsonl` only (tests/multi_gpu_speed.rs refits them and fails when
//! they drift); the check half is reported in docs/speed.md.

use super::memory::GpuMemory;
use super::{IntraLink, Layout, Network, NetworkSpec};
use crate::gpus::GpuSpec;
use crate::speed::ComputeDtype;
use crate::speed::engines::EngineEfficiency;
use crate::speed::estimate::{EAGER_KERNEL_S, KERNELS_PER_LAYER, ModelNumbers};
use serde::Serialize;

/// Communication constants of the multi-GPU model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Constants {
    /// Seconds per small all-reduce over PCIe when the engine replays CUDA graphs (the
    /// collectives are launched from the graph). Cited, not fitted: gpus.toml `[[link_latency]]`
    /// pcie, 19.4–22.3 µs for 4 GPUs behind one switch (its source there). A free fit ran to
    /// the grid's 1 µs floor, absorbing MLC's low single-node efficiency — not physical.
    pub pcie_call_s: f64,
    /// Seconds per ring hop (× (n−1)) of a small all-reduce over PCIe launched eagerly from the
    /// host (no CUDA graphs: vLLM before 0.2.6, PR #1926, or `--enforce-eager`). Fitted.
    pub pcie_eager_hop_s: f64,
    /// Share of the PCIe per-direction bandwidth a ring all-reduce reaches (P2P through a
    /// switch ~22–26 of 31.5 GB/s; through the host bridge or without P2P much less:
    /// docs/research/multinode.md). Fitted.
    pub pcie_share: f64,
    /// Share of link bandwidth EP all-to-all reaches in prefill (DeepEP normal kernels).
    /// Fitted.
    pub ep_share: f64,
    /// Share of the GPipe bubble, (pp−1) stage times per round, left exposed without PP
    /// send/recv overlap. Fitted (one calibration record, before PP send/recv overlap).
    pub pp_bubble: f64,
    /// Share of the shorter of compute and EP all-to-all that two-batch overlap hides
    /// (1: step = max of the two; 0: their sum). Fitted.
    pub tbo_overlap: f64,
}

/// The fitted constants (tests/multi_gpu_speed.rs, calibration half).
pub const FITTED: Constants = Constants {
    pcie_call_s: 20.0e-6,
    pcie_eager_hop_s: 67.0e-6,
    pcie_share: 0.47,
    ep_share: 1.00,
    pp_bubble: 1.00,
    tbo_overlap: 0.0,
};

/// Attention FLOPs per (query token, attended token) pair summed over one layer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AttentionFlops {
    /// Decode: QKᵀ and PV, 2 × 2 × heads × head_dim; MLA in its absorbed form (FlashMLA, the
    /// engines' decode path): 2 × heads × (kv_lora_rank + rope) for the scores plus
    /// 2 × heads × kv_lora_rank for the values.
    pub decode: f64,
    /// Prefill, causal (half of the square already counted by the attended-token sum, as the
    /// single-node model does): 2 × heads × head_dim; MLA unabsorbed (MHA over
    /// qk_nope + rope and v_head_dim): heads × (qk_nope + rope + v).
    pub prefill: f64,
}

impl AttentionFlops {
    /// From the architecture.
    pub fn of(arch: &crate::arch::ModelArch) -> AttentionFlops {
        let heads = f64::from(arch.num_attention_heads);
        match arch.mla {
            Some(m) => {
                let (r, rope) = (f64::from(m.kv_lora_rank), f64::from(m.qk_rope_head_dim));
                AttentionFlops {
                    decode: 2.0 * heads * (r + rope) + 2.0 * heads * r,
                    prefill: heads
                        * f64::from(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim),
                }
            }
            None => {
                let dim = heads * f64::from(arch.head_dim);
                AttentionFlops {
                    decode: 4.0 * dim,
                    prefill: 2.0 * dim,
                }
            }
        }
    }
}

/// DeepEP low-latency kernels, dispatch + combine µs per MoE layer at 128 tokens per rank,
/// hidden 7168, top-8, H800 with CX7 400 Gb/s (DeepEP README @ 0aaa674): EP 8, 16, 32, 64,
/// 128, 256.
pub const DEEPEP_LL_US: [(u32, f64); 6] = [
    (8, 77.0 + 114.0),
    (16, 118.0 + 195.0),
    (32, 155.0 + 273.0),
    (64, 173.0 + 314.0),
    (128, 192.0 + 369.0),
    (256, 194.0 + 360.0),
];

/// Engine features that hide communication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Overlap {
    /// PP send/recv overlapped with compute (the engines' async PP).
    pub pp_send_recv: bool,
    /// Two micro-batches alternate compute and EP all-to-all (TBO/DBO, DeepSeek's production).
    pub two_batch: bool,
}

/// One layout serving one workload.
#[derive(Debug, Clone)]
pub struct ClusterScenario<'a> {
    /// The whole model's numbers (FLOPs, routing, shapes).
    pub model: &'a ModelNumbers,
    /// Attention FLOPs per attended token ([`AttentionFlops::of`]).
    pub attention: AttentionFlops,
    /// Share of layers that are MoE ([`moe_layer_share`]).
    pub moe_layer_share: f64,
    /// The fullest GPU's memory (weights and KV per token on it).
    pub memory: &'a GpuMemory,
    /// The GPU.
    pub gpu: &'a GpuSpec,
    /// The layout.
    pub layout: Layout,
    /// The link inside a node.
    pub intra: IntraLink,
    /// The network between nodes.
    pub network: Network,
    /// Sequences decoding together on one DP replica (one rank under DP attention).
    pub batch: u64,
    /// Mean context per sequence during decode, tokens.
    pub context: u64,
    /// Prompt tokens per request.
    pub prompt_tokens: u64,
    /// Overlap features of the engine.
    pub overlap: Overlap,
    /// Kernels and collectives launched one by one from the host (no CUDA graphs).
    pub eager: bool,
}

/// Decode and prefill figures of a layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterFigures {
    /// Seconds for every sequence of a replica to advance one token.
    pub round_s: f64,
    /// Output tokens/s of one sequence.
    pub tokens_per_s_per_sequence: f64,
    /// Output tokens/s per GPU (all replicas together / all GPUs).
    pub tokens_per_s_per_gpu: f64,
    /// Parts of one stage's step (per micro-batch): memory, compute, launches.
    pub memory_s: f64,
    /// Compute time of a stage step.
    pub compute_s: f64,
    /// Launch floor of a stage step.
    pub launch_s: f64,
    /// TP all-reduces of a stage step.
    pub tp_comm_s: f64,
    /// EP dispatch + combine of a stage step.
    pub ep_comm_s: f64,
    /// PP hand-overs and exposed bubble per round.
    pub pp_s: f64,
    /// Time to first token of one prompt alone on an idle replica, s.
    pub ttft_s: f64,
    /// Prompt tokens/s per GPU under saturating prefill (chunks of `prompt_tokens`).
    pub prefill_tokens_per_s_per_gpu: f64,
}

/// Roofline and expected figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterEstimate {
    /// 100 % of bandwidth and the fastest tensor path, every GPU busy, no communication.
    pub roofline: ClusterFigures,
    /// The engine's efficiency plus communication.
    pub expected: ClusterFigures,
}

/// Why no estimate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The GPU has no datasheet bandwidth or tensor rate.
    #[error("GPU {0} lacks datasheet bandwidth or tensor rate")]
    UnknownGpu(String),
    /// The layout cannot run the model.
    #[error(transparent)]
    Layout(#[from] super::LayoutError),
    /// The engine's speed is not modelled.
    #[error("no fitted efficiency for engine {0}")]
    Engine(String),
}

/// Everything [`estimate_layout`] needs, from the model and the deployment.
#[derive(Debug, Clone)]
pub struct LayoutRequest<'a> {
    /// The model.
    pub arch: &'a crate::arch::ModelArch,
    /// Effective quantization (checkpoint or flag).
    pub quant: Option<&'a crate::arch::Quantization>,
    /// KV-cache dtype.
    pub kv: crate::arch::Dtype,
    /// The GPU.
    pub gpu: &'a GpuSpec,
    /// The layout.
    pub layout: Layout,
    /// The network between nodes.
    pub network: Network,
    /// The GPUs of a node talk over PCIe even if the catalog lists NVLink.
    pub force_pcie: bool,
    /// The engine (its fitted efficiency).
    pub engine: crate::speed::engines::Engine,
    /// Sequences per DP replica (per rank under DP attention).
    pub batch: u64,
    /// Mean decode context, tokens.
    pub context: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Overlap features of the engine.
    pub overlap: Overlap,
    /// No CUDA graphs.
    pub eager: bool,
}

/// Validates the layout, sizes the fullest GPU and estimates speed with [`FITTED`]: the one call
/// `plan` needs per candidate layout.
pub fn estimate_layout(
    r: &LayoutRequest<'_>,
) -> Result<(GpuMemory, ClusterEstimate), ClusterError> {
    r.layout.validate(r.arch)?;
    let eff = crate::speed::engines::efficiency(r.engine)
        .ok_or_else(|| ClusterError::Engine(r.engine.cli_id().to_string()))?;
    let model = crate::speed::estimate::model_numbers(
        r.arch,
        &crate::speed::estimate::Weights::Checkpoint(r.quant),
        r.kv,
    );
    let memory = super::memory::fullest_gpu(r.arch, r.quant, r.kv, &r.layout);
    let s = ClusterScenario {
        model: &model,
        attention: AttentionFlops::of(r.arch),
        moe_layer_share: moe_layer_share(r.arch),
        memory: &memory,
        gpu: r.gpu,
        layout: r.layout,
        intra: IntraLink::from_gpu(r.gpu, r.layout.tp.min(r.layout.gpus_per_node), r.force_pcie),
        network: r.network,
        batch: r.batch,
        context: r.context,
        prompt_tokens: r.prompt_tokens,
        overlap: r.overlap,
        eager: r.eager,
    };
    let e = estimate(&s, &eff, &FITTED)?;
    Ok((memory, e))
}

fn peak_tflops(gpu: &GpuSpec, path: ComputeDtype, best: bool) -> Option<f64> {
    // same rule as the single-node model (speed::estimate): GeForce FP16 accumulate is twice the
    // stored FP32-accumulate rate, which only the roofline takes
    let geforce =
        gpu.name.starts_with("RTX ") && !gpu.name.contains("A6000") && !gpu.name.contains("Ada");
    let fp16_any = if geforce {
        gpu.fp16_tflops.map(|f| 2.0 * f)
    } else {
        gpu.fp16_tflops
    };
    let fp16 = gpu.fp16_tflops;
    let own = match path {
        ComputeDtype::Fp16 => fp16,
        ComputeDtype::Fp8 => gpu.fp8_tflops.or(fp16),
        ComputeDtype::Int8 => gpu.int8_tops.or(fp16),
        ComputeDtype::Fp4 => gpu.fp4_tflops.or(gpu.fp8_tflops).or(fp16),
    };
    if best {
        [own, fp16_any].into_iter().flatten().reduce(f64::max)
    } else {
        own
    }
}

fn nvlink_latency_s() -> f64 {
    crate::gpus::catalog()
        .ok()
        .and_then(|c| c.link_latency("nvlink"))
        .map_or(5e-6, |l| l.allreduce_us * 1e-6)
}

/// Mean KV tokens a sequence's attention reads at context `ctx`, relative to `ctx` (sliding
/// windows read less), and Σ layers × attended tokens.
fn kv_share(m: &ModelNumbers, ctx: u64) -> (f64, f64) {
    let mut bytes = 0.0;
    let mut full = 0.0;
    let mut attended = 0.0;
    for &(b, w) in &m.kv_layers {
        let t = if w > 0 { ctx.min(w) } else { ctx } as f64;
        bytes += b * t;
        full += b * ctx as f64;
        attended += t;
    }
    let share = if full > 0.0 { bytes / full } else { 1.0 };
    (share, attended)
}

/// DeepEP low-latency dispatch + combine seconds per MoE layer at `ep` ranks (log-linear
/// between the table's sizes, clamped at its ends).
pub fn deepep_ll_s(ep: u32) -> f64 {
    let e = f64::from(ep.max(1));
    let mut prev = DEEPEP_LL_US[0];
    if e <= f64::from(prev.0) {
        return prev.1 * 1e-6;
    }
    for &(n, us) in &DEEPEP_LL_US[1..] {
        if e <= f64::from(n) {
            let t =
                (e.ln() - f64::from(prev.0).ln()) / (f64::from(n).ln() - f64::from(prev.0).ln());
            return (prev.1 + t * (us - prev.1)) * 1e-6;
        }
        prev = (n, us);
    }
    prev.1 * 1e-6
}

/// Latency of one small all-reduce over PCIe among `tp` GPUs.
fn pcie_alpha(c: &Constants, eager: bool, tp: f64) -> f64 {
    if eager {
        c.pcie_eager_hop_s * (tp - 1.0)
    } else {
        c.pcie_call_s
    }
}

/// The link a TP all-reduce crosses, as (seconds per call, bytes per second): the network when
/// the TP group spans nodes, else NVLink, else PCIe at its fitted share.
fn tp_link(s: &ClusterScenario<'_>, c: &Constants, net: &NetworkSpec, tp: f64) -> (f64, f64) {
    if !s.layout.tp_within_node() {
        (net.latency_s, net.bytes_per_s())
    } else if s.intra.nvlink {
        (nvlink_latency_s(), s.intra.gbps_per_direction * 1e9)
    } else {
        (
            pcie_alpha(c, s.eager, tp),
            s.intra.gbps_per_direction * 1e9 * c.pcie_share,
        )
    }
}

/// Host cost per kernel: the engine's fitted one, at least [`EAGER_KERNEL_S`] when eager (as the
/// single-node model).
fn per_kernel(e: &EngineEfficiency, eager: bool) -> f64 {
    if eager {
        e.per_kernel_s.max(EAGER_KERNEL_S)
    } else {
        e.per_kernel_s
    }
}

struct Rates {
    bw: f64,
    flops: f64,
    eff: Option<(EngineEfficiency, Constants)>,
}

/// Share of the model's layers that are MoE layers (EP all-to-all runs only there): DeepSeek-V3
/// has 3 dense layers of 61 (`first_k_dense_replace`), Qwen3-235B none. 0 for dense models.
pub fn moe_layer_share(arch: &crate::arch::ModelArch) -> f64 {
    let Some(m) = arch.moe.as_ref().filter(|m| m.experts > 0) else {
        return 0.0;
    };
    if m.moe_layers.is_empty() || arch.num_layers == 0 {
        return 1.0;
    }
    m.moe_layers.iter().filter(|x| **x).count() as f64 / f64::from(arch.num_layers)
}

fn figures(s: &ClusterScenario<'_>, r: &Rates) -> ClusterFigures {
    let m = s.model;
    let l = s.layout;
    let (tp, pp) = (f64::from(l.tp.max(1)), f64::from(l.pp.max(1)));
    let stage_layers = f64::from(s.memory.layers.max(1));
    let stage_share = stage_layers / m.layers.max(1) as f64;
    let b = s.batch.max(1) as f64;
    let net: NetworkSpec = s.network.spec();
    let (kv_share_ctx, attended) = kv_share(m, s.context);
    let (_, attended_p) = kv_share(m, s.prompt_tokens.max(1));
    let k = f64::from(m.experts_per_token);
    let experts = f64::from(m.experts.max(1));
    // expert bytes a step of `tokens` tokens per rank touches on this GPU: tokens reach this
    // GPU's experts from every rank of the EP group (uniform routing)
    let expert_read = |tokens: f64| -> f64 {
        if m.experts == 0 {
            return s.memory.expert_bytes as f64;
        }
        let group_tokens = if l.ep > 1 {
            tokens * f64::from(l.ep) / tp
        } else {
            tokens
        };
        let touched = 1.0 - (1.0 - k / experts).powf(group_tokens);
        s.memory.expert_bytes as f64 * touched
    };
    let flops_per_token = 2.0 * m.active_params + attended * s.attention.decode;
    let stage_time = |tokens: f64, r: &Rates| -> (f64, f64, f64, f64, f64, f64) {
        let bytes = s.memory.dense_bytes as f64
            + expert_read(tokens)
            + tokens * s.memory.kv_bytes_per_token as f64 * s.context as f64 * kv_share_ctx
            // hybrid models: each sequence's recurrent state, read and written per step
            + tokens * 2.0 * m.state_bytes_per_sequence * stage_share / tp;
        let mem = bytes / r.bw;
        let comp = tokens * flops_per_token * stage_share / tp / r.flops;
        let Some((e, c)) = &r.eff else {
            return (mem, comp, 0.0, 0.0, 0.0, mem.max(comp));
        };
        let (mem, comp) = (mem / e.memory_bandwidth, comp / e.compute);
        let launch = stage_layers * KERNELS_PER_LAYER * per_kernel(e, s.eager);
        let act = tokens * m.hidden as f64 * m.activation_bytes;
        let tp_comm = if l.tp > 1 {
            let (alpha, bw) = tp_link(s, c, &net, tp);
            2.0 * stage_layers * (alpha + 2.0 * (tp - 1.0) / tp * act / bw)
        } else {
            0.0
        };
        let ep_comm = if l.ep > 1 {
            let ep = f64::from(l.ep);
            let moe_layers = stage_layers * s.moe_layer_share;
            let wire = tokens * k * m.hidden as f64 * 3.0 * (ep - 1.0) / ep;
            let per_layer = if l.ep_across_nodes() && s.network != Network::NvlinkDomain {
                // DeepEP low-latency table, scaled by tokens, hidden, top-k and NIC speed
                deepep_ll_s(l.ep)
                    * (tokens / 128.0).max(0.25)
                    * (m.hidden as f64 / 7168.0)
                    * (k / 8.0)
                    * (50.0 / net.line_gbps)
            } else {
                let bw = if l.ep_across_nodes() {
                    net.bytes_per_s()
                } else {
                    s.intra.gbps_per_direction * 1e9
                };
                2.0 * nvlink_latency_s() + wire / (bw * c.ep_share)
            };
            moe_layers * per_layer
        } else {
            0.0
        };
        let core = mem.max(comp);
        let hidden = if s.overlap.two_batch {
            c.tbo_overlap * (core + launch).min(ep_comm)
        } else {
            0.0
        };
        let step = core + launch + ep_comm - hidden + tp_comm;
        (mem, comp, launch, tp_comm, ep_comm, step)
    };
    // decode: m micro-batches through pp stages
    let micro = if l.pp > 1 { b.min(pp) } else { 1.0 };
    let bm = b / micro;
    let (mem, comp, launch, tp_comm, ep_comm, t_stage) = stage_time(bm, r);
    let handoff = |tokens: f64| -> f64 {
        let act = tokens * m.hidden as f64 * m.activation_bytes;
        if l.pp_across_nodes() {
            net.latency_s + act / net.bytes_per_s()
        } else if s.intra.nvlink {
            nvlink_latency_s() + act / (s.intra.gbps_per_direction * 1e9)
        } else {
            FITTED.pcie_call_s + act / (s.intra.gbps_per_direction * 1e9)
        }
    };
    let (round, pp_s) = match &r.eff {
        None => (t_stage, 0.0),
        Some((e, c)) => {
            let host = e.per_sequence_step_s * b;
            if l.pp > 1 {
                let exposed = if s.overlap.pp_send_recv {
                    0.0
                } else {
                    c.pp_bubble * (pp - 1.0) * (t_stage + handoff(bm))
                };
                let pp_s = exposed + (pp - 1.0) * handoff(bm) / micro.max(1.0);
                (micro.max(pp) * t_stage + pp_s + host, pp_s)
            } else {
                (t_stage + host, 0.0)
            }
        }
    };
    let round = if r.eff.is_none() {
        // reads the stage's weights once for the whole batch, all stages in parallel
        let (.., full) = stage_time(b, r);
        full
    } else {
        round
    };
    let per_gpu = b / round / (tp * pp);
    // prefill: one prompt alone (TTFT) and saturating chunks of prompt_tokens per rank
    let p = s.prompt_tokens.max(1) as f64;
    let pf_flops_tok = 2.0 * m.active_params + attended_p * s.attention.prefill;
    let prefill_pass = |tokens: f64, r: &Rates| -> f64 {
        let comp = tokens * pf_flops_tok / tp / r.flops;
        let mem = (s.memory.dense_bytes as f64 + expert_read(tokens)) * pp / r.bw;
        let Some((e, c)) = &r.eff else {
            // roofline: all stages of the replica work at once
            return (comp / pp).max(mem / pp);
        };
        let core = (comp / e.compute).max(mem / e.memory_bandwidth);
        let launch =
            f64::from(l.pp.max(1)) * stage_layers * KERNELS_PER_LAYER * per_kernel(e, s.eager);
        let act = tokens * m.hidden as f64 * m.activation_bytes;
        let layers = m.layers as f64;
        let tp_comm = if l.tp > 1 {
            let (alpha, bw) = tp_link(s, c, &net, tp);
            2.0 * layers * (alpha + 2.0 * (tp - 1.0) / tp * act / bw)
        } else {
            0.0
        };
        let ep_comm = if l.ep > 1 {
            let ep = f64::from(l.ep);
            let gpn = f64::from(l.gpus_per_node.max(1));
            let per_token = k * m.hidden as f64 * 3.0;
            // DeepEP normal dispatch sends a token once to each remote node holding one of its
            // experts and forwards it over NVLink inside that node (README @ 0aaa674:
            // "asymmetric-domain bandwidth forwarding"): RDMA copies per token = expected
            // remote nodes touched by top-k uniform routing; NVLink copies = top-k share local
            let (remote_node, local) = if l.ep_across_nodes() && s.network != Network::NvlinkDomain
            {
                let nodes = ep / gpn;
                let touched = 1.0 - (1.0 - gpn / ep).powf(k);
                ((nodes - 1.0) * touched / k, (gpn - 1.0) / ep)
            } else {
                (0.0, (ep - 1.0) / ep)
            };
            let local_bw = if l.ep_across_nodes() && s.network == Network::NvlinkDomain {
                net.bytes_per_s()
            } else {
                s.intra.gbps_per_direction * 1e9
            };
            let t_net = tokens * per_token * remote_node / (net.bytes_per_s() * c.ep_share);
            let t_local = tokens * per_token * local / (local_bw * c.ep_share);
            layers
                * s.moe_layer_share
                * (2.0 * net.latency_s.max(nvlink_latency_s()) + t_net.max(t_local))
        } else {
            0.0
        };
        let pp_comm = (pp - 1.0) * handoff(tokens);
        let body = if s.overlap.two_batch {
            core + ep_comm - c.tbo_overlap * core.min(ep_comm)
        } else {
            core + ep_comm
        };
        body + launch + tp_comm + pp_comm
    };
    let ttft = prefill_pass(p, r);
    // saturating prefill: a chunk of `p` tokens per rank, stages pipelined (pp chunks in flight)
    let chunk = prefill_pass(p, r);
    let prefill_per_gpu = match &r.eff {
        None => p / chunk / (tp * pp),
        Some(_) => p / (chunk / pp) / (tp * pp),
    };
    ClusterFigures {
        round_s: round,
        tokens_per_s_per_sequence: 1.0 / round,
        tokens_per_s_per_gpu: per_gpu,
        memory_s: mem,
        compute_s: comp,
        launch_s: launch,
        tp_comm_s: tp_comm,
        ep_comm_s: ep_comm,
        pp_s,
        ttft_s: ttft,
        prefill_tokens_per_s_per_gpu: prefill_per_gpu,
    }
}

/// Roofline and expected figures of a scenario with an engine's efficiency and constants.
pub fn estimate(
    s: &ClusterScenario<'_>,
    eff: &EngineEfficiency,
    c: &Constants,
) -> Result<ClusterEstimate, ClusterError> {
    let g = s.gpu;
    let bw = g
        .memory_bandwidth_gbps
        .filter(|b| *b > 0.0)
        .ok_or_else(|| ClusterError::UnknownGpu(g.name.clone()))?;
    let best = peak_tflops(g, s.model.roofline_path, true)
        .ok_or_else(|| ClusterError::UnknownGpu(g.name.clone()))?;
    let own = peak_tflops(g, s.model.path, false).unwrap_or(best);
    let roofline = figures(
        s,
        &Rates {
            bw: bw * 1e9,
            flops: best * 1e12,
            eff: None,
        },
    );
    let expected = figures(
        s,
        &Rates {
            bw: bw * 1e9,
            flops: own * 1e12,
            eff: Some((eff.clone(), *c)),
        },
    );
    Ok(ClusterEstimate { roofline, expected })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Dtype, ModelArch};
    use crate::cluster::memory::fullest_gpu;
    use crate::speed::estimate::{Weights, model_numbers};

    struct Fixture {
        arch: ModelArch,
        model: ModelNumbers,
        gpu: &'static GpuSpec,
    }

    fn fixture(id: &str, gpu: &str) -> Fixture {
        let arch = crate::catalog::lookup(id).unwrap();
        let model = model_numbers(
            &arch,
            &Weights::Checkpoint(arch.quantization.as_ref()),
            Dtype::Bf16,
        );
        Fixture {
            arch,
            model,
            gpu: crate::gpus::lookup(gpu).unwrap(),
        }
    }

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

    #[allow(clippy::too_many_arguments)]
    fn run(
        f: &Fixture,
        l: Layout,
        net: Network,
        pcie: bool,
        batch: u64,
        overlap: Overlap,
    ) -> ClusterEstimate {
        run_with(f, l, net, pcie, batch, overlap, &FITTED)
    }

    fn run_with(
        f: &Fixture,
        l: Layout,
        net: Network,
        pcie: bool,
        batch: u64,
        overlap: Overlap,
        c: &Constants,
    ) -> ClusterEstimate {
        let memory = fullest_gpu(&f.arch, f.arch.quantization.as_ref(), Dtype::Bf16, &l);
        let s = ClusterScenario {
            model: &f.model,
            attention: AttentionFlops::of(&f.arch),
            moe_layer_share: moe_layer_share(&f.arch),
            memory: &memory,
            gpu: f.gpu,
            layout: l,
            intra: IntraLink::from_gpu(f.gpu, l.tp.min(l.gpus_per_node), pcie),
            network: net,
            batch,
            context: 1024,
            prompt_tokens: 1024,
            overlap,
            eager: false,
        };
        let eff = crate::speed::engines::efficiency(crate::speed::engines::Engine::Vllm).unwrap();
        estimate(&s, &eff, c).unwrap()
    }

    #[test]
    fn tp_all_reduce_follows_the_ring_formula() {
        let f = fixture("meta-llama/Llama-3.1-70B-Instruct", "H100 SXM");
        let e = run(
            &f,
            layout(8, 1, 1, 1, 1, 8),
            Network::IbNdr,
            false,
            64,
            Overlap::default(),
        );
        // 2 per layer × 80 layers × (5 µs + 2·7/8 × 64 tokens × 8192 × 2 B / 450 GB/s)
        let bytes = 64.0 * 8192.0 * 2.0;
        let want = 2.0 * 80.0 * (5e-6 + 2.0 * 7.0 / 8.0 * bytes / 450e9);
        assert!(
            (e.expected.tp_comm_s - want).abs() < 1e-9,
            "{} vs {want}",
            e.expected.tp_comm_s
        );
        // no communication and 100 % rates in the roofline: never slower than expected
        assert!(e.roofline.tp_comm_s == 0.0);
        assert!(e.roofline.tokens_per_s_per_gpu >= e.expected.tokens_per_s_per_gpu);
        assert!(e.roofline.prefill_tokens_per_s_per_gpu >= e.expected.prefill_tokens_per_s_per_gpu);
    }

    #[test]
    fn pcie_costs_more_than_nvlink_and_tcp_tp_more_than_pp() {
        let f = fixture("meta-llama/Llama-3.1-70B-Instruct", "H100 SXM");
        let nv = run(
            &f,
            layout(4, 1, 1, 1, 1, 4),
            Network::IbNdr,
            false,
            1,
            Overlap::default(),
        );
        let pcie = run(
            &f,
            layout(4, 1, 1, 1, 1, 4),
            Network::IbNdr,
            true,
            1,
            Overlap::default(),
        );
        assert!(pcie.expected.tp_comm_s > 2.0 * nv.expected.tp_comm_s);
        assert!(pcie.expected.round_s > nv.expected.round_s);
        // across two nodes over TCP: TP16 all-reduces cross the network every layer, PP2×TP8
        // hands over once per stage — the vLLM 405B blog's 6.6× has this sign
        let big = fixture("meta-llama/Llama-3.1-405B-Instruct", "H100 SXM");
        let tp16 = run(
            &big,
            layout(16, 1, 1, 1, 2, 8),
            Network::Eth100,
            false,
            64,
            Overlap::default(),
        );
        let pp2 = run(
            &big,
            layout(8, 2, 1, 1, 2, 8),
            Network::Eth100,
            false,
            64,
            Overlap::default(),
        );
        assert!(tp16.expected.round_s > 3.0 * pp2.expected.round_s);
        // over InfiniBand the gap shrinks
        let tp16_ib = run(
            &big,
            layout(16, 1, 1, 1, 2, 8),
            Network::IbNdr,
            false,
            64,
            Overlap::default(),
        );
        assert!(tp16_ib.expected.round_s < tp16.expected.round_s / 3.0);
    }

    #[test]
    fn pp_bubble_and_two_batch_overlap() {
        let f = fixture("Qwen/Qwen3-235B-A22B", "H200 SXM");
        let l = layout(8, 4, 1, 1, 4, 8);
        let plain = run(&f, l, Network::IbNdr, false, 128, Overlap::default());
        let ov = Overlap {
            pp_send_recv: true,
            two_batch: false,
        };
        let overlapped = run(&f, l, Network::IbNdr, false, 128, ov);
        assert!(plain.expected.pp_s > overlapped.expected.pp_s);
        assert!(plain.expected.round_s > overlapped.expected.round_s);
        // one stage: no PP cost at all
        let one = run(
            &f,
            layout(8, 1, 1, 1, 1, 8),
            Network::IbNdr,
            false,
            128,
            Overlap::default(),
        );
        assert!(one.expected.pp_s == 0.0);
        // DeepSeek-V3 DP/EP 32 over 4 nodes: EP all-to-all costed, TBO hides part of it
        let ds = fixture("deepseek-ai/DeepSeek-V3", "H100 SXM");
        let l = layout(1, 1, 32, 32, 4, 8);
        let no = run(&ds, l, Network::IbNdr, false, 128, Overlap::default());
        let tbo = Overlap {
            pp_send_recv: false,
            two_batch: true,
        };
        let yes = run(&ds, l, Network::IbNdr, false, 128, tbo);
        assert!(no.expected.ep_comm_s > 0.0 && no.expected.tp_comm_s == 0.0);
        // the fitted overlap share is 0 (docs/speed.md): TBO never slower; with a full
        // overlap the step is the longer of compute and all-to-all
        assert!(yes.expected.round_s <= no.expected.round_s);
        let full = Constants {
            tbo_overlap: 1.0,
            ..FITTED
        };
        let hidden = run_with(&ds, l, Network::IbNdr, false, 128, tbo, &full);
        assert!(hidden.expected.round_s < no.expected.round_s);
        // a slower network costs more all-to-all
        let hdr = run(&ds, l, Network::IbHdr, false, 128, Overlap::default());
        assert!(hdr.expected.ep_comm_s > no.expected.ep_comm_s);
    }

    #[test]
    fn estimate_layout_validates_then_estimates() {
        let a = crate::catalog::lookup("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        let gpu = crate::gpus::lookup("H100 SXM").unwrap();
        let mut r = LayoutRequest {
            arch: &a,
            quant: None,
            kv: Dtype::Bf16,
            gpu,
            layout: layout(8, 2, 1, 1, 2, 8),
            network: Network::IbNdr,
            force_pcie: false,
            engine: crate::speed::engines::Engine::Vllm,
            batch: 32,
            context: 2048,
            prompt_tokens: 1024,
            overlap: Overlap::default(),
            eager: false,
        };
        let (m, e) = estimate_layout(&r).unwrap();
        assert_eq!(m.layers, 40);
        assert!(e.expected.pp_s > 0.0 && e.expected.tp_comm_s > 0.0);
        assert!(e.expected.tokens_per_s_per_gpu > 0.0);
        r.layout = layout(8, 1, 1, 1, 2, 8);
        assert!(matches!(
            estimate_layout(&r),
            Err(ClusterError::Layout(
                crate::cluster::LayoutError::WorldSize { .. }
            ))
        ));
    }

    #[test]
    fn deepep_table_interpolates() {
        assert!((deepep_ll_s(8) - 191e-6).abs() < 1e-12);
        assert!((deepep_ll_s(4) - 191e-6).abs() < 1e-12);
        assert!((deepep_ll_s(64) - 487e-6).abs() < 1e-12);
        assert!((deepep_ll_s(512) - 554e-6).abs() < 1e-12);
        let mid = deepep_ll_s(72);
        assert!(mid > 487e-6 && mid < 561e-6, "{mid}");
    }

    #[test]
    fn mla_attention_flops_use_the_latent() {
        let ds = crate::catalog::lookup("deepseek-ai/DeepSeek-V3").unwrap();
        let a = AttentionFlops::of(&ds);
        // 2 × 128 × (512 + 64) + 2 × 128 × 512 = 278,528 per attended token per layer
        assert!((a.decode - 278_528.0).abs() < 1e-6);
        assert!((a.prefill - 128.0 * 320.0).abs() < 1e-6);
        let llama = crate::catalog::lookup("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        assert!((AttentionFlops::of(&llama).decode - 4.0 * 8192.0).abs() < 1e-6);
        assert!((moe_layer_share(&ds) - 58.0 / 61.0).abs() < 1e-9);
        assert!(moe_layer_share(&llama) == 0.0);
    }
}
