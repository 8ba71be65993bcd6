//! Unit behaviour of the planner: KV bytes per token by attention kind, bad config.json inputs
//! (`fixtures/bad/plan/EXPECTED.md`), version parsing, suggestions, JSON contract, no panics.

use inferscope_plan::arch::{AttentionKind, Dtype, from_hf_config};
use inferscope_plan::catalog;
use inferscope_plan::memory::{self, EngineVersion, GIB, Shard};
use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
use inferscope_plan::suggest::{ChangeKind, suggest};

fn h100(count: u32) -> GpuSpec {
    GpuSpec {
        name: "H100 80GB HBM3".into(),
        total_bytes: (79.19 * GIB) as u64,
        count,
    }
}

fn kv_per_token(id: &str, tp: u32, kv: Dtype) -> u64 {
    let a = catalog::lookup(id).unwrap();
    a.layers
        .iter()
        .map(|l| memory::kv_bytes_per_token_layer(&a, l, tp, kv))
        .sum()
}

#[test]
fn kv_bytes_llama3_8b_gqa_is_128_kib() {
    // 32 layers × 2 (K,V) × 8 KV heads × 128 × 2 bytes
    assert_eq!(
        kv_per_token("meta-llama/Meta-Llama-3-8B", 1, Dtype::Bf16),
        128 * 1024
    );
    assert_eq!(
        kv_per_token("meta-llama/Meta-Llama-3-8B", 1, Dtype::Fp8),
        64 * 1024
    );
    // TP 2 splits the KV heads
    assert_eq!(
        kv_per_token("meta-llama/Meta-Llama-3-8B", 2, Dtype::Bf16),
        64 * 1024
    );
    // TP 16 > 8 KV heads: each rank keeps one replicated head
    assert_eq!(
        kv_per_token("meta-llama/Meta-Llama-3-8B", 16, Dtype::Bf16),
        32 * 2 * 128 * 2
    );
}

#[test]
fn kv_bytes_deepseek_v3_mla_replicated() {
    let expect = 576 * 61 * 2;
    assert_eq!(
        kv_per_token("deepseek-ai/DeepSeek-V3", 1, Dtype::Bf16),
        expect
    );
    // the latent is replicated: TP does not shrink it
    assert_eq!(
        kv_per_token("deepseek-ai/DeepSeek-V3", 8, Dtype::Bf16),
        expect
    );
    let p = plan(&{
        let mut r = PlanRequest::new(
            catalog::lookup("deepseek-ai/DeepSeek-V3").unwrap(),
            "v3",
            h100(8),
        );
        r.tp = 8;
        r
    });
    assert_eq!(p.kv_bytes_per_token, expect);
}

#[test]
fn gemma2_alternates_sliding_and_full() {
    let a = catalog::lookup("google/gemma-2-9b-it").unwrap();
    assert_eq!(a.layers.len(), 42);
    assert_eq!(a.layers[0].kind, AttentionKind::Sliding(4096));
    assert_eq!(a.layers[1].kind, AttentionKind::Full);
    assert_eq!(
        a.layers
            .iter()
            .filter(|l| l.kind == AttentionKind::Full)
            .count(),
        21
    );
    // 42 layers × 2 × 8 × 256 × 2 bytes per token of pool
    assert_eq!(
        kv_per_token("google/gemma-2-9b-it", 1, Dtype::Bf16),
        42 * 2 * 8 * 256 * 2
    );
    // V1 lays it out in two groups; a 4096-window layer needs only window + batch tokens
    let layout = memory::kv_layout(&a, 0..42, 1, Dtype::Bf16, 16);
    assert_eq!(layout.num_groups(), 2);
    assert_eq!(layout.group_size, 21);
    let per_req = layout.blocks_per_request(32_768, 16, 2048);
    assert_eq!(per_req, 2048 + (4095 + 2048_u64).div_ceil(16) + 1);
}

