//! `plan --engine-version V`: the rules of that vLLM release, with their sources, in `--json`
//! (`engine_rules`, `accounting`) and in the text's first lines and assumptions (issue 15).

mod common;

use common::inferscope;
use serde_json::Value;

fn plan_json(gpu: &str, version: Option<&str>, extra: &[&str]) -> Value {
    let mut args = vec![
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        gpu,
        "--gpus",
        "1",
        "--json",
    ];
    if let Some(v) = version {
        args.extend(["--engine-version", v]);
    }
    args.extend(extra);
    let (_code, out, err) = inferscope(&args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

fn rule<'a>(v: &'a Value, name: &str) -> &'a str {
    v["engine_rules"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == name)
        .and_then(|r| r["value"].as_str())
        .unwrap_or_else(|| panic!("no rule {name}: {v}"))
}

#[test]
fn engine_version_selects_the_release_rules_with_sources() {
    for (version, engine, util, graphs, block) in [
        ("0.6.4", "V0", "0.9 (default)", "captured after", "16"),
        ("0.8.5", "V1", "0.9 (default)", "captured after", "16"),
        ("0.10.2", "V1", "0.9 (default)", "captured after", "16"),
        ("0.19.0", "V1", "0.9 (default)", "captured after", "16"),
        (
            "0.20.0",
            "V1",
            "0.92 (default)",
            "estimated and taken out",
            "16",
        ),
        (
            "0.34.0",
            "V1",
            "1 (default: extensible",
            "estimated and taken out",
            "64",
        ),
    ] {
        let v = plan_json("h100-sxm", Some(version), &["--max-model-len", "8192"]);
        assert_eq!(v["accounting"], "modelled", "{version}");
        assert_eq!(v["engine_rules"]["rules_of"], version);
        for r in v["engine_rules"]["rules"].as_array().unwrap() {
            let src = r["source"].as_str().unwrap();
            assert!(
                src.contains(".py") || src.contains("given") || src.contains("--"),
                "{version}: {r}"
            );
        }
        assert!(
            rule(&v, "engine").starts_with(engine),
            "{version}: {}",
            rule(&v, "engine")
        );
        assert!(
            rule(&v, "gpu_memory_utilization").starts_with(util),
            "{version}"
        );
        assert!(rule(&v, "cuda_graphs").starts_with(graphs), "{version}");
        assert_eq!(rule(&v, "block_size"), block, "{version}");
        assert_eq!(v["block_size"].as_u64().unwrap().to_string(), block);
    }
    // 0.20 takes the CUDA-graph estimate out of the same budget 0.19 leaves to KV
    let a = plan_json(
        "h100-sxm",
        Some("0.19.0"),
        &["--max-model-len", "8192", "--gpu-memory-utilization", "0.9"],
    );
    let b = plan_json(
        "h100-sxm",
        Some("0.20.0"),
        &["--max-model-len", "8192", "--gpu-memory-utilization", "0.9"],
    );
    let kv = |v: &Value| v["per_gpu"]["kv_cache_gib"].as_f64().unwrap();
    let graph = b["per_gpu"]["cuda_graph_gib"].as_f64().unwrap();
    assert!(
        (kv(&a) - kv(&b) - graph).abs() < 0.02,
        "{} {} {graph}",
        kv(&a),
        kv(&b)
    );
}

/// The dummy sampler run's top-k/top-p: PyTorch sorts the whole `max_num_seqs × vocab` logits
/// in V1 before 0.17 (derived bytes per logit), a Triton kernel does it without a sort from
/// 0.17 (the fitted constant). Same model, GPU and batch: only the sampler term moves.
#[test]
fn the_sampler_rule_follows_the_release() {
    let opts = ["--max-model-len", "8192", "--gpu-memory-utilization", "0.9"];
    let sorted = plan_json("h100-sxm", Some("0.16.0"), &opts);
    let fused = plan_json("h100-sxm", Some("0.17.0"), &opts);
    assert!(rule(&sorted, "sampler").starts_with("PyTorch sorts the logits (38 B per logit"));
    assert!(rule(&fused, "sampler").starts_with("top-k/top-p by a Triton kernel"));
    assert!(rule(&plan_json("h100-sxm", Some("0.10.2"), &opts), "sampler").contains("pip install"));
    assert!(
        rule(&plan_json("h100-sxm", Some("0.6.4"), &opts), "sampler")
            .starts_with("V0 sampler: inside the fitted V0 overhead")
    );
    // V0 from 0.6.6 (memory_profiling) sorts too: its dummy requests ask top_p 0.99, top_k vocab − 1
    assert!(
        rule(&plan_json("h100-sxm", Some("0.7.3"), &opts), "sampler")
            .starts_with("V0: PyTorch sorts the logits (38 B per logit")
    );
    // 1024 rows (H100 default) × 128,256 logits: (38 − 13.54) B each ≈ 2.99 GiB more activation
    let act = |v: &Value| v["per_gpu"]["activation_gib"].as_f64().unwrap();
    let more = act(&sorted) - act(&fused);
    let expected = 1024.0 * 128_256.0 * (38.0 - 13.54) / f64::from(1u32 << 30);
    assert!((more - expected).abs() < 0.02, "{more} vs {expected}");
}

