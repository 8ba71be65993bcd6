//! `inferscope check`, `check --list` and `explain` as users run them: exit codes, JSON,
//! selection, config overrides, plans, and the findings a person reading each modelled machine's
//! matrix would expect.

mod common;

use common::inferscope;

fn findings(json: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["findings"].as_array().unwrap().clone()
}

fn status_of<'a>(f: &'a [serde_json::Value], code: &str) -> Vec<&'a str> {
    f.iter()
        .filter(|x| x["code"] == code)
        .map(|x| x["status"].as_str().unwrap())
        .collect()
}

#[test]
fn gpu_less_machine_reports_host_findings_and_gpu_checks_unknown() {
    let (code, out, err) = inferscope(&["check", "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    let f = findings(&out);
    assert!(f.len() >= 39);
    // This machine (and CI) has no GPU: every GPU check says so instead of passing.
    let gpu010: Vec<_> = f.iter().filter(|x| x["code"] == "GPU010").collect();
    assert_eq!(gpu010.len(), 1);
    assert_eq!(gpu010[0]["status"], "unknown");
    assert!(
        gpu010[0]["evidence"]
            .as_str()
            .unwrap()
            .contains("no GPU in this snapshot")
    );
    // Host checks ran.
    assert_eq!(status_of(&f, "MEM004").len(), 1);
    assert_ne!(status_of(&f, "MEM004")[0], "unknown");
}

#[test]
fn plx_box_warns_that_tensor_parallel_crosses_sockets_and_fails_on_shm() {
    let (code, out, _) = inferscope(&[
        "check",
        "--json",
        "--root",
        "fixtures/hosts/pcie8-2s-plx-switches/root",
    ]);
    assert_eq!(code, 1, "MEM006 is an error");
    let f = findings(&out);
    assert_eq!(status_of(&f, "GPU002"), ["fail"]);
    assert_eq!(status_of(&f, "MEM006"), ["fail"]);
    assert_eq!(
        status_of(&f, "GPU008")[..4],
        ["fail"; 4],
        "GPUs 0-3 have no local NIC"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["summary"]["errors"].as_u64().unwrap() >= 1);
}

#[test]
fn h100_box_passes_placement_and_fails_nothing_at_error_level() {
    let (code, out, err) = inferscope(&[
        "check",
        "--json",
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
    ]);
    assert_eq!(code, 0, "{err}");
    let f = findings(&out);
    assert!(status_of(&f, "GPU001").iter().all(|s| *s == "pass"));
    assert!(status_of(&f, "GPU008").iter().all(|s| *s == "pass"));
    assert!(
        status_of(&f, "GPU010").iter().all(|s| *s == "unknown"),
        "no driver facts in a tree"
    );
    // Warnings still make --fail-on warn exit 1.
    let (code, _, _) = inferscope(&[
        "check",
        "--fail-on",
        "warn",
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
    ]);
    assert_eq!(code, 1);
}

#[test]
fn gpus_the_server_will_not_see_are_not_in_scope_unless_all_gpus() {
    // The box's captured environment has CUDA_VISIBLE_DEVICES=1,2,3,4: GPU0, the one the
    // cgroup cuts off from its CPUs, is not the server's (issue 26 item 4).
    let asym = "fixtures/hosts/dual-socket-5gpu-asymmetric/root";
    let (code, out, err) = inferscope(&["check", "--json", "--only", "MEM008", "--root", asym]);
    assert_eq!(code, 0, "{err}");
    let f = findings(&out);
    assert_eq!(
        status_of(&f, "MEM008"),
        ["not_in_scope", "pass", "pass", "pass", "pass"]
    );
    assert_eq!(f[0]["subject"], "GPU0 (0000:18:00.0)");
    let evidence = f[0]["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with(
            "not in scope: CUDA_VISIBLE_DEVICES=1,2,3,4 in the snapshot's environment (CUDA_DEVICE_ORDER=FASTEST_FIRST) hides this GPU from the server (--all-gpus checks it); the check alone says fail: no usable local CPUs"
        ),
        "{evidence}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["not_in_scope"], 1);
    assert_eq!(v["summary"]["errors"], 0);

    // Every per-GPU check gets the same treatment, not only MEM008.
    let (code, out, _) = inferscope(&["check", "--json", "--root", asym]);
    assert!(code == 0 || code == 1);
    for x in findings(&out) {
        let about_gpu0 = x["subject"] == "GPU0 (0000:18:00.0)";
        let per_gpu = inferscope_check::find(x["code"].as_str().unwrap())
            .is_some_and(|d| d.scope == inferscope_check::Scope::Gpu);
        assert_eq!(x["status"] == "not_in_scope", about_gpu0 && per_gpu, "{x}");
    }

    // The text report lists them apart and counts them.
    let (code, out, _) = inferscope(&["check", "--only", "MEM008", "--root", asym]);
    assert_eq!(code, 0);
    assert!(out.contains("Not in scope (GPUs the server will not see; --all-gpus judges them):\n  MEM008 GPU0 (0000:18:00.0): "), "{out}");
    assert!(
        out.contains("0 errors, 0 warnings, 0 info, 4 passed, 0 unknown, 1 not in scope"),
        "{out}"
    );

    // --all-gpus judges every GPU, as before.
    let (code, out, _) = inferscope(&[
        "check",
        "--json",
        "--only",
        "MEM008",
        "--all-gpus",
        "--root",
        asym,
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        status_of(&findings(&out), "MEM008"),
        ["fail", "pass", "pass", "pass", "pass"]
    );
}

#[test]
fn only_config_and_bad_input() {
    let root = "fixtures/hosts/pcie8-2s-plx-switches/root";
    let (code, _, err) = inferscope(&["check", "--only", "NOPE1", "--root", root]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown check code \"NOPE1\""), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let off = dir.path().join("off.toml");
    std::fs::write(&off, "[checks.MEM006]\nenabled = false\n").unwrap();
    let (code, out, err) = inferscope(&[
        "check",
        "--only",
        "MEM006",
        "--config",
        off.to_str().unwrap(),
        "--root",
        root,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0 errors"), "{out}");
    let lower = dir.path().join("lower.toml");
    std::fs::write(&lower, "[thresholds]\nmin_dev_shm_bytes = 1048576\n").unwrap();
    let (code, _, _) = inferscope(&[
        "check",
        "--only",
        "MEM006",
        "--config",
        lower.to_str().unwrap(),
        "--root",
        root,
    ]);
    assert_eq!(code, 0, "64 MiB passes a 1 MiB threshold");
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[thresholds]\nmin_dev_shm = 1\n").unwrap();
    let (code, _, err) = inferscope(&["check", "--config", typo.to_str().unwrap(), "--root", root]);
    assert_eq!(code, 2);
    assert!(
        err.contains("typo.toml") && err.contains("min_dev_shm"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn plan_file_drives_plan_checks() {
    // A plan that does not fit: Llama-3.1-70B bf16 on 2×L40S modelled by hand.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"fits": false, "per_gpu": {"total_gib": 40.4, "weights_gib": 65.7, "non_torch_gib": 0.6,
            "activation_gib": 1.2, "cuda_graph_gib": 0.4, "kv_cache_gib": 0.0},
            "kv_cache_tokens": 0, "max_concurrency": 0.0, "concurrency": 16,
            "max_model_len": 8192, "weights_bytes_total": 141120000000, "assumptions": []}"#,
    )
    .unwrap();
    let (code, out, _) = inferscope(&[
        "check",
        "--json",
        "--only",
        "PLAN001,PLAN002",
        "--plan",
        plan.to_str().unwrap(),
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
    ]);
    assert_eq!(code, 1);
    let f = findings(&out);
    assert_eq!(status_of(&f, "PLAN001"), ["fail"]);
    assert_eq!(
        status_of(&f, "PLAN002"),
        ["unknown"],
        "PLAN001 covers a plan that does not fit"
    );
    // Fits, but KV capacity covers 2.43 full-length sequences for 8 users (modelled on the
    // Qwen2.5-72B TP2 H100 start-up in ../shared/fixtures/vllm-logs).
    std::fs::write(
        &plan,
        r#"{"fits": true, "kv_cache_tokens": 19906, "max_concurrency": 2.43, "concurrency": 8,
            "max_model_len": 8192}"#,
    )
    .unwrap();
    let (code, out, _) = inferscope(&[
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
    assert_eq!(code, 1);
    let f = findings(&out);
    assert_eq!(status_of(&f, "PLAN001"), ["pass"]);
    assert_eq!(status_of(&f, "PLAN002"), ["fail"]);
    std::fs::write(&plan, "{not json").unwrap();
    let (code, _, err) = inferscope(&["check", "--plan", plan.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a plan"), "{err}");
}

#[test]
fn process_checks_run_on_a_live_pid() {
    let pid = std::process::id().to_string();
    let (code, out, err) = inferscope(&[
        "check",
        "--json",
        "--only",
        "PROC001,PROC002",
        "--pid",
        &pid,
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let f = findings(&out);
    // No GPU here, so nothing can be attributed to a GPU: unknown, with a reason.
    assert_eq!(status_of(&f, "PROC001"), ["unknown"]);
    let (code, _, err) = inferscope(&["check", "--pid", "4294967"]);
    assert_eq!(code, 2);
    assert!(err.contains("no such process"), "{err}");
}

#[test]
fn list_and_explain() {
    let (code, out, _) = inferscope(&["check", "--list"]);
    assert_eq!(code, 0);
    assert!(out.lines().count() >= 39);
    assert!(out.contains("MEM006"));
    let (code, out, _) = inferscope(&["explain", "mem006"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("MEM006 (error · host)"), "{out}");
    assert!(out.contains("## How to fix"), "{out}");
    let (code, _, err) = inferscope(&["explain", "XYZ999"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown check code"), "{err}");
}

/// Issue 32: a file that is not `plan --json` output is exit 2 naming what is missing or wrong
/// (fixtures/bad/check-plan/EXPECTED.md), never a plan that "does not fit" with 0.00 GiB.
#[test]
fn files_that_are_not_plans_are_refused() {
    common::assert_bad_inputs(
        "fixtures/bad/check-plan",
        &[
            "check",
            "--root",
            "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
            "--plan",
        ],
        6,
    );
}