#[test]
fn gemma3_and_llama4_patterns() {
    let g = catalog::lookup("google/gemma-3-27b-it").unwrap();
    assert_eq!(g.vocab_size, 262_208);
    assert_eq!(
        g.layers
            .iter()
            .filter(|l| l.kind == AttentionKind::Full)
            .count(),
        10
    );
    assert_eq!(
        memory::kv_layout(&g, 0..62, 1, Dtype::Bf16, 16).num_groups(),
        7
    );
    let s = catalog::lookup("meta-llama/Llama-4-Scout-17B-16E-Instruct").unwrap();
    assert_eq!(
        s.layers
            .iter()
            .filter(|l| l.kind == AttentionKind::ChunkedLocal(8192))
            .count(),
        36
    );
    assert!(s.moe.as_ref().unwrap().moe_layers.iter().all(|m| *m));
    let m = catalog::lookup("meta-llama/Llama-4-Maverick-17B-128E-Instruct").unwrap();
    assert_eq!(
        m.moe
            .as_ref()
            .unwrap()
            .moe_layers
            .iter()
            .filter(|m| **m)
            .count(),
        24
    );
}

#[test]
fn deepseek_moe_and_gpt_oss_facts() {
    let d = catalog::lookup("deepseek-ai/DeepSeek-R1").unwrap();
    let moe = d.moe.as_ref().unwrap();
    assert_eq!(moe.experts, 256);
    assert_eq!(moe.moe_layers.iter().filter(|m| !**m).count(), 3);
    assert_eq!(d.quantization.as_ref().unwrap().method, "fp8");
    let o = catalog::lookup("openai/gpt-oss-120b").unwrap();
    assert_eq!(o.quantization.as_ref().unwrap().method, "mxfp4");
    assert!(o.quantization.as_ref().unwrap().attention_unquantized);
    assert_eq!(
        o.layers
            .iter()
            .filter(|l| l.kind == AttentionKind::Sliding(128))
            .count(),
        18
    );
    let n = catalog::lookup("nvidia/Gemma-4-31B-IT-NVFP4").unwrap();
    let q = n.quantization.as_ref().unwrap();
    assert_eq!(
        (q.method.as_str(), q.bits, q.group_size),
        ("modelopt", 4, 16)
    );
    assert!(q.attention_unquantized && q.kv_cache_fp8);
}

#[test]
fn bad_configs_match_expected() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/bad/plan");
    let expected = std::fs::read_to_string(format!("{dir}/EXPECTED.md")).unwrap();
    let mut rows = Vec::new();
    for line in expected.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let file = cells[1].trim_matches('`');
        let msg = cells[2].trim_matches('`');
        rows.push((file.to_string(), msg.to_string()));
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = rows.iter().map(|(f, _)| f.clone()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "EXPECTED.md must list exactly the .json files"
    );
    for (file, msg) in rows {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        let err = from_hf_config(&text).expect_err(&file);
        assert_eq!(err.to_string(), msg, "{file}");
    }
}

#[test]
fn oversized_config_rejected_before_parsing() {
    let big = " ".repeat(inferscope_plan::arch::MAX_CONFIG_BYTES + 1);
    let e = from_hf_config(&big).unwrap_err();
    assert!(
        e.to_string().contains("larger than the 8388608-byte limit"),
        "{e}"
    );
}

#[test]
fn no_panic_on_mangled_configs() {
    // every catalog config cut at many points, and with numbers replaced by extremes
    for (id, json) in catalog::MODELS.iter().take(20) {
        for cut in (0..json.len()).step_by(97) {
            let _ = from_hf_config(&json[..cut]);
        }
        for repl in [
            "0",
            "4294967295",
            "18446744073709551615",
            "-3",
            "1.5",
            "null",
            "\"x\"",
            "[]",
        ] {
            let mangled = json.replace("128", repl).replace("32", repl);
            if let Ok(a) = from_hf_config(&mangled) {
                let _ = plan(&PlanRequest::new(a, *id, h100(8)));
            }
        }
    }
}

