//! `plan --find --nodes` (issue #30, Done-when 1): the exact command of the issue ranks
//! aggregated and disaggregated layouts over 1, 2 and 4 nodes with memory per GPU, throughput per
//! GPU and the SLO verdict, and explains the winner. Without `--nodes`, `--find` is unchanged
//! (tests/plan_find.rs and the goldens cover it).

mod common;

use common::inferscope;

const DONE_WHEN: [&str; 16] = [
    "plan",
    "--find",
    "--model",
    "deepseek-ai/DeepSeek-R1",
    "--gpu",
    "h100-sxm",
    "--nodes",
    "1,2,4",
    "--input-len",
    "2000",
    "--output-len",
    "500",
    "--slo",
    "ttft=2s,tpot=50ms",
    "--top",
    "40",
];

#[test]
fn the_issue_command_ranks_aggregated_and_pd_over_nodes() {
    let (code, out, err) = inferscope(&DONE_WHEN);
    assert_eq!(code, 0, "{err}");
    println!("{out}");
    assert!(out.contains("GiB/GPU") && out.contains("tok/s/GPU") && out.contains("SLO"));
    assert!(out.contains("Winner: "), "{out}");
    let mut args = DONE_WHEN.to_vec();
    args.push("--json");
    let (code, out, err) = inferscope(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.trim_start().starts_with("{\n  \"schema_version\""),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    for n in [1, 2, 4] {
        assert!(
            rows.iter().any(|r| r["nodes"] == n),
            "no row for {n} node(s)"
        );
    }
    for kind in ["aggregated", "disaggregated"] {
        assert!(rows.iter().any(|r| r["kind"] == kind), "no {kind} row");
    }
    for r in rows {
        assert!(r["memory_gib_per_gpu"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["output_tokens_per_s_per_gpu"].is_number(), "{r}");
        assert!(r["meets_slo"].is_boolean(), "{r}");
        // a verdict is explained: met, or what is missed
        assert_eq!(
            r["meets_slo"].as_bool().unwrap(),
            r["misses"].as_array().unwrap().is_empty()
        );
    }
    // DeepSeek-R1 (FP8, ~640 GiB of weights) does not fit 8 × H100: the 1-node row says so
    let one = rows.iter().find(|r| r["nodes"] == 1).unwrap();
    assert_eq!(one["fits"], false);
    assert!(
        one["misses"][0].as_str().unwrap().starts_with("memory"),
        "{one}"
    );
    // meeting rows first, each within the targets
    let first_miss = rows.iter().position(|r| r["meets_slo"] == false).unwrap();
    for r in &rows[..first_miss] {
        assert!(r["ttft_s"].as_f64().unwrap() <= 2.0 && r["tpot_s"].as_f64().unwrap() <= 0.05);
    }
    // P/D rows carry the KV transfer (141 MB = 2,000 × 70,272 B of MLA latent) and both groups
    let pd = rows.iter().find(|r| r["kind"] == "disaggregated").unwrap();
    assert_eq!(pd["kv_transfer"]["bytes"], 2000 * 70_272);
    assert!(pd["prefill"]["count"].as_u64().unwrap() >= 1);
    assert!(pd["decode"]["layout"]["tp"].is_number());
    let why = v["explanation"].as_str().unwrap();
    assert!(why.contains("wins") && why.contains("×"), "{why}");
    assert!(v["margin_over_other_kind"].as_f64().unwrap() > 0.0);
}

#[test]
fn nodes_needs_lengths_and_a_gpu() {
    let (code, _, err) = inferscope(&[
        "plan",
        "--find",
        "--model",
        "deepseek-ai/DeepSeek-R1",
        "--gpu",
        "h100-sxm",
        "--nodes",
        "2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--input-len"), "{err}");
    let (code, _, err) = inferscope(&[
        "plan",
        "--find",
        "--model",
        "deepseek-ai/DeepSeek-R1",
        "--gpu",
        "h100-sxm",
        "--nodes",
        "2",
        "--input-len",
        "100",
        "--output-len",
        "10",
        "--network",
        "ib-xdr",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ib-ndr"), "{err}");
    let (code, _, err) = inferscope(&[
        "plan",
        "--find",
        "--model",
        "deepseek-ai/DeepSeek-R1",
        "--gpu",
        "h100-sxm",
        "--nodes",
        "2",
        "--input-len",
        "100",
        "--output-len",
        "10",
        "--slo",
        "e2e=10s",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ttft and tpot"), "{err}");
}
