//! Two speed figures for one deployment: a **roofline** (100 % of datasheet bandwidth and of the
//! fastest tensor path the weights' and activations' dtypes allow, no communication, no
//! overhead — no real run can beat it) and an **expected** figure for a named engine (its fitted
//! efficiency, all-reduce latency per call over the actual link, a kernel-launch floor,
//! llama.cpp's layer split). Method and measured errors: docs/speed.md.

use super::engines::EngineEfficiency;
use super::{ComputeDtype, SpeedError};
use crate::arch::{AttentionKind, Dtype, ModelArch, Quantization};
use crate::gguf_quant::{self, GgufFileType};
use crate::gpus::GpuSpec;
use crate::memory::{Shard, kv_bytes_per_token_layer, parameter_count, weights_per_gpu};
use serde::Serialize;

/// How the model is spread over GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Tensor parallelism: every GPU holds a slice of every layer; 2 all-reduces per layer.
    Tensor,
    /// Layers split across GPUs (llama.cpp `--split-mode layer`, pipeline parallelism): a token
    /// passes the GPUs one after another.
    Layers,
}

/// Kernels one transformer layer launches in a decode step (norms, QKV, rope, attention, output,
/// gate/up, activation, down, residual adds) — a judgement from profiles of llama-style layers.
pub const KERNELS_PER_LAYER: f64 = 10.0;
/// Host cost of one kernel launched eagerly from PyTorch (no CUDA/HIP graphs, `--enforce-eager`):
/// at least 10 µs of dispatch (judgement from PyTorch's per-op overhead), which the GPU waits for
/// once the kernels are shorter than that.
pub const EAGER_KERNEL_S: f64 = 10e-6;

/// Model facts the speed model needs, for the whole model (all GPUs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelNumbers {
    /// Weight bytes as stored on the GPUs.
    pub weight_bytes: f64,
    /// Of which routed-expert bytes (MoE).
    pub routed_expert_bytes: f64,
    /// Routed experts and top-k (0 for dense).
    pub experts: u32,
    pub experts_per_token: u32,
    /// Parameters one token multiplies through.
    pub active_params: f64,
    /// KV bytes per token of context per layer, with each layer's window (0 = full attention).
    pub kv_layers: Vec<(f64, u64)>,
    /// Recurrent-state bytes of one sequence over all state layers (hybrid models; 0 otherwise),
    /// as vLLM keeps them (`state::vllm_state_bytes`, one GPU). A decode step reads and writes
    /// each sequence's state once: the Gated DeltaNet and Mamba update kernels
    /// (`fused_recurrent_gated_delta_rule`, `selective_state_update`) load the state and store
    /// the new one in place.
    pub state_bytes_per_sequence: f64,
    pub hidden: u64,
    pub layers: u64,
    /// Query width (heads × head_dim) and each layer's attention window (0 = full).
    pub attention_dim: u64,
    /// Bytes per activation element on the wire.
    pub activation_bytes: f64,
    /// Tensor path an engine's GEMMs normally take (the expected figure).
    pub path: ComputeDtype,
    /// Fastest tensor path these dtypes allow (the roofline): int8 for GGUF quants, which
    /// llama.cpp's MMQ kernels may use, though its usual prefill runs near the FP16 rate.
    pub roofline_path: ComputeDtype,
    /// 16-bit GEMMs accumulate in FP16 (llama.cpp's cuBLAS calls use `CUBLAS_COMPUTE_16F`), which
    /// GeForce cards run at twice their FP32-accumulate rate.
    pub fp16_accumulate: bool,
    /// What the weights are (for the assumptions).
    pub weights_desc: String,
}

/// Weights as deployed.
#[derive(Debug, Clone, PartialEq)]
pub enum Weights<'a> {
    /// As the checkpoint or a `--quantization` method says (`None`: the native dtype).
    Checkpoint(Option<&'a Quantization>),
    /// A GGUF file type, sized tensor by tensor (crate::gguf_quant).
    Gguf(GgufFileType),
}

