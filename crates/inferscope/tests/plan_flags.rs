//! A pasted serving command is read the way its engine reads it (issue 26 item 6): an option the
//! engine refuses is exit 2 naming the closest known one; an ambiguous abbreviation is a warning
//! printed before anything else.

mod common;

use common::inferscope;

#[test]
fn a_misspelt_engine_flag_is_exit_2_with_the_closest_one() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--gpu",
        "h100-sxm",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--max-modle-len",
        "8192",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("--max-modle-len") && err.contains("did you mean --max-model-len?"),
        "{err}"
    );
    // what vLLM's argparse takes as --max-model-len, the plan takes too
    let (code, out, err) = inferscope(&[
        "plan",
        "--gpu",
        "h100-sxm",
        "--json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--max-model",
        "8192",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["max_model_len"], 8192);
}

#[test]
fn an_ambiguous_abbreviation_is_a_warning_at_the_top() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--gpu",
        "h100-sxm",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--max-model-len",
        "8192",
        "--max-num",
        "64",
    ]);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap_or("");
    assert!(
        first.starts_with("warning: --max-num abbreviates several options"),
        "{out}"
    );
}
