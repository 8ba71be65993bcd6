//! Speed bounds: decode tokens/s from the memory-bandwidth roofline, prefill/TTFT from tensor
//! throughput, tensor-parallel all-reduce cost, model load time and host RAM for loading.
//!
//! Everything here is pure arithmetic over plain numbers ([`SpeedInputs`], [`LoadInputs`]) and a
//! catalog [`GpuSpec`], so the planner core can call it without this module knowing its types.
//! Every result carries the assumptions it made. With [`Efficiency::ROOFLINE`] the results are
//! hard bounds (no real server is faster); [`Efficiency::default`] gives typical figures.
//! Formulas and defaults are documented in docs/gpus.md; the roofline/expected pair per engine
//! ([`estimate`], [`engines`]) in docs/speed.md.

use crate::gpus::GpuSpec;

pub mod engines;
pub mod estimate;
pub mod report;

/// Efficiency factors: the share of each peak a real server achieves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Efficiency {
    /// Share of peak DRAM bandwidth achieved by decode (weights + KV reads). Default 0.75: vLLM
    /// serving Llama-3.1-8B BF16 at one request on an A100 40GB measured ~75 tok/s, ~77% of the
    /// bandwidth roofline (johnmusgrave.com/p/vllm-throughput-latency-sweep-on).
    pub memory_bandwidth: f64,
    /// Share of dense tensor peak achieved by prefill GEMMs + attention. Default 0.5: a judgement
    /// (not measured here), typical of large-GEMM utilisation in inference engines.
    pub compute: f64,
    /// Share of the GPU-to-GPU link's per-direction bandwidth an all-reduce achieves. Default 0.7
    /// (judgement, not measured here).
    pub link: f64,
    /// Share of PCIe (or C2C) per-direction bandwidth achieved by host-to-GPU copies. Default 0.8
    /// (TLP/protocol overhead; judgement, not measured here).
    pub pcie: f64,
    /// Fixed latency per all-reduce call, seconds. Default 0 (not counted): real NCCL / custom
    /// all-reduce calls cost microseconds each, which dominates at small batch; set it to include.
    pub allreduce_latency_s: f64,
}

impl Efficiency {
    /// Peak everything, zero latency: results are strict upper bounds on speed.
    pub const ROOFLINE: Efficiency = Efficiency {
        memory_bandwidth: 1.0,
        compute: 1.0,
        link: 1.0,
        pcie: 1.0,
        allreduce_latency_s: 0.0,
    };

    fn describe(&self) -> String {
        format!(
            "efficiency factors: memory bandwidth {}, compute {}, GPU link {}, PCIe {}, all-reduce latency {} µs per call",
            self.memory_bandwidth,
            self.compute,
            self.link,
            self.pcie,
            self.allreduce_latency_s * 1e6
        )
    }

    fn validate(&self) -> Result<(), SpeedError> {
        for (n, v) in [
            ("memory_bandwidth", self.memory_bandwidth),
            ("compute", self.compute),
            ("link", self.link),
            ("pcie", self.pcie),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err(SpeedError::Invalid(format!(
                    "efficiency {n} must be in (0, 1], got {v}"
                )));
            }
        }
        if !(self.allreduce_latency_s.is_finite() && self.allreduce_latency_s >= 0.0) {
            return Err(SpeedError::Invalid(format!(
                "all-reduce latency must be >= 0, got {}",
                self.allreduce_latency_s
            )));
        }
        Ok(())
    }
}

impl Default for Efficiency {
    fn default() -> Self {
        Efficiency {
            memory_bandwidth: 0.75,
            compute: 0.5,
            link: 0.7,
            pcie: 0.8,
            allreduce_latency_s: 0.0,
        }
    }
}

/// Which link carries the tensor-parallel all-reduce.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Link {
    /// The GPU's own link (NVLink / Infinity Fabric) when the catalog has one, else PCIe.
    Auto,
    /// The catalog's GPU-to-GPU link; an error if the GPU has none.
    GpuLink,
    /// PCIe of the catalog generation and lanes (peer-to-peer or through the host).
    Pcie,
    /// A given bandwidth, GB/s per direction.
    PerDirectionGbps(f64),
}

/// Which tensor rate bounds the GEMMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ComputeDtype {
    /// FP16/BF16 (also weight-only quantization such as AWQ/GPTQ, which dequantizes to FP16).
    Fp16,
    /// FP8 weights and activations (W8A8-FP8).
    Fp8,
    /// INT8 weights and activations (W8A8-INT8; llama.cpp's int8 MMQ kernels for GGUF quants).
    Int8,
    /// FP4 weights and activations (NVFP4 on Blackwell).
    Fp4,
}

/// The GEMM path as users name it ("FP16/BF16", "FP8"), never the Rust name.
impl std::fmt::Display for ComputeDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComputeDtype::Fp16 => "FP16/BF16",
            ComputeDtype::Fp8 => "FP8",
            ComputeDtype::Int8 => "INT8",
            ComputeDtype::Fp4 => "FP4",
        })
    }
}

/// MoE routing, to count the expert weights a decode step touches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeRouting {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Experts each token is routed to (top-k).
    pub experts_per_token: u32,
    /// Bytes of ALL routed experts resident on this GPU (shared experts excluded).
    pub routed_expert_bytes_per_gpu: f64,
}