/// Model numbers for `arch` with these weights and KV-cache dtype.
pub fn model_numbers(arch: &ModelArch, weights: &Weights<'_>, kv: Dtype) -> ModelNumbers {
    let params = parameter_count(arch) as f64;
    let h = arch.hidden_size;
    let routed_params: f64 = arch.moe.as_ref().map_or(0.0, |m| {
        let n = m.moe_layers.iter().filter(|x| **x).count() as f64;
        let n = if m.moe_layers.is_empty() {
            f64::from(arch.num_layers)
        } else {
            n
        };
        n * f64::from(m.experts) * m.expert_intermediate as f64 * h as f64 * 3.0
    });
    let (experts, k) = arch
        .moe
        .as_ref()
        .map_or((0, 0), |m| (m.experts, m.experts_per_token));
    let active_params = if experts > 0 {
        params - routed_params + routed_params * f64::from(k) / f64::from(experts)
    } else {
        params
    };
    let (roofline_path, weight_bytes, routed_expert_bytes, path, desc) = match weights {
        Weights::Gguf(ft) => {
            let g = gguf_quant::size(arch, *ft);
            let roof = match ft {
                GgufFileType::F16 | GgufFileType::BF16 => ComputeDtype::Fp16,
                // llama.cpp can multiply quantized weights with int8 dot products (MMQ)
                _ => ComputeDtype::Int8,
            };
            (
                roof,
                g.total_bytes as f64,
                g.routed_expert_bytes as f64,
                ComputeDtype::Fp16,
                format!("GGUF {ft:?} ({:.2} bits per weight)", g.bits_per_weight),
            )
        }
        Weights::Checkpoint(q) => {
            let w = weights_per_gpu(arch, *q, Shard::SINGLE);
            let total = (w.total() - w.rope_cache - w.runtime) as f64;
            let routed = if params > 0.0 {
                (w.experts as f64).min(total)
            } else {
                0.0
            };
            let path = match q {
                Some(q) if q.float && q.bits == 8 => ComputeDtype::Fp8,
                Some(q) if q.float && q.bits == 4 && q.method != "mxfp4" => ComputeDtype::Fp4,
                Some(q) if !q.float && q.bits == 8 => ComputeDtype::Int8,
                // weight-only (AWQ/GPTQ/MXFP4 on pre-Blackwell) dequantize to 16-bit GEMMs
                _ => ComputeDtype::Fp16,
            };
            let desc = match q {
                Some(q) => format!("{} {}-bit", q.method, q.bits),
                None => arch.dtype.to_string(),
            };
            (path, total, routed, path, desc)
        }
    };
    let kv_layers = (0..arch.num_layers as usize)
        .map(|i| {
            let l = arch
                .layers
                .get(i)
                .copied()
                .unwrap_or(crate::arch::LayerAttention {
                    kind: AttentionKind::Full,
                    kv_heads: arch.num_kv_heads,
                    head_dim: arch.head_dim,
                    k_eq_v: false,
                });
            let window = match l.kind {
                AttentionKind::Sliding(w) | AttentionKind::ChunkedLocal(w) => u64::from(w),
                _ => 0,
            };
            (kv_bytes_per_token_layer(arch, &l, 1, kv) as f64, window)
        })
        .collect();
    let (conv, ssm) =
        crate::hybrid::vllm_state_dtypes(arch, crate::memory::EngineVersion::LATEST, None, None);
    let state_bytes_per_sequence = arch
        .state_layers
        .iter()
        .filter_map(|l| crate::state::vllm_state_bytes(&l.state, 1, conv, ssm))
        .map(|b| b.total() as f64)
        .sum();
    ModelNumbers {
        state_bytes_per_sequence,
        weight_bytes,
        routed_expert_bytes,
        experts,
        experts_per_token: k,
        active_params,
        kv_layers,
        hidden: h,
        layers: u64::from(arch.num_layers),
        attention_dim: u64::from(arch.num_attention_heads) * u64::from(arch.head_dim),
        activation_bytes: 2.0,
        path,
        roofline_path,
        fp16_accumulate: matches!(weights, Weights::Gguf(_)),
        weights_desc: desc,
    }
}

