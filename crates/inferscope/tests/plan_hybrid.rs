//! `inferscope plan` on hybrid attention/state-space models (issue 29 item 2): the state is
//! shown next to the KV per token, and an engine whose state pool is not modelled is an input
//! error (exit 2) naming the layer type, the architecture, the engine and the release.

mod common;

use common::inferscope;

const QWEN3_NEXT: &str = "fixtures/hub/Qwen--Qwen3-Next-80B-A3B-Instruct/config.json";

#[test]
fn old_sglang_refuses_a_linear_attention_model_by_name() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--model",
        QWEN3_NEXT,
        "--gpu",
        "H100 SXM",
        "--gpus",
        "4",
        "--engine-version",
        "0.5.9",
        "--",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        QWEN3_NEXT,
        "--tp",
        "4",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(
            "layer type `linear_attention` of Qwen3NextForCausalLM is not modelled for SGLang 0.5.9"
        ),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn vllm_plan_shows_state_bytes_per_sequence() {
    let (code, out, err) = inferscope(&[
        "plan",
        "--model",
        "fixtures/hub/nvidia--NVIDIA-Nemotron-Nano-9B-v2/config.json",
        "--gpu",
        "H100 SXM",
        "--gpus",
        "1",
        "--engine-version",
        "0.11.0",
        "--max-model-len",
        "32768",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    // 27 Mamba-2 layers × (3 × (10240 + 2·8·128) × 2 + 128 × 80 × 128 × 2) bytes
    let state = 27 * (3 * (10_240 + 2 * 8 * 128) * 2 + 128 * 80 * 128 * 2);
    assert!(
        out.contains(&format!("{state} bytes/sequence/GPU of recurrent state")),
        "{out}"
    );
    // 4 attention layers × 2 × 8 KV heads × 128 × 2 bytes; blocks of 672 tokens
    assert!(
        out.contains("blocks of 672), 16384 bytes/token/GPU"),
        "{out}"
    );
}