/// Inputs of the decode and prefill bounds, per GPU.
#[derive(Debug, Clone)]
pub struct SpeedInputs<'a> {
    pub gpu: &'a GpuSpec,
    /// All weight bytes resident on one GPU.
    pub weights_bytes_per_gpu: f64,
    /// Weight bytes one token reads on one GPU (= weights for dense models; attention + shared +
    /// top-k experts for MoE).
    pub active_weight_bytes_per_token_per_gpu: f64,
    /// Routing details for MoE; without them an MoE step reads the active bytes at concurrency 1
    /// and all weights above (conservative).
    pub moe: Option<MoeRouting>,
    /// Parameters one token multiplies through on one GPU (for FLOPs).
    pub active_params_per_token_per_gpu: f64,
    /// KV-cache bytes per token of context on one GPU (all layers).
    pub kv_bytes_per_token_per_gpu: f64,
    /// Recurrent-state bytes of one sequence on one GPU (hybrid models; 0 otherwise), read and
    /// written once per decode step.
    pub state_bytes_per_sequence_per_gpu: f64,
    /// Average context length (tokens) of each sequence during decode.
    pub context_tokens: u64,
    /// Sequences decoded together (batch).
    pub concurrency: u64,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Model hidden size.
    pub hidden: u64,
    /// Layers on this GPU (all layers without pipeline parallelism).
    pub layers: u64,
    /// Attention query width (heads × head_dim) of the whole model; 0 = `hidden`.
    pub attention_dim: u64,
    /// Bytes per activation element (2 for FP16/BF16).
    pub dtype_bytes: f64,
    pub compute: ComputeDtype,
    pub link: Link,
    pub efficiency: Efficiency,
}

/// Why a bound could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpeedError {
    #[error(
        "{0}: memory bandwidth unknown, so no decode speed bound (describe the GPU by its catalog name)"
    )]
    UnknownBandwidth(String),
    #[error("{0}: tensor throughput unknown, so no prefill bound")]
    UnknownCompute(String),
    #[error("{0}: no GPU-to-GPU link in the catalog (PCIe only)")]
    NoGpuLink(String),
    #[error("{0}: PCIe generation/lanes unknown; give the link bandwidth")]
    UnknownPcie(String),
    #[error("invalid speed input: {0}")]
    Invalid(String),
    #[error("speed not modelled for {0}")]
    NotModelled(&'static str),
}

/// What limits a decode step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Limit {
    MemoryBandwidth,
    Compute,
}

/// Decode speed at the given concurrency.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DecodeBound {
    pub weight_bytes_read_per_step: f64,
    pub kv_bytes_read_per_step: f64,
    /// (weights + KV) / (bandwidth × efficiency).
    pub memory_time_s: f64,
    /// FLOPs / (TFLOPS × efficiency); `None` when the GPU's rate is unknown.
    pub compute_time_s: Option<f64>,
    /// Tensor-parallel all-reduce time per step (0 at tp = 1).
    pub allreduce_time_s: f64,
    /// max(memory, compute) + all-reduce.
    pub step_time_s: f64,
    pub limited_by: Limit,
    pub tokens_per_s_per_sequence: f64,
    pub tokens_per_s_aggregate: f64,
    pub assumptions: Vec<String>,
}

/// Prefill of one prompt (time to first token, lower bound).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PrefillBound {
    pub prompt_tokens: u64,
    /// FLOPs on one GPU: 2 × active params × tokens + causal attention.
    pub flops_per_gpu: f64,
    pub compute_time_s: f64,
    /// Reading the weights once.
    pub memory_time_s: f64,
    pub allreduce_time_s: f64,
    /// max(compute, memory) + all-reduce.
    pub ttft_s: f64,
    pub assumptions: Vec<String>,
}

fn check(name: &str, v: f64) -> Result<f64, SpeedError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(SpeedError::Invalid(format!(
            "{name} must be a finite number >= 0, got {v}"
        )))
    }
}

fn validate(i: &SpeedInputs<'_>) -> Result<(), SpeedError> {
    check("weights_bytes_per_gpu", i.weights_bytes_per_gpu)?;
    check(
        "active_weight_bytes_per_token_per_gpu",
        i.active_weight_bytes_per_token_per_gpu,
    )?;
    check(
        "active_params_per_token_per_gpu",
        i.active_params_per_token_per_gpu,
    )?;
    check("kv_bytes_per_token_per_gpu", i.kv_bytes_per_token_per_gpu)?;
    check(
        "state_bytes_per_sequence_per_gpu",
        i.state_bytes_per_sequence_per_gpu,
    )?;
    check("dtype_bytes", i.dtype_bytes)?;
    if i.active_weight_bytes_per_token_per_gpu > i.weights_bytes_per_gpu {
        return Err(SpeedError::Invalid(String::from(
            "active weight bytes per token exceed the weights on the GPU",
        )));
    }
    if i.tp == 0 || i.concurrency == 0 {
        return Err(SpeedError::Invalid(String::from(
            "tp and concurrency must be at least 1",
        )));
    }
    if let Some(m) = i.moe {
        check("routed_expert_bytes_per_gpu", m.routed_expert_bytes_per_gpu)?;
        if m.experts == 0 || m.experts_per_token == 0 || m.experts_per_token > m.experts {
            return Err(SpeedError::Invalid(format!(
                "MoE routing needs 1 <= experts_per_token ({}) <= experts ({})",
                m.experts_per_token, m.experts
            )));
        }
        if m.routed_expert_bytes_per_gpu > i.weights_bytes_per_gpu {
            return Err(SpeedError::Invalid(String::from(
                "routed expert bytes exceed the weights on the GPU",
            )));
        }
    }
    if let Link::PerDirectionGbps(b) = i.link
        && !(b.is_finite() && b > 0.0)
    {
        return Err(SpeedError::Invalid(format!(
            "link bandwidth must be > 0 GB/s, got {b}"
        )));
    }
    i.efficiency.validate()
}