/// One deployment and workload.
#[derive(Debug, Clone)]
pub struct Scenario<'a> {
    pub model: &'a ModelNumbers,
    pub gpu: &'a GpuSpec,
    /// GPUs the model is spread over.
    pub gpus: u32,
    pub split: Split,
    /// Sequences decoded together.
    pub batch: u64,
    /// Mean context of each sequence during decode (tokens).
    pub decode_context: u64,
    /// Prompt tokens of one request (TTFT).
    pub prompt_tokens: u64,
    /// Kernels launched one by one (`--enforce-eager`), not replayed from CUDA/HIP graphs.
    pub eager: bool,
    /// Pipeline-parallel stages under [`Split::Tensor`] (`--pipeline-parallel-size`; 1 = none):
    /// each stage is `gpus / stages` tensor-parallel GPUs, and a token passes the stages in turn.
    pub pipeline_stages: u32,
}

/// Speed figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Seconds per decode step (one token for each of `batch` sequences).
    pub decode_step_s: f64,
    pub decode_tokens_per_s_per_sequence: f64,
    pub decode_tokens_per_s_aggregate: f64,
    /// Prefill of one prompt alone.
    pub ttft_s: f64,
    /// Decode step parts: weights + KV reads, compute, communication, launch floor.
    pub memory_time_s: f64,
    pub compute_time_s: f64,
    pub communication_time_s: f64,
    pub launch_floor_s: f64,
    /// Bytes one decode step reads: weights (experts touched) and KV cache (with a hybrid
    /// model's recurrent state, read and written), all GPUs.
    pub weight_bytes_read_per_step: f64,
    pub kv_bytes_read_per_step: f64,
    /// Prefill parts for one prompt: FLOPs on all GPUs, compute and weight-read time.
    pub prefill_flops: f64,
    pub prefill_compute_time_s: f64,
    pub prefill_memory_time_s: f64,
    pub prefill_communication_time_s: f64,
}

/// Roofline and expected figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub roofline: Figures,
    pub expected: Figures,
    pub efficiency: EngineEfficiency,
    pub assumptions: Vec<String>,
}

fn peak_tflops(gpu: &GpuSpec, path: ComputeDtype, best: bool, acc16: bool) -> Option<f64> {
    // a GeForce card's FP16-accumulate rate is twice the stored FP32-accumulate one
    let geforce =
        gpu.name.starts_with("RTX ") && !gpu.name.contains("A6000") && !gpu.name.contains("Ada");
    let fp16_any = if geforce {
        gpu.fp16_tflops.map(|f| 2.0 * f)
    } else {
        gpu.fp16_tflops
    };
    let fp16 = if acc16 { fp16_any } else { gpu.fp16_tflops };
    let own = match path {
        ComputeDtype::Fp16 => fp16,
        ComputeDtype::Fp8 => gpu.fp8_tflops.or(fp16),
        ComputeDtype::Int8 => gpu.int8_tops.or(fp16),
        ComputeDtype::Fp4 => gpu.fp4_tflops.or(gpu.fp8_tflops).or(fp16),
    };
    if best {
        // The roofline takes the fastest path open to these dtypes (an engine may pick one).
        [own, fp16_any].into_iter().flatten().reduce(f64::max)
    } else {
        own
    }
}

/// Link of a TP all-reduce: (kind for the latency table, GB/s per direction, description).
fn link(gpu: &GpuSpec, gpus: u32) -> (&'static str, Option<f64>, String) {
    let pcie = gpu.pcie_gbps_per_direction();
    match (&gpu.gpu_link, gpu.gpu_link_gbps) {
        // NVLink bridges join pairs only; more GPUs talk over PCIe
        (Some(l), Some(_)) if l.contains("bridge") && gpus > 2 => {
            ("pcie", pcie, format!("PCIe ({l} joins pairs only)"))
        }
        (Some(l), Some(b)) if l.contains("Infinity") => {
            ("infinity_fabric", Some(b / 2.0), l.clone())
        }
        (Some(l), Some(b)) => ("nvlink", Some(b / 2.0), l.clone()),
        _ => ("pcie", pcie, String::from("PCIe")),
    }
}