#[test]
fn every_catalog_model_plans_without_panic() {
    for id in catalog::ids() {
        let a = catalog::lookup(id).unwrap();
        for (tp, pp) in [(1, 1), (2, 1), (8, 1), (4, 2)] {
            let mut r = PlanRequest::new(a.clone(), id, h100(8));
            r.tp = tp;
            r.pp = pp;
            r.max_model_len = Some(8192);
            let p = plan(&r);
            assert!(p.per_gpu.weights_gib >= 0.0, "{id}");
            assert!(!p.assumptions.is_empty());
        }
        // degenerate requests
        let mut r = PlanRequest::new(
            a,
            id,
            GpuSpec {
                name: "x".into(),
                total_bytes: u64::MAX,
                count: 0,
            },
        );
        r.tp = u32::MAX;
        r.pp = u32::MAX;
        r.block_size = Some(u32::MAX);
        r.gpu_memory_utilization = Some(f64::NAN);
        r.max_model_len = Some(u64::MAX);
        r.max_num_batched_tokens = Some(u64::MAX);
        r.max_num_seqs = Some(u32::MAX);
        let _ = plan(&r);
        let _ = suggest(&r, &[]);
    }
}

#[test]
fn weights_bytes_and_params_are_plausible() {
    let p = |id: &str| memory::parameter_count(&catalog::lookup(id).unwrap()) as f64 / 1e9;
    assert!((p("meta-llama/Llama-3.1-8B-Instruct") - 8.03).abs() < 0.05);
    assert!((p("meta-llama/Llama-3.1-70B-Instruct") - 70.6).abs() < 0.3);
    assert!((p("Qwen/Qwen2.5-72B-Instruct") - 72.7).abs() < 0.3);
    assert!((p("deepseek-ai/DeepSeek-V3") - 671.0).abs() < 10.0);
    assert!((p("openai/gpt-oss-120b") - 117.0).abs() < 3.0);
    let full = memory::weights_per_gpu(
        &catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap(),
        None,
        Shard::SINGLE,
    );
    assert_eq!(full.embedding, 128_256 * 4096 * 2);
}

#[test]
fn engine_versions() {
    let v = |s: &str| EngineVersion::parse(s).unwrap();
    assert_eq!(v("0.6.4").to_string(), "0.6.4");
    assert_eq!(v("v0.11.0").minor, 11);
    assert_eq!(v("0.8.5.post1").patch, 5);
    assert_eq!(
        v("main@73c8d677 (between v0.4.1 and v0.4.2)").to_string(),
        "0.4.1"
    );
    assert_eq!(v("main@abc"), EngineVersion::LATEST);
    assert!(!v("0.7.3").v1_default());
    assert!(v("0.8.0").v1_default());
    assert!(EngineVersion::parse("banana").is_none());
}

#[test]
fn v0_profiles_whole_context() {
    let a = catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap();
    let mut r = PlanRequest::new(a, "l", h100(1));
    r.engine_version = Some("0.6.4".into());
    r.max_model_len = Some(4096);
    let short = plan(&r);
    r.max_model_len = Some(32768);
    let long = plan(&r);
    assert!(!short.engine.v1);
    assert!(long.per_gpu.activation_gib > short.per_gpu.activation_gib);
    assert!(long.per_gpu.kv_cache_gib < short.per_gpu.kv_cache_gib);
}

