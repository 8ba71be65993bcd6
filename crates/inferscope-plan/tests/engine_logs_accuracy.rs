//! SGLang and TGI start-ups (`fixtures/tools/engine-logs/`) through their own accounting.
//!
//! `cargo test -p inferscope-plan --test engine_logs_accuracy -- --nocapture` prints, per case,
//! ours vs the log. Targets (issue 15): SGLang `max_total_num_tokens` within 3 %, TGI tokens
//! within 5 %. No constant here is fitted: SGLang's sizing is pure arithmetic over the measured
//! free memory, our weights and our KV cell size; TGI's needs the warm-up peak, which is the
//! planner's derived activation term with the vLLM non-torch constants (fitted on vLLM's
//! calibration half, never on these rows).

use inferscope_plan::arch::Quantization;
use inferscope_plan::catalog;
use inferscope_plan::engines::{sglang::kv as sglang, tgi::kv as tgi};
use inferscope_plan::memory::{self, GIB, Shard, kv_layout, weights_per_gpu};
use serde_json::Value;

fn cases(file: &str) -> Vec<Value> {
    let path = format!(
        "{}/../../fixtures/tools/engine-logs/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .expect("engine-logs fixture")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("case JSON"))
        .collect()
}

/// `"21.63 GB"` (SGLang's GB are GiB: `get_available_gpu_memory` divides by 2^30).
fn gib(v: &Value) -> Option<f64> {
    v.as_str()?.split_whitespace().next()?.parse().ok()
}

fn pct(ours: f64, theirs: f64) -> f64 {
    (ours - theirs) / theirs * 100.0
}

/// Per-GPU weights and KV bytes per token of a catalog model under TP.
fn shape(model: &str, tp: u32) -> (inferscope_plan::ModelArch, u64, u64) {
    let arch = catalog::lookup(model).unwrap_or_else(|e| panic!("{model}: {e}"));
    let q: Option<&Quantization> = arch.quantization.as_ref();
    let shard = Shard {
        tp,
        pp: 1,
        stage: 0,
        expert_parallel: false,
    };
    let w = weights_per_gpu(&arch, q, shard).total();
    let kv = kv_layout(&arch, 0..arch.num_layers as usize, tp, arch.dtype, 16).bytes_per_token;
    (arch, w, kv)
}

/// SGLang cases whose free memory at start is in the log (or derivable from it), with the
/// release the log's format pins and the GPU's `nvidia-smi` total (MiB).
/// (id, version, gpu_mem_mib, free_at_start GiB override and why)
/// (id, release, nvidia-smi MiB, free-at-start override in GiB and why)
type SglangCase = (&'static str, &'static str, f64, Option<(f64, &'static str)>);

const SGLANG: &[SglangCase] = &[
    ("sgl-didier-qwq32b-4xl4-tp4", "0.4.3.post4", 23034.0, None),
    // free at start not printed: end-of-load free 13.91 + weights 1.25 (both printed)
    (
        "sgl-mineru-qwen3-0.6b-rtx5080",
        "0.4.9",
        16303.0,
        Some((15.16, "load end 13.91 + weights 1.25 GiB")),
    ),
    (
        "sgl-willxxy-qwen25-05b-h100nvl-nocudagraph",
        "0.5.10.post1",
        95830.0,
        None,
    ),
    // same host and model, the next day: free at start taken from the sibling run (36.54)
    (
        "sgl-willxxy-qwen25-05b-h100nvl-defaults",
        "0.5.10.post1",
        95830.0,
        Some((36.54, "sibling run's Load weight begin")),
    ),
    (
        "sgl-lhl-mi300x-llama3-8b-benchlatency",
        "0.3.3",
        196592.0,
        None,
    ),
];

#[test]
fn sglang_max_total_num_tokens() {
    let all = cases("sglang.jsonl");
    let mut worst: f64 = 0.0;
    let mut worst_full: f64 = 0.0;
    println!(
        "{:<46} {:>8} {:>6} {:>10} {:>10} {:>7} | {:>6} {:>6} {:>10} {:>7}",
        "case",
        "release",
        "frac",
        "tok ours",
        "tok log",
        "err%",
        "w log",
        "w ours",
        "tok(ours w)",
        "err%"
    );
    for (id, version, gpu_mem, free_override) in SGLANG {
        let c = all
            .iter()
            .find(|c| c["id"] == *id)
            .unwrap_or_else(|| panic!("{id} not in sglang.jsonl"));
        let m = &c["measured"];
        let s = &c["settings"];
        let tp = c["tp_size"].as_u64().unwrap_or(1) as u32;
        let (arch, formula, cell) = shape(c["model_id"].as_str().unwrap(), tp);
        // SGLang's loading takes more than the tensors: fp32 RoPE cache and allocator rounding
        let shard = Shard {
            tp,
            pp: 1,
            stage: 0,
            expert_parallel: false,
        };
        let (extra, _) =
            sglang::load_extra(&arch, arch.quantization.as_ref(), shard, Some(version));
        let weights = formula + extra;
        let free = free_override
            .map(|(g, _)| g)
            .or_else(|| gib(&m["load_weight_begin_avail_mem"]))
            .expect("free memory at start");
        // the weights SGLang measured (free before − after loading), where printed; the
        // sibling run's for the run that printed only its last line
        let measured_w = match (
            gib(&m["load_weight_begin_avail_mem"]),
            gib(&m["load_weight_end_avail_mem"]),
        ) {
            (Some(b), Some(e)) => b - e,
            _ => gib(&m["weights_mem_usage"]).unwrap_or(0.98),
        };
        let run = |w: u64| {
            sglang::kv(&sglang::SglangInputs {
                version: Some(version),
                gpu_mem_mib: *gpu_mem,
                free_at_start: (free * GIB) as u64,
                weights: w,
                cell_size: cell,
                tp,
                pp: 1,
                mem_fraction_static: s["mem_fraction_static"].as_f64(),
                chunked_prefill_size: s["chunked_prefill_size"].as_u64(),
                cuda_graph_max_bs: s["cuda_graph_max_bs"].as_u64(),
                disable_piecewise_cuda_graph: s["disable_piecewise_cuda_graph"]
                    .as_bool()
                    .unwrap_or(false),
                mla: arch.mla.is_some(),
                dsa: arch.nsa_index_head_dim.is_some(),
                nemotron_h: arch.model_type == "nemotron_h",
                disable_cuda_graph: s["disable_cuda_graph"].as_bool().unwrap_or(false),
                max_running_requests: s["max_running_requests"].as_u64(),
                speculative: s["speculative_algorithm"].as_str(),
                multimodal: arch.vision_params > 0,
            })
        };
        let r = run((measured_w * GIB) as u64);
        let full = run(weights);
        let theirs = m["max_total_num_tokens"]
            .as_u64()
            .expect("max_total_num_tokens") as f64;
        let e = pct(r.tokens as f64, theirs);
        let ef = pct(full.tokens as f64, theirs);
        worst = worst.max(e.abs());
        worst_full = worst_full.max(ef.abs());
        println!(
            "{id:<46} {version:>8} {:>6.3} {:>10} {:>10} {e:>+7.2} | {:>6.2} {:>6.2} {:>10} {ef:>+7.2}",
            r.mem_fraction_static,
            r.tokens,
            theirs,
            measured_w,
            weights as f64 / GIB,
            full.tokens
        );
        assert!(
            r.info.rules.iter().all(|x| !x.source.is_empty()),
            "every rule cites its source"
        );
        assert!(e.abs() <= 3.0, "{id}: SGLang tokens off by {e:.2}%");
        assert!(
            ef.abs() <= 3.0,
            "{id}: with our weights, tokens off by {ef:.2}%"
        );
    }
    println!(
        "SGLang: worst |err| {worst:.2}% with SGLang's measured weights; {worst_full:.2}% with the planner's weights"
    );
}

/// A failed SGLang start-up stays a failure: DeepSeek V4 Pro's weights (125.65 GiB printed)
/// exceed 0.88 of the ~137.9 GiB free, so the KV budget is negative.
#[test]
fn sglang_negative_budget_fails() {
    let r = sglang::kv(&sglang::SglangInputs {
        version: None,
        gpu_mem_mib: 143771.0,
        free_at_start: (137.9 * GIB) as u64,
        weights: (125.65 * GIB) as u64,
        cell_size: 70272,
        tp: 8,
        pp: 1,
        mem_fraction_static: Some(0.88),
        mla: true,
        ..sglang::SglangInputs::default()
    });
    assert!(r.rest < 0 && r.tokens == 0, "{r:?}");
}

/// TGI cases: (id, version, torch total GiB of the GPU, max_batch_prefill_tokens, and why the
/// log cannot be held to 5 % when it cannot). Only the start-up with its whole command is
/// asserted; the other two lack settings TGI's sizing depends on, and their figures are printed
/// with the reason (the versions are pinned from the logs themselves).
type TgiCase = (
    &'static str,
    &'static str,
    f64,
    Option<u64>,
    Option<&'static str>,
);

const TGI: &[TgiCase] = &[
    (
        "tgi-gemma3-27b-it-2xa6000-flashinfer",
        "3.3.0",
        47.54,
        Some(8000),
        None,
    ),
    // v1.0.0 server/text_generation_server/models/flash_causal_lm.py warmup: no wiggle room,
    // CUDA_MEMORY_FRACTION from the environment (utils/dist.py, default 1.0)
    (
        "tgi-i832-llama2-70b-4xa100-80gb-tgi1.0",
        "1.0.0",
        79.15,
        None,
        Some(
            "the issue pastes one line, no `Args { .. }`: with TGI 1.0's defaults (CUDA_MEMORY_FRACTION 1.0, \
             --max-batch-prefill-tokens 4096) the shard has ~13 GiB more KV than logged; a memory fraction, \
             a larger prefill or another process would explain it and the log shows none of them",
        ),
    ),
    // router/src/main.rs:289/317/354 (Using config / Warming up / Setting max batch total
    // tokens) are the line numbers of v2.0.2–v2.0.4 exactly
    (
        "tgi-hyperpod-mistral7b-instruct-g5.8xlarge",
        "2.0.4",
        22.2,
        None,
        Some(
            "a SageMaker JumpStart container sets MAX_INPUT_LENGTH / MAX_TOTAL_TOKENS / \
             MAX_BATCH_PREFILL_TOKENS in its environment and the six logged lines print none of them; \
             the launcher's own default (prefill 4145 for max_position_embeddings 32768) gives ~1.9 GiB \
             more KV than logged",
        ),
    ),
];

#[test]
fn tgi_total_tokens() {
    let all = cases("tgi.jsonl");
    let mut worst: f64 = 0.0;
    for (id, version, total_gib, prefill, missing) in TGI {
        let c = all
            .iter()
            .find(|c| c["id"] == *id)
            .unwrap_or_else(|| panic!("{id} not in tgi.jsonl"));
        let m = &c["measured"];
        let tp = c["tp_size"].as_u64().unwrap_or(1) as u32;
        // chat and base Llama 2 share the architecture (the case's `inferred.model_id`)
        let model = c["model_id"].as_str().unwrap().replace("-chat-hf", "-hf");
        let (arch, weights, per_token) = shape(&model, tp);
        // the launcher's default where the log does not print it
        let prefill = prefill.unwrap_or_else(|| {
            tgi::default_prefill_tokens(
                Some(version),
                &arch.model_type,
                arch.vision_params > 0,
                arch.max_position_embeddings,
            )
            .0
        });
        let act = tgi::warmup_activation(&arch, prefill, tp);
        let r = tgi::kv(&tgi::TgiInputs {
            version: Some(version),
            total: (total_gib * GIB) as u64,
            weights,
            non_torch: memory::non_torch_bytes(tp, 1, true, None),
            warmup_activation: act,
            bytes_per_token: per_token,
            prefill_tokens: prefill,
            cuda_memory_fraction: c["settings"]["cuda_memory_fraction"].as_f64(),
            block_size: m["kv_block_size"].as_u64().map(|b| b as u32),
        });
        // KV-cache blocks × block size when printed, else max_batch_total_tokens
        let theirs = match (m["kv_cache_blocks"].as_u64(), m["kv_block_size"].as_u64()) {
            (Some(b), Some(s)) => b * s,
            _ => m["max_batch_total_tokens"].as_u64().expect("token count"),
        } as f64;
        let e = pct(r.tokens as f64, theirs);
        println!(
            "{id:<46} {version:>6} kv {:>6.2} GiB tokens ours {:>8} log {:>8} {e:>+7.2}%",
            r.kv as f64 / GIB,
            r.tokens,
            theirs
        );
        match missing {
            None => {
                worst = worst.max(e.abs());
                assert!(e.abs() <= 5.0, "{id}: TGI tokens off by {e:.2}%");
            }
            Some(why) => println!(
                "  not asserted ({:+.2} GiB of KV vs the log): {why}",
                (r.tokens as f64 - theirs) * per_token as f64 / GIB
            ),
        }
    }
    println!("TGI (cases with their launch command): worst |err| {worst:.2}%");
}

/// Recent vLLM start-ups (0.11–0.28, `vllm-recent.jsonl`): never used for fitting. These check
/// the post-0.19 rules (0.92 default utilization and the CUDA-graph estimate in the budget from
/// 0.20). (id, model as in the catalog, torch total GiB, tp, pp, util, max_len, batched tokens,
/// log KV GiB, tolerance GiB and why)
type RecentCase = (
    &'static str,
    &'static str,
    f64,
    u32,
    u32,
    Option<f64>,
    Option<u64>,
    Option<u64>,
    f64,
    f64,
);

const RECENT: &[RecentCase] = &[
    // L40S 46068 MiB: torch-visible 44.4 GiB (catalog)
    (
        "vllm-capstone-qwen3-14b-bf16-l40s-v0.28.0",
        "Qwen/Qwen3-14B",
        44.4,
        1,
        1,
        None,
        None,
        None,
        11.57,
        0.6,
    ),
    // the author measured 9.10 or 10.33 GiB on the same host by launch order: ±1.2 GiB
    (
        "vllm-capstone-qwen3-14b-awq-1xl4-v0.28.0",
        "Qwen/Qwen3-14B-AWQ",
        21.95,
        1,
        1,
        None,
        None,
        None,
        9.10,
        1.2,
    ),
    (
        "vllm-capstone-qwen3-14b-awq-2xl4-pp2-v0.28.0",
        "Qwen/Qwen3-14B-AWQ",
        21.95,
        1,
        2,
        None,
        None,
        None,
        14.04,
        1.2,
    ),
    // a failed start-up: the plan must fail too; its KV figure is reported (ours is 0, 1.7 GiB
    // low, with 0.11's sorted-logits sampler over 1024 × 201,088 logits, 7.3 GiB; with the
    // no-sort constant it was 1.8 GiB high. The weights are the open question: ours 68.60 GiB,
    // 0.14.1 logs 64.38 for the same checkpoint)
    (
        "vllm-i27508-gpt-oss-120b-h100-gmu095-v0.11-fail",
        "openai/gpt-oss-120b",
        79.19,
        1,
        1,
        Some(0.95),
        None,
        Some(1024),
        1.71,
        f64::INFINITY,
    ),
];

#[test]
fn vllm_recent_startups() {
    use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
    let all = cases("vllm-recent.jsonl");
    for (id, model, total, tp, pp, util, max_len, batched, theirs, tol) in RECENT {
        let c = all
            .iter()
            .find(|c| c["id"] == *id)
            .unwrap_or_else(|| panic!("{id}"));
        let arch = catalog::lookup(model).unwrap_or_else(|e| panic!("{model}: {e}"));
        let mut req = PlanRequest::new(
            arch,
            *model,
            GpuSpec {
                name: c["gpu_model"].as_str().unwrap().into(),
                total_bytes: (total * GIB) as u64,
                count: tp * pp,
            },
        );
        req.tp = *tp;
        req.pp = *pp;
        req.gpu_memory_utilization = *util;
        req.max_model_len = *max_len;
        req.max_num_batched_tokens = *batched;
        req.engine_version = c["engine_version"].as_str().map(str::to_string);
        let p = plan(&req);
        let ours = p.per_gpu.kv_cache_gib;
        println!(
            "{id:<50} rules {} KV ours {ours:>6.2} log {theirs:>6.2} GiB ({:+.2} GiB); weights {:.2} act {:.2} non-torch {:.2} graphs {:.2}",
            p.engine.version,
            ours - theirs,
            p.per_gpu.weights_gib,
            p.per_gpu.activation_gib,
            p.per_gpu.non_torch_gib,
            p.per_gpu.cuda_graph_gib
        );
        assert!(
            (ours - theirs).abs() <= *tol,
            "{id}: KV {ours:.2} vs {theirs:.2} GiB"
        );
        let failed = c["startup_outcome"]
            .as_str()
            .is_some_and(|o| o.starts_with("failed"));
        assert_eq!(
            p.fits, !failed,
            "{id}: fits {} but the start-up {}",
            p.fits, c["startup_outcome"]
        );
    }
}

/// DeepSeek V3.2's sparse-attention indexer (NSA/DSA) in SGLang's KV budget. The PR #11309 row
/// (`sgl-pr11309-dsv32exp-8xb200-main-memfrac0.8`) prints the pool of the pre-PR code, latent
/// only (54.52 GiB for 1,462,784 tokens), and its author states 65.49 GiB with the index: the
/// difference is the indexer's bytes per token and layer, which must be what 0.5.10 budgets
/// (`index_head_dim + index_head_dim/128 × 4`). The row prints neither free memory nor weights,
/// so its token count cannot be checked.
#[test]
fn sglang_nsa_indexer_bytes_match_the_pr_run() {
    let all = cases("sglang.jsonl");
    let c = all
        .iter()
        .find(|c| c["id"] == "sgl-pr11309-dsv32exp-8xb200-main-memfrac0.8")
        .expect("row");
    let m = &c["measured"];
    let tokens = m["kv_tokens"].as_f64().unwrap();
    let latent = gib(&m["kv_size"]).unwrap();
    let with_index: f64 = m["author_statement"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap();
    let per_layer_index = (with_index - latent) * GIB / tokens / 61.0;
    let mla = inferscope_plan::arch::Mla {
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
        qk_nope_head_dim: 128,
        v_head_dim: 128,
        q_lora_rank: Some(1536),
    };
    let ours = sglang::nsa_cell_size(&mla, 61, 128, 1) - 61 * 576;
    println!(
        "indexer bytes per token and layer: log {per_layer_index:.2}, ours {}",
        ours / 61
    );
    assert!((per_layer_index - (ours / 61) as f64).abs() < 0.5);
    // the default KV dtype: fp8 on Blackwell (compute capability 10), bf16 before
    assert_eq!(sglang::nsa_default_kv_bytes(Some(10)), 1);
    assert_eq!(sglang::nsa_default_kv_bytes(Some(9)), 2);
    assert_eq!(sglang::nsa_default_kv_bytes(None), 2);

    // through the planner: V3's shape with V3.2's config keys (architectures, index_topk,
    // index_head_dim), on 8 × B200 with SGLang 0.5.10
    use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
    let v3 = include_str!("../data/models/deepseek-ai__DeepSeek-V3.json");
    let mut cfg: Value = serde_json::from_str(v3).unwrap();
    cfg["architectures"] = serde_json::json!(["DeepseekV32ForCausalLM"]);
    cfg["index_topk"] = 2048.into();
    cfg["index_head_dim"] = 128.into();
    let arch = inferscope_plan::from_hf_config(&cfg.to_string()).unwrap();
    assert_eq!(arch.nsa_index_head_dim, Some(128));
    let mut req = PlanRequest::new(
        arch,
        "deepseek-ai/DeepSeek-V3.2-Exp",
        GpuSpec {
            name: "B200".into(),
            total_bytes: (178.0 * GIB) as u64,
            count: 8,
        },
    );
    req.engine = inferscope_plan::engine::Engine::Sglang;
    req.tp = 8;
    req.engine_version = Some("0.5.10.post1".into());
    req.compute_capability = Some((10, 0));
    let p = plan(&req);
    assert_eq!(p.kv_bytes_per_token, 61 * (576 + 132));
    let rules = p.engine_rules.unwrap();
    assert!(
        rules.rules.iter().any(|r| r.rule == "nsa_indexer"),
        "{rules:?}"
    );
    // without index_topk it is plain V3 (no indexer)
    cfg.as_object_mut().unwrap().remove("index_topk");
    let arch = inferscope_plan::from_hf_config(&cfg.to_string()).unwrap();
    assert_eq!(arch.nsa_index_head_dim, None);
}
