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
use crate::speed::engines::{self, Engine};
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
    pub engine: Engine,
    /// Most GPUs of one kind to use (`--gpus`); None: up to 8.
    pub max_gpus: Option<u32>,
    /// Why `max_model_len` is what it is (`--max-model-len`, input + output, the model's own).
    pub context_basis: String,
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
    /// Sold only in one region (China export variants), from the catalog; None: widely.
    pub region: Option<String>,
    /// The serving command for this row (`vllm serve MODEL --tensor-parallel-size 2 ...`); None
    /// for engines without a command line inferscope writes.
    pub command: Option<String>,
    /// What must be true for `command` to run as written (a 4-bit checkpoint to pick), if any.
    pub command_note: Option<String>,
    /// `--prices`: USD per hour for `count` GPUs.
    pub usd_per_hour: Option<f64>,
    /// `--prices`: USD per million output tokens at the expected aggregate decode throughput.
    pub usd_per_million_output_tokens: Option<f64>,
}

/// The configuration that came closest when nothing meets the workload, and what it lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Miss {
    /// GPU (catalog name).
    pub gpu: String,
    /// GPUs.
    pub count: u32,
    /// Weights (`native`, `fp8`, `int4`).
    pub weights: String,
    /// KV cache dtype.
    pub kv_cache_dtype: String,
    /// Memory the workload needs per GPU over the engine's share (1.0 = just enough); for a
    /// speed miss, the required over the expected tokens/s.
    pub shortfall_ratio: f64,
    /// What it lacks, in words ("needs 2.1 × more memory per GPU ...").
    pub lacks: String,
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
    /// Context length every request was planned for.
    pub context_tokens: u64,
    /// Why that context length (said first in the human output).
    pub context_basis: String,
    /// Candidates that meet the workload before any `--top` cut.
    pub candidates_total: usize,
    /// `cost` when prices ranked the candidates, else `gpus`.
    pub ranked_by: String,
    /// When nothing meets the workload: the closest configuration and what it lacks.
    pub closest_miss: Option<Miss>,
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
        state_bytes_per_sequence_per_gpu: p.state_bytes_per_sequence as f64,
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

/// The serving command for one row, and what must hold for it to run as written.
fn command_for(
    engine: Engine,
    model: &str,
    count: u32,
    weights: &str,
    kv: &str,
    max_len: u64,
) -> (Option<String>, Option<String>) {
    let int4 = weights == "int4";
    let model_word = if int4 {
        format!("<a 4-bit AWQ/GPTQ checkpoint of {model}>")
    } else {
        model.to_string()
    };
    let note = int4.then(|| {
        format!("4-bit: pick an AWQ or GPTQ checkpoint of {model}; the engine reads its quantization from it")
    });
    let shape = crate::engines::ServeShape {
        model: &model_word,
        gpus: count,
        fp8_weights: weights == "fp8",
        kv_fp8: kv == "fp8",
        max_len,
    };
    let Some(cmd) = crate::engines::room(engine).serve_command(&shape) else {
        return (None, None);
    };
    (Some(cmd), note)
}

/// How far a plan is from the workload: need over have per GPU, and the words for it.
fn shortfall(p: &Plan, w: &Workload) -> (f64, String) {
    let g = &p.per_gpu;
    let have = g.total_gib.max(0.01);
    let fixed = g.weights_gib + g.non_torch_gib + g.activation_gib + g.cuda_graph_gib;
    let per_seq = p.kv_bytes_per_token as f64 * w.max_model_len as f64 / GIB;
    let need = fixed + per_seq * f64::from(w.concurrency.max(1));
    let ratio = need / have;
    let words = if fixed > have {
        format!(
            "needs {ratio:.1} × more memory per GPU: weights and runtime alone take {fixed:.1} GiB of the engine's {have:.1} GiB, before any KV cache"
        )
    } else if !p.fits {
        format!(
            "KV for 1 sequence of {} tokens needs {:.2} GiB more per GPU (about {ratio:.2} × the memory for all {})",
            w.max_model_len,
            (fixed + per_seq - have).max(0.01),
            w.concurrency
        )
    } else {
        format!(
            "holds {:.2} of {} sequences of {} tokens: KV for {} needs {:.2} GiB more per GPU ({ratio:.2} × the memory)",
            p.max_concurrency,
            w.concurrency,
            w.max_model_len,
            w.concurrency,
            (need - have).max(0.01)
        )
    };
    (ratio, words)
}

