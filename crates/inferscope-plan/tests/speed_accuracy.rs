//! Speed truth (issue 22): every published measurement in fixtures/speed/cases.jsonl against the
//! roofline (which no case may beat) and the engine's expected figure (fitted on the calibration
//! half, judged on the check half). Run with `--nocapture` to see the per-case table.
//!
//! Split: FNV-1a 64 of the case id; even = calibration, odd = check (docs/speed.md).

mod common;
use common::median;

use inferscope_plan::arch::{Dtype, ModelArch, Quantization};
use inferscope_plan::gguf_quant::GgufFileType;
use inferscope_plan::plan::GpuSpec as PlanGpu;
use inferscope_plan::speed::engines::{self, Engine, EngineEfficiency, all_engine_fit};
use inferscope_plan::speed::estimate::{
    Figures, ModelNumbers, Scenario, Split, Weights, batch_throughput, estimate_figures,
    fit_efficiency, model_numbers,
};
use inferscope_plan::{PlanRequest, catalog, gpus, plan};
use serde_json::Value;

/// ShareGPT as vLLM's and SGLang's benchmarks sample it: mean prompt 217 tokens (the
/// vllm-0.8.5post1 case's totals, 217393 / 1000), mean output 194 (the SGLang and vLLM 0.6.0
/// offline cases' derived means, 194.3 and 194.4).
const SHAREGPT_INPUT: u64 = 217;
const SHAREGPT_OUTPUT: u64 = 194;

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn is_calibration(id: &str) -> bool {
    fnv1a(id).is_multiple_of(2)
}

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/speed/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

/// Catalog architecture for a published model id (same shapes; why, where not the same id).
fn catalog_id(model: &str) -> &'static str {
    match model {
        // chat and base share the shapes
        "meta-llama/Llama-2-7b-chat-hf" | "meta-llama/Llama-2-7b-hf" => "meta-llama/Llama-2-7b-hf",
        // LLaMA-7B (6.74 B, 32 layers × 4096, vocab 32000) = Llama-2-7B's shapes
        m if m.starts_with("LLaMA-7B") => "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-13b" => "meta-llama/Llama-2-13b-hf",
        "meta-llama/Llama-2-70b-chat-hf" | "meta-llama/Llama-2-70b-hf" => {
            "meta-llama/Llama-2-70b-hf"
        }
        "meta-llama/Meta-Llama-3-70B" => "meta-llama/Meta-Llama-3-70B-Instruct",
        "meta-llama/Meta-Llama-3-8B" => "meta-llama/Meta-Llama-3-8B",
        "meta-llama/Llama-3.1-8B"
        | "meta-llama/Llama-3.1-8B-Instruct"
        | "nvidia/Llama-3.1-8B-Instruct-FP8" => "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct" | "amd/Llama-3.1-70B-Instruct-FP8-KV" => {
            "meta-llama/Llama-3.1-70B-Instruct"
        }
        "meta-llama/Llama-3.1-405B-Instruct"
        | "meta-llama/Llama-3.1-405B-FP8"
        | "amd/Llama-3.1-405B-Instruct-FP8-KV" => "meta-llama/Llama-3.1-405B-Instruct",
        // Qwen2.5-Coder-3B has Qwen2.5-3B's config (36 layers × 2048, 16/2 heads, tied)
        "Qwen/Qwen2.5-Coder-3B-Instruct" => "Qwen/Qwen2.5-3B-Instruct",
        "Qwen/Qwen3-32B" => "Qwen/Qwen3-32B",
        "nvidia/Qwen3-235B-A22B-FP8" => "Qwen/Qwen3-235B-A22B",
        "openai/gpt-oss-20b" => "openai/gpt-oss-20b",
        other => panic!("no catalog architecture for {other}"),
    }
}

fn gpu_name(key: &str) -> &'static str {
    match key {
        "RTX4090-24GB" => "RTX 4090",
        "RTX3090Ti-24GB" => "RTX 3090 Ti",
        "A100-PCIe-80GB" => "A100 PCIe 80GB",
        // TRT-LLM v0.5's A100 table: SXM 80GB (the DGX part its other tables name)
        "A100" | "A100-80GB" => "A100 SXM 80GB",
        "H100-PCIe-80GB" => "H100 PCIe",
        "H100-80GB" | "H100-SXM-80GB" => "H100 SXM",
        "H100-NVL-94GB" => "H100 NVL",
        "H200-SXM-141GB" => "H200 SXM",
        "L40S-48GB" => "L40S",
        "A10G-24GB" => "A10G",
        "MI300X-192GB" => "MI300X",
        other => panic!("no catalog GPU for {other}"),
    }
}

