//! Human output speaks the user's words: engine names and dtypes as users write them
//! (`vLLM`, `SGLang`, `bfloat16`, `FP16/BF16`), never Rust's debug names (`Vllm`, `Sglang`,
//! `Bf16`, `Fp16`) — issue 32, "one vocabulary". The plans below cover each engine's memory table,
//! the speed assumptions and the weights line.

mod common;

/// Rust variant names that must not reach a user as words of their own.
const DEBUG_NAMES: &[&str] = &[
    "Vllm", "Sglang", "LlamaCpp", "Bf16", "Fp16", "Fp8 ", "F32", "F16 ",
];

#[test]
fn plan_output_never_shows_rust_debug_names() {
    let commands: &[&[&str]] = &[
        &[
            "plan",
            "--gpu",
            "l40s",
            "--gpus",
            "4",
            "--",
            "vllm",
            "serve",
            "meta-llama/Llama-3.3-70B-Instruct",
            "--tensor-parallel-size",
            "4",
            "--max-model-len",
            "8192",
        ],
        &[
            "plan",
            "--gpu",
            "h100-sxm",
            "--",
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen2.5-7B-Instruct",
        ],
        &[
            "plan",
            "--gpu",
            "h100-sxm",
            "--",
            "vllm",
            "serve",
            "Qwen/Qwen2.5-7B-Instruct",
            "--dtype",
            "float16",
        ],
    ];
    for args in commands {
        let (code, out, err) = common::inferscope(args);
        assert!(code == 0 || code == 1, "{args:?}: exit {code}: {err}");
        for word in DEBUG_NAMES {
            for line in out.lines().filter(|l| l.contains(word)) {
                // A word inside a longer token (a model id, a flag) is not a debug name.
                let standalone = line
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|t| t == word.trim());
                assert!(
                    !standalone,
                    "{args:?} prints the Rust name {word:?}: {line}"
                );
            }
        }
    }
}