/// Weight bytes read in one step that carries `tokens` tokens.
fn weight_bytes_for(i: &SpeedInputs<'_>, tokens: u64, a: &mut Vec<String>) -> f64 {
    let w = i.weights_bytes_per_gpu;
    let active = i.active_weight_bytes_per_token_per_gpu;
    if let Some(m) = i.moe {
        let non_expert = (w - m.routed_expert_bytes_per_gpu).max(0.0);
        let p_miss = 1.0 - f64::from(m.experts_per_token) / f64::from(m.experts);
        // Expected share of experts touched by `tokens` tokens under uniform, independent routing.
        let touched = 1.0 - p_miss.powf(tokens as f64);
        a.push(format!(
            "MoE: a step of {tokens} token(s) reads the non-expert weights plus {:.1}% of the routed experts (1 - (1 - {}/{})^{tokens}, uniform independent routing; real routing is skewed, so fewer experts may be read)",
            touched * 100.0,
            m.experts_per_token,
            m.experts
        ));
        non_expert + m.routed_expert_bytes_per_gpu * touched
    } else if active < w {
        if tokens <= 1 {
            a.push(String::from(
                "MoE: one token reads only its active experts' weights",
            ));
            active
        } else {
            a.push(format!(
                "MoE without routing details: a step of {tokens} tokens is assumed to read all expert weights (conservative)"
            ));
            w
        }
    } else {
        w
    }
}

/// GB/s per direction of the all-reduce link, with its description.
fn link_gbps(i: &SpeedInputs<'_>) -> Result<(f64, String), SpeedError> {
    let g = i.gpu;
    let pcie = || {
        g.pcie_gbps_per_direction()
            .map(|b| {
                (
                    b,
                    format!(
                        "PCIe Gen{} x{} ({b:.1} GB/s per direction)",
                        g.pcie_gen.unwrap_or(0),
                        g.pcie_lanes.unwrap_or(0)
                    ),
                )
            })
            .ok_or_else(|| SpeedError::UnknownPcie(g.name.clone()))
    };
    let gpu_link = || {
        g.gpu_link_gbps.map(|b| {
            (
                b / 2.0,
                format!(
                    "{} ({b} GB/s bidirectional = {} GB/s per direction)",
                    g.gpu_link.as_deref().unwrap_or("GPU link"),
                    b / 2.0
                ),
            )
        })
    };
    match i.link {
        Link::Auto => match gpu_link() {
            Some(x) => Ok(x),
            None => pcie(),
        },
        Link::GpuLink => gpu_link().ok_or_else(|| SpeedError::NoGpuLink(g.name.clone())),
        Link::Pcie => pcie(),
        Link::PerDirectionGbps(b) => Ok((b, format!("given link, {b} GB/s per direction"))),
    }
}

/// Ring all-reduce time for `tokens` tokens through all layers: 2 all-reduces per layer (after
/// attention and after the MLP), each moving 2 × (tp − 1)/tp × tokens × hidden × dtype bytes
/// per GPU in each direction.
fn allreduce_time(
    i: &SpeedInputs<'_>,
    tokens: u64,
    a: &mut Vec<String>,
) -> Result<f64, SpeedError> {
    if i.tp <= 1 {
        return Ok(0.0);
    }
    let (gbps, desc) = link_gbps(i)?;
    let tp = f64::from(i.tp);
    let bytes = 2.0 * (tp - 1.0) / tp * tokens as f64 * i.hidden as f64 * i.dtype_bytes;
    let per_call = bytes / (gbps * 1e9 * i.efficiency.link) + i.efficiency.allreduce_latency_s;
    let calls = 2.0 * i.layers as f64;
    a.push(format!(
        "tensor parallel {}: {calls} ring all-reduces per step of {} bytes each per GPU over {desc}",
        i.tp,
        bytes.round()
    ));
    Ok(per_call * calls)
}

fn tensor_tflops(i: &SpeedInputs<'_>, a: &mut Vec<String>) -> Option<f64> {
    let g = i.gpu;
    let (rate, what) = match i.compute {
        ComputeDtype::Fp16 => (g.fp16_tflops, "FP16/BF16"),
        ComputeDtype::Fp8 => (g.fp8_tflops, "FP8"),
        ComputeDtype::Int8 => (g.int8_tops, "INT8"),
        ComputeDtype::Fp4 => (g.fp4_tflops, "FP4"),
    };
    match rate {
        Some(r) => {
            a.push(format!("{what} dense tensor peak {r} TFLOPS ({})", g.name));
            Some(r)
        }
        None if i.compute != ComputeDtype::Fp16 && g.fp16_tflops.is_some() => {
            let r = g.fp16_tflops?;
            a.push(format!(
                "{} has no {what} tensor path in the catalog: FP16 rate {r} TFLOPS used (the engine falls back to a weight-only kernel)",
                g.name
            ));
            Some(r)
        }
        None => None,
    }
}