/// Seconds per small all-reduce over `kind` among `gpus` GPUs. NVLink/xGMI one-shot kernels cost
/// about the same at 2–8 GPUs (measured custom all-reduce, source in docs/speed.md); NCCL's ring over PCIe takes 2(n−1) hops, so the
/// 4-GPU measurement is scaled by (n−1)/3.
fn link_latency_s(kind: &str, gpus: u32) -> f64 {
    let base = crate::gpus::catalog()
        .ok()
        .and_then(|c| c.link_latency(kind))
        .map_or(20e-6, |l| l.allreduce_us * 1e-6);
    if kind == "pcie" {
        base * f64::from(gpus.max(2) - 1) / 3.0
    } else {
        base
    }
}

/// Bytes of KV read per sequence at `ctx` tokens and Σ layers × attended tokens.
fn kv_at(m: &ModelNumbers, ctx: u64) -> (f64, f64) {
    let mut bytes = 0.0;
    let mut attended = 0.0;
    for &(b, w) in &m.kv_layers {
        let t = if w > 0 { ctx.min(w) } else { ctx } as f64;
        bytes += b * t;
        attended += t;
    }
    (bytes, attended)
}

/// Weight bytes a step of `tokens` tokens reads (routed experts touched under uniform routing).
fn weights_read(m: &ModelNumbers, tokens: u64) -> f64 {
    if m.experts == 0 || m.routed_expert_bytes <= 0.0 {
        return m.weight_bytes;
    }
    let p_miss = 1.0 - f64::from(m.experts_per_token) / f64::from(m.experts);
    let touched = 1.0 - p_miss.powf(tokens as f64);
    m.weight_bytes - m.routed_expert_bytes + m.routed_expert_bytes * touched
}

struct Rates {
    bw: f64,
    flops: f64,
}

fn figures(s: &Scenario<'_>, r: &Rates, eff: Option<&EngineEfficiency>) -> Figures {
    let m = s.model;
    let n = f64::from(s.gpus.max(1));
    let b = s.batch.max(1);
    // GPUs working on one token at once: all of them under TP, one under a layer split.
    let stages = match s.split {
        Split::Tensor => f64::from(s.pipeline_stages.clamp(1, s.gpus.max(1))),
        Split::Layers => n,
    };
    let par = (n / stages).floor().max(1.0);
    let (kv_seq, attended) = kv_at(m, s.decode_context);
    let w_read = weights_read(m, b);
    let bytes = w_read + (kv_seq + 2.0 * m.state_bytes_per_sequence) * b as f64;
    let memory_time_s = bytes / (par * r.bw);
    let flops = b as f64 * (2.0 * m.active_params + 4.0 * attended * m.attention_dim as f64);
    let compute_time_s = flops / (par * r.flops);
    // prefill of one prompt
    let p = s.prompt_tokens.max(1) as f64;
    let (_, attended_p) = kv_at(m, s.prompt_tokens.max(1));
    // causal attention over the prompt: half the square, per layer (windowed layers less)
    let pf_flops = 2.0 * m.active_params * p + 2.0 * p * attended_p * m.attention_dim as f64;
    // the roofline lets every GPU work on the prompt (chunks can be pipelined through stages)
    let par_pf = if eff.is_none() { n } else { par };
    let pf_compute = pf_flops / (par_pf * r.flops);
    let pf_memory = weights_read(m, s.prompt_tokens.max(1)) / (par_pf * r.bw);
    let (comm_step, comm_prefill, floor) = match eff {
        None => (0.0, 0.0, 0.0),
        Some(_) => {
            let per_kernel = eff.map_or(0.0, |e| {
                if s.eager {
                    e.per_kernel_s.max(EAGER_KERNEL_S)
                } else {
                    e.per_kernel_s
                }
            });
            let floor = m.layers as f64 * KERNELS_PER_LAYER * per_kernel;
            let (kind, gbps, _) = link(s.gpu, s.gpus);
            let lat = link_latency_s(kind, s.gpus);
            let bw = gbps.unwrap_or(16.0) * 1e9;
            let comm = |tokens: f64| -> f64 {
                let act = tokens * m.hidden as f64 * m.activation_bytes;
                // tensor parallel: 2 all-reduces per layer among the `par` GPUs of a stage
                let tensor = if par > 1.0 {
                    2.0 * m.layers as f64 * (lat + 2.0 * (par - 1.0) / par * act / bw)
                } else {
                    0.0
                };
                // one hand-over of the hidden state per stage boundary
                tensor + (stages - 1.0) * (lat + act / bw)
            };
            (comm(b as f64), comm(p), floor)
        }
    };
    let (mem_e, comp_e, per_seq_s) = eff.map_or((1.0, 1.0, 0.0), |e| {
        (e.memory_bandwidth, e.compute, e.per_sequence_step_s)
    });
    let core = (memory_time_s / mem_e).max(compute_time_s / comp_e);
    // launches the GPU waits for, and host work per running sequence per step (scheduling,
    // sampling, detokenizing)
    let step = core + floor + comm_step + per_seq_s * b as f64;
    // a prefill pass launches the same kernels as a decode step
    let ttft = (pf_compute / comp_e).max(pf_memory / mem_e) + comm_prefill + floor;
    let per_seq = 1.0 / step;
    // a layer split may pipeline different sequences through its GPUs
    let pipelined = match eff {
        None => stages.min(b as f64),
        Some(_) => 1.0,
    };
    Figures {
        decode_step_s: step,
        decode_tokens_per_s_per_sequence: per_seq,
        decode_tokens_per_s_aggregate: per_seq * b as f64 * pipelined,
        ttft_s: ttft,
        memory_time_s: memory_time_s / mem_e,
        compute_time_s: compute_time_s / comp_e,
        communication_time_s: comm_step,
        launch_floor_s: floor,
        weight_bytes_read_per_step: w_read,
        kv_bytes_read_per_step: (kv_seq + 2.0 * m.state_bytes_per_sequence) * b as f64,
        prefill_flops: pf_flops,
        prefill_compute_time_s: pf_compute / comp_e,
        prefill_memory_time_s: pf_memory / mem_e,
        prefill_communication_time_s: comm_prefill,
    }
}

