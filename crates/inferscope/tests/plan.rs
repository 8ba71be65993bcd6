//! `inferscope plan` as users run it: the pasted serving command, the GPU from the catalog, the
//! machine or a fixture tree, `--find`, the JSON contract that `check --plan` reads, bad input.

mod common;

use common::inferscope;

const QWEN_AWQ: &[&str] = &[
    "plan",
    "--gpu",
    "l40s",
    "--gpus",
    "2",
    "--concurrency",
    "64",
    "--json",
    "--",
    "vllm",
    "serve",
    "Qwen/Qwen2.5-72B-Instruct-AWQ",
    "--tensor-parallel-size",
    "2",
    "--max-model-len",
    "32768",
    "--port",
    "8000",
    "--speculative-config",
    "x",
];

#[test]
fn pasted_command_gives_the_json_contract_and_check_reads_it() {
    let (code, out, err) = inferscope(QWEN_AWQ);
    // Fits, but 64 users at 32k do not: exit 1 like a failed check.
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "total_gib",
        "weights_gib",
        "non_torch_gib",
        "activation_gib",
        "cuda_graph_gib",
        "kv_cache_gib",
    ] {
        assert!(v["per_gpu"][key].is_number(), "per_gpu.{key}");
    }
    assert_eq!(v["fits"], true);
    assert!(v["kv_cache_tokens"].as_u64().unwrap() > 0);
    assert!(v["max_concurrency"].as_f64().unwrap() < 64.0);
    assert!(!v["assumptions"].as_array().unwrap().is_empty());
    assert_eq!(v["engine_settings"]["ignored"][0], "--speculative-config x");
    assert!(
        v["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "kv_fp8")
    );
    // AWQ 72B on two GPUs: about 19 GiB of weights each.
    let w = v["per_gpu"]["weights_gib"].as_f64().unwrap();
    assert!((17.0..22.0).contains(&w), "{w}");
    // The same file drives the plan checks.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, &out).unwrap();
    let (code, check, err) = inferscope(&[
        "check",
        "--json",
        "--only",
        "PLAN001,PLAN002",
        "--fail-on",
        "warn",
        "--plan",
        plan.to_str().unwrap(),
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
    ]);
    assert_eq!(code, 1, "{err}");
    let c: serde_json::Value = serde_json::from_str(&check).unwrap();
    let status: Vec<&str> = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        status,
        ["pass", "fail"],
        "fits, but KV holds fewer than 64 full-length requests"
    );
}

#[test]
fn gpus_come_from_a_fixture_tree_by_pci_device_id() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
        "--tp",
        "8",
        "--model",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--max-model-len",
        "8192",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("H100 SXM ×8"), "{out}");
    assert!(out.contains("Fits: yes"), "{out}");
}

#[test]
fn find_ranks_the_catalog() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--find",
        "--json",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--max-model-len",
        "8192",
        "--concurrency",
        "16",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = v["candidates"].as_array().unwrap();
    assert!(!c.is_empty());
    assert_eq!(c[0]["count"], 1, "an 8B model fits on one GPU");
    assert!(
        c.iter()
            .all(|x| x["max_concurrency"].as_f64().unwrap() >= 16.0)
    );
    assert!(
        v["evaluated"].as_u64().unwrap() >= 44 * 3 * 2,
        "every GPU × weights × KV dtype"
    );
}

#[test]
fn a_gguf_file_is_sized_from_its_header() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--gpu-memory-gib",
        "8",
        "--gpus",
        "1",
        "--json",
        "--model",
        "fixtures/tools/gguf/tiny-random-llama-recipe.gguf",
        "--max-model-len",
        "256",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], true);
    assert_eq!(v["weights_bytes_total"], 66464);
    assert!(v["model_source"].as_str().unwrap().contains("GGUF"));
}

#[test]
fn bad_input_is_one_clear_error() {
    for (args, needle) in [
        (
            vec!["plan", "--gpu", "l40s", "--model", "nobody/NoSuchModel-7B"],
            "unknown model",
        ),
        (
            vec![
                "plan",
                "--gpu",
                "a100",
                "--model",
                "meta-llama/Llama-3.1-8B-Instruct",
            ],
            "a100",
        ),
        (
            vec!["plan", "--gpu", "l40s", "--", "ollama", "serve"],
            "not a serving engine",
        ),
        (vec!["plan", "--gpu", "l40s"], "no model"),
        (
            vec![
                "plan",
                "--gpu",
                "l40s",
                "--gpus",
                "1",
                "--tp",
                "2",
                "--model",
                "meta-llama/Llama-3.1-8B-Instruct",
            ],
            "needs 2 GPUs",
        ),
        (
            vec![
                "plan",
                "--model",
                "fixtures/bad/snapshot/truncated.json",
                "--gpu",
                "l40s",
            ],
            "truncated.json",
        ),
    ] {
        let (code, out, err) = inferscope(&args);
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A machine without a GPU (the dev VM's tree; not this host, which may have one): say so
    // and how to name one.
    let (code, _, err) = inferscope(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--root",
        "fixtures/hosts/dev-vm-2core-nogpu",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--gpu NAME"), "{err}");
}