fn attention_dim(i: &SpeedInputs<'_>) -> f64 {
    if i.attention_dim == 0 {
        i.hidden as f64
    } else {
        i.attention_dim as f64
    }
}

/// Decode step time and tokens/s at `concurrency` sequences of `context_tokens` each.
///
/// step = max((W + KV) / (BW × e_mem), FLOPs / (TFLOPS × e_compute)) + all-reduce, where W is the
/// weight bytes read per step (all weights for dense models), KV = kv bytes/token × context ×
/// concurrency, FLOPs = concurrency × (2 × active params + 4 × layers × context × attention dim
/// / tp). Per-sequence tokens/s = 1/step; aggregate = concurrency/step.
pub fn decode_bound(i: &SpeedInputs<'_>) -> Result<DecodeBound, SpeedError> {
    validate(i)?;
    let g = i.gpu;
    let bw = g
        .memory_bandwidth_gbps
        .filter(|b| *b > 0.0)
        .ok_or_else(|| SpeedError::UnknownBandwidth(g.name.clone()))?;
    let mut a = vec![i.efficiency.describe()];
    let b = i.concurrency;
    let w = weight_bytes_for(i, b, &mut a);
    let kv = (i.kv_bytes_per_token_per_gpu * i.context_tokens as f64
        + 2.0 * i.state_bytes_per_sequence_per_gpu)
        * b as f64;
    a.push(format!(
        "every decode step reads the weights once for the whole batch and each sequence's KV cache ({} tokens of context × {} sequences)",
        i.context_tokens, b
    ));
    let memory_time_s = (w + kv) / (bw * 1e9 * i.efficiency.memory_bandwidth);
    a.push(format!("memory bandwidth {bw} GB/s peak ({})", g.name));
    let flops = b as f64
        * (2.0 * i.active_params_per_token_per_gpu
            + 4.0 * i.layers as f64 * i.context_tokens as f64 * attention_dim(i) / f64::from(i.tp));
    let compute_time_s = match tensor_tflops(i, &mut a) {
        Some(t) => Some(flops / (t * 1e12 * i.efficiency.compute)),
        None => {
            a.push(format!(
                "{}: tensor rate unknown, compute limit not checked",
                g.name
            ));
            None
        }
    };
    let allreduce_time_s = allreduce_time(i, b, &mut a)?;
    let (core, limited_by) = match compute_time_s {
        Some(c) if c > memory_time_s => (c, Limit::Compute),
        _ => (memory_time_s, Limit::MemoryBandwidth),
    };
    let step_time_s = core + allreduce_time_s;
    a.push(String::from(
        "not counted: kernel launch and scheduler overhead, sampling, attention kernels reading less than peak; prefill of new requests interleaved with decode",
    ));
    let (per_seq, agg) = if step_time_s > 0.0 {
        (1.0 / step_time_s, b as f64 / step_time_s)
    } else {
        (f64::INFINITY, f64::INFINITY)
    };
    Ok(DecodeBound {
        weight_bytes_read_per_step: w,
        kv_bytes_read_per_step: kv,
        memory_time_s,
        compute_time_s,
        allreduce_time_s,
        step_time_s,
        limited_by,
        tokens_per_s_per_sequence: per_seq,
        tokens_per_s_aggregate: agg,
        assumptions: a,
    })
}

/// Time to first token lower bound for one prompt of `prompt_tokens`, alone on the GPUs.
///
/// FLOPs per GPU = 2 × active params × P + 2 × layers × P² × attention dim / tp (causal: QKᵀ and
/// AV are 2·P²·d each, halved by the mask). TTFT ≥ max(FLOPs / (TFLOPS × e_compute),
/// weights / (BW × e_mem)) + all-reduce of P tokens.
pub fn prefill_bound(i: &SpeedInputs<'_>, prompt_tokens: u64) -> Result<PrefillBound, SpeedError> {
    validate(i)?;
    let g = i.gpu;
    let mut a = vec![i.efficiency.describe()];
    let tflops =
        tensor_tflops(i, &mut a).ok_or_else(|| SpeedError::UnknownCompute(g.name.clone()))?;
    let p = prompt_tokens as f64;
    let attn = 2.0 * i.layers as f64 * p * p * attention_dim(i) / f64::from(i.tp);
    let flops = 2.0 * i.active_params_per_token_per_gpu * p + attn;
    a.push(format!(
        "prefill FLOPs = 2 × {} active params/GPU × {prompt_tokens} tokens + causal attention {attn:.3e}; full attention assumed on every layer (sliding-window layers cost less)",
        i.active_params_per_token_per_gpu
    ));
    let compute_time_s = flops / (tflops * 1e12 * i.efficiency.compute);
    let memory_time_s = match g.memory_bandwidth_gbps.filter(|b| *b > 0.0) {
        Some(bw) => {
            let w = weight_bytes_for(i, prompt_tokens.max(1), &mut a);
            w / (bw * 1e9 * i.efficiency.memory_bandwidth)
        }
        None => 0.0,
    };
    let allreduce_time_s = allreduce_time(i, prompt_tokens, &mut a)?;
    a.push(String::from(
        "one prompt alone, not chunked; queueing behind other requests, tokenization and network not counted",
    ));
    Ok(PrefillBound {
        prompt_tokens,
        flops_per_gpu: flops,
        compute_time_s,
        memory_time_s,
        allreduce_time_s,
        ttft_s: compute_time_s.max(memory_time_s) + allreduce_time_s,
        assumptions: a,
    })
}