/// The roofline and expected figures alone (no assumptions text): what a fit evaluates.
pub fn estimate_figures(
    s: &Scenario<'_>,
    eff: &EngineEfficiency,
) -> Result<(Figures, Figures), SpeedError> {
    let g = s.gpu;
    let bw = g
        .memory_bandwidth_gbps
        .filter(|b| *b > 0.0)
        .ok_or_else(|| SpeedError::UnknownBandwidth(g.name.clone()))?;
    let best = peak_tflops(g, s.model.roofline_path, true, true)
        .ok_or_else(|| SpeedError::UnknownCompute(g.name.clone()))?;
    let own = peak_tflops(g, s.model.path, false, s.model.fp16_accumulate).unwrap_or(best);
    if s.gpus == 0 || !s.model.weight_bytes.is_finite() || s.model.weight_bytes <= 0.0 {
        return Err(SpeedError::Invalid(String::from(
            "GPU count and weight bytes must be positive",
        )));
    }
    let roofline = figures(
        s,
        &Rates {
            bw: bw * 1e9,
            flops: best * 1e12,
        },
        None,
    );
    let expected = figures(
        s,
        &Rates {
            bw: bw * 1e9,
            flops: own * 1e12,
        },
        Some(eff),
    );
    Ok((roofline, expected))
}

