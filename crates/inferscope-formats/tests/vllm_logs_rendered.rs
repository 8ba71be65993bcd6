//! `fixtures/tools/vllm-logs/cases.jsonl` keeps real vLLM start-ups as transcribed figures, not
//! log text. This test writes, for each case, the lines its release prints with those figures (the
//! format strings of the release's own source: vLLM 0.4's `distributed_gpu_executor.py`
//! `initialize_cache` "# GPU blocks: %d, # CPU blocks: %d"; vLLM 0.19.0's `gpu_model_runner.py`
//! `load_model` "Model loading took %s GiB memory", `gpu_worker.py` "Free memory on device (F/T
//! GiB) on startup. Desired GPU memory utilization is (U, X GiB). Actual usage is …" and
//! "Available KV cache memory: %s GiB", `kv_cache_utils.py` "GPU KV cache size: %s tokens" and
//! "Maximum concurrency for %s tokens per request: %.2fx"), with the prefixes of a real 0.19 log,
//! and checks the parser reads every figure back. The free-memory figure is not in the cases; the
//! rendered line repeats the total there and the test does not read it.

use inferscope_formats::startup_log::{Engine, parse};
use serde_json::Value;

fn render(c: &Value) -> String {
    let m = &c["measured"];
    let f = |k: &str| m[k].as_f64();
    let mut s = String::new();
    if c["engine"] == "V0" {
        s.push_str(&format!(
            "INFO 04-29 10:00:00 distributed_gpu_executor.py:45] # GPU blocks: {}, # CPU blocks: {}\n",
            m["gpu_blocks"], m["cpu_blocks"]
        ));
        return s;
    }
    let p = "(EngineCore_DP0 pid=3141) INFO 01-01 00:00:00";
    let v = c["vllm_version"].as_str().unwrap();
    s.push_str(&format!(
        "(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version {v}\n"
    ));
    s.push_str(&format!("{p} [gpu_model_runner.py:4821] Model loading took {:.2} GiB memory and 12.345678 seconds\n", f("weights_gib").unwrap()));
    let total = f("total_gpu_memory_gib").unwrap();
    let util = f("usable_memory_gib").unwrap() / total;
    s.push_str(&format!(
        "{p} [gpu_worker.py:640] Free memory on device ({total:.2}/{total:.2} GiB) on startup. Desired GPU memory utilization is ({util:.2}, {:.2} GiB). Actual usage is {:.2} GiB for weight, {:.2} GiB for peak activation, {:.2} GiB for non-torch memory, and {:.2} GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=1` to fit into requested memory, or `--kv-cache-memory=2` to fully utilize gpu memory. Current kv cache memory in use is 3 bytes.\n",
        f("usable_memory_gib").unwrap(), f("weights_gib").unwrap(), f("activation_peak_gib").unwrap(), f("non_torch_gib").unwrap(), f("cuda_graph_gib").unwrap()
    ));
    s.push_str(&format!(
        "{p} [gpu_worker.py:437] Available KV cache memory: {:.2} GiB\n",
        f("kv_cache_gib").unwrap()
    ));
    let tokens = m["kv_cache_tokens"].as_u64().unwrap();
    let sep = |n: u64| {
        let d = n.to_string();
        let mut out = String::new();
        for (i, ch) in d.chars().enumerate() {
            if i > 0 && (d.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    s.push_str(&format!(
        "{p} [kv_cache_utils.py:1319] GPU KV cache size: {} tokens\n",
        sep(tokens)
    ));
    s.push_str(&format!(
        "{p} [kv_cache_utils.py:1325] Maximum concurrency for {} tokens per request: {:.2}x\n",
        sep(m["max_concurrency_request_tokens"].as_u64().unwrap()),
        f("max_concurrency").unwrap()
    ));
    s
}

#[test]
fn every_vllm_logs_case_rendered_in_its_release_format_parses_back() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tools/vllm-logs/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).unwrap();
        let id = c["id"].as_str().unwrap();
        let log = parse(render(&c).as_bytes()).unwrap_or_else(|e| panic!("{id}: {e}"));
        let m = &c["measured"];
        let checks: &[(&str, &str)] = if c["engine"] == "V0" {
            &[("gpu_blocks", "gpu_blocks"), ("cpu_blocks", "cpu_blocks")]
        } else {
            assert_eq!(log.engine, Some(Engine::Vllm));
            assert_eq!(log.engine_version.as_deref(), c["vllm_version"].as_str());
            &[
                ("weights_gib", "weights"),
                ("total_gpu_memory_gib", "total_gpu_memory"),
                ("usable_memory_gib", "usable_memory"),
                ("activation_peak_gib", "activation_peak"),
                ("non_torch_gib", "non_torch"),
                ("cuda_graph_gib", "cuda_graph"),
                ("kv_cache_gib", "kv_cache"),
                ("kv_cache_tokens", "kv_cache_tokens"),
                ("max_concurrency", "max_concurrency"),
                (
                    "max_concurrency_request_tokens",
                    "max_concurrency_request_tokens",
                ),
            ]
        };
        for (theirs, ours) in checks {
            let want = m[*theirs].as_f64().unwrap();
            let got = log
                .figure(ours)
                .unwrap_or_else(|| panic!("{id}: no {ours}"))
                .value;
            assert!((got - want).abs() < 0.005, "{id}: {ours} {got} vs {want}");
        }
        n += 1;
    }
    assert_eq!(n, 26);
}