/// Inputs of the load-time bound.
#[derive(Debug, Clone)]
pub struct LoadInputs<'a> {
    pub gpu: &'a GpuSpec,
    /// Bytes of the checkpoint on disk (all shards).
    pub checkpoint_bytes: f64,
    /// Bytes each GPU receives.
    pub weights_bytes_per_gpu: f64,
    /// Largest single checkpoint file, if known (streaming loaders hold about one at a time).
    pub largest_file_bytes: Option<f64>,
    /// Sequential read speed of the disk or network store, GB/s (a parameter: NVMe Gen4 ~7,
    /// SATA SSD ~0.5, 10 GbE ~1.2 — measure yours).
    pub disk_gbps: f64,
    /// Free host RAM, bytes, if known.
    pub host_ram_free_bytes: Option<f64>,
    /// Free RAM per NUMA node (node id, bytes), if known.
    pub numa_free_bytes: Vec<(u32, f64)>,
    pub efficiency: Efficiency,
}

/// Whether the checkpoint fits a NUMA node's free memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NumaFit {
    pub node: u32,
    pub free_bytes: f64,
    /// Room for the streaming working set (largest file).
    pub fits_streaming: bool,
    /// Room for the whole checkpoint in the page cache (fast restarts).
    pub fits_whole_checkpoint: bool,
}

/// Model load time lower bound and host RAM needed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadBound {
    /// checkpoint / disk.
    pub disk_time_s: f64,
    /// weights per GPU / host link (each GPU has its own link; all copy in parallel).
    pub host_to_gpu_time_s: f64,
    /// max(disk, host-to-GPU): reading and copying overlap at best.
    pub load_time_s: f64,
    /// Host RAM a streaming (mmap) loader needs at least: the largest file.
    pub host_ram_streaming_bytes: f64,
    /// Host RAM to keep the whole checkpoint cached.
    pub host_ram_whole_bytes: f64,
    pub fits_host_ram: Option<bool>,
    pub numa: Vec<NumaFit>,
    pub assumptions: Vec<String>,
}

