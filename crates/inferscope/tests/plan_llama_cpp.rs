//! `inferscope plan -- llama-server ...` agrees with what the real llama-server allocated, cell for
//! cell: every start-up log in fixtures/tools/llama-server (captured by
//! scripts/capture_llama_server_logs.sh from the llama-server of llama-cpp-python 0.3.36) gives
//! n_ctx, n_ctx_seq, slots, the per-slot context, the unified flag and the KV cache size in MiB.

mod common;

use common::repo;
use std::process::Command;

/// What a log says llama.cpp did.
#[derive(Debug, PartialEq)]
struct Allocated {
    n_ctx: u64,
    n_ctx_seq: u64,
    slots: u64,
    n_ctx_slot: u64,
    kv_unified: bool,
    /// Sum of every `llama_kv_cache: size = X MiB` (a sliding-window model prints two).
    kv_cache_mib: f64,
    /// `creating     SWA KV cache, size = N cells`.
    swa_cells: Option<u64>,
}

fn after<'a>(log: &'a str, key: &str) -> &'a str {
    let line = log
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("no `{key}` in the log"));
    line.split_once(key).unwrap().1.trim()
}

fn number(s: &str) -> u64 {
    s.split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

fn allocated(log: &str) -> Allocated {
    let slots_line = after(log, "load_model: initializing, n_slots = ");
    Allocated {
        n_ctx: number(after(log, "llama_context: n_ctx                 = ")),
        n_ctx_seq: number(after(log, "llama_context: n_ctx_seq             = ")),
        slots: number(slots_line),
        n_ctx_slot: number(after(slots_line, "n_ctx_slot = ")),
        kv_unified: after(log, "llama_context: kv_unified            = ") == "true",
        kv_cache_mib: log
            .lines()
            .filter_map(|l| l.split_once("llama_kv_cache: size = "))
            .map(|(_, r)| r.split_whitespace().next().unwrap().parse::<f64>().unwrap())
            .sum(),
        swa_cells: log
            .lines()
            .find_map(|l| l.split_once("creating     SWA KV cache, size = "))
            .map(|(_, r)| number(r)),
    }
}

#[test]
fn plans_match_every_real_llama_server_log() {
    let dir = repo().join("fixtures/tools/llama-server");
    let tmp = tempfile::tempdir().unwrap();
    // The GGUF headers, restored to their files' lengths (sparse: no tensor data is needed).
    for model in ["tiny", "tiny4", "gemma3"] {
        let head = std::fs::read(dir.join(format!("{model}.gguf.head"))).unwrap();
        let size: u64 = std::fs::read_to_string(dir.join(format!("{model}.gguf.head.size")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let path = tmp.path().join(format!("{model}.gguf"));
        std::fs::write(&path, &head).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(size)
            .unwrap();
    }
    let mut checked = 0;
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    for log_path in logs {
        let log = std::fs::read_to_string(&log_path).unwrap();
        let command = after(&log, "# command: ");
        let mut words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        // `-m tiny.gguf` → the restored file.
        let m = words.iter().position(|w| w == "-m").unwrap();
        words[m + 1] = tmp.path().join(&words[m + 1]).display().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(["plan", "--json", "--gpu-memory-gib", "24", "--"])
            .args(&words)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", log_path.display());
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let l = &plan["llama_cpp"];
        let planned = Allocated {
            n_ctx: l["n_ctx"].as_u64().unwrap(),
            n_ctx_seq: l["n_ctx_seq"].as_u64().unwrap(),
            slots: l["slots"].as_u64().unwrap(),
            n_ctx_slot: l["n_ctx_slot"].as_u64().unwrap(),
            kv_unified: l["kv_unified"].as_bool().unwrap(),
            kv_cache_mib: l["kv_cache_mib"].as_f64().unwrap(),
            swa_cells: l["swa_cells"].as_u64(),
        };
        let real = allocated(&log);
        // llama.cpp prints MiB with two decimals; ours is rounded the same way.
        assert_eq!(planned, real, "{}: {command}", log_path.display());
        assert_eq!(plan["max_model_len"], real.n_ctx_slot);
        assert_eq!(plan["engine"]["name"], "llama_cpp", "{}", plan["engine"]);
        // the file's own tensors, each in its ggml type: llama.cpp's model buffer (all on the
        // CPU in these CPU-only runs) holds the same bytes, up to its 32-byte tensor alignment
        let buffer_mib: f64 = after(&log, "CPU_Mapped model buffer size =")
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let ours_mib = plan["weights_bytes_total"].as_f64().unwrap() / 1048576.0;
        assert!(
            (ours_mib - buffer_mib).abs() <= 0.01 * buffer_mib + 0.01,
            "{}: weights {ours_mib:.2} MiB vs model buffer {buffer_mib:.2} MiB",
            log_path.display()
        );
        assert!(
            plan["assumptions"]
                .to_string()
                .contains("exact bytes of the file's"),
            "{}",
            plan["assumptions"]
        );
        checked += 1;
    }
    assert_eq!(checked, 17);
}

#[test]
fn a_llama_server_plan_says_what_does_not_fit_and_why() {
    let dir = repo().join("fixtures/tools/llama-server");
    let tmp = tempfile::tempdir().unwrap();
    let head = std::fs::read(dir.join("tiny4.gguf.head")).unwrap();
    let path = tmp.path().join("tiny4.gguf");
    std::fs::write(&path, &head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(12_562_240)
        .unwrap();
    let p = path.display().to_string();
    let plan = |extra: &[&str]| -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(["plan", "--json", "--gpu-memory-gib", "1"])
            .args(extra)
            .args(["--", "llama-server", "-m", &p])
            .args(["-c", "1000000", "-np", "1", "-ngl", "all"])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // 1,000,192 f16 cells (a million, rounded up to 256) × 4 layers × (K + V) × 256 values ×
    // 2 bytes = 3907 MiB of KV on a 1 GiB GPU.
    let p1 = plan(&[]);
    assert_eq!(p1["fits"], false);
    let problem = p1["problems"][0].as_str().unwrap();
    assert!(problem.contains("exceed the GPU's 1.00 GiB"), "{problem}");
    assert_eq!(p1["llama_cpp"]["kv_cache_mib"], 3907.0);
    // A quantized V cache with flash attention off is refused, as llama.cpp refuses it.
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "plan",
            "--json",
            "--gpu-memory-gib",
            "24",
            "--",
            "llama-server",
            "-m",
            &p,
        ])
        .args(["-ctv", "q8_0", "-fa", "off"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fits"], false);
    assert!(
        v["problems"][0]
            .as_str()
            .unwrap()
            .contains("needs flash attention"),
        "{}",
        v["problems"]
    );
}
