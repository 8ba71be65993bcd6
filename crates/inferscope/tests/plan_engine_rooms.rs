//! Each engine answers from its own room (issue 32): an engine without memory accounting says so
//! (exit 2) instead of printing vLLM's plan under its name, and an SGLang plan shows SGLang's own
//! CUDA-graph and non-torch figures, not vLLM's estimates beside a table that says 0.00.

mod common;

use common::inferscope;
use serde_json::Value;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

#[test]
fn an_engine_without_memory_accounting_is_exit_2_by_name() {
    for args in [
        // --engine without a pasted command
        vec![
            "plan", "--model", MODEL, "--gpu", "L40S", "--engine", "trtllm",
        ],
        vec![
            "plan",
            "--model",
            MODEL,
            "--gpu",
            "L40S",
            "--engine",
            "tensorrt-llm",
            "--json",
        ],
        // a pasted TensorRT-LLM command
        vec![
            "plan",
            "--gpu",
            "L40S",
            "--",
            "trtllm-serve",
            MODEL,
            "--tp_size",
            "1",
        ],
    ] {
        let (code, out, err) = inferscope(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("memory not modelled for TensorRT-LLM"),
            "{args:?}: {err}"
        );
        assert!(
            !out.contains("Accounting"),
            "{args:?}: a plan was printed: {out}"
        );
    }
    let (code, _, err) =
        inferscope(&["plan", "--model", MODEL, "--gpu", "L40S", "--engine", "mlc"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("memory not modelled for MLC LLM"), "{err}");
}

fn plan_json(command: &[&str]) -> Value {
    let mut args = vec!["plan", "--gpu", "H100 SXM", "--json", "--"];
    args.extend_from_slice(command);
    let (code, out, err) = inferscope(&args);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn said(v: &Value, words: &str) -> bool {
    v["assumptions"]
        .as_array()
        .unwrap_or_else(|| panic!("no assumptions: {v}"))
        .iter()
        .any(|a| a.as_str().is_some_and(|a| a.contains(words)))
}

fn graph_estimate_said(v: &Value) -> bool {
    said(v, "CUDA-graph memory estimate")
}

#[test]
fn sglang_plan_says_its_own_cuda_graph_figure() {
    let sglang = plan_json(&[
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        MODEL,
        "--context-length",
        "8192",
    ]);
    // SGLang's graphs live outside --mem-fraction-static: its table counts none in the budget,
    // and the plan must not state vLLM's estimate beside it
    assert_eq!(sglang["per_gpu"]["cuda_graph_gib"].as_f64(), Some(0.0));
    assert!(!graph_estimate_said(&sglang), "{:#}", sglang["assumptions"]);
    assert!(
        sglang["engine_rules"]["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["rule"] == "outside_the_fraction")),
        "SGLang's own rule for graphs: {:#}",
        sglang["engine_rules"]
    );
    // the same for non-torch memory: none in SGLang's table, so no vLLM-fitted figure beside it
    assert_eq!(sglang["per_gpu"]["non_torch_gib"].as_f64(), Some(0.0));
    assert!(
        !said(&sglang, "non-torch memory"),
        "{:#}",
        sglang["assumptions"]
    );
    // vLLM counts its graphs and non-torch memory and says how it estimated them
    let vllm = plan_json(&["vllm", "serve", MODEL, "--max-model-len", "8192"]);
    assert!(vllm["per_gpu"]["cuda_graph_gib"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(vllm["per_gpu"]["non_torch_gib"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(graph_estimate_said(&vllm), "{:#}", vllm["assumptions"]);
    assert!(said(&vllm, "non-torch memory"), "{:#}", vllm["assumptions"]);
}
