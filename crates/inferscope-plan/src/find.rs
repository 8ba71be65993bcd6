//! `plan --find`: which GPU type × count × weight quantization × KV dtype serves a model for a
//! workload — the table users build by hand from spec sheets and trial OOMs.
//!
//! Every candidate is a full [`plan`] run (so it carries the same memory accounting and
//! assumptions), followed by the decode speed from [`crate::speed::estimate`]: the expected
//! figure for the chosen engine (what a tokens/s target is judged on and what ranks) with the
//! roofline beside it. Candidates that meet the workload are ranked by GPU count, then by the
//! smallest GPU memory that works, then by expected decode speed.

use crate::arch::{Dtype, ModelArch, Quantization};
use crate::gpus::GpuSpec as CatalogGpu;
use crate::memory::{GIB, parameter_count};
use crate::plan::{GpuSpec, Plan, PlanRequest, plan};
use crate::speed::engines::SpeedEngine;
use crate::speed::estimate::{Scenario, Split, Weights, estimate, model_numbers};
use crate::speed::{self, ComputeDtype, Efficiency, Link, SpeedInputs};
use serde::Serialize;

/// What the deployment must serve.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Context length every request may use.
    pub max_model_len: u64,
    /// Requests of `max_model_len` that must fit at once.
    pub concurrency: u32,
    /// Decode tokens/s each sequence must get at that concurrency (expected figure), if required.
    pub min_tokens_per_s_per_sequence: Option<f64>,
    /// Engine whose expected speed ranks the candidates.
    pub engine: SpeedEngine,
}

/// One deployment option.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// GPU (catalog name).
    pub gpu: String,
    /// GPUs used (tensor parallel).
    pub count: u32,
    /// Weights: `native` (checkpoint as published), `fp8` or `int4` (AWQ/GPTQ-style).
    pub weights: String,
    /// KV cache dtype: `auto` or `fp8`.
    pub kv_cache_dtype: String,
    /// Weights per GPU, GiB.
    pub weights_gib_per_gpu: f64,
    /// KV cache per GPU, GiB.
    pub kv_cache_gib_per_gpu: f64,
    /// Sequences of `max_model_len` that fit at once.
    pub max_concurrency: f64,
    /// Expected decode tokens/s per sequence for the engine at the workload's concurrency
    /// (None: GPU figures unknown).
    pub expected_tokens_per_s_per_sequence: Option<f64>,
    /// Roofline (no real run is faster) per sequence.
    pub roofline_tokens_per_s_per_sequence: Option<f64>,
    /// Alias of `expected_tokens_per_s_per_sequence` (older key).
    pub decode_tokens_per_s_per_sequence: Option<f64>,
    /// Expected aggregate decode tokens/s at that concurrency (older key, now the expected).
    pub decode_tokens_per_s_aggregate: Option<f64>,
    /// Meets memory, concurrency and (if asked) speed.
    pub meets: bool,
}

/// The search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindResult {
    /// Candidates that meet the workload, best first.
    pub candidates: Vec<Candidate>,
    /// Configurations evaluated.
    pub evaluated: usize,
    /// How candidates were generated and judged.
    pub assumptions: Vec<String>,
}

/// GPU counts tried (tensor-parallel sizes a single node offers).
pub const COUNTS: [u32; 4] = [1, 2, 4, 8];

fn quantized(arch: &ModelArch, weights: &str) -> Option<ModelArch> {
    match weights {
        "native" => Some(arch.clone()),
        // Re-quantizing an already quantized checkpoint is not a choice users have.
        _ if arch.quantization.is_some() => None,
        "fp8" => Quantization::from_method("fp8").map(|q| ModelArch {
            quantization: Some(q),
            checkpoint_bytes: None,
            ..arch.clone()
        }),
        "int4" => Quantization::from_method("awq").map(|q| ModelArch {
            quantization: Some(q),
            checkpoint_bytes: None,
            ..arch.clone()
        }),
        _ => None,
    }
}

/// Speed-bound inputs for a plan: every sequence at `context_tokens`, `concurrency` sequences.
pub fn speed_inputs<'a>(
    arch: &ModelArch,
    p: &Plan,
    gpu: &'a CatalogGpu,
    tp: u32,
    fp8_compute: bool,
    context_tokens: u64,
    concurrency: u32,
) -> SpeedInputs<'a> {
    let weights_bytes = p.per_gpu.weights_gib * GIB;
    let params = parameter_count(arch) as f64;
    // Active share of the weights per token: dense models read everything; MoE models read the
    // routed experts they use (upper bound at batch 1 via speed.rs's routing).
    let moe = arch.moe.as_ref().map(|m| {
        let routed_params: f64 = m.moe_layers.iter().filter(|x| **x).count() as f64
            * f64::from(m.experts)
            * m.expert_intermediate as f64
            * arch.hidden_size as f64
            * 3.0;
        let share = (routed_params / params.max(1.0)).clamp(0.0, 1.0);
        speed::MoeRouting {
            experts: m.experts,
            experts_per_token: m.experts_per_token,
            routed_expert_bytes_per_gpu: weights_bytes * share,
        }
    });
    SpeedInputs {
        gpu,
        weights_bytes_per_gpu: weights_bytes,
        active_weight_bytes_per_token_per_gpu: weights_bytes,
        moe,
        active_params_per_token_per_gpu: params / f64::from(tp),
        kv_bytes_per_token_per_gpu: p.kv_bytes_per_token as f64,
        context_tokens,
        concurrency: u64::from(concurrency.max(1)),
        tp,
        hidden: arch.hidden_size,
        layers: u64::from(arch.num_layers),
        attention_dim: u64::from(arch.num_attention_heads) * u64::from(arch.head_dim),
        dtype_bytes: 2.0,
        compute: if fp8_compute && gpu.fp8_tflops.is_some() {
            ComputeDtype::Fp8
        } else {
            ComputeDtype::Fp16
        },
        link: Link::Auto,
        efficiency: Efficiency::default(),
    }
}