/// Roofline and expected figures for `s` with an engine's efficiency.
pub fn estimate(s: &Scenario<'_>, eff: &EngineEfficiency) -> Result<Estimate, SpeedError> {
    let (roofline, expected) = estimate_figures(s, eff)?;
    let g = s.gpu;
    let bw = g.memory_bandwidth_gbps.unwrap_or(0.0);
    let best = peak_tflops(g, s.model.roofline_path, true, true).unwrap_or(0.0);
    let own = peak_tflops(g, s.model.path, false, s.model.fp16_accumulate).unwrap_or(best);
    let (kind, gbps, desc) = link(g, s.gpus);
    let mut a = vec![
        format!(
            "weights {} = {:.2} GB over {} GPU(s) ({}); decode reads them once per step for the batch, plus each sequence's KV cache at {} tokens of context",
            s.model.weights_desc,
            s.model.weight_bytes / 1e9,
            s.gpus,
            match s.split {
                Split::Tensor => "tensor parallel",
                Split::Layers => "layers split across GPUs, one after another",
            },
            s.decode_context
        ) + &if s.model.state_bytes_per_sequence > 0.0 {
            format!(
                " and its recurrent state ({:.1} MB a sequence, read and written every step)",
                s.model.state_bytes_per_sequence / 1e6
            )
        } else {
            String::new()
        },
        format!(
            "roofline: {bw} GB/s and {best} TFLOPS ({} path or faster) per GPU at 100 %, no communication, no launch cost: no real run is faster",
            s.model.path
        ),
        format!(
            "expected for {}: {:.0} % of bandwidth, {:.0} % of {own} TFLOPS, + launch cost {} layers × {KERNELS_PER_LAYER} kernels × {:.1} µs{}, + {:.0} µs per running sequence per step ({})",
            eff.engine.cli_id(),
            eff.memory_bandwidth * 100.0,
            eff.compute * 100.0,
            s.model.layers,
            if s.eager {
                eff.per_kernel_s.max(EAGER_KERNEL_S)
            } else {
                eff.per_kernel_s
            } * 1e6,
            if s.eager { " (eager)" } else { "" },
            eff.per_sequence_step_s * 1e6,
            eff.basis,
        ),
    ];
    if s.gpus > 1 {
        a.push(format!(
            "communication over {desc} ({:.1} GB/s per direction): {:.1} µs per all-reduce or hand-over ({kind}, gpus.toml link_latency), {} per step",
            gbps.unwrap_or(16.0),
            link_latency_s(kind, s.gpus) * 1e6,
            match s.split {
                Split::Tensor => "2 all-reduces per layer",
                Split::Layers => "one hand-over per GPU boundary",
            }
        ));
    }
    if s.model.experts > 0 {
        a.push(format!(
            "MoE: {} of {} experts per token, active parameters {:.2e}; a step of B tokens reads the experts they touch under uniform routing",
            s.model.experts_per_token, s.model.experts, s.model.active_params
        ));
    }
    a.push(String::from(
        "not counted: queueing, sampling, tokenization, network; TTFT is one prompt alone",
    ));
    Ok(Estimate {
        roofline,
        expected,
        efficiency: eff.clone(),
        assumptions: a,
    })
}

/// Output tokens/s of a batch of `batch` prompts of `input` tokens each producing `output`
/// tokens: B·O / (prefill of the B prompts + O decode steps at mean context I + O/2).
pub fn batch_throughput(f: &Figures, batch: u64, output: u64) -> f64 {
    let b = batch.max(1) as f64;
    let o = output.max(1) as f64;
    b * o / (b * f.ttft_s + o * f.decode_step_s)
}

/// Fitted parameters: (memory bandwidth share, compute share, seconds per kernel launch,
/// seconds per sequence per step).
pub type FitParams = (f64, f64, f64, f64);

/// Grid of each parameter: shares in steps of 0.01, the launch cost in steps of 0.5 µs, the
/// per-sequence cost in steps of 10 µs.
const GRID: [(u32, u32, f64); 4] = [
    (20, 100, 0.01),
    (10, 100, 0.01),
    (0, 40, 0.5e-6),
    (0, 100, 10e-6),
];