/// Load time ≥ max(checkpoint / disk, weights per GPU / host link) — for one GPU this is
/// weights / min(disk, PCIe) — plus the host RAM loading needs.
pub fn load_bound(i: &LoadInputs<'_>) -> Result<LoadBound, SpeedError> {
    check("checkpoint_bytes", i.checkpoint_bytes)?;
    check("weights_bytes_per_gpu", i.weights_bytes_per_gpu)?;
    if !(i.disk_gbps.is_finite() && i.disk_gbps > 0.0) {
        return Err(SpeedError::Invalid(format!(
            "disk speed must be > 0 GB/s, got {}",
            i.disk_gbps
        )));
    }
    i.efficiency.validate()?;
    let g = i.gpu;
    let mut a = vec![format!(
        "disk {} GB/s sequential (given); host link efficiency {}",
        i.disk_gbps, i.efficiency.pcie
    )];
    let (link, desc) = match (g.host_link_gbps, g.pcie_gbps_per_direction()) {
        (Some(c2c), _) => (
            c2c / 2.0,
            format!("NVLink-C2C {} GB/s per direction", c2c / 2.0),
        ),
        (None, Some(p)) => (
            p,
            format!(
                "PCIe Gen{} x{} {p:.1} GB/s per direction",
                g.pcie_gen.unwrap_or(0),
                g.pcie_lanes.unwrap_or(0)
            ),
        ),
        (None, None) => return Err(SpeedError::UnknownPcie(g.name.clone())),
    };
    a.push(format!(
        "host-to-GPU over {desc}; every GPU has its own link"
    ));
    let disk_time_s = i.checkpoint_bytes / (i.disk_gbps * 1e9);
    let host_to_gpu_time_s = i.weights_bytes_per_gpu / (link * 1e9 * i.efficiency.pcie);
    let streaming = match i.largest_file_bytes {
        Some(f) => check("largest_file_bytes", f)?.min(i.checkpoint_bytes),
        None => {
            a.push(String::from(
                "largest checkpoint file unknown: streaming working set taken as the whole checkpoint",
            ));
            i.checkpoint_bytes
        }
    };
    a.push(String::from(
        "not counted: deserialization, weight processing/quantization on load, CUDA graph capture and engine warm-up",
    ));
    let fits_host_ram = match i.host_ram_free_bytes {
        Some(f) => Some(check("host_ram_free_bytes", f)? >= streaming),
        None => None,
    };
    let mut numa = Vec::with_capacity(i.numa_free_bytes.len());
    for &(node, free) in &i.numa_free_bytes {
        let free = check("NUMA free bytes", free)?;
        numa.push(NumaFit {
            node,
            free_bytes: free,
            fits_streaming: free >= streaming,
            fits_whole_checkpoint: free >= i.checkpoint_bytes,
        });
    }
    Ok(LoadBound {
        disk_time_s,
        host_to_gpu_time_s,
        load_time_s: disk_time_s.max(host_to_gpu_time_s),
        host_ram_streaming_bytes: streaming,
        host_ram_whole_bytes: i.checkpoint_bytes,
        fits_host_ram,
        numa,
        assumptions: a,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpus;

    fn gpu(name: &str) -> &'static GpuSpec {
        match gpus::lookup(name) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    /// Llama-3-8B (hidden 4096, 32 layers, 32 query heads × 128, 8 KV heads × 128) in BF16.
    /// KV per token = 2 (K and V) × 32 layers × 8 heads × 128 × 2 bytes = 131,072 bytes.
    fn llama3_8b<'a>(g: &'a GpuSpec) -> SpeedInputs<'a> {
        SpeedInputs {
            gpu: g,
            weights_bytes_per_gpu: 16.0e9,
            active_weight_bytes_per_token_per_gpu: 16.0e9,
            moe: None,
            active_params_per_token_per_gpu: 8.0e9,
            kv_bytes_per_token_per_gpu: 131_072.0,
            state_bytes_per_sequence_per_gpu: 0.0,
            context_tokens: 0,
            concurrency: 1,
            tp: 1,
            hidden: 4096,
            layers: 32,
            attention_dim: 4096,
            dtype_bytes: 2.0,
            compute: ComputeDtype::Fp16,
            link: Link::Auto,
            efficiency: Efficiency::ROOFLINE,
        }
    }

    fn ok<T>(r: Result<T, SpeedError>) -> T {
        match r {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn llama3_8b_bf16_one_h100_sxm_roofline() {
        // 16e9 bytes / 3.35e12 B/s = 4.776 ms per step -> 1 / 4.776 ms = 209.4 tok/s.
        // Compute at batch 1: 2 × 8e9 FLOPs / 989.4e12 = 16 µs, far below: memory bound.
        let g = gpu("h100-sxm");
        let d = ok(decode_bound(&llama3_8b(g)));
        assert!(close(d.step_time_s, 4.776e-3, 0.001), "{}", d.step_time_s);
        assert!(close(d.tokens_per_s_per_sequence, 209.4, 0.001));
        assert_eq!(d.tokens_per_s_aggregate, d.tokens_per_s_per_sequence);
        assert_eq!(d.limited_by, Limit::MemoryBandwidth);
        assert_eq!(d.allreduce_time_s, 0.0);
        assert!(!d.assumptions.is_empty());
    }

    #[test]
    fn kv_reads_grow_with_context_and_batch() {
        // 32 sequences × 2048 tokens × 131,072 B = 8.590e9 B of KV per step.
        // (16e9 + 8.590e9) / 3.35e12 = 7.340 ms -> 136.2 tok/s per sequence, 32/7.340 ms = 4,360 aggregate.
        let g = gpu("H100 SXM");
        let mut i = llama3_8b(g);
        i.context_tokens = 2048;
        i.concurrency = 32;
        let d = ok(decode_bound(&i));
        assert!(close(d.kv_bytes_read_per_step, 8.590e9, 0.001));
        assert!(close(d.step_time_s, 7.340e-3, 0.001), "{}", d.step_time_s);
        assert!(close(d.tokens_per_s_per_sequence, 136.2, 0.002));
        assert!(close(d.tokens_per_s_aggregate, 4360.0, 0.002));
        // Default efficiencies (bandwidth 0.75) make it 1/0.75 slower.
        i.efficiency = Efficiency::default();
        let e = ok(decode_bound(&i));
        assert!(close(e.step_time_s, 7.340e-3 / 0.75, 0.001));
    }

    #[test]
    fn large_batches_become_compute_bound() {
        // Batch 1024, context 0: FLOPs = 1024 × 2 × 8e9 = 1.638e13 -> /989.4e12 = 16.56 ms,
        // above the 4.776 ms weight read.
        let g = gpu("H100 SXM");
        let mut i = llama3_8b(g);
        i.concurrency = 1024;
        let d = ok(decode_bound(&i));
        assert_eq!(d.limited_by, Limit::Compute);
        assert!(close(d.step_time_s, 16.56e-3, 0.002), "{}", d.step_time_s);
    }

    #[test]
    fn sanity_against_a_published_measurement() {
        // johnmusgrave.com/p/vllm-throughput-latency-sweep-on: vLLM, Llama-3.1-8B-Instruct BF16,
        // one A100 40GB, 1 concurrent request, 1024 in / 128 out: ~75 tok/s, "roughly 77% of the
        // memory-bandwidth ceiling".
        // Roofline: 8.03e9 params × 2 B = 16.06e9 B, + KV 131,072 B × ~1088 tokens = 0.143e9 B,
        // / 1555e9 B/s = 10.42 ms -> 96.0 tok/s. 75 / 96.0 = 0.78.
        let g = gpu("A100 SXM 40GB");
        let mut i = llama3_8b(g);
        i.weights_bytes_per_gpu = 16.06e9;
        i.active_weight_bytes_per_token_per_gpu = 16.06e9;
        i.context_tokens = 1088;
        let bound = ok(decode_bound(&i));
        assert!(close(bound.tokens_per_s_per_sequence, 96.0, 0.005));
        assert!(
            bound.tokens_per_s_per_sequence > 75.0,
            "the bound must not be below a measurement"
        );
        // The default efficiency (0.75) lands within 5% of the measurement: 96.0 × 0.75 = 72.0.
        i.efficiency = Efficiency::default();
        let typical = ok(decode_bound(&i));
        assert!(close(typical.tokens_per_s_per_sequence, 75.0, 0.05));
    }

    #[test]
    fn tensor_parallel_allreduce_nvlink_vs_pcie() {
        // Llama-3-70B (hidden 8192, 80 layers) BF16 over TP 4 on H100 SXM, batch 1:
        // message per all-reduce = 2 × 3/4 × 1 × 8192 × 2 B = 24,576 B per GPU per direction.
        // NVLink 900 GB/s bidirectional = 450 GB/s per direction: 24,576 / 450e9 = 54.6 ns;
        // × 160 calls = 8.74 µs. PCIe Gen5 x16 = 63.0 GB/s: 390 ns × 160 = 62.4 µs.
        let g = gpu("H100 SXM");
        let mut i = llama3_8b(g);
        i.weights_bytes_per_gpu = 141e9 / 4.0;
        i.active_weight_bytes_per_token_per_gpu = 141e9 / 4.0;
        i.active_params_per_token_per_gpu = 70.6e9 / 4.0;
        i.tp = 4;
        i.hidden = 8192;
        i.layers = 80;
        i.attention_dim = 8192;
        let nv = ok(decode_bound(&i));
        assert!(
            close(nv.allreduce_time_s, 8.74e-6, 0.005),
            "{}",
            nv.allreduce_time_s
        );
        // weights 35.25e9 / 3.35e12 = 10.522 ms
        assert!(close(nv.memory_time_s, 10.522e-3, 0.001));
        i.link = Link::Pcie;
        let pc = ok(decode_bound(&i));
        assert!(
            close(pc.allreduce_time_s, 62.4e-6, 0.005),
            "{}",
            pc.allreduce_time_s
        );
        // With a 10 µs latency per call the 160 calls add 1.6 ms: latency, not bandwidth,
        // dominates TP cost at small batch.
        i.link = Link::Auto;
        i.efficiency.allreduce_latency_s = 10e-6;
        let lat = ok(decode_bound(&i));
        assert!(close(lat.allreduce_time_s, 8.74e-6 + 1.6e-3, 0.001));
        // L40S has no NVLink: Auto falls back to PCIe Gen4 and GpuLink is an error.
        let l = gpu("L40S");
        let mut j = llama3_8b(l);
        j.tp = 2;
        j.link = Link::GpuLink;
        assert!(matches!(decode_bound(&j), Err(SpeedError::NoGpuLink(_))));
        j.link = Link::Auto;
        let d = ok(decode_bound(&j));
        assert!(d.assumptions.iter().any(|s| s.contains("PCIe Gen4 x16")));
    }

    #[test]
    fn moe_reads_only_touched_experts() {
        // 8 experts, top-2; routed experts 80e9 B, everything else 10e9 B on the GPU.
        // batch 1: 10e9 + 80e9 × 2/8 = 30e9 B (= the active bytes).
        // batch 8: share touched = 1 − (6/8)^8 = 1 − 0.10011 = 0.89989 -> 10e9 + 71.99e9 = 81.99e9 B.
        let g = gpu("H100 SXM");
        let mut i = llama3_8b(g);
        i.weights_bytes_per_gpu = 90e9;
        i.active_weight_bytes_per_token_per_gpu = 30e9;
        i.moe = Some(MoeRouting {
            experts: 8,
            experts_per_token: 2,
            routed_expert_bytes_per_gpu: 80e9,
        });
        let one = ok(decode_bound(&i));
        assert!(close(one.weight_bytes_read_per_step, 30e9, 1e-9));
        i.concurrency = 8;
        let eight = ok(decode_bound(&i));
        assert!(close(eight.weight_bytes_read_per_step, 81.99e9, 0.0005));
        // Without routing details: active at batch 1, all weights above.
        i.moe = None;
        assert!(close(
            ok(decode_bound(&i)).weight_bytes_read_per_step,
            90e9,
            1e-9
        ));
        i.concurrency = 1;
        assert!(close(
            ok(decode_bound(&i)).weight_bytes_read_per_step,
            30e9,
            1e-9
        ));
    }

    #[test]
    fn prefill_ttft_lower_bound() {
        // Llama-3-8B, 2048-token prompt, H100 SXM, roofline:
        // linear: 2 × 8e9 × 2048 = 3.2768e13 FLOPs
        // attention: 2 × 32 layers × 2048² × 4096 = 1.0995e12 FLOPs
        // total 3.3868e13 / 989.4e12 = 34.23 ms (weight read 4.78 ms is below it).
        let g = gpu("H100 SXM");
        let p = ok(prefill_bound(&llama3_8b(g), 2048));
        assert!(
            close(p.flops_per_gpu, 3.3868e13, 0.001),
            "{}",
            p.flops_per_gpu
        );
        assert!(close(p.ttft_s, 34.23e-3, 0.001), "{}", p.ttft_s);
        // FP8 halves the compute time on H100 (1978.9 TFLOPS).
        let mut i = llama3_8b(g);
        i.compute = ComputeDtype::Fp8;
        let f = ok(prefill_bound(&i, 2048));
        assert!(close(f.compute_time_s, 17.115e-3, 0.001));
        // A100 has no FP8: falls back to FP16 and says so.
        let a = gpu("A100 SXM 80GB");
        let mut j = llama3_8b(a);
        j.compute = ComputeDtype::Fp8;
        let r = ok(prefill_bound(&j, 2048));
        assert!(r.assumptions.iter().any(|s| s.contains("no FP8")));
    }

    #[test]
    fn custom_gpu_has_no_speed_bound() {
        let c = match gpus::custom(40.0) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let i = llama3_8b(&c);
        assert!(matches!(
            decode_bound(&i),
            Err(SpeedError::UnknownBandwidth(_))
        ));
        assert!(matches!(
            prefill_bound(&i, 100),
            Err(SpeedError::UnknownCompute(_))
        ));
    }

    #[test]
    fn invalid_inputs_are_errors_not_panics() {
        let g = gpu("H100 SXM");
        let mut i = llama3_8b(g);
        i.tp = 0;
        assert!(decode_bound(&i).is_err());
        let mut i = llama3_8b(g);
        i.weights_bytes_per_gpu = f64::NAN;
        assert!(decode_bound(&i).is_err());
        let mut i = llama3_8b(g);
        i.efficiency.memory_bandwidth = 0.0;
        assert!(decode_bound(&i).is_err());
        let mut i = llama3_8b(g);
        i.moe = Some(MoeRouting {
            experts: 4,
            experts_per_token: 8,
            routed_expert_bytes_per_gpu: 1.0,
        });
        assert!(decode_bound(&i).is_err());
        let mut i = llama3_8b(g);
        i.link = Link::PerDirectionGbps(-1.0);
        i.tp = 2;
        assert!(decode_bound(&i).is_err());
    }

    #[test]
    fn load_time_and_host_ram() {
        // Llama-3-70B BF16 checkpoint 141e9 B over TP 4 on H100 SXM, NVMe at 7 GB/s:
        // disk 141e9 / 7e9 = 20.14 s; PCIe Gen5 x16 63.0 GB/s: 35.25e9 / 63.0e9 = 0.5595 s
        // -> load ≥ 20.14 s (disk bound).
        let g = gpu("H100 SXM");
        let l = ok(load_bound(&LoadInputs {
            gpu: g,
            checkpoint_bytes: 141e9,
            weights_bytes_per_gpu: 141e9 / 4.0,
            largest_file_bytes: Some(5e9),
            disk_gbps: 7.0,
            host_ram_free_bytes: Some(64e9),
            numa_free_bytes: vec![(0, 200e9), (1, 3e9)],
            efficiency: Efficiency::ROOFLINE,
        }));
        assert!(close(l.disk_time_s, 20.14, 0.001));
        assert!(
            close(l.host_to_gpu_time_s, 0.5595, 0.002),
            "{}",
            l.host_to_gpu_time_s
        );
        assert_eq!(l.load_time_s, l.disk_time_s);
        assert_eq!(l.fits_host_ram, Some(true));
        assert_eq!(l.numa.len(), 2);
        assert!(l.numa[0].fits_streaming && l.numa[0].fits_whole_checkpoint);
        assert!(!l.numa[1].fits_streaming && !l.numa[1].fits_whole_checkpoint);
        // One GPU, a fast disk (50 GB/s page cache): bound = weights / min(disk, PCIe)
        // = 16e9 / 31.5e9 (PCIe Gen4 x16, L40S) = 0.508 s.
        let s = gpu("L40S");
        let m = ok(load_bound(&LoadInputs {
            gpu: s,
            checkpoint_bytes: 16e9,
            weights_bytes_per_gpu: 16e9,
            largest_file_bytes: None,
            disk_gbps: 50.0,
            host_ram_free_bytes: None,
            numa_free_bytes: Vec::new(),
            efficiency: Efficiency::ROOFLINE,
        }));
        assert!(close(m.load_time_s, 0.508, 0.002), "{}", m.load_time_s);
        assert_eq!(m.host_ram_streaming_bytes, 16e9);
        // GH200 loads over NVLink-C2C (450 GB/s per direction), not PCIe.
        let gh = gpu("GH200 96GB");
        let c = ok(load_bound(&LoadInputs {
            gpu: gh,
            checkpoint_bytes: 90e9,
            weights_bytes_per_gpu: 90e9,
            largest_file_bytes: None,
            disk_gbps: 1000.0,
            host_ram_free_bytes: None,
            numa_free_bytes: Vec::new(),
            efficiency: Efficiency::ROOFLINE,
        }));
        assert!(close(c.host_to_gpu_time_s, 0.2, 0.001));
        assert!(
            load_bound(&LoadInputs {
                gpu: s,
                checkpoint_bytes: 1.0,
                weights_bytes_per_gpu: 1.0,
                largest_file_bytes: None,
                disk_gbps: 0.0,
                host_ram_free_bytes: None,
                numa_free_bytes: Vec::new(),
                efficiency: Efficiency::ROOFLINE,
            })
            .is_err()
        );
    }
}
