//! Multi-GPU / multi-node speed truth (issue #30): every record of
//! fixtures/speed/multi-gpu.jsonl the cluster model can predict, against its roofline (which no
//! record may beat) and the expected figure (constants fitted on `half: calibration`, reported
//! on `half: check`). Run with `--nocapture` for the per-case table; docs/speed.md, section
//! "Multi-GPU and multi-node", explains each choice.

mod common;
use common::median;

use inferscope_plan::arch::{Dtype, ModelArch, Quantization};
use inferscope_plan::catalog;
use inferscope_plan::cluster::memory::{GpuMemory, fullest_gpu};
use inferscope_plan::cluster::step::{
    AttentionFlops, ClusterEstimate, ClusterFigures, ClusterScenario, Constants, FITTED, Overlap,
    estimate, moe_layer_share,
};
use inferscope_plan::cluster::{IntraLink, Layout, Network};
use inferscope_plan::gpus::{self, GpuSpec};
use inferscope_plan::speed::engines::{self, Engine, EngineEfficiency};
use inferscope_plan::speed::estimate::{ModelNumbers, Weights, model_numbers};
use serde_json::Value;

/// ShareGPT-like chat as the single-node test assumes when lengths are not stated (217 prompt,
/// 194 output tokens: tests/speed_accuracy.rs).
const CHAT_INPUT: u64 = 217;
const CHAT_OUTPUT: u64 = 194;
/// Bytes per GPU the engines keep outside weights and KV (activations of the profile run, CUDA
/// graphs, NCCL/DeepEP buffers): 3 GiB, a judgement between vLLM's measured non-torch + profile
/// figures for TP > 1 (crate::memory::fitted: ~2 GiB non-torch at TP 8) and DeepEP's buffers.
const OVERHEAD_BYTES: f64 = 3.0 * (1u64 << 30) as f64;

fn records() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/speed/multi-gpu.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

/// Catalog shapes for the records' model ids (same config, where the id differs).
fn catalog_id(model: &str) -> Option<&'static str> {
    Some(match model {
        "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" | "meta-llama/Llama-3.1-70B" => {
            "meta-llama/Llama-3.1-70B-Instruct"
        }
        "meta-llama/Llama-2-70b-chat-hf"
        | "meta-llama/Llama-2-70b-hf"
        | "TheBloke/Llama-2-70B-AWQ" => "meta-llama/Llama-2-70b-hf",
        "meta-llama/Llama-3.1-405B"
        | "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8"
        | "meta-llama/Meta-Llama-3.1-405B-Instruct" => "meta-llama/Llama-3.1-405B-Instruct",
        "Qwen/Qwen3-235B-A22B" => "Qwen/Qwen3-235B-A22B",
        m if m.starts_with("deepseek-ai/DeepSeek-V3")
            || m.starts_with("deepseek-ai/DeepSeek-R1") =>
        {
            "deepseek-ai/DeepSeek-V3"
        }
        "openai/gpt-oss-120b" => "openai/gpt-oss-120b",
        _ => return None,
    })
}

fn gpu_name(key: &str) -> Option<&'static str> {
    Some(match key {
        "RTX4090-24GB" => "RTX 4090",
        "RTX3090Ti-24GB" => "RTX 3090 Ti",
        "A100-PCIe-80GB" => "A100 PCIe 80GB",
        "A100-SXM-80GB" => "A100 SXM 80GB",
        "A10G-24GB" => "A10G",
        "L40S-48GB" => "L40S",
        "H100-SXM-80GB" => "H100 SXM",
        "H200-SXM-141GB" => "H200 SXM",
        "H800-80GB" => "H800 SXM",
        "GB200-186GB" => "GB200",
        "B200-180GB" => "B200",
        "GH200-96GB" => "GH200 96GB",
        _ => return None,
    })
}