/// Fits the efficiency: coordinate descent then a pattern search on the grids above, minimising
/// Σ ln²(predicted / measured) over `pairs(params)` (least squares of the log ratio). A parameter the figures do not depend on
/// keeps `default`'s value.
pub fn fit_efficiency(
    pairs: &dyn Fn(FitParams) -> Vec<(f64, f64)>,
    default: FitParams,
) -> FitParams {
    let cost = |p: FitParams| -> f64 {
        pairs(p)
            .iter()
            .filter(|(p, x)| *p > 0.0 && *x > 0.0)
            .map(|(p, x)| (p / x).ln().powi(2))
            .sum()
    };
    let set = |p: FitParams, k: usize, v: f64| -> FitParams {
        match k {
            0 => (v, p.1, p.2, p.3),
            1 => (p.0, v, p.2, p.3),
            2 => (p.0, p.1, v, p.3),
            _ => (p.0, p.1, p.2, v),
        }
    };
    // The landscape is not convex (max() of memory and compute, bandwidth share against launch
    // cost): several starts, each refined by coordinate descent and a pattern search.
    let mut starts = vec![default];
    for m in [0.5, 0.75, 1.0] {
        for k in [0.0, 6e-6, 15e-6] {
            starts.push((m, default.1, k, default.3));
        }
    }
    let mut best = default;
    let mut best_cost = cost(best);
    for start in starts {
        let (p, c) = descend(&cost, &set, start);
        if c < best_cost - 1e-12 {
            best = p;
            best_cost = c;
        }
    }
    // a parameter with no effect goes back to the default
    let d = [default.0, default.1, default.2, default.3];
    for (k, &dv) in d.iter().enumerate() {
        let cand = set(best, k, dv);
        if (cost(cand) - best_cost).abs() < 1e-12 {
            best = cand;
        }
    }
    best
}