enum W {
    Native,
    Quant(Quantization),
    Gguf(GgufFileType),
}

fn weights(case: &Value, arch: &ModelArch) -> W {
    let w = case["weights_dtype"].as_str().unwrap_or("");
    let lower = w.to_ascii_lowercase();
    if let Some(rest) = w.strip_prefix("GGUF ") {
        let ft = rest.split_whitespace().next().unwrap_or("");
        return W::Gguf(GgufFileType::parse(ft).unwrap_or_else(|| panic!("{w}")));
    }
    if lower.contains("mxfp4") {
        return match &arch.quantization {
            Some(q) => W::Quant(q.clone()),
            None => panic!("gpt-oss without its mxfp4 quantization"),
        };
    }
    if lower.contains("q4f16_1") {
        // MLC q4f16_1: 4-bit, one fp16 scale per 32 weights
        let mut q = Quantization::from_method("gptq").unwrap_or_else(|| panic!("gptq"));
        q.method = "mlc-q4f16_1".into();
        q.group_size = 32;
        return W::Quant(q);
    }
    if lower.starts_with("awq") {
        return W::Quant(Quantization::from_method("awq").unwrap_or_else(|| panic!("awq")));
    }
    if case["model_id"].as_str() == Some("meta-llama/Llama-3.1-405B-FP8") {
        // Meta's FP8 checkpoint: quant_method fbgemm_fp8 with every self_attn module in
        // modules_to_not_convert (the feed-forward layers only are FP8)
        let mut q = Quantization::from_method("fbgemm_fp8").unwrap_or_else(|| panic!("fbgemm"));
        q.attention_unquantized = true;
        return W::Quant(q);
    }
    if lower.starts_with("fp8") {
        return W::Quant(Quantization::from_method("fp8").unwrap_or_else(|| panic!("fp8")));
    }
    W::Native
}

#[derive(Debug)]
struct Fig {
    what: &'static str,
    measured: f64,
    roofline: f64,
    expected: f64,
    /// Rates (tok/s): higher is faster; times (TTFT): lower is faster.
    rate: bool,
    /// Counted in the expected-error figures (false: only checked against the roofline).
    scored: bool,
}