fn quant(r: &Value, arch: &ModelArch) -> Option<Quantization> {
    let w = r["weights_dtype"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    if w.contains("mxfp4") {
        return arch.quantization.clone();
    }
    if w.contains("q4f16_1") {
        // MLC q4f16_1: 4-bit, one fp16 scale per 32 weights (as tests/speed_accuracy.rs)
        let mut q = Quantization::from_method("gptq")?;
        q.method = "mlc-q4f16_1".into();
        q.group_size = 32;
        return Some(q);
    }
    if w.starts_with("awq") {
        return Quantization::from_method("awq");
    }
    if w.starts_with("fp8") {
        return arch
            .quantization
            .clone()
            .or_else(|| Quantization::from_method("fp8"));
    }
    None
}

struct Case {
    id: String,
    calibration: bool,
    arch: ModelArch,
    quant: Option<Quantization>,
    kv: Dtype,
    gpu: &'static GpuSpec,
    eff: EngineEfficiency,
    engine: Engine,
    raw: Value,
}

/// A figure the model is judged on.
struct Fig {
    what: String,
    measured: f64,
    roofline: f64,
    expected: f64,
}

impl Fig {
    fn error(&self) -> f64 {
        (self.expected - self.measured).abs() / self.measured
    }
    fn beats_roofline(&self) -> bool {
        self.measured > self.roofline * 1.000_001
    }
}

fn load(r: &Value) -> Result<Case, String> {
    let id = r["id"].as_str().unwrap_or("").to_string();
    let model_id = r["model_id"].as_str().unwrap_or("");
    let cid = catalog_id(model_id).ok_or(format!("model {model_id} not in the catalog"))?;
    let arch = catalog::lookup(cid).map_err(|e| e.to_string())?;
    let gkey = r["gpu_key"].as_str().unwrap_or("");
    let gpu = gpus::lookup(gpu_name(gkey).ok_or(format!("GPU {gkey} not mapped"))?)
        .map_err(|e| e.to_string())?;
    let engine_text = r["engine"].as_str().unwrap_or("");
    // DeepSeek's in-house system: SGLang's efficiency (the open system built to reproduce it)
    let engine = if engine_text.starts_with("DeepSeek") {
        Engine::Sglang
    } else if engine_text.starts_with("MLC") {
        engines::parse("mlc").ok_or("mlc")?
    } else {
        engines::parse(engine_text).ok_or(format!("engine {engine_text} not modelled"))?
    };
    let eff = engines::efficiency(engine).ok_or("no efficiency")?;
    let q = quant(r, &arch);
    let kv_text = r["kv_cache_dtype"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    let kv = if kv_text.starts_with("fp8") {
        Dtype::Fp8
    } else if arch.dtype == Dtype::F32 {
        Dtype::F16
    } else {
        arch.dtype
    };
    Ok(Case {
        calibration: r["half"].as_str() == Some("calibration"),
        id,
        arch,
        quant: q,
        kv,
        gpu,
        eff,
        engine,
        raw: r.clone(),
    })
}

fn layout_of(r: &Value) -> Option<Layout> {
    let u = |v: &Value| v.as_u64().map(|x| x as u32);
    let nodes = u(&r["nodes"])?;
    let gpn = u(&r["gpus_per_node"])?;
    let tp = u(&r["tp_size"]);
    let pp = u(&r["pp_size"]).unwrap_or(1);
    let dp = u(&r["dp_size"]).unwrap_or(1);
    let ep = u(&r["ep_size"]).unwrap_or(1);
    // DP attention + EP (SGLang --tp N --dp N --enable-dp-attention; vLLM/DeepSeek wide EP):
    // attention and dense layers whole on each rank
    if ep > 1 && dp == ep {
        return Some(Layout {
            tp: 1,
            pp,
            dp,
            ep,
            nodes,
            gpus_per_node: gpn,
        });
    }
    Some(Layout {
        tp: tp?,
        pp,
        dp,
        ep,
        nodes,
        gpus_per_node: gpn,
    })
}

fn network_of(r: &Value) -> Network {
    let t = r["interconnect"]["inter_node"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    if t.contains("nvlink") {
        Network::NvlinkDomain
    } else if t.contains("roce") {
        Network::Roce400
    } else if t.contains("tcp") || t.contains("ethernet") {
        Network::Eth100
    } else {
        // InfiniBand of unstated speed, or RDMA assumed: NDR, the HGX H100/H200 pairing
        Network::IbNdr
    }
}

struct Setup<'a> {
    case: &'a Case,
    model: ModelNumbers,
    memory: GpuMemory,
    layout: Layout,
    intra: IntraLink,
    network: Network,
    overlap: Overlap,
    eager: bool,
}

impl<'a> Setup<'a> {
    fn new(case: &'a Case, layout: Layout, network: Network, overlap: Overlap) -> Self {
        let model = model_numbers(
            &case.arch,
            &Weights::Checkpoint(case.quant.as_ref()),
            case.kv,
        );
        let memory = fullest_gpu(&case.arch, case.quant.as_ref(), case.kv, &layout);
        let intra_text = case.raw["interconnect"]["intra_node"]
            .as_str()
            .unwrap_or("")
            .to_ascii_lowercase();
        let force_pcie = intra_text.contains("pcie") || intra_text.contains("no nvlink");
        let intra = IntraLink::from_gpu(case.gpu, layout.tp.min(layout.gpus_per_node), force_pcie);
        // vLLM before 0.2.6 had no CUDA graphs (0.2.6 wheel: vllm/engine/arg_utils.py has
        // --enforce-eager, 0.2.5 has none; vllm-project/vllm PR #1926): the
        // mlc-llm bench's vLLM commit acbed3e (2023-10-06) ran every kernel eagerly
        let version = case.raw["engine_version"].as_str().unwrap_or("");
        let eager = case.engine == Engine::Vllm && version.contains("acbed3e");
        Setup {
            eager,
            case,
            model,
            memory,
            layout,
            intra,
            network,
            overlap,
        }
    }

    fn est(&self, batch: u64, context: u64, prompt: u64, c: &Constants) -> ClusterEstimate {
        let s = ClusterScenario {
            model: &self.model,
            attention: AttentionFlops::of(&self.case.arch),
            moe_layer_share: moe_layer_share(&self.case.arch),
            memory: &self.memory,
            gpu: self.case.gpu,
            layout: self.layout,
            intra: self.intra.clone(),
            network: self.network,
            batch,
            context,
            prompt_tokens: prompt,
            overlap: self.overlap,
            eager: self.eager,
        };
        estimate(&s, &self.case.eff, c).unwrap_or_else(|e| panic!("{}: {e}", self.case.id))
    }

    /// Sequences one replica keeps running when all requests are queued: the KV the fullest GPU
    /// holds at the engine's memory fraction, over input + output tokens, capped by the engine.
    fn max_batch(&self, input: u64, output: u64) -> u64 {
        let (fraction, cap) = match self.case.engine {
            // vLLM: gpu_memory_utilization 0.9, max_num_seqs 256
            Engine::Vllm => (0.9, 256.0),
            // SGLang mem_fraction_static ~0.88 (0.9 in PR #7979's command), max-running 512 there
            Engine::Sglang => (0.9, 512.0),
            // trtllm-bench: kv_cache_free_gpu_mem_fraction 0.95 of what weights leave
            _ => (0.95, 2048.0),
        };
        let total = self.case.gpu.torch_total_gib * (1u64 << 30) as f64;
        let free = match self.case.engine {
            Engine::Trtllm => {
                (total - self.memory.weight_bytes() as f64 - OVERHEAD_BYTES) * fraction
            }
            _ => total * fraction - self.memory.weight_bytes() as f64 - OVERHEAD_BYTES,
        };
        let tokens = (free / self.memory.kv_bytes_per_token.max(1) as f64).max(0.0);
        (tokens / (input + output) as f64).clamp(1.0, cap) as u64
    }
}

/// Output tok/s of a replica running `b` requests of `input`/`output` tokens back to back:
/// B·O / (B × TTFT + O × round), as tests/speed_accuracy.rs scores static batches.
fn batch_rate(f: &ClusterFigures, b: u64, output: u64) -> f64 {
    let (b, o) = (b.max(1) as f64, output.max(1) as f64);
    b * o / (b * f.ttft_s + o * f.round_s)
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The figures a record is judged on, or why it cannot be predicted.
fn figs(case: &Case, c: &Constants) -> Result<Vec<Fig>, String> {
    let r = &case.raw;
    let wl = &r["workload"];
    let m = &r["measured"];
    let x = &r["measured_extra"];
    let kind = r["metric_kind"].as_str().unwrap_or("");
    let input = wl["input_tokens"].as_u64().unwrap_or(CHAT_INPUT);
    let output = wl["output_tokens"].as_u64().unwrap_or(CHAT_OUTPUT);
    let network = network_of(r);
    let layout = || layout_of(r).ok_or_else(|| String::from("layout (TP/PP split) not stated"));
    let fig = |what: &str, measured: f64, e: (f64, f64)| Fig {
        what: what.to_string(),
        measured,
        roofline: e.0,
        expected: e.1,
    };
    let mut out = Vec::new();
    match kind {
        "single_stream_decode" => {
            let l = layout()?;
            let s = Setup::new(case, l, network, Overlap::default());
            let e = s.est(1, input + output / 2, input, c);
            let measured =
                num(&m["decode_tokens_per_s_single_stream"]).ok_or("no single-stream figure")?;
            out.push(fig(
                "decode tok/s/seq",
                measured,
                (
                    e.roofline.tokens_per_s_per_sequence,
                    e.expected.tokens_per_s_per_sequence,
                ),
            ));
        }
        "online_latency_at_concurrency" => {
            let l = layout()?;
            let s = Setup::new(case, l, network, Overlap::default());
            let b = wl["concurrency"].as_u64().unwrap_or(1);
            let e = s.est(b, input + output / 2, input, c);
            let a = num(&m["output_tokens_per_s_aggregate"]).ok_or("no aggregate")?;
            out.push(fig(
                "output tok/s",
                a,
                (
                    batch_rate(&e.roofline, b, output),
                    batch_rate(&e.expected, b, output),
                ),
            ));
        }
        "aggregate_throughput_max_load" if r["category"] == "ep" => {
            // P/D: 1 prefill + 1 decode instance, each DP16/EP16 over 2 nodes; requests/s is the
            // slower of the two roles, output tok/s = requests/s × output
            let l = layout()?;
            let role = Layout { nodes: 2, ..l };
            let overlap = Overlap {
                pp_send_recv: false,
                two_batch: true,
            };
            let s = Setup::new(case, role, network, overlap);
            let b = s.max_batch(input, output);
            let e = s.est(b, input + output / 2, input, c);
            let gpus = f64::from(role.tp * role.pp * role.dp);
            let rate = |f: &ClusterFigures| -> f64 {
                let decode = f.tokens_per_s_per_gpu * gpus / output as f64;
                let prefill = f.prefill_tokens_per_s_per_gpu * gpus / input as f64;
                decode.min(prefill) * output as f64
            };
            let a = num(&m["output_tokens_per_s_aggregate"]).ok_or("no aggregate")?;
            out.push(fig(
                &format!("output tok/s (1P+1D, {b}/rank)"),
                a,
                (rate(&e.roofline), rate(&e.expected)),
            ));
        }
        "aggregate_throughput_max_load" => {
            let l = layout()?;
            let overlap = Overlap {
                // SGLang after PR #7979 overlaps PP send/recv; the record before it does not
                pp_send_recv: r["category"] == "pp_multinode" && r["half"] == "check",
                two_batch: false,
            };
            let s = Setup::new(case, l, network, overlap);
            let (input, output) = if r["category"] == "pp_multinode" {
                // random 900–1000 tokens: the printed means (121127 / 128 in, 121703 / 128 out)
                (946, 951)
            } else {
                (input, output)
            };
            let prompts = wl["num_prompts"].as_u64().unwrap_or(u64::MAX);
            let b = s.max_batch(input, output).min(prompts);
            let e = s.est(b, input + output / 2, input, c);
            let measured = match num(&m["output_tokens_per_s_aggregate"]) {
                Some(a) => a,
                None => {
                    let t = num(&x["total_generated_tokens"]).unwrap_or(121_703.0);
                    t / num(&x["benchmark_duration_s"]).ok_or("no duration")?
                }
            };
            let dp = f64::from(l.dp);
            out.push(fig(
                &format!("output tok/s (batch {b})"),
                measured,
                (
                    batch_rate(&e.roofline, b, output) * dp,
                    batch_rate(&e.expected, b, output) * dp,
                ),
            ));
        }
        "online_latency_at_request_rate" => {
            let rate_total = num(&wl["request_rate"]).ok_or("no request rate")?;
            let (l, rate, measured, what) = if r["category"] == "pd" {
                if let Some(t) = num(&m["tpot_ms"]) {
                    // decode role: 2 × TP4 instances, prefills elsewhere
                    let l = Layout {
                        tp: 4,
                        pp: 1,
                        dp: 1,
                        ep: 1,
                        nodes: 1,
                        gpus_per_node: 4,
                    };
                    (
                        l,
                        rate_total / 2.0,
                        1000.0 / t,
                        "decode tok/s/seq (P/D, TP4 role)",
                    )
                } else {
                    let itl = num(&x["itl_mean_ms"]).ok_or("no ITL")?;
                    let l = Layout::SINGLE;
                    (
                        l,
                        rate_total / 16.0,
                        1000.0 / itl,
                        "ITL-based tok/s/seq (TP1 replica)",
                    )
                }
            } else if let Some(itl) = num(&m["itl_ms"]) {
                (layout()?, rate_total, 1000.0 / itl, "ITL-based tok/s/seq")
            } else {
                return Err(String::from(
                    "only rate-bound figures (output and input tok/s follow the offered request rate), no TPOT or ITL",
                ));
            };
            let disagg = r["category"] == "pd" && num(&m["tpot_ms"]).is_some();
            let s = Setup::new(case, l, network, Overlap::default());
            // Little's law: in flight = rate × (TTFT + O × TPOT); an aggregated replica also
            // prefills the arriving prompts, which the decode steps wait for
            let mut b = 1u64;
            let mut tpot = (0.0, 0.0);
            for _ in 0..40 {
                let e = s.est(b, input + output / 2, input, c);
                let busy = if disagg {
                    0.0
                } else {
                    (rate * e.expected.ttft_s).min(0.9)
                };
                tpot = (e.roofline.round_s, e.expected.round_s / (1.0 - busy));
                let ttft = if disagg { 0.0 } else { e.expected.ttft_s };
                let next = (rate * (ttft + output as f64 * tpot.1)).round().max(1.0) as u64;
                if next == b {
                    break;
                }
                b = next;
            }
            out.push(fig(
                &format!("{what}, {b} in flight"),
                measured,
                (1.0 / tpot.0, 1.0 / tpot.1),
            ));
        }
        "prefill_throughput_per_node" => {
            let l = layout()?;
            let overlap = Overlap {
                pp_send_recv: false,
                two_batch: true,
            };
            let s = Setup::new(case, l, network, overlap);
            // (figure, prompt tokens, what): the per-node rate at a stated prompt length; for
            // DeepSeek's production record both figures it carries — the 24-hour average of
            // computed tokens (cache hits excluded, SGLang's table; prompt mix not stated, 4,096
            // assumed) and DeepSeek's own profile at 4,096 input tokens
            let mut rows = Vec::new();
            if let Some(v) = num(&x["input_tokens_per_s_per_node"]) {
                rows.push((v, input, "prefill tok/s/node"));
            }
            if let Some(v) = num(&x["input_tokens_per_s_per_node_excl_cache_hits_sglang_table"]) {
                rows.push((v, 4096, "prefill tok/s/node, 24-h production average"));
            }
            if let Some(v) = num(&x["deepseek_profile_per_node_4096in"]) {
                rows.push((v, 4096, "prefill tok/s/node, DeepSeek profile"));
            }
            if rows.is_empty() {
                return Err(String::from("no per-node prefill figure"));
            }
            let gpn = f64::from(l.gpus_per_node);
            for (measured, prompt, what) in rows {
                let e = s.est(1, prompt, prompt, c);
                out.push(fig(
                    &format!("{what} ({prompt} in)"),
                    measured,
                    (
                        e.roofline.prefill_tokens_per_s_per_gpu * gpn,
                        e.expected.prefill_tokens_per_s_per_gpu * gpn,
                    ),
                ));
            }
        }
        "decode_throughput_per_node_at_batch" => {
            if wl["mode"].as_str().unwrap_or("").contains("simulated MTP") {
                return Err(String::from(
                    "simulated MTP (batch doubled, KV halved, dummy kernels): not a real decode step",
                ));
            }
            let l = layout()?;
            let overlap = Overlap {
                pp_send_recv: false,
                two_batch: true,
            };
            let s = Setup::new(case, l, network, overlap);
            let b = wl["batch"].as_u64().unwrap_or(128);
            let ctx = wl["kv_cache_length"].as_u64().unwrap_or(4989);
            let e = s.est(b, ctx, input.min(ctx), c);
            let measured = num(&x["output_tokens_per_s_per_node"]).ok_or("no per-node figure")?;
            let gpn = f64::from(l.gpus_per_node);
            out.push(fig(
                &format!("decode tok/s/node ({b} seq/GPU, {ctx} ctx)"),
                measured,
                (
                    e.roofline.tokens_per_s_per_gpu * gpn,
                    e.expected.tokens_per_s_per_gpu * gpn,
                ),
            ));
        }
        "decode_throughput_per_gpu_at_batch" => {
            return Err(String::from(
                "sequences per GPU not stated: a per-GPU decode rate cannot be placed on the batch curve",
            ));
        }
        "throughput_ratio" => {
            // PP2×TP8 over TP16, both over TCP (the 6.6× figure), at vLLM's max-load batch
            let ratio = num(&x["throughput_ratio_pp2tp8_over_tp16_without_ib"])
                .ok_or("no numeric ratio")?;
            let pp = layout()?;
            let tp16 = Layout {
                tp: 16,
                pp: 1,
                ..pp
            };
            let a = Setup::new(case, pp, Network::Eth100, Overlap::default());
            let b = Setup::new(case, tp16, Network::Eth100, Overlap::default());
            let ba = a.max_batch(input, output);
            let bb = b.max_batch(input, output);
            let ea = a.est(ba, input + output / 2, input, c);
            let eb = b.est(bb, input + output / 2, input, c);
            let ra = batch_rate(&ea.expected, ba, output);
            let rb = batch_rate(&eb.expected, bb, output);
            // a ratio has no roofline of its own: report the expected ratio on both columns
            out.push(fig(
                "PP2xTP8 / TP16 over TCP",
                ratio,
                (f64::INFINITY, ra / rb),
            ));
        }
        "throughput_per_gpu_unspecified" => {
            return Err(String::from(
                "which tokens and which workload are not stated: no figure to predict",
            ));
        }
        other => return Err(format!("metric kind {other} not modelled")),
    }
    Ok(out)
}

fn all(c: &Constants) -> Vec<(Case, Result<Vec<Fig>, String>)> {
    records()
        .iter()
        .map(|r| match load(r) {
            Ok(case) => {
                let f = figs(&case, c);
                (case, f)
            }
            Err(e) => panic!("{}: {e}", r["id"]),
        })
        .collect()
}

/// Σ ln²(expected / measured) over the calibration figures.
fn loss(c: &Constants) -> f64 {
    all(c)
        .iter()
        .filter(|(case, _)| case.calibration)
        .flat_map(|(_, f)| {
            f.as_ref()
                .map(|v| v.iter().collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .map(|f| (f.expected / f.measured).ln().powi(2))
        .sum()
}

/// Coordinate descent over the constants' grids: eager PCIe hop 1–200 µs by 1 µs, shares
/// 0.05–1.00 by 0.01, PP bubble 0–1 by 0.01.
fn fit() -> Constants {
    let mut c = FITTED;
    for _ in 0..4 {
        let mut best = (loss(&c), c);
        for i in 1..=200 {
            let t = Constants {
                pcie_eager_hop_s: f64::from(i) * 1e-6,
                ..best.1
            };
            let l = loss(&t);
            if l < best.0 - 1e-12 {
                best = (l, t);
            }
        }
        for i in 5..=100 {
            let t = Constants {
                pcie_share: f64::from(i) / 100.0,
                ..best.1
            };
            let l = loss(&t);
            if l < best.0 - 1e-12 {
                best = (l, t);
            }
        }
        for i in 5..=100 {
            let t = Constants {
                ep_share: f64::from(i) / 100.0,
                ..best.1
            };
            let l = loss(&t);
            if l < best.0 - 1e-12 {
                best = (l, t);
            }
        }
        for i in 0..=100 {
            let t = Constants {
                pp_bubble: f64::from(i) / 100.0,
                ..best.1
            };
            let l = loss(&t);
            if l < best.0 - 1e-12 {
                best = (l, t);
            }
        }
        for i in 0..=100 {
            let t = Constants {
                tbo_overlap: f64::from(i) / 100.0,
                ..best.1
            };
            let l = loss(&t);
            if l < best.0 - 1e-12 {
                best = (l, t);
            }
        }
        if best.1 == c {
            break;
        }
        c = best.1;
    }
    c
}

#[test]
fn fitted_constants_are_the_calibration_fit() {
    let f = fit();
    println!(
        "fit on the calibration half: pcie_call_s {:.1} µs, pcie_eager_hop_s {:.1} µs, pcie_share {:.2}, ep_share {:.2}, pp_bubble {:.2}, tbo_overlap {:.2}",
        f.pcie_call_s * 1e6,
        f.pcie_eager_hop_s * 1e6,
        f.pcie_share,
        f.ep_share,
        f.pp_bubble,
        f.tbo_overlap
    );
    assert!(
        (f.pcie_eager_hop_s - FITTED.pcie_eager_hop_s).abs() < 1.5e-6,
        "{f:?}"
    );
    assert!((f.pcie_share - FITTED.pcie_share).abs() < 0.015, "{f:?}");
    assert!((f.ep_share - FITTED.ep_share).abs() < 0.015, "{f:?}");
    assert!((f.pp_bubble - FITTED.pp_bubble).abs() < 0.015, "{f:?}");
    assert!((f.tbo_overlap - FITTED.tbo_overlap).abs() < 0.015, "{f:?}");
}

#[test]
fn check_half_errors_and_rooflines() {
    let results = all(&FITTED);
    println!(
        "| id | half | figure | measured | predicted | roofline | error % |\n|---|---|---|---:|---:|---:|---:|"
    );
    // DeepSeek's production prefill figure is a 24-hour average of the load it served (load
    // varies over the day; DeepSeek's own profile of the same node at 4,096 tokens, 62.7k tok/s,
    // is scored as a point figure). An average of served load bounds capacity from below, so
    // it is checked as a bound (predicted ≥ average), not scored as an error (docs/speed.md).
    const LOWER_BOUND: &str = "24-h production average";
    let mut check = Vec::new();
    let mut beaten = Vec::new();
    let mut below_bound = Vec::new();
    let mut bounds = 0;
    let mut skipped = 0;
    for (case, f) in &results {
        let half = if case.calibration {
            "calibration"
        } else {
            "check"
        };
        match f {
            Err(why) => {
                skipped += 1;
                println!("| {} | {half} | skipped: {why} | | | | |", case.id);
            }
            Ok(figs) => {
                for g in figs {
                    println!(
                        "| {} | {half} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                        case.id,
                        g.what,
                        g.measured,
                        g.expected,
                        g.roofline,
                        100.0 * g.error()
                    );
                    if g.beats_roofline() {
                        beaten.push(format!("{} {}", case.id, g.what));
                    }
                    if g.expected > g.roofline * 1.000_001 {
                        beaten.push(format!("{} {}: expected above roofline", case.id, g.what));
                    }
                    if g.what.contains(LOWER_BOUND) {
                        // served load averaged over a day: what the node did, not what it can
                        // do, so the model's capacity must be at least it
                        if g.expected < g.measured {
                            below_bound.push(format!("{} {}", case.id, g.what));
                        }
                        bounds += 1;
                    } else if !case.calibration {
                        check.push((format!("{} {}", case.id, g.what), g.error()));
                    }
                }
            }
        }
    }
    let med = median(check.iter().map(|c| c.1).collect());
    let worst = check.iter().map(|c| c.1).fold(0.0, f64::max);
    println!(
        "check half: {} figures, median error {:.1} %, worst {:.1} %; {bounds} lower bound(s) (served-load averages) held: {}; {skipped} records skipped",
        check.len(),
        100.0 * med,
        100.0 * worst,
        below_bound.is_empty()
    );
    assert!(beaten.is_empty(), "beats the roofline: {beaten:?}");
    assert!(
        below_bound.is_empty(),
        "capacity below served load: {below_bound:?}"
    );
    assert_eq!(bounds, 1, "the production average is scored as a bound");
    assert!(check.len() >= 8, "too few check figures: {}", check.len());
    assert!(med <= 0.25, "median error {:.1} % > 25 %", 100.0 * med);
    assert!(worst <= 0.50, "worst error {:.1} % > 50 %", 100.0 * worst);
}

/// SHA-256 (FIPS 180-4), hex: the split rule of MULTI-GPU.md hashes each id.
fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64) * 8;
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([
                chunk[4 * i],
                chunk[4 * i + 1],
                chunk[4 * i + 2],
                chunk[4 * i + 3],
            ]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn halves_follow_the_documented_split() {
    // FIPS 180-4 test vector
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // MULTI-GPU.md: within each category, sort by confidence (high, medium, low) then the
    // SHA-256 hex of the id; the 1st, 3rd, ... calibrate, the 2nd, 4th, ... check
    let rs = records();
    let mut cats: Vec<&str> = rs.iter().filter_map(|r| r["category"].as_str()).collect();
    cats.sort_unstable();
    cats.dedup();
    for cat in cats {
        let rank = |c: &str| match c {
            "high" => 0,
            "medium" => 1,
            _ => 2,
        };
        let mut v: Vec<(u8, String, &Value)> = rs
            .iter()
            .filter(|r| r["category"] == cat)
            .map(|r| {
                let id = r["id"].as_str().unwrap_or("");
                (
                    rank(r["confidence"].as_str().unwrap_or("")),
                    sha256_hex(id.as_bytes()),
                    r,
                )
            })
            .collect();
        v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (i, (_, _, r)) in v.iter().enumerate() {
            let want = if i % 2 == 0 { "calibration" } else { "check" };
            assert_eq!(r["half"].as_str(), Some(want), "{}", r["id"]);
        }
    }
}