#[test]
fn long_context_v0_uses_chunked_prefill_and_old_gpus_fall_back_to_v0() {
    // 0.6.4: max_model_len > 32768 turns chunked prefill on: 512 tokens, not a whole sequence
    let v = plan_json("h100-sxm", Some("0.6.4"), &["--max-model-len", "65536"]);
    assert!(rule(&v, "profile_batch").starts_with("512 tokens"), "{v}");
    let v = plan_json("h100-sxm", Some("0.7.3"), &["--max-model-len", "65536"]);
    assert!(rule(&v, "profile_batch").starts_with("2048 tokens"));
    // 0.8.5 on a V100 (compute capability 7.0): V0 fallback; 0.10.2 keeps V1
    let v = plan_json(
        "v100-sxm2-32gb",
        Some("0.8.5"),
        &["--max-model-len", "8192"],
    );
    assert!(
        rule(&v, "engine").contains("compute capability < 8.0"),
        "{v}"
    );
    let v = plan_json(
        "v100-sxm2-32gb",
        Some("0.10.2"),
        &["--max-model-len", "8192"],
    );
    assert!(rule(&v, "engine").starts_with("V1"));
    // the engine's own A100 exception (from 0.9): 2048 tokens although it has 80 GiB
    let v = plan_json(
        "a100-sxm-80gb",
        Some("0.10.2"),
        &["--max-model-len", "8192"],
    );
    assert!(rule(&v, "profile_batch").starts_with("2048 tokens"), "{v}");
}

#[test]
fn newer_or_absent_version_says_which_rules_apply() {
    let v = plan_json("h100-sxm", Some("0.40.1"), &["--max-model-len", "8192"]);
    assert_eq!(v["accounting"], "approximate");
    assert_eq!(v["engine_rules"]["rules_of"], "0.34.0");
    assert!(
        v["engine_rules"]["note"]
            .as_str()
            .unwrap()
            .contains("newer than modelled: rules of 0.34.0")
    );
    assert!(
        v["assumptions"][0]
            .as_str()
            .unwrap()
            .starts_with("accounting approximate")
    );
    let v = plan_json("h100-sxm", None, &["--max-model-len", "8192"]);
    assert_eq!(v["accounting"], "modelled");
    assert_eq!(v["engine_rules"]["rules_of"], "0.34.0");
    // the text says it in its first lines and lists the sources under Assumptions
    let (_c, out, _e) = inferscope(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "1",
        "--max-model-len",
        "8192",
        "--engine-version",
        "0.40.1",
    ]);
    let head: Vec<&str> = out.lines().take(5).collect();
    assert!(
        head.iter()
            .any(|l| l.starts_with("Accounting: APPROXIMATE: 0.40.1 is newer than modelled")),
        "{out}"
    );
    assert!(
        out.contains("vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"),
        "{out}"
    );
}

#[test]
fn sglang_and_tgi_use_their_own_accounting() {
    let (_c, out, err) = inferscope(&[
        "plan",
        "--gpu",
        "l4",
        "--gpus",
        "4",
        "--engine-version",
        "0.4.3.post4",
        "--json",
        "--",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/QwQ-32B",
        "--tp",
        "4",
        "--mem-fraction-static",
        "0.85",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["engine_rules"]["engine"], "sglang");
    assert!(rule(&v, "kv_pool").contains("free at start"));
    assert_eq!(rule(&v, "mem_fraction_static"), "0.85");
    // loading charges the fp32 RoPE cache and the allocator's per-tensor rounding (0.22 GiB)
    assert!(rule(&v, "load_allocator_slack").starts_with("0.22"), "{v}");
    assert!(rule(&v, "rope_cache").contains("fp32"), "{v}");
    // the real start-up (fixtures/tools/engine-logs/sglang.jsonl) measured 15.54 GiB of
    // weights and 46611 tokens; the plan assumes free-at-start = total − 0.25 GiB
    let w = v["per_gpu"]["weights_gib"].as_f64().unwrap();
    assert!((w - 15.54).abs() <= 0.03, "{w}");
    let t = v["kv_cache_tokens"].as_f64().unwrap();
    assert!((t / 46611.0 - 1.0).abs() < 0.03, "{t}");
    let (_c, out, err) = inferscope(&[
        "plan",
        "--gpu",
        "rtx-a6000",
        "--gpus",
        "2",
        "--engine-version",
        "3.3.0",
        "--json",
        "--",
        "text-generation-launcher",
        "--model-id",
        "google/gemma-3-27b-it",
        "--num-shard",
        "2",
        "--max-concurrent-requests",
        "4",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["engine_rules"]["engine"], "tgi");
    assert_eq!(v["block_size"], 1);
    // a queue limit, not a batch size
    assert!(v["engine_settings"]["max_num_seqs"].is_null());
    // the 3.x launcher's default for gemma3, as the real start-up logged it
    assert!(
        v["assumptions"]
            .to_string()
            .contains("--max-batch-prefill-tokens 8000 (default)"),
        "{}",
        v["assumptions"]
    );
    // the real start-up printed 52719 blocks of 1 token (fixtures/tools/engine-logs/tgi.jsonl)
    let t = v["kv_cache_tokens"].as_f64().unwrap();
    assert!((t / 52719.0 - 1.0).abs() < 0.05, "{t}");
}
