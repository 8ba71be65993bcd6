//! Every real start-up excerpt in `fixtures/tools/engine-logs/*.jsonl` (SGLang, TGI, recent vLLM;
//! `raw_lines` verbatim, `measured` as printed) and every real llama-server log in
//! `fixtures/tools/llama-server/` parses, and each figure equals the one the case records as
//! printed (same digits, so within print rounding by construction).

use inferscope_formats::startup_log::{Engine, StartupLogError, parse};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools")
}

/// `measured` key in the cases → our figure key. `None`: recorded by the case but not a start-up
/// figure we extract (said why).
fn our_key(k: &str) -> Option<&'static str> {
    Some(match k {
        "weights_mem_usage" | "model_loading" => "weights",
        "load_weight_begin_avail_mem" => "avail_before_weights",
        "load_weight_end_avail_mem" => "avail_after_weights",
        "kv_tokens" | "max_total_num_tokens" | "gpu_kv_cache_tokens" | "max_batch_total_tokens" => {
            "kv_cache_tokens"
        }
        "k_size" => "k_size",
        "v_size" => "v_size",
        "kv_size" | "available_kv_cache_memory" => "kv_cache",
        "memory_pool_end_avail_mem" => "avail_after_kv_pool",
        "cuda_graph_mem_usage" | "cuda_graph" => "cuda_graph",
        "max_running_requests" => "max_running_requests",
        "context_len" | "max_total_tokens_defaulted" => "max_model_len",
        "init_torch_distributed_mem_usage" => "distributed_init",
        "kv_cache_blocks" | "num_gpu_blocks" => "gpu_blocks",
        "kv_block_size" => "block_size",
        "default_max_batch_prefill_tokens" => "max_batch_prefill_tokens",
        "max_concurrency" => "max_concurrency",
        // Not memory figures of the start-up (timings, graph batch sizes, nvidia-smi, the
        // author's prose, the input limit), or avail-mem readings around graph capture.
        "cuda_graph_time"
        | "cuda_graphs"
        | "nvidia_smi_used"
        | "author_statement"
        | "min_viable_mem_fraction_static_non_mtp"
        | "min_viable_mem_fraction_static_mtp"
        | "mtp_draft_weights_extra"
        | "max_input_tokens_defaulted"
        | "cuda_graph_begin_avail_mem"
        | "cuda_graph_end_avail_mem"
        | "available_gpu_mem_after_init" => return None,
        other => panic!("measured key {other} has no mapping: add one"),
    })
}

/// The first number in a printed value (`"15.54 GB"`, `"1.54x for 65,536 tokens"`,
/// `"took 1.92 GiB (19 secs)"`).
fn first_number(v: &Value) -> f64 {
    if let Some(n) = v.as_f64() {
        return n;
    }
    let s = v.as_str().unwrap();
    let start = s.find(|c: char| c.is_ascii_digit() || c == '-').unwrap();
    let num: String = s[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    num.trim_end_matches('.').parse().unwrap()
}

/// Cases whose `raw_lines` hold no engine print at all: a blog's summary table.
const NOT_LOGS: &[&str] = &[
    "vllm-capstone-qwen3-14b-awq-1xl4-v0.28.0",
    "vllm-capstone-qwen3-14b-awq-2xl4-pp2-v0.28.0",
];

/// Failed start-ups whose excerpt stops before the error line.
const FAILURE_NOT_IN_EXCERPT: &[&str] = &["vllm-i33155-gpt-oss-120b-h100-v0.14.1-oom"];

#[test]
fn every_engine_log_case_parses_with_the_printed_figures() {
    let mut checked = 0;
    let mut figures = 0;
    for file in ["sglang.jsonl", "tgi.jsonl", "vllm-recent.jsonl"] {
        let text = std::fs::read_to_string(fixtures().join("engine-logs").join(file)).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let c: Value = serde_json::from_str(line).unwrap();
            let id = c["id"].as_str().unwrap();
            let raw: String = c["raw_lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| format!("{}\n", l.as_str().unwrap()))
                .collect();
            let parsed = parse(raw.as_bytes());
            if NOT_LOGS.contains(&id) {
                assert!(
                    matches!(parsed, Err(StartupLogError::NotAStartupLog { .. })),
                    "{id}"
                );
                continue;
            }
            let log = parsed.unwrap_or_else(|e| panic!("{id}: {e}"));
            let engine = match c["engine"].as_str().unwrap() {
                "sglang" => Engine::Sglang,
                "tgi" => Engine::Tgi,
                _ => Engine::Vllm,
            };
            assert_eq!(log.engine, Some(engine), "{id}");
            let failed = c["startup_outcome"].as_str().unwrap().starts_with("failed");
            if !FAILURE_NOT_IN_EXCERPT.contains(&id) {
                assert_eq!(log.failed, failed, "{id}: {:?}", log.failure);
            }
            for (k, v) in c["measured"].as_object().unwrap() {
                let Some(ours) = our_key(k) else { continue };
                // The pr11309 prose line also says "KV size"; only the log line counts.
                let f = log
                    .figure(ours)
                    .unwrap_or_else(|| panic!("{id}: {k} ({ours}) not found in {raw}"));
                assert_eq!(f.value, first_number(v), "{id}: {k}");
                figures += 1;
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 16);
    assert!(figures >= 60, "{figures}");
}

#[test]
fn every_llama_server_log_parses_with_its_kv_cache_and_slots() {
    let dir = fixtures().join("llama-server");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "log") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let log = parse(text.as_bytes()).unwrap();
        assert_eq!(log.engine, Some(Engine::LlamaCpp));
        assert_eq!(log.engine_version.as_deref(), Some("0.5.0-dev"));
        assert!(!log.failed, "{}: {:?}", path.display(), log.failure);
        // The sum of `llama_kv_cache: size = X MiB` lines, as plan_llama_cpp.rs sums them.
        let kv: f64 = text
            .lines()
            .filter_map(|l| l.split_once("llama_kv_cache: size = "))
            .map(|(_, r)| r.split_whitespace().next().unwrap().parse::<f64>().unwrap())
            .sum();
        let f = log.figure("kv_cache").unwrap();
        assert_eq!((f.value, f.unit), (kv, "MiB"), "{}", path.display());
        assert!(log.figure("n_slots").is_some() && log.figure("max_model_len").is_some());
        assert!(log.figure("weights").is_some(), "{}", path.display());
        assert!(log.arg("c").is_some() || log.arg("ctx_size").is_some() || text.contains("-m "));
        n += 1;
    }
    assert_eq!(n, 17);
}