impl Fig {
    fn beats_roofline(&self) -> bool {
        if self.rate {
            self.measured > self.roofline * 1.000_001
        } else {
            self.measured < self.roofline * 0.999_999
        }
    }
    fn error(&self) -> f64 {
        (self.expected - self.measured).abs() / self.measured
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn uint(v: &Value) -> Option<u64> {
    v.as_u64()
}

struct Case {
    id: String,
    engine: Engine,
    calibration: bool,
    model: ModelNumbers,
    gpu: &'static gpus::GpuSpec,
    gpus: u32,
    split: Split,
    arch: ModelArch,
    eager: bool,
    /// Sequences the engine runs when every request is queued at once (KV capacity).
    cap: u64,
    kv_fp8: bool,
    /// `--quantization` for the memory planner (None: the checkpoint's own).
    quant_flag: Option<String>,
    raw: Value,
}

fn load(raw: Value) -> Case {
    let id = raw["id"].as_str().unwrap_or("").to_string();
    let engine = engines::parse(raw["engine"].as_str().unwrap_or(""))
        .unwrap_or_else(|| panic!("{id}: engine"));
    let model_id = raw["model_id"].as_str().unwrap_or("");
    let mut arch = catalog::lookup(catalog_id(model_id)).unwrap_or_else(|e| panic!("{id}: {e}"));
    let kv_text = raw["kv_cache_dtype"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    // NVIDIA's ModelOpt FP8 checkpoints carry kv_cache_quant_algo FP8 (hf_quant_config.json),
    // which TensorRT-LLM follows when the benchmark does not say otherwise
    let modelopt_fp8 = model_id.starts_with("nvidia/") && model_id.ends_with("-FP8");
    let kv = if kv_text.starts_with("fp8") || (kv_text == "not stated" && modelopt_fp8) {
        Dtype::Fp8
    } else if matches!(arch.dtype, Dtype::F32) {
        Dtype::F16
    } else {
        arch.dtype
    };
    let w = weights(&raw, &arch);
    if let W::Quant(q) = &w
        && q.attention_unquantized
    {
        arch.quantization = Some(q.clone());
    }
    let model = match &w {
        W::Native => model_numbers(&arch, &Weights::Checkpoint(None), kv),
        W::Quant(q) => model_numbers(&arch, &Weights::Checkpoint(Some(q)), kv),
        W::Gguf(ft) => model_numbers(&arch, &Weights::Gguf(*ft), kv),
    };
    let gpu = gpus::lookup(gpu_name(raw["gpu_key"].as_str().unwrap_or("")))
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    let count = raw["gpu_count"].as_u64().unwrap_or(1) as u32;
    let split = if raw["tp_size"].is_null() || engines::splits_layers(engine) {
        Split::Layers
    } else {
        Split::Tensor
    };
    let eager = raw["workload"]["mode"]
        .as_str()
        .unwrap_or("")
        .contains("--enforce-eager");
    let quant_flag = match &w {
        W::Quant(q) if arch.quantization.is_none() && q.method != "mlc-q4f16_1" => {
            Some(q.method.clone())
        }
        _ => None,
    };
    let mut case = Case {
        cap: 1,
        kv_fp8: kv == Dtype::Fp8,
        quant_flag,
        eager,
        calibration: is_calibration(&id),
        id,
        engine,
        model,
        gpu,
        gpus: count,
        split,
        arch,
        raw,
    };
    let wl = &case.raw["workload"];
    let input = uint(&wl["input_tokens"]).unwrap_or(SHAREGPT_INPUT);
    let output = uint(&wl["output_tokens"]).unwrap_or(SHAREGPT_OUTPUT);
    case.cap = max_load_batch(&case, input, output);
    case
}

fn scenario<'a>(c: &'a Case, batch: u64, ctx: u64, prompt: u64) -> Scenario<'a> {
    Scenario {
        model: &c.model,
        gpu: c.gpu,
        gpus: c.gpus,
        split: c.split,
        batch,
        decode_context: ctx,
        prompt_tokens: prompt,
        eager: c.eager,
        pipeline_stages: 1,
    }
}

/// Sequences an engine keeps running when every request is queued at once: its batch cap, or
/// as many as the KV cache holds at full length — the KV capacity from the memory planner
/// (crate::plan, vLLM's accounting) at the engine's memory fraction.
fn max_load_batch(c: &Case, input: u64, output: u64) -> u64 {
    let (cap, fraction) = match c.engine {
        // vLLM 0.6 max_num_seqs 256, gpu_memory_utilization 0.9 (0.88 in the 0.6.0 run)
        Engine::Vllm => (256.0, 0.9),
        // SGLang: mem_fraction_static ~0.88; running requests bounded by the KV pool
        Engine::Sglang => (4096.0, 0.88),
        // trtllm-bench: kv_cache_free_gpu_mem_fraction 0.95
        _ => (2048.0, 0.95),
    };
    let mut req = PlanRequest::new(
        c.arch.clone(),
        c.id.clone(),
        PlanGpu {
            name: c.gpu.name.clone(),
            total_bytes: (c.gpu.torch_total_gib * (1u64 << 30) as f64) as u64,
            count: c.gpus,
        },
    );
    match c.split {
        Split::Tensor => req.tp = c.gpus,
        Split::Layers => req.pp = c.gpus,
    }
    req.gpu_memory_utilization = Some(fraction);
    req.kv_cache_dtype = Some(if c.kv_fp8 { "fp8" } else { "auto" }.into());
    req.quantization = c.quant_flag.clone();
    req.enforce_eager = c.eager;
    req.offline = true;
    // a --max-model-len the source states sizes vLLM's profiling run
    let ctx = c.raw["source_context"].as_str().unwrap_or("");
    req.max_model_len = ctx
        .split("--max-model-len ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .or(c.raw["workload"]["max_model_len"].as_u64());
    let p = plan(&req);
    let tokens = if p.fits {
        p.kv_cache_tokens as f64
    } else {
        0.0
    };
    (tokens / (input + output) as f64).clamp(1.0, cap) as u64
}

struct Pair {
    roofline: Figures,
    expected: Figures,
}

/// The figures one published case can be judged on, one block per metric kind (decode, prefill,
/// throughput, TTFT). One piece (~180 lines): each block reads the same case JSON and the same
/// scenario helpers, and splitting them would pass a dozen locals between functions.
fn figs(c: &Case, eff: &EngineEfficiency) -> Vec<Fig> {
    let r = &c.raw;
    let wl = &r["workload"];
    let m = &r["measured"];
    let kind = r["metric_kind"].as_str().unwrap_or("");
    let input = uint(&wl["input_tokens"]).unwrap_or(SHAREGPT_INPUT);
    let output = uint(&wl["output_tokens"]).unwrap_or(SHAREGPT_OUTPUT);
    let llama_bench = wl["mode"].as_str().unwrap_or("").contains("llama-bench");
    let est = |s: &Scenario<'_>| {
        let (roofline, expected) =
            estimate_figures(s, eff).unwrap_or_else(|e| panic!("{}: {e}", c.id));
        Pair { roofline, expected }
    };
    let mut out = Vec::new();
    let decode_ctx = if llama_bench {
        output / 2
    } else {
        input + output / 2
    };
    match kind {
        "single_stream_decode" | "single_stream_decode+prefill" | "single_stream_decode+ttft" => {
            let e = est(&scenario(c, 1, decode_ctx, input));
            let measured = num(&m["decode_tokens_per_s_single_stream"])
                .or_else(|| num(&m["tpot_ms"]).map(|t| 1000.0 / t));
            if let Some(d) = measured {
                out.push(Fig {
                    what: "decode tok/s/seq",
                    measured: d,
                    roofline: e.roofline.decode_tokens_per_s_per_sequence,
                    expected: e.expected.decode_tokens_per_s_per_sequence,
                    rate: true,
                    scored: true,
                });
            }
            let ttft = num(&m["ttft_ms"])
                .map(|t| t / 1000.0)
                .or_else(|| num(&m["prefill_tokens_per_s"]).map(|p| input as f64 / p));
            if let Some(t) = ttft {
                out.push(Fig {
                    what: "TTFT s",
                    measured: t,
                    roofline: e.roofline.ttft_s,
                    expected: e.expected.ttft_s,
                    rate: false,
                    scored: true,
                });
            }
        }
        "ttft" => {
            let e = est(&scenario(c, 1, input, input));
            out.push(Fig {
                what: "TTFT s",
                measured: num(&m["ttft_ms"]).unwrap_or(f64::NAN) / 1000.0,
                roofline: e.roofline.ttft_s,
                expected: e.expected.ttft_s,
                rate: false,
                scored: true,
            });
        }
        "aggregate_throughput_at_batch"
        | "aggregate_throughput_at_batch_cap"
        | "e2e_latency_static_batch"
        | "aggregate_throughput_max_load" => {
            let cap = c.cap;
            let b = match uint(&wl["batch"]) {
                Some(b) => b,
                None if kind == "aggregate_throughput_at_batch_cap" => 32,
                None => cap,
            };
            let e = est(&scenario(c, b, input + output / 2, input));
            let measured = num(&m["output_tokens_per_s_aggregate"])
                .or_else(|| num(&r["inferred"]["derived"]["output_tokens_per_s_aggregate"]))
                .unwrap_or(f64::NAN);
            // more requests than the KV cache holds run in waves (expected only: the roofline
            // assumes they all fit)
            let expected = if b > cap {
                let full = b / cap;
                let rest = b % cap;
                let t = |n: u64| -> f64 {
                    let e = est(&scenario(c, n, input + output / 2, input));
                    n as f64 * output as f64 / batch_throughput(&e.expected, n, output)
                };
                b as f64 * output as f64
                    / (full as f64 * t(cap) + if rest > 0 { t(rest) } else { 0.0 })
            } else {
                batch_throughput(&e.expected, b, output)
            };
            out.push(Fig {
                what: "output tok/s",
                measured,
                roofline: batch_throughput(&e.roofline, b, output),
                expected,
                rate: true,
                scored: true,
            });
        }
        "online_latency_at_request_rate" => {
            // Little's law: sequences in flight = rate × (TTFT + O × TPOT); decode shares the
            // GPU with the prefills arriving at that rate.
            let rate = num(&wl["request_rate"]).unwrap_or(1.0);
            let mut b = 1u64;
            let mut tpot = (0.0, 0.0);
            let mut roof_ttft = 0.0;
            // converges in a few rounds; stop when the batch repeats
            for _ in 0..30 {
                let e = est(&scenario(c, b, input + output / 2, input));
                let busy = (rate * e.expected.ttft_s).min(0.9);
                tpot = (
                    e.roofline.decode_step_s,
                    e.expected.decode_step_s / (1.0 - busy),
                );
                roof_ttft = e.roofline.ttft_s;
                let next = (rate * (e.expected.ttft_s + output as f64 * tpot.1)).round() as u64;
                if next.max(1) == b {
                    break;
                }
                b = next.max(1);
            }
            if let Some(t) = num(&m["tpot_ms"]) {
                out.push(Fig {
                    what: "TPOT-based tok/s/seq",
                    measured: 1000.0 / t,
                    roofline: 1.0 / tpot.0,
                    expected: 1.0 / tpot.1,
                    rate: true,
                    scored: true,
                });
            }
            if let Some(t) = num(&m["ttft_ms"]) {
                // includes queueing behind other requests: roofline check only
                out.push(Fig {
                    what: "TTFT s (queued)",
                    measured: t / 1000.0,
                    roofline: roof_ttft,
                    expected: f64::NAN,
                    rate: false,
                    scored: false,
                });
            }
        }
        "online_latency_at_concurrency" => {
            let b = uint(&wl["concurrency"]).unwrap_or(1);
            let e = est(&scenario(c, b, input + output / 2, input));
            if let Some(t) = num(&m["itl_ms"]) {
                out.push(Fig {
                    what: "ITL-based tok/s/seq",
                    measured: 1000.0 / t,
                    roofline: e.roofline.decode_tokens_per_s_per_sequence,
                    expected: e.expected.decode_tokens_per_s_per_sequence,
                    rate: true,
                    scored: true,
                });
            }
            if let Some(a) = num(&m["output_tokens_per_s_aggregate"]) {
                out.push(Fig {
                    what: "output tok/s",
                    measured: a,
                    roofline: batch_throughput(&e.roofline, b, output),
                    expected: batch_throughput(&e.expected, b, output),
                    rate: true,
                    scored: true,
                });
            }
            if let Some(t) = num(&m["ttft_ms"]) {
                out.push(Fig {
                    what: "TTFT s (queued)",
                    measured: t / 1000.0,
                    roofline: e.roofline.ttft_s,
                    expected: e.expected.ttft_s,
                    rate: false,
                    scored: false,
                });
            }
        }
        other => panic!("{}: unknown metric_kind {other}", c.id),
    }
    let _ = &c.arch;
    out.retain(|f| f.measured.is_finite() && f.measured > 0.0);
    out
}

type P = (f64, f64, f64, f64);

fn eff(engine: Engine, p: P) -> EngineEfficiency {
    EngineEfficiency {
        engine,
        memory_bandwidth: p.0,
        compute: p.1,
        per_kernel_s: p.2,
        per_sequence_step_s: p.3,
        basis: String::from("fit"),
    }
}

fn same(a: P, b: P) -> bool {
    (a.0 - b.0).abs() < 0.005
        && (a.1 - b.1).abs() < 0.005
        && (a.2 - b.2).abs() < 0.05e-6
        && (a.3 - b.3).abs() < 0.5e-6
}

#[test]
fn speed_truth_over_every_published_case() {
    let all: Vec<Case> = cases().into_iter().map(load).collect();
    assert!(all.len() >= 30, "{} cases", all.len());

    // ---- fit on the calibration half ----
    let calib: Vec<&Case> = all.iter().filter(|c| c.calibration).collect();
    let pairs_for = |set: &[&Case], p: P| -> Vec<(f64, f64)> {
        set.iter()
            .flat_map(|c| figs(c, &eff(c.engine, p)))
            .filter(|f| f.scored)
            .map(|f| (f.expected, f.measured))
            .collect()
    };
    let global = fit_efficiency(&|p| pairs_for(&calib, p), (0.7, 0.5, 0.0, 0.0));
    println!(
        "all-engine fit on the calibration half: memory {:.2}, compute {:.2}, {:.2} µs per kernel, {:.2} µs per sequence per step",
        global.0,
        global.1,
        global.2 * 1e6,
        global.3 * 1e6
    );
    let mut drift = Vec::new();
    if !same(global, all_engine_fit()) {
        drift.push(format!(
            "ALL_FIT {:?} is not the calibration fit {global:?}",
            all_engine_fit()
        ));
    }
    for engine in engines::modelled() {
        let mine: Vec<&Case> = calib
            .iter()
            .copied()
            .filter(|c| c.engine == engine)
            .collect();
        let fit = if mine.is_empty() {
            global
        } else {
            fit_efficiency(&|p| pairs_for(&mine, p), global)
        };
        let shipped = engines::efficiency(engine).unwrap();
        println!(
            "{:<10} calibration cases {:>2}: fit ({:.2}, {:.2}, {:.2e}, {:.2e}); shipped ({:.2}, {:.2}, {:.2e}, {:.2e}) ({})",
            engine.cli_id(),
            mine.len(),
            fit.0,
            fit.1,
            fit.2,
            fit.3,
            shipped.memory_bandwidth,
            shipped.compute,
            shipped.per_kernel_s,
            shipped.per_sequence_step_s,
            shipped.basis
        );
        if !same(
            fit,
            (
                shipped.memory_bandwidth,
                shipped.compute,
                shipped.per_kernel_s,
                shipped.per_sequence_step_s,
            ),
        ) {
            drift.push(format!(
                "{}: shipped efficiency is not the calibration fit",
                engine.cli_id()
            ));
        }
    }

    // ---- every case: roofline, expected, measured ----
    println!(
        "\n{:<72} {:<5} {:<20} {:>10} {:>10} {:>10} {:>7}",
        "case", "half", "figure", "roofline", "expected", "measured", "error"
    );
    let mut beaten = Vec::new();
    let mut check_errors = Vec::new();
    let mut per_engine: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for c in &all {
        let e = engines::efficiency(c.engine).unwrap();
        for f in figs(c, &e) {
            println!(
                "{:<72} {:<5} {:<20} {:>10.4} {:>10.4} {:>10.4} {:>6.1}%",
                c.id,
                if c.calibration { "calib" } else { "check" },
                f.what,
                f.roofline,
                f.expected,
                f.measured,
                if f.scored {
                    f.error() * 100.0
                } else {
                    f64::NAN
                }
            );
            if f.beats_roofline() {
                beaten.push(format!(
                    "{} {}: measured {} vs roofline {}",
                    c.id, f.what, f.measured, f.roofline
                ));
            }
            if !c.calibration && f.scored {
                check_errors.push(f.error());
                per_engine
                    .entry(c.engine.cli_id())
                    .or_default()
                    .push(f.error());
            }
        }
    }
    let med = median(check_errors.clone());
    let worst = check_errors.iter().copied().fold(0.0, f64::max);
    println!(
        "\ncheck half: {} figures, median error {:.1} %, worst {:.1} %",
        check_errors.len(),
        med * 100.0,
        worst * 100.0
    );
    for (e, v) in &per_engine {
        println!(
            "  {e:<10} {} figures, median {:.1} %, worst {:.1} %",
            v.len(),
            median(v.clone()) * 100.0,
            v.iter().copied().fold(0.0, f64::max) * 100.0
        );
    }
    assert!(
        drift.is_empty(),
        "engines.rs drifted from the fit:\n{}",
        drift.join("\n")
    );
    assert!(
        beaten.is_empty(),
        "measured faster than the roofline:\n{}",
        beaten.join("\n")
    );
    assert!(check_errors.len() >= 10, "too few check figures");
    assert!(
        med <= 0.25,
        "check-half median error {:.1} % > 25 %",
        med * 100.0
    );
    assert!(
        worst <= 0.60,
        "check-half worst error {:.1} % > 60 %",
        worst * 100.0
    );
}

#[test]
fn split_is_stable_and_two_sided() {
    let all = cases();
    let calib = all
        .iter()
        .filter(|c| is_calibration(c["id"].as_str().unwrap_or("")))
        .count();
    assert!(
        calib > 5 && calib < all.len() - 5,
        "{calib} of {}",
        all.len()
    );
    // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (reference value of the FNV spec).
    assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
}