#[test]
fn json_is_a_superset_of_plan_facts() {
    let mut r = PlanRequest::new(
        catalog::lookup("Qwen/Qwen2.5-7B-Instruct").unwrap(),
        "q",
        h100(1),
    );
    r.concurrency = Some(64);
    let p = plan(&r);
    let json = serde_json::to_value(&p).unwrap();
    for key in [
        "fits",
        "kv_cache_tokens",
        "max_concurrency",
        "concurrency",
        "max_model_len",
        "tensor_parallel_size",
        "weights_bytes_total",
        "gpus",
        "numa_nodes",
        "assumptions",
        "kv_bytes_per_token",
        "blocks",
        "engine",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for key in [
        "total_gib",
        "weights_gib",
        "non_torch_gib",
        "activation_gib",
        "cuda_graph_gib",
        "kv_cache_gib",
        "free_after_kv_gib",
    ] {
        assert!(json["per_gpu"].get(key).is_some(), "missing per_gpu.{key}");
    }
    let facts: inferscope_host::facts::PlanFacts = serde_json::from_value(json).unwrap();
    assert!(facts.fits);
    assert_eq!(facts.concurrency, Some(64));
    assert_eq!(facts.per_gpu.kv_cache_gib, p.per_gpu.kv_cache_gib);
}

#[test]
fn suggestions_when_too_small() {
    // Qwen2.5-72B in bf16 on one H100: weights alone do not fit
    let mut r = PlanRequest::new(
        catalog::lookup("Qwen/Qwen2.5-72B-Instruct").unwrap(),
        "q",
        h100(1),
    );
    r.max_model_len = Some(32768);
    r.concurrency = Some(16);
    let p = plan(&r);
    assert!(!p.fits);
    assert!(!p.problems.is_empty());
    let bigger = GpuSpec {
        name: "H200".into(),
        total_bytes: (139.8 * GIB) as u64,
        count: 1,
    };
    let s = suggest(&r, &[bigger]);
    assert!(
        s.iter()
            .any(|x| x.kind == ChangeKind::MoreTensorParallel && x.fits)
    );
    assert!(s.iter().any(|x| x.kind == ChangeKind::Quantize && x.fits));
    // each suggestion is a re-plan: fp8 KV never gives fewer tokens than the original
    // Llama-3.1-8B at 128k with 200 users: too few, fp8 KV doubles concurrency
    let mut r = PlanRequest::new(
        catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap(),
        "l",
        h100(1),
    );
    r.concurrency = Some(200);
    r.max_model_len = Some(32768);
    let base = plan(&r);
    assert!(base.fits && base.meets_concurrency == Some(false));
    let s = suggest(&r, &[]);
    let fp8 = s.iter().find(|x| x.kind == ChangeKind::KvFp8).unwrap();
    assert!((fp8.max_concurrency / base.max_concurrency - 2.0).abs() < 0.01);
    let len = s
        .iter()
        .find(|x| x.kind == ChangeKind::MaxModelLen)
        .unwrap();
    assert!(len.meets_target, "{len:?}");
    // a plan that already meets its target needs nothing
    r.concurrency = Some(1);
    assert!(suggest(&r, &[]).is_empty());
}

#[test]
fn catalog_covers_issue_and_cases() {
    for id in [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-13b-hf",
        "meta-llama/Llama-2-70b-hf",
        "meta-llama/Meta-Llama-3-8B",
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "meta-llama/Meta-Llama-3-70B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.1-405B-Instruct",
        "meta-llama/Llama-3.2-1B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        "mistralai/Mistral-Small-24B-Instruct-2501",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Qwen/Qwen2.5-3B-Instruct",
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-14B-Instruct",
        "Qwen/Qwen2.5-32B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4",
        "Qwen/Qwen2.5-Coder-32B-Instruct",
        "Qwen/QwQ-32B",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-1.7B",
        "Qwen/Qwen3-4B",
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3-14B",
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B",
        "Qwen/Qwen3-8B-FP8",
        "Qwen/Qwen3-235B-A22B-FP8",
        "Qwen/Qwen3-235B-A22B-Instruct-2507",
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-R1",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
        "google/gemma-2-9b-it",
        "google/gemma-2-27b-it",
        "google/gemma-3-4b-it",
        "google/gemma-3-12b-it",
        "google/gemma-3-27b-it",
        "google/gemma-4-26B-A4B",
        "google/gemma-4-31B-it",
        "microsoft/phi-1_5",
        "microsoft/phi-2",
        "microsoft/Phi-3-mini-4k-instruct",
        "microsoft/Phi-3.5-mini-instruct",
        "microsoft/phi-4",
        "openai/gpt-oss-20b",
        "openai/gpt-oss-120b",
        "ibm-granite/granite-3.3-8b-instruct",
        "ibm-granite/granite-4.0-micro",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "facebook/opt-125m",
        "facebook/opt-6.7b",
    ] {
        assert!(catalog::lookup(id).is_ok(), "{id} not in catalog");
    }
    let cases = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/vllm-logs/cases.jsonl"
    ))
    .unwrap();
    for line in cases.lines().filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["model_id"].as_str().unwrap();
        assert!(
            catalog::lookup(id).is_ok(),
            "{id} from cases.jsonl not in catalog"
        );
    }
}