/// Search the catalog; `prices` (USD per GPU-hour by catalog name) rank by cost when given.
///
/// One piece (~150 lines): the nested search and each row's figures belong together.
pub fn find(
    arch: &ModelArch,
    model_name: &str,
    w: &Workload,
    gpus: &[CatalogGpu],
    prices: Option<&crate::prices::Prices>,
) -> FindResult {
    let mut candidates = Vec::new();
    let mut evaluated = 0;
    let mut closest: Option<Miss> = None;
    let mut consider_miss = |m: Miss| {
        if closest
            .as_ref()
            .is_none_or(|c| m.shortfall_ratio < c.shortfall_ratio)
        {
            closest = Some(m);
        }
    };
    let counts: Vec<u32> = COUNTS
        .iter()
        .copied()
        .filter(|c| w.max_gpus.is_none_or(|m| *c <= m))
        .collect();
    for gpu in gpus {
        for weights in ["native", "fp8", "int4"] {
            let Some(a) = quantized(arch, weights) else {
                continue;
            };
            for kv in ["auto", "fp8"] {
                for &count in &counts {
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
                    let miss = |ratio: f64, lacks: String| Miss {
                        gpu: gpu.name.clone(),
                        count,
                        weights: weights.to_string(),
                        kv_cache_dtype: kv.to_string(),
                        shortfall_ratio: ratio,
                        lacks,
                    };
                    if !p.fits || p.max_concurrency < f64::from(w.concurrency) {
                        let (ratio, lacks) = shortfall(&p, w);
                        consider_miss(miss(ratio, lacks));
                        continue;
                    }
                    let kv_dtype = if kv == "fp8" { Dtype::Fp8 } else { a.dtype };
                    let numbers =
                        model_numbers(&a, &Weights::Checkpoint(a.quantization.as_ref()), kv_dtype);
                    let est = engines::efficiency(w.engine).and_then(|eff| {
                        estimate(
                            &Scenario {
                                model: &numbers,
                                gpu,
                                gpus: count,
                                split: if engines::splits_layers(w.engine) {
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
                            &eff,
                        )
                        .ok()
                    });
                    let per_seq = est
                        .as_ref()
                        .map(|e| e.expected.decode_tokens_per_s_per_sequence);
                    let meets = match (w.min_tokens_per_s_per_sequence, per_seq) {
                        (Some(min), Some(got)) => got >= min,
                        (Some(_), None) => false,
                        (None, _) => true,
                    };
                    if !meets {
                        let min = w.min_tokens_per_s_per_sequence.unwrap_or(0.0);
                        let got = per_seq.unwrap_or(0.0);
                        consider_miss(miss(
                            min / got.max(1e-9),
                            match per_seq {
                                Some(g) => {
                                    format!("expected {g:.0} tokens/s per sequence; {min} required")
                                }
                                None => {
                                    "decode speed unknown (the catalog lacks this GPU's bandwidth)"
                                        .into()
                                }
                            },
                        ));
                        continue;
                    }
                    let aggregate = est
                        .as_ref()
                        .map(|e| e.expected.decode_tokens_per_s_aggregate);
                    let price = prices.and_then(|pr| pr.usd_per_gpu_hour.get(&gpu.name));
                    let (usd_per_hour, usd_per_million_output_tokens) =
                        match price.map(|usd| crate::prices::cost(*usd, count, aggregate)) {
                            Some((h, m)) => (Some(h), m),
                            None => (None, None),
                        };
                    let (command, command_note) =
                        command_for(w.engine, model_name, count, weights, kv, w.max_model_len);
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
                        decode_tokens_per_s_aggregate: aggregate,
                        meets,
                        region: gpu.region.clone(),
                        command,
                        command_note,
                        usd_per_hour,
                        usd_per_million_output_tokens,
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
    let by_cost = prices.is_some();
    // Priced rows first (cheapest per hour, then per token); unpriced after, by GPUs.
    let cost_key = |c: &Candidate| {
        (
            c.usd_per_hour.unwrap_or(f64::MAX),
            c.usd_per_million_output_tokens.unwrap_or(f64::MAX),
        )
    };
    candidates.sort_by(|a, b| {
        let cost = if by_cost {
            let (ah, am) = cost_key(a);
            let (bh, bm) = cost_key(b);
            ah.total_cmp(&bh).then(am.total_cmp(&bm))
        } else {
            std::cmp::Ordering::Equal
        };
        cost.then(a.count.cmp(&b.count))
            .then(mem(a).total_cmp(&mem(b)))
            .then(
                b.decode_tokens_per_s_per_sequence
                    .unwrap_or(0.0)
                    .total_cmp(&a.decode_tokens_per_s_per_sequence.unwrap_or(0.0)),
            )
            .then(a.gpu.cmp(&b.gpu))
    });
    let candidates_total = candidates.len();
    FindResult {
        closest_miss: if candidates.is_empty() { closest } else { None },
        candidates,
        evaluated,
        context_tokens: w.max_model_len,
        context_basis: w.context_basis.clone(),
        candidates_total,
        ranked_by: if by_cost { "cost" } else { "gpus" }.into(),
        assumptions: vec![
            format!("context {} tokens per request: {}", w.max_model_len, w.context_basis),
            format!("GPU counts tried: {counts:?} (tensor parallel within one node; the head count must divide by it)"),
            "weights tried: the checkpoint as published, fp8 and 4-bit AWQ/GPTQ-style (only for unquantized checkpoints)".into(),
            "KV cache dtypes tried: auto (model dtype) and fp8".into(),
            "for each GPU × weights × KV dtype only the smallest count that meets the workload is listed".into(),
            format!("decode speed at full context for every sequence: expected for {} (fitted efficiency, docs/speed.md), roofline beside it (no real run is faster)", w.engine.cli_id()),
            if by_cost {
                "ranked by USD per hour for the GPUs (--prices), then USD per million output tokens at the expected aggregate decode speed; unpriced GPUs last".into()
            } else {
                "ranked by GPU count, then the smallest GPU memory that works, then expected decode speed".into()
            },
            "GPUs marked with a region are sold only there (China export variants): listed, not hidden".into(),
        ],
    }
}