/// Coordinate descent then a pattern search over all 80 grid directions from `start`.
fn descend(
    cost: &dyn Fn(FitParams) -> f64,
    set: &dyn Fn(FitParams, usize, f64) -> FitParams,
    start: FitParams,
) -> (FitParams, f64) {
    let mut best = start;
    let mut best_cost = cost(best);
    for _round in 0..4 {
        for (k, &(lo, hi, step)) in GRID.iter().enumerate() {
            for i in lo..=hi {
                let cand = set(best, k, f64::from(i) * step);
                let c = cost(cand);
                if c < best_cost - 1e-12 {
                    best = cand;
                    best_cost = c;
                }
            }
        }
    }
    // Parameters trade off (bandwidth share against launch cost): a pattern search over all
    // 80 grid directions leaves the ridges coordinate descent stops on.
    let get = |p: FitParams, k: usize| match k {
        0 => p.0,
        1 => p.1,
        2 => p.2,
        _ => p.3,
    };
    for stride in [8.0, 4.0, 2.0, 1.0] {
        loop {
            let mut moved = false;
            for code in 1..81u32 {
                let mut cand = best;
                let mut ok = true;
                let mut c = code;
                for (k, &(lo, hi, step)) in GRID.iter().enumerate() {
                    let d = f64::from(c % 3) - 1.0;
                    c /= 3;
                    let v = get(best, k) + d * stride * step;
                    if v < f64::from(lo) * step - 1e-12 || v > f64::from(hi) * step + 1e-12 {
                        ok = false;
                    }
                    cand = set(cand, k, (v / step).round() * step);
                }
                if !ok {
                    continue;
                }
                let v = cost(cand);
                if v < best_cost - 1e-12 {
                    best = cand;
                    best_cost = v;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }
    (best, best_cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speed::engines::{Engine, efficiency};

    fn arch(id: &str) -> ModelArch {
        match crate::catalog::lookup(id) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        }
    }

    fn gpu(name: &str) -> &'static GpuSpec {
        match crate::gpus::lookup(name) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    }

    fn scenario<'a>(m: &'a ModelNumbers, g: &'a GpuSpec, gpus: u32) -> Scenario<'a> {
        Scenario {
            model: m,
            gpu: g,
            gpus,
            split: Split::Tensor,
            batch: 1,
            decode_context: 0,
            prompt_tokens: 1,
            eager: false,
            pipeline_stages: 1,
        }
    }

    #[test]
    fn roofline_is_bytes_over_datasheet_bandwidth() {
        // Llama-3.1-8B BF16: the weights the roofline reads, over 3.35 TB/s, at batch 1 and an
        // empty context; the expected figure is slower by the engine's efficiency and overheads.
        let m = model_numbers(
            &arch("meta-llama/Llama-3.1-8B-Instruct"),
            &Weights::Checkpoint(None),
            Dtype::Bf16,
        );
        assert!(
            (m.weight_bytes / 1e9 - 16.06).abs() < 0.1,
            "{}",
            m.weight_bytes
        );
        let g = gpu("H100 SXM");
        let e = match estimate(&scenario(&m, g, 1), &efficiency(Engine::Vllm).unwrap()) {
            Ok(e) => e,
            Err(e) => panic!("{e}"),
        };
        let want = m.weight_bytes / 3.35e12;
        assert!((e.roofline.decode_step_s - want).abs() / want < 1e-9);
        assert!(e.expected.decode_step_s > e.roofline.decode_step_s);
        assert!(e.expected.ttft_s > e.roofline.ttft_s);
    }

    #[test]
    fn tensor_parallel_pays_latency_per_all_reduce_and_pcie_more() {
        // Llama-2-70B FP16 at TP 4, batch 1: 160 all-reduces per step; NVLink (A100 SXM) costs
        // 5 µs each, PCIe (A100 PCIe) 20 µs for 4 GPUs (gpus.toml link_latency).
        let m = model_numbers(
            &arch("meta-llama/Llama-2-70b-hf"),
            &Weights::Checkpoint(None),
            Dtype::F16,
        );
        let eff = efficiency(Engine::Vllm).unwrap();
        let run = |g: &str| match estimate(&scenario(&m, gpu(g), 4), &eff) {
            Ok(e) => e.expected.communication_time_s,
            Err(e) => panic!("{e}"),
        };
        let nv = run("A100 SXM 80GB");
        let pcie = run("A100 PCIe 80GB");
        assert!((nv - 160.0 * 5e-6).abs() < 0.1e-3, "{nv}");
        assert!((pcie - 160.0 * 20e-6).abs() < 0.3e-3, "{pcie}");
        // a roofline has no communication
        match estimate(&scenario(&m, gpu("A100 PCIe 80GB"), 4), &eff) {
            Ok(e) => assert_eq!(e.roofline.communication_time_s, 0.0),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn fit_recovers_known_parameters() {
        // Synthetic "measurements" made with (0.8, 0.5, 5 µs, 20 µs) over varied shapes.
        let m = model_numbers(
            &arch("meta-llama/Llama-3.1-8B-Instruct"),
            &Weights::Checkpoint(None),
            Dtype::Bf16,
        );
        let g = gpu("H100 SXM");
        let shapes: Vec<(u64, u64)> = vec![(1, 512), (8, 2048), (64, 1024), (256, 512), (1, 4096)];
        let eff = |p: FitParams| EngineEfficiency {
            engine: Engine::Vllm,
            memory_bandwidth: p.0,
            compute: p.1,
            per_kernel_s: p.2,
            per_sequence_step_s: p.3,
            basis: String::new(),
        };
        let figs = |p: FitParams| -> Vec<f64> {
            shapes
                .iter()
                .flat_map(|&(b, ctx)| {
                    let mut s = scenario(&m, g, 1);
                    s.batch = b;
                    s.decode_context = ctx;
                    s.prompt_tokens = ctx;
                    match estimate(&s, &eff(p)) {
                        Ok(e) => vec![e.expected.decode_step_s, e.expected.ttft_s],
                        Err(e) => panic!("{e}"),
                    }
                })
                .collect()
        };
        let truth = figs((0.8, 0.5, 5e-6, 20e-6));
        let fit = fit_efficiency(
            &|p| figs(p).into_iter().zip(truth.iter().copied()).collect(),
            (0.7, 0.4, 0.0, 0.0),
        );
        // bandwidth share and launch cost trade off along a ridge the grid crosses obliquely:
        // recovered to within 0.03 and 1 µs
        assert!(
            (fit.0 - 0.8).abs() < 0.031 && (fit.1 - 0.5).abs() < 0.011,
            "{fit:?}"
        );
        assert!(
            (fit.2 - 5e-6).abs() < 1.01e-6 && (fit.3 - 20e-6).abs() < 11e-6,
            "{fit:?}"
        );
    }
}
