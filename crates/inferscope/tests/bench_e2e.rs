//! End-to-end: the real `inferscope bench` binary against a real llama.cpp `llama-server`
//! serving a tiny generated model (issue 8 done-when).
//!
//! `scripts/test` sets the server up (built from the llama-cpp-python sdist on PyPI, ~9 min once,
//! cached in ~/.cache/inferscope-llama); `common::llama_server` finds it. Without it the test
//! fails naming that command, unless `INFERSCOPE_SKIP_E2E=1` outside CI.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One llama-server load at a time: the tests of this file run in parallel threads, and a
/// second server streaming next to an A/A pair is the neighbour load that makes A′ slower than
/// A (seen: itl_p50 +13 % "significant" while the other test ran). A single-run comparison
/// cannot see drift between runs; `bench --repeat` can (docs/bench.md).
static ONE_SERVER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Kills the server when the test ends, also on panic: SIGTERM, then SIGKILL after 10 s.
struct ServerGuard {
    child: Child,
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(500),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.take(1 << 20).read_to_string(&mut out).ok()?;
    Some(out)
}

fn start_server(bin: &Path, gguf: &Path, log: &Path) -> (ServerGuard, u16) {
    start_server_slots(bin, gguf, log, 4, 2)
}

/// llama-server with `slots` parallel sequences (`-np`) sharing an 8192-token context, on
/// `threads` CPU threads (`-t`).
fn start_server_slots(
    bin: &Path,
    gguf: &Path,
    log: &Path,
    slots: u32,
    threads: u32,
) -> (ServerGuard, u16) {
    let port = free_port();
    let logf = std::fs::File::create(log).unwrap();
    let child = Command::new(bin)
        .args(["-m"])
        .arg(gguf)
        .args(["--alias", "tiny", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args([
            "-c",
            "8192",
            "-np",
            &slots.to_string(),
            "-t",
            &threads.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(logf.try_clone().unwrap())
        .stderr(logf)
        .spawn()
        .expect("start llama-server");
    let guard = ServerGuard { child };
    let t = Instant::now();
    loop {
        if let Some(r) = http_get(port, "/health")
            && r.starts_with("HTTP/1.1 200")
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "llama-server did not become healthy; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (guard, port)
}

/// Run the binary with a hard wall-clock limit.
fn run_bench(args: &[String]) -> (ExitStatus, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("inferscope bench did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, out, err)
}

#[test]
fn bench_against_a_real_llama_server() {
    let Some((bin, gguf)) = common::llama_server() else {
        return;
    };
    let _one = ONE_SERVER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start_server(&bin, &gguf, &dir.path().join("server.log"));
    let url = format!("http://127.0.0.1:{port}");
    let p = |n: &str| dir.path().join(n).display().to_string();
    // The Hugging Face tokenizer the setup script writes beside the model (same vocabulary).
    let tokenizer = gguf.with_file_name("tok").join("tokenizer.json");

    // Completions, streaming, closed loop at concurrency 2, 20 requests of 16 tokens, with the
    // local tokenizer checked against the server's usage.
    let args: Vec<String> = [
        "bench",
        "--url",
        &url,
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--warmup",
        "2",
        "--dataset",
        "random:in=32,out=16",
        "--slo",
        "ttft=5s",
        "--out",
        &p("c.json"),
        "--trace",
        &p("c.jsonl"),
        "--plot",
        &p("plots"),
        "--quiet",
        "--timeout",
        "30s",
        "--tokenizer",
        &tokenizer.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (status, out, err) = run_bench(&args);
    assert!(
        status.success(),
        "bench failed: {status}\nstdout:\n{out}\nstderr:\n{err}"
    );
    eprintln!("{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("c.json")).unwrap()).unwrap();
    assert_eq!(r["valid"], true, "{r:#}");
    assert_eq!(r["requests"]["completed"], 20);
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(r["requests"]["warmup"], 2);
    assert!(r["output_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(r["requests_per_s"].as_f64().unwrap() > 0.0);
    // The tiny model cannot sample EOS, so every request yields exactly max_tokens.
    assert_eq!(r["output_tokens"], 20 * 16);
    assert_eq!(r["token_count_source"], "usage");
    assert_eq!(r["settings"]["tokenizer"]["vocab_size"], 997);
    // Counted as continuations, the generated texts give llama-server's own counts.
    let agree = &r["tokenizer_vs_usage"];
    eprintln!("tokenizer vs usage: {agree}");
    assert_eq!(agree["requests"], 20);
    assert_eq!(agree["equal"], 20, "{agree}");
    assert_eq!(r["settings"]["request"]["model"], "tiny");
    assert!(
        r["server"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "tiny"),
        "{}",
        r["server"]
    );
    for k in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] {
        for f in ["mean", "p50", "p90", "p95", "p99", "p999"] {
            assert!(r[k][f].as_f64().unwrap() > 0.0, "{k}.{f}: {}", r[k]);
        }
    }
    assert!(r["client"]["cpu_s_per_output_token"].as_f64().unwrap() > 0.0);
    let trace = std::fs::read_to_string(p("c.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 22);
    // Prompt tokens per the local tokenizer (text + BOS) equal the server's usage.
    for line in trace.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(rec["input_tokens"].as_u64().unwrap() > 0, "{rec}");
        assert_eq!(rec["tokenizer_input_tokens"], rec["input_tokens"], "{rec}");
        // With --tokenizer, `random:in=32` is 32 tokens (whole words, so at most one word
        // short) plus the BOS the server adds.
        let n = rec["input_tokens"].as_u64().unwrap();
        assert!((30..=33).contains(&n), "{rec}");
    }
    assert!(Path::new(&p("plots")).join("ttft_cdf.svg").is_file());

    // Chat, streaming, open loop: 6 requests at 4/s.
    let args: Vec<String> = [
        "bench",
        "--url",
        &url,
        "--api",
        "chat",
        "--rate",
        "4",
        "--requests",
        "6",
        "--dataset",
        "random:in=16,out=8",
        "--json",
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (status, out, err) = run_bench(&args);
    assert!(
        status.success(),
        "chat bench failed: {status}\n{out}\n{err}"
    );
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["requests"]["completed"], 6);
    assert_eq!(r["output_tokens"], 6 * 8);

    // A run compared with itself is never a roll back: every delta is zero. With 6 requests the
    // interval of a p50 can be wider than its 10 % threshold, and then "inconclusive" (exit 0) is
    // the honest verdict; which one depends on the spread this run happened to have (a CI run
    // got tpot_p50 [-0.204, +0.204] ms around 0.701 ms), so both are accepted.
    let args: Vec<String> = ["compare", &p("c.json"), &p("c.json")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (status, out, _) = run_bench(&args);
    assert!(status.success(), "{out}");
    assert!(
        out.contains("verdict: keep") || out.contains("verdict: inconclusive"),
        "{out}"
    );
    assert!(!out.contains("roll back"), "{out}");
}

/// Issue 16 done-when against the real server: two identical servers are kept or inconclusive,
/// never rolled back, and a server change that really slows it rolls back: `-np 1` instead of
/// `-np 8` under 8 concurrent streams queues each request behind the others (TTFT p50 ~5 →
/// ~45 ms here). Each side is five runs (`--repeat 5`), so the verdict rests on the variance
/// between runs: single runs rolled back an A/A pair 1 time in 3 (a whole run shifts with the
/// machine's load, which resampling requests cannot see). Order A, change, A′ puts the change
/// between the two baselines, so a drift over time shows as A/A noise, not as the change's
/// effect. Measured on this 2-core VM while another build ran (docs/bench.md): A/A keep or
/// inconclusive 3/3, roll back 3/3. A whole-machine slowdown between the A and A′ blocks (seen
/// once in seven full runs) gets one more fresh A/A pair, which must be kept.
#[test]
fn compare_two_identical_real_llama_server_runs() {
    let Some((bin, gguf)) = common::llama_server() else {
        return;
    };
    let _one = ONE_SERVER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).display().to_string();
    let run = |name: &str, slots: u32| {
        let (_server, port) =
            // One server thread: llama.cpp's threads spin while they wait, and two of them on a
            // 2-core machine with any neighbour stretched a run from 8 s to 100 s.
            start_server_slots(&bin, &gguf, &dir.path().join(format!("{name}.log")), slots, 1);
        // A fresh llama-server's first second is slow whatever the warm-up count: the first of
        // five runs had TTFT p50 27–44 ms against 4 ms for the rest, even with 32 warm-up
        // requests per run, and a second `bench` process against the same server did not see
        // it. One unmeasured run first, as a user warming a server before measuring.
        let url = format!("http://127.0.0.1:{port}");
        // The same load for the warm-up and the measured runs; `extra` adds the measured flags.
        let load = |extra: &[&str]| -> Vec<String> {
            let common = [
                "bench",
                "--url",
                &url,
                "--concurrency",
                "8",
                "--requests",
                "96",
            ];
            let tail = ["--dataset", "random:in=64,out=16,spread=0", "--quiet"];
            common
                .iter()
                .chain(extra)
                .chain(tail.iter())
                .map(|s| s.to_string())
                .collect()
        };
        let (status, out, err) = run_bench(&load(&[]));
        assert!(status.success(), "{name} warm-up: {out}\n{err}");
        let (json, trace) = (p(&format!("{name}.json")), p(&format!("{name}.jsonl")));
        let args = load(&[
            "--warmup", "8",
            // Five runs per side: compare then judges on the variance between runs, the only
            // error bar that covers what shifts a whole run (single-run A/A pairs here rolled
            // back 1 time in 3 on tpot_p50 +39 % with nothing changed). With three, Welch's
            // test has ~2 degrees of freedom and a 4× TTFT change was not significant at the
            // Bonferroni-corrected level half the time.
            "--repeat", "5", "--out", &json, "--trace", &trace,
        ]);
        let (status, out, err) = run_bench(&args);
        assert!(status.success(), "{name}: {out}\n{err}");
    };
    run("a", 8);
    run("slots1", 1);
    run("a2", 8);
    let cmp_pair = |a: &str, b: &str| {
        let args: Vec<String> = ["compare", &p(a), &p(b), "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (status, out, _) = run_bench(&args);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (
            status.code(),
            v["verdict"].as_str().unwrap_or("").to_string(),
            v,
        )
    };
    let (mut code, mut verdict, mut v) = cmp_pair("a.json", "a2.json");
    eprintln!("real llama-server A/A: {verdict}, reasons {}", v["reasons"]);
    if verdict == "roll_back" {
        // A whole-machine slowdown on this shared VM (seen once in seven full runs: every
        // metric of all five A′ runs 25–40 % worse, TPOT included, nothing else running here)
        // is, statistically, a real change between the two blocks of runs; no test on
        // separate blocks can tell it from a regression. One fresh A/A pair more: a false
        // roll back that repeats is the tool's fault, not the machine's.
        run("a3", 8);
        run("a4", 8);
        (code, verdict, v) = cmp_pair("a3.json", "a4.json");
        eprintln!(
            "real llama-server A/A again: {verdict}, reasons {}",
            v["reasons"]
        );
    }
    assert!(verdict == "keep" || verdict == "inconclusive", "{v}");
    assert_eq!(code, Some(0));
    let (code, verdict, v) = cmp_pair("a.json", "slots1.json");
    eprintln!(
        "real llama-server -np 8 -> -np 1: {verdict}, reasons {}",
        v["reasons"]
    );
    assert_eq!(verdict, "roll_back", "{v}");
    assert_eq!(code, Some(1));
}
