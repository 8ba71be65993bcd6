//! `run`'s engine detection from each engine's command (moved from `src/engine.rs`'s inline
//! tests, issue 32: the engines' commands are test data, not the crate's knowledge).

use inferscope_launch::engine::detect;
use inferscope_plan::engines::Engine;

fn cmd(words: &str) -> Vec<String> {
    words.split(' ').map(String::from).collect()
}

#[test]
fn detects_each_engine_from_its_command() {
    for (c, e) in [
        ("vllm serve m --tensor-parallel-size 2", Some(Engine::Vllm)),
        ("/opt/venv/bin/vllm serve m", Some(Engine::Vllm)),
        (
            "python -m vllm.entrypoints.openai.api_server --model m",
            Some(Engine::Vllm),
        ),
        (
            "python3.11 -u -m sglang.launch_server --model-path m",
            Some(Engine::Sglang),
        ),
        ("text-generation-launcher --model-id m", Some(Engine::Tgi)),
        ("llama-server -m m.gguf", Some(Engine::LlamaCpp)),
        ("ollama serve", Some(Engine::Ollama)),
        ("python serve.py -m vllm", None),
        ("python -mtorch.distributed.run x", None),
        ("sh -c env", None),
        (
            "env X=1 vllm serve m --enable-sleep-mode",
            Some(Engine::Vllm),
        ),
        ("env -i PATH=/usr/bin vllm serve m", Some(Engine::Vllm)),
        ("env -u HF_TOKEN vllm serve m", Some(Engine::Vllm)),
        ("VLLM_USE_V1=1 vllm serve m", Some(Engine::Vllm)),
        (
            "nohup python3 -m sglang.launch_server --model-path m",
            Some(Engine::Sglang),
        ),
    ] {
        assert_eq!(detect(&cmd(c)), e, "{c}");
    }
    assert_eq!(detect(&[]), None);
}
