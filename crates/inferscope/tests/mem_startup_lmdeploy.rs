//! `mem startup` reads LMDeploy start-up logs (issue 32 item 4): the LMDeploy room's reader
//! (`inferscope_plan::engines::lmdeploy::log`) recognises them from their own lines, and with the
//! model and GPU known the report compares them with the room's plan. Logs:
//! fixtures/engines/lmdeploy/ (SOURCES.md).

mod common;

use common::inferscope;
use serde_json::Value;

fn report(args: &[&str]) -> Value {
    let mut all = vec!["mem", "startup", "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = inferscope(&all);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

const DIR: &str = "fixtures/engines/lmdeploy/";

#[test]
fn every_lmdeploy_fixture_is_read_as_lmdeploy_with_its_cache() {
    // (log, KV GiB the engine's lines state: blocks × block MiB / 1024, or None)
    for (log, kv) in [
        ("tm-0.9.2-qwen3-8b-awq-v100.log", Some(863.0 * 9.0 / 1024.0)),
        (
            "tm-internvl2_5-8b-mpo-a100.log",
            Some(6214.0 * 8.0 / 1024.0),
        ),
        (
            "tm-0.9.x-gpt-oss-20b-kv-int4.log",
            Some(1740.0 * 0.844 / 1024.0),
        ),
        (
            "tm-0.4.x-windows-internlm-20b.log",
            Some(118.0 * 75.0 / 1024.0),
        ),
        ("tm-0.0.x-block128.log", Some(32.0 * 64.0 / 1024.0)),
        (
            "tm-0.1.0-internlm-chat-7b-a100-quarter.log",
            Some(159.0 * 64.0 / 1024.0),
        ),
        ("pt-qwen2.5-vl-72b-awq-tp8.log", None),
        ("tm-glm-4.7-flash-max-cached.log", None),
    ] {
        let path = format!("{DIR}{log}");
        let r = report(&[&path]);
        assert_eq!(r["engine"], "lmdeploy", "{log}");
        match kv {
            Some(kv) => {
                let got = r["measured"]["kv_cache_gib"].as_f64().unwrap();
                assert!((got - kv).abs() < 0.01, "{log}: {got} vs {kv}");
            }
            None => assert!(r["measured"]["kv_cache_gib"].is_null(), "{log}"),
        }
    }
    let r = report(&[&format!("{DIR}pt-qwen2.5-vl-72b-awq-tp8.log")]);
    assert_eq!(r["measured"]["gpu_blocks"], 157);
    assert_eq!(r["tp_size"], 8);
    let r = report(&[&format!("{DIR}tm-glm-4.7-flash-max-cached.log")]);
    assert_eq!(r["measured"]["kv_cache_tokens"], 42880);
}

#[test]
fn with_the_model_and_gpu_the_log_is_compared_with_the_room_plan() {
    let path = format!("{DIR}tm-0.9.2-qwen3-8b-awq-v100.log");
    let r = report(&[
        &path,
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "Tesla V100-SXM2-16GB",
    ]);
    let p = &r["prediction"];
    assert_eq!(p["gpu"], "Tesla V100-SXM2-16GB");
    let kv = p["terms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["term"] == "kv_cache")
        .unwrap();
    assert!((kv["measured_gib"].as_f64().unwrap() - 7.58).abs() < 0.01);
    // the bf16 checkpoint named here (not the AWQ one the log ran) leaves ~0.2 GiB: the plan
    // is the room's (free × F of TurboMind 0.2.2–0.14), not vLLM's 0.9 utilisation
    let predicted = kv["predicted_gib"].as_f64().unwrap();
    assert!(predicted < 1.0, "{predicted}");
}

#[test]
fn a_log_without_lmdeploy_lines_is_still_refused_by_name() {
    let (code, _, err) = inferscope(&["mem", "startup", "Cargo.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a start-up log"), "{err}");
}
