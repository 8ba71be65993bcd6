//! Issue 32 (a): one engine detector. `run`, `plan` and `mem startup` (its `# command:` header)
//! name the same engine for every command shape, wrappers included; before, `env X=1 vllm serve`
//! was vLLM for `plan` and an "unknown engine" for `run`, which then skipped vLLM's safety rule.

mod common;

use inferscope_formats::startup_log::{self, command_engine};
use inferscope_launch::engine::detect;
use inferscope_plan::engine::{Engine, parse_command};

/// Command shapes: the real commands of fixtures (sources in the comments) and the wrappers
/// users put in front of them. The expected engine is the stable name (`startup_log::Engine`).
const SHAPES: &[(&str, &str)] = &[
    // fixtures/tools/engine-logs/vllm-recent.jsonl, vllm-project/vllm issue #33155.
    (
        "CUDA_VISIBLE_DEVICES=1 uv run vllm serve openai/gpt-oss-120b --host 0.0.0.0 --port 8000",
        "vllm",
    ),
    // fixtures/tools/engine-logs/sglang.jsonl.
    (
        "python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --dp 8",
        "sglang",
    ),
    // fixtures/llama-cpp `# command:` headers.
    ("llama-server -m gemma3.gguf -c 8192 -np 2", "llama.cpp"),
    ("vllm serve m --enable-sleep-mode", "vllm"),
    ("env X=1 vllm serve m --enable-sleep-mode", "vllm"),
    ("env -i PATH=/usr/bin vllm serve m", "vllm"),
    ("env -u HF_TOKEN vllm serve m", "vllm"),
    ("VLLM_USE_V1=1 HF_HOME=/data vllm serve m", "vllm"),
    ("/opt/venv/bin/vllm serve m", "vllm"),
    ("nohup vllm serve m", "vllm"),
    (
        "numactl --cpunodebind=0 --membind=0 -- vllm serve m --tensor-parallel-size 2",
        "vllm",
    ),
    ("numactl -N 1 -m 1 vllm serve m", "vllm"),
    (
        "python -m vllm.entrypoints.openai.api_server --model m",
        "vllm",
    ),
    (
        "env X=1 python3 -u -m vllm.entrypoints.openai.api_server --model m",
        "vllm",
    ),
    ("python3 -m sglang.launch_server --model-path m", "sglang"),
    (
        "nohup env CUDA_VISIBLE_DEVICES=0 python3 -m sglang.launch_server --model-path m",
        "sglang",
    ),
    ("text-generation-launcher --model-id m", "tgi"),
    (
        "env -u HF_TOKEN text-generation-launcher --model-id m",
        "tgi",
    ),
    (
        "taskset -c 0-15 llama-server -m x.gguf -c 4096",
        "llama.cpp",
    ),
    ("uv run --with vllm vllm serve m", "vllm"),
    // fixtures/engines/lmdeploy/tm-0.9.2-qwen3-8b-awq-v100.log (InternLM/lmdeploy issue #3825)
    (
        "lmdeploy serve api_server Qwen3-8B-AWQ --server-port 10007 --backend turbomind --cache-max-entry-count 0.9",
        "lmdeploy",
    ),
    ("env X=1 lmdeploy serve api_server m --tp 2", "lmdeploy"),
    ("python3 -m lmdeploy serve api_server m", "lmdeploy"),
];

fn words(c: &str) -> Vec<String> {
    c.split(' ').map(String::from).collect()
}

#[test]
fn every_command_path_names_the_same_engine() {
    for (cmd, want) in SHAPES {
        let w = words(cmd);
        let run = detect(&w).map_or("unknown", Engine::cli_id);
        let plan = parse_command(&w)
            .map(|s| s.engine.cli_id())
            .unwrap_or_else(|e| panic!("plan refused {cmd:?}: {e}"));
        let mem = command_engine(cmd).map_or("none", startup_log::Engine::cli_id);
        assert_eq!((run, plan, mem), (*want, *want, *want), "{cmd}");
    }
}

#[test]
fn plan_reads_the_engine_arguments_behind_wrappers() {
    let s = parse_command(&words(
        "env -u HF_TOKEN numactl -N 0 -- vllm serve org/m --tensor-parallel-size 2",
    ))
    .unwrap();
    assert_eq!(s.model.as_deref(), Some("org/m"));
    assert_eq!(s.tensor_parallel_size, Some(2));
}

#[test]
fn run_refuses_sleep_mode_with_expandable_segments_behind_env() {
    for prefix in [
        &[][..],
        &["env", "X=1"],
        &["env", "-u", "HF_TOKEN"],
        &["nohup"],
    ] {
        let mut args = vec![
            "run",
            "--numa-node",
            "0",
            "--dry-run",
            "--alloc-conf",
            "expandable_segments:True",
            "--",
        ];
        args.extend_from_slice(prefix);
        args.extend_from_slice(&["vllm", "serve", "m", "--enable-sleep-mode"]);
        let (code, out, err) = common::inferscope(&args);
        assert_eq!((code, out.as_str()), (2, ""), "{prefix:?}: {err}");
        assert!(err.contains("CuMemAllocator"), "{prefix:?}: {err}");
    }
}

#[test]
fn the_command_header_of_a_startup_log_names_the_engine_behind_env() {
    let log = startup_log::parse(
        b"# command: env X=1 python3 -m sglang.launch_server --model-path m\n".as_slice(),
    )
    .unwrap();
    assert_eq!(log.engine, Some(startup_log::Engine::Sglang));
}
