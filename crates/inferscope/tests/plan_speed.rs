//! `plan` speed figures as users get them (issue 22): the `speed` JSON contract (roofline beside
//! the engine's expected figure, older keys as aliases), `--engine`, GGUF `--quantization`, and
//! `--find` ranking on the expected figure with the roofline beside it.

mod common;

use common::inferscope;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = inferscope(args);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {path}"))
}

#[test]
fn speed_keys_roofline_above_expected_and_aliases() {
    let v = json(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100 SXM",
        "--gpus",
        "1",
        "--max-model-len",
        "8192",
        "--json",
    ]);
    let roof = f(&v, "/speed/decode/roofline_tokens_per_s_per_sequence");
    let exp = f(&v, "/speed/decode/expected_tokens_per_s_per_sequence");
    let agg = f(&v, "/speed/decode/expected_tokens_per_s_aggregate");
    assert!(roof > exp && exp > 0.0, "roofline {roof} expected {exp}");
    assert_eq!(exp, f(&v, "/speed/decode/tokens_per_s_per_sequence"));
    assert_eq!(agg, f(&v, "/speed/decode/tokens_per_s_aggregate"));
    // BF16 8B on 3.35 TB/s: 16.06 GB + KV of 8192 tokens (1.07 GB) -> roofline ~195 tok/s
    assert!((roof - 195.0).abs() < 5.0, "{roof}");
    let ttft_roof = f(&v, "/speed/prefill/roofline_ttft_s");
    let ttft_exp = f(&v, "/speed/prefill/expected_ttft_s");
    assert!(ttft_roof < ttft_exp);
    assert_eq!(ttft_exp, f(&v, "/speed/prefill/ttft_s"));
    assert_eq!(v["speed"]["engine"], "vllm");
    assert_eq!(v["speed"]["decode"]["efficiency"]["engine"], "vllm");
    assert!(
        v["speed"]["prefill"]["assumptions"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
}

#[test]
fn llama_cpp_gguf_q4_k_m_on_l40s_matches_a_published_run() {
    // llamacpp-xd-l40s-llama3-70b-q4_k_m (fixtures/speed, check half): llama-bench tg512 on one
    // L40S, Meta-Llama-3-70B Q4_K_M (39.59 GiB): 15.46 tok/s; pp512 673.63 tok/s (0.760 s).
    let v = json(&[
        "plan",
        "--model",
        "meta-llama/Meta-Llama-3-70B-Instruct",
        "--gpu",
        "L40S",
        "--gpus",
        "1",
        "--engine",
        "llama.cpp",
        "--quantization",
        "Q4_K_M",
        "--max-model-len",
        "512",
        "--input-len",
        "512",
        "--json",
    ]);
    assert_eq!(v["speed"]["engine"], "llama.cpp");
    let exp = f(&v, "/speed/decode/expected_tokens_per_s_per_sequence");
    let roof = f(&v, "/speed/decode/roofline_tokens_per_s_per_sequence");
    assert!(
        roof > 15.46,
        "the roofline must not be below the measurement: {roof}"
    );
    assert!(
        (exp - 15.46).abs() / 15.46 < 0.25,
        "expected {exp} vs 15.46"
    );
    let ttft = f(&v, "/speed/prefill/expected_ttft_s");
    assert!(
        (ttft - 0.760).abs() / 0.760 < 0.25,
        "expected TTFT {ttft} vs 0.760 s"
    );
    // the memory planner used the GGUF bytes: llama.cpp accounting, weights near the file's
    let w = f(&v, "/per_gpu/weights_gib");
    assert!(w > 36.0 && w < 40.0, "{w}");
}

#[test]
fn unknown_engine_is_a_usage_error() {
    let (code, _, err) = inferscope(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "L40S",
        "--engine",
        "foo",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--engine foo") && err.contains("trtllm"),
        "{err}"
    );
}

#[test]
fn find_ranks_on_expected_and_shows_the_roofline() {
    let v = json(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--find",
        "--concurrency",
        "8",
        "--max-model-len",
        "8192",
        "--engine",
        "trtllm",
        "--json",
    ]);
    let c = v["candidates"].as_array().unwrap();
    assert!(!c.is_empty());
    for x in c {
        let e = x["expected_tokens_per_s_per_sequence"].as_f64().unwrap();
        let r = x["roofline_tokens_per_s_per_sequence"].as_f64().unwrap();
        assert!(r > e, "{x}");
        assert_eq!(x["decode_tokens_per_s_per_sequence"].as_f64(), Some(e));
    }
    let (_, out, _) = inferscope(&[
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--find",
        "--concurrency",
        "8",
        "--max-model-len",
        "8192",
    ]);
    assert!(
        out.contains("expected t/s") && out.contains("roofline t/s"),
        "{out}"
    );
    assert!(out.contains("expected for vllm"), "{out}");
}

#[test]
fn pasted_llama_server_command_picks_the_llama_cpp_efficiency() {
    let v = json(&[
        "plan",
        "--gpu",
        "RTX 4090",
        "--gpus",
        "1",
        "--json",
        "--",
        "llama-server",
        "-m",
        "fixtures/tools/gguf/tiny-llama-v2-patched.gguf",
        "-c",
        "2048",
    ]);
    assert_eq!(v["speed"]["engine"], "llama.cpp");
    assert_eq!(v["speed"]["decode"]["efficiency"]["engine"], "llama.cpp");
    let roof = f(&v, "/speed/decode/roofline_tokens_per_s_per_sequence");
    let exp = f(&v, "/speed/decode/expected_tokens_per_s_per_sequence");
    assert!(roof > exp && exp > 0.0);
}