/// Decode roofline for a plan (see [`speed_inputs`]); `None` when the GPU's bandwidth is unknown.
pub fn decode_bound(
    arch: &ModelArch,
    p: &Plan,
    gpu: &CatalogGpu,
    tp: u32,
    fp8_compute: bool,
    context_tokens: u64,
    concurrency: u32,
) -> Option<speed::DecodeBound> {
    let inputs = speed_inputs(arch, p, gpu, tp, fp8_compute, context_tokens, concurrency);
    speed::decode_bound(&inputs).ok()
}

/// Search the catalog.
pub fn find(arch: &ModelArch, model_name: &str, w: &Workload, gpus: &[CatalogGpu]) -> FindResult {
    let mut candidates = Vec::new();
    let mut evaluated = 0;
    for gpu in gpus {
        for weights in ["native", "fp8", "int4"] {
            let Some(a) = quantized(arch, weights) else {
                continue;
            };
            for kv in ["auto", "fp8"] {
                for &count in &COUNTS {
                    if a.num_attention_heads % count != 0 {
                        continue;
                    }
                    evaluated += 1;
                    let mut req =
                        PlanRequest::new(a.clone(), model_name, GpuSpec::from_catalog(gpu, count));
                    req.tp = count;
                    req.use_catalog_gpu(Some(gpu));
                    req.max_model_len = Some(w.max_model_len);
                    req.kv_cache_dtype = Some(kv.to_string());
                    req.concurrency = Some(w.concurrency);
                    let p = plan(&req);
                    if !p.fits || p.max_concurrency < f64::from(w.concurrency) {
                        continue;
                    }
                    let kv_dtype = if kv == "fp8" { Dtype::Fp8 } else { a.dtype };
                    let numbers =
                        model_numbers(&a, &Weights::Checkpoint(a.quantization.as_ref()), kv_dtype);
                    let est = estimate(
                        &Scenario {
                            model: &numbers,
                            gpu,
                            gpus: count,
                            split: if w.engine.splits_layers() {
                                Split::Layers
                            } else {
                                Split::Tensor
                            },
                            batch: u64::from(w.concurrency.max(1)),
                            decode_context: w.max_model_len,
                            prompt_tokens: w.max_model_len.min(1024),
                            eager: false,
                            pipeline_stages: 1,
                        },
                        &w.engine.efficiency(),
                    )
                    .ok();
                    let per_seq = est
                        .as_ref()
                        .map(|e| e.expected.decode_tokens_per_s_per_sequence);
                    let meets = match (w.min_tokens_per_s_per_sequence, per_seq) {
                        (Some(min), Some(got)) => got >= min,
                        (Some(_), None) => false,
                        (None, _) => true,
                    };
                    if !meets {
                        continue;
                    }
                    candidates.push(Candidate {
                        gpu: gpu.name.clone(),
                        count,
                        weights: weights.to_string(),
                        kv_cache_dtype: kv.to_string(),
                        weights_gib_per_gpu: p.per_gpu.weights_gib,
                        kv_cache_gib_per_gpu: p.per_gpu.kv_cache_gib,
                        max_concurrency: p.max_concurrency,
                        expected_tokens_per_s_per_sequence: per_seq,
                        roofline_tokens_per_s_per_sequence: est
                            .as_ref()
                            .map(|e| e.roofline.decode_tokens_per_s_per_sequence),
                        decode_tokens_per_s_per_sequence: per_seq,
                        decode_tokens_per_s_aggregate: est
                            .as_ref()
                            .map(|e| e.expected.decode_tokens_per_s_aggregate),
                        meets,
                    });
                    // More GPUs of the same kind only add cost once this count works.
                    break;
                }
            }
        }
    }
    let mem = |c: &Candidate| {
        gpus.iter()
            .find(|g| g.name == c.gpu)
            .map_or(f64::MAX, |g| g.torch_total_gib)
    };
    candidates.sort_by(|a, b| {
        a.count
            .cmp(&b.count)
            .then(mem(a).total_cmp(&mem(b)))
            .then(
                b.decode_tokens_per_s_per_sequence
                    .unwrap_or(0.0)
                    .total_cmp(&a.decode_tokens_per_s_per_sequence.unwrap_or(0.0)),
            )
            .then(a.gpu.cmp(&b.gpu))
    });
    FindResult {
        candidates,
        evaluated,
        assumptions: vec![
            format!("GPU counts tried: {COUNTS:?} (tensor parallel within one node; the head count must divide by it)"),
            "weights tried: the checkpoint as published, fp8 and 4-bit AWQ/GPTQ-style (only for unquantized checkpoints)".into(),
            "KV cache dtypes tried: auto (model dtype) and fp8".into(),
            "for each GPU × weights × KV dtype only the smallest count that meets the workload is listed".into(),
            format!("decode speed at full context for every sequence: expected for {} (fitted efficiency, docs/speed.md), roofline beside it (no real run is faster)", w.engine.as_str()),
            "ranked by GPU count, then the smallest GPU memory that works, then expected decode speed".into(),
        ],
    }
}
