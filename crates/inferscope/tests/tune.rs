//! `inferscope tune` and `bench --find-capacity` end to end (issue 20 done-when): the real
//! llama-server (the tiny model `scripts/test` sets up), a scripted server with a known service
//! time (tests/scripts/scripted_server.py), and bad inputs.

mod common;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scripted() -> String {
    common::repo()
        .join("crates/inferscope/tests/scripts/scripted_server.py")
        .display()
        .to_string()
}

/// Run the binary with a hard wall-clock limit; (exit code, stdout, stderr).
fn inferscope(args: &[String], limit: Duration) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    // Drain pipes in threads so a chatty child cannot block.
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

/// No process of the group (nor the leader) is left.
fn assert_gone(pid: u64) {
    // SAFETY: signal 0 only checks existence.
    let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
    let group = unsafe { libc::killpg(pid as i32, 0) } == 0;
    assert!(!alive, "server process {pid} is still running");
    assert!(!group, "process group {pid} still has members");
}

fn candidate<'a>(report: &'a Value, key: &str, value: &str) -> &'a Value {
    report["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["settings"][key] == value)
        .unwrap_or_else(|| panic!("no candidate {key}={value} in {report:#}"))
}

/// Issue 20, first done-when, against the real llama-server.
///
/// The issue asks for `-np 4` to beat `-np 1` on *throughput*. On this project's test machine (2
/// shared CPU cores, llama.cpp on the CPU, the 2-layer tiny model) that cannot be shown reliably: the cost of
/// a token is mostly per sequence (the model fits in cache; little is saved by batching). Warmed
/// servers give `-np 4` +20 % to +85 % more throughput than `-np 1`, but one candidate's runs
/// spread by ±25 % on a shared 2-core VM, and the throughput verdict was significant at the
/// corrected level in only 3 of 6 tune runs (see docs/tune.md). Asserting it would be a coin
/// toss. What `-np` does change, robustly, is queueing: at concurrency 4 with one slot, every request
/// waits for up to three 128-token generations before its first token (p90 TTFT ≈ 700 ms
/// measured), with four slots it starts at once (≈ 10 ms). So this test tunes the same grid
/// for *goodput* under `ttft=100ms`, where the right answer is unambiguous, and checks that
/// the winner has `-np 4`, that the verdict is significant against `-np 1 -t 1` (between-run
/// statistics over 4 runs each), that report, plots and journal are written, and that a rerun
/// with the same journal starts no server.
#[test]
fn tune_llama_server_slots_and_threads() {
    let Some((bin, gguf)) = common::llama_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tune");
    let server = format!(
        "{} -m {} --host 127.0.0.1 --port {{port}} -c 4096 -np {{np}} -t {{t}}",
        bin.display(),
        gguf.display()
    );
    let args: Vec<String> = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "np=1,4",
        "--set",
        "t=1,2",
        "--concurrency",
        "4",
        "--workload",
        "random:in=8,out=128",
        "--slo",
        "ttft=100ms",
        "--objective",
        "goodput",
        "--duration",
        "2s",
        "--warmup",
        "4",
        "--repeat",
        "4",
        "--startup-timeout",
        "60s",
        "--grace",
        "10s",
        "--plan-gpu",
        "rtx-4090",
        "--out",
        &out.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(300));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    eprintln!("{text}");
    // The contract keys.
    assert_eq!(r["winner"]["settings"]["np"], "4", "{text}");
    assert!(r["winner"]["command"].as_str().unwrap().contains("-np 4"));
    assert!(
        r["winner"]["command"]
            .as_str()
            .unwrap()
            .contains("--port 8000")
    );
    assert_eq!(r["significant"], true, "{text}");
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("is better than the baseline `np=1 t=1`")
            && verdict.ends_with("significant"),
        "{verdict}"
    );
    assert_eq!(r["comparison"]["method"], "between_runs");
    assert_eq!(r["candidates"].as_array().unwrap().len(), 4);
    for c in r["candidates"].as_array().unwrap() {
        assert_eq!(c["status"], "measured", "{c:#}");
        assert!(c["result"]["ttft_ms"]["p90"].as_f64().is_some());
        // planned with the llama.cpp model: it fits an RTX 4090
        assert_eq!(c["plan"]["fits"], true, "{c:#}");
        for pid in c["server_pids"].as_array().unwrap() {
            assert_gone(pid.as_u64().unwrap());
        }
    }
    // the finalists have their repeats; the baseline's goodput is far below the winner's
    let base = candidate(&r, "t", "1");
    let base = if base["settings"]["np"] == "1" {
        base
    } else {
        r["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["settings"]["np"] == "1" && c["settings"]["t"] == "1")
            .unwrap()
    };
    assert_eq!(base["objective_runs"].as_array().unwrap().len(), 4);
    let winner = r["candidates"][0].clone();
    assert_eq!(winner["rank"], 1);
    assert_eq!(winner["objective_runs"].as_array().unwrap().len(), 4);
    assert!(
        winner["objective"].as_f64().unwrap() > 2.0 * base["objective"].as_f64().unwrap(),
        "{text}"
    );
    // files
    for f in [
        "report.json",
        "report.txt",
        "pareto_ttft.svg",
        "pareto_tpot.svg",
        "journal.jsonl",
        "winner.sh",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let svg = std::fs::read_to_string(out.join("pareto_ttft.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("np=4"));
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    let runs = journal
        .lines()
        .filter(|l| l.contains(r#""kind":"run""#))
        .count();
    // 4 screened; the better half of the 3 others (2) + the baseline; then the leader + the
    // baseline, twice, up to 4 runs each: 4 + 3 + 2 + 2
    assert_eq!(runs, 11, "{journal}");

    // Rerun with the same journal: nothing new runs, the same winner.
    let (code, stdout2, stderr2) = inferscope(&args, Duration::from_secs(120));
    assert_eq!(code, 0, "stderr:\n{stderr2}");
    let r2: Value = serde_json::from_str(&stdout2).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("journal.jsonl")).unwrap(),
        journal,
        "the rerun wrote to the journal"
    );
    assert_eq!(r2["winner"], r["winner"]);
    for c in r2["candidates"].as_array().unwrap() {
        assert!(c["server_pids"].as_array().unwrap().is_empty(), "{c:#}");
    }
}

/// Issue 20, second done-when: a server that exits at start-up, one that never becomes ready and
/// one the planner says does not fit are each reported with the reason, the run goes on, and no
/// server process is left.
#[test]
fn tune_reports_failures_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    // `hang` runs under `sh` with a child `sleep`, so stopping must take the whole group.
    let server = format!(
        "sh -c 'if [ {{mode}} = hang ]; then echo loading forever >&2; sleep 300; fi; exec python3 {} --port {{port}} --mode {{mode}} --slots 4 --service-ms 20 --tokens 4'",
        scripted()
    );
    let args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "mode=serve,exit,hang",
        "--concurrency",
        "4",
        "--workload",
        "random:in=8,out=4",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--repeat",
        "2",
        "--startup-timeout",
        "3s",
        "--grace",
        "2s",
        "--out",
        &out.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let serve = candidate(&r, "mode", "serve");
    assert_eq!(serve["status"], "measured");
    assert_eq!(serve["objective_runs"].as_array().unwrap().len(), 2);
    let exit = candidate(&r, "mode", "exit");
    assert_eq!(exit["status"], "failed");
    assert_eq!(
        exit["reason"],
        "the server exited at start-up (exit status: 3)"
    );
    assert!(
        exit["log_tail"]
            .as_str()
            .unwrap()
            .contains("error: cannot load model (scripted failure")
    );
    let hang = candidate(&r, "mode", "hang");
    assert_eq!(hang["status"], "failed");
    assert_eq!(
        hang["reason"],
        "the server did not become ready (GET /health or /v1/models) within 3s"
    );
    assert!(
        hang["log_tail"]
            .as_str()
            .unwrap()
            .contains("loading forever")
    );
    let mut pids = 0;
    for c in r["candidates"].as_array().unwrap() {
        for pid in c["server_pids"].as_array().unwrap() {
            assert_gone(pid.as_u64().unwrap());
            pids += 1;
        }
    }
    assert_eq!(pids, 4, "serve twice, exit once, hang once");
    assert_eq!(r["winner"]["settings"]["mode"], "serve");
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("    | loading forever"), "{text}");

    // The planner: with the llama.cpp model, a 8M-token context on a 1 GiB GPU does not fit;
    // the run goes on with the candidate that does.
    let Some((bin, gguf)) = common::llama_server() else {
        return;
    };
    let server = format!(
        "{} -m {} --host 127.0.0.1 --port {{port}} -np 1 -t 1 -ngl 99 -c {{ctx}}",
        bin.display(),
        gguf.display()
    );
    let out2 = dir.path().join("t2");
    let args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "ctx=8000000,1024",
        "--plan-gpu-memory-gib",
        "1",
        "--concurrency",
        "1",
        "--workload",
        "random:in=8,out=4",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--out",
        &out2.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(120));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let big = candidate(&r, "ctx", "8000000");
    assert_eq!(big["status"], "skipped");
    let why = big["reason"].as_str().unwrap();
    assert!(
        why.starts_with("the planner says it does not fit: ")
            && why.contains("exceed the GPU's 1.00 GiB"),
        "{why}"
    );
    assert!(big["server_pids"].as_array().unwrap().is_empty());
    assert_eq!(big["plan"]["fits"], false);
    let small = candidate(&r, "ctx", "1024");
    assert_eq!(small["status"], "measured", "{small:#}");
    for pid in small["server_pids"].as_array().unwrap() {
        assert_gone(pid.as_u64().unwrap());
    }
    // the baseline (first candidate) was skipped: no significance claimed
    assert_eq!(r["significant"], false);
    assert!(r["verdict"].as_str().unwrap().contains("was not measured"));
}

/// Issue 20, third done-when: capacity search against a server of known service time.
///
/// N = 16 slots served first come, first served; each request holds one for S = 200 ms: the
/// server completes at most μ = N/S = 80 requests/s. That is the analytic capacity. Below μ the
/// queue is stable and waits are short; above it the queue grows for the whole probe by
/// (λ − μ) requests each second, so requests sent t seconds in wait about (λ − μ)·t/μ. With
/// ttft ≤ 600 ms (S plus 400 ms of waiting) and 95 % attainment over a 5 s probe, the fluid
/// picture still passes up to λ ≈ μ·(1 + 0.4/(0.95·5)) ≈ 1.08 μ, while Poisson bursts below μ
/// and stalls of this shared machine pull the edge down (an M/D/16 simulation over 30 seeds
/// puts it at 1.01–1.18 μ, median 1.07 μ, before stalls). Measured: 77.5 and 77.7 requests/s.
/// The search (5 % resolution) must land within 10 % of μ.
///
/// (Why not fewer, shorter slots: at S = 100 ms, N = 8 and ttft ≤ 300 ms, one 200 ms stall of
/// a loaded 2-core machine leaves a backlog that 0.07·μ of spare capacity needs seconds to
/// drain; the search then found 0.89 μ.)
#[test]
fn capacity_search_finds_the_analytic_rate() {
    // In process (crates/inferscope-testkit): the same queue as tests/scripts/scripted_server.py.
    let server = inferscope_testkit::Script::new(inferscope_testkit::Mode::slots(
        16,
        Duration::from_millis(200),
        2,
    ))
    .start_in_thread();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cap.json");
    let args = strings(&[
        "bench",
        "--url",
        &server.url(),
        "--find-capacity",
        "--slo",
        "ttft=600ms",
        "--attainment",
        "0.95",
        "--concurrency",
        "32",
        "--duration",
        "5s",
        "--dataset",
        "random:in=8,out=2",
        "--out",
        &json.display().to_string(),
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(240));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cap = r["capacity"]["requests_per_s"].as_f64().unwrap();
    assert!(
        (cap - 80.0).abs() <= 8.0,
        "capacity {cap:.1} requests/s is not within 10 % of N/S = 80\n{stdout}"
    );
    let probes = r["capacity"]["probes"].as_array().unwrap();
    assert!(probes.len() <= 8);
    assert_eq!(probes.len(), r["probes"].as_array().unwrap().len());
    assert!(stdout.contains("capacity: "), "{stdout}");
}

/// Bad command lines: one clear error, exit 2, nothing started.
#[test]
fn bad_tune_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--server",
                "srv --port {port} -np {np}",
                "--set",
                "np=1",
                "--set",
                "t=1,2",
            ],
            "--set t: the server command has no {t} placeholder, so its values would change nothing",
        ),
        (
            vec![
                "--server",
                "srv --port {port} -np {np} -t {threads}",
                "--set",
                "np=1",
            ],
            "--server `srv --port {port} -np {np} -t {threads}`: placeholder {threads} has no --set threads=...; known: np, port, gpus",
        ),
        (
            vec!["--server", "srv -np {np}", "--set", "np=1"],
            "--server `srv -np {np}`: no {port} placeholder; each candidate is started on a free port, so write e.g. --port {port}",
        ),
        (
            vec!["--server", "srv --port {port} {gpus}"],
            "--server `srv --port {port} {gpus}`: uses {gpus} but no --gpus was given",
        ),
        (
            vec!["--server", "srv --port {port", "--set", "np=1"],
            "--server: `{port`: `{` without a closing `}` (write {{ for a literal brace)",
        ),
        (
            vec!["--server", "srv 'unterminated --port {port}"],
            "--server: `srv 'unterminated --port {port}`: unterminated single quote",
        ),
        (
            vec!["--server", "srv --port {port}", "--objective", "capacity"],
            "--objective capacity needs --slo (e.g. ttft=500ms,tpot=50ms)",
        ),
    ];
    for (extra, msg) in cases {
        let mut args = vec!["tune", "--out", &out, "--quiet"];
        args.extend(extra);
        let (code, stdout, stderr) = inferscope(&strings(&args), Duration::from_secs(30));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert_eq!(stderr, format!("inferscope: error: {msg}\n"), "{args:?}");
    }
    // --set parse errors come from clap (exit 2 as well)
    let (code, _, stderr) = inferscope(
        &strings(&["tune", "--server", "s --port {port}", "--set", "np=1,1"]),
        Duration::from_secs(30),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--set `np=1,1`: value `1` is listed twice"),
        "{stderr}"
    );
    // a zero time limit per request would fail every request: refused by clap, naming the flag
    for flag in ["--timeout", "--idle-timeout"] {
        let (code, _, stderr) = inferscope(
            &strings(&["tune", "--server", "s --port {port}", flag, "0s"]),
            Duration::from_secs(30),
        );
        assert_eq!(code, 2);
        assert!(
            stderr.contains(&format!("invalid value '0s' for '{flag} <D>'"))
                && stderr.contains("out of range (above 0, at most a year)"),
            "{stderr}"
        );
    }
    // a journal from another tuning run is refused, naming the file
    let j = dir.path().join("j.jsonl");
    std::fs::write(
        &j,
        "{\"kind\":\"header\",\"version\":1,\"fingerprint\":\"something else\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = inferscope(
        &strings(&[
            "tune",
            "--server",
            "s --port {port}",
            "--journal",
            &j.display().to_string(),
            "--out",
            &out,
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with(&format!(
            "inferscope: error: {}: written for another tuning run",
            j.display()
        )),
        "{stderr}"
    );
}

/// Ctrl-C in the middle of a measurement: the server is stopped, the report of what finished is
/// written, exit code 130, and the interrupted run is not in the journal (a rerun redoes it).
#[test]
fn tune_interrupted_stops_the_server_and_reports() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let server = format!(
        "python3 {} --port {{port}} --slots {{slots}} --service-ms 20 --tokens 2",
        scripted()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "tune",
            "--server",
            &server,
            "--set",
            "slots=2,4",
            "--concurrency",
            "2",
            "--workload",
            "random:in=8,out=2",
            "--duration",
            "60s",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--out",
            &out.display().to_string(),
            "--json",
        ])
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("no ready line");
        seen.push(line.clone());
        if line.contains("ready in") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tune did not stop after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{seen:?}");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["interrupted"], true);
    assert!(r["winner"].is_null());
    let first = candidate(&r, "slots", "2");
    assert_eq!(first["reason"], "not tried: interrupted");
    let pids = first["server_pids"].as_array().unwrap();
    assert_eq!(pids.len(), 1);
    assert_gone(pids[0].as_u64().unwrap());
    assert!(out.join("report.json").is_file());
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 1, "only the header: {journal}");
}

/// `--budget`: runs start only while the elapsed time plus the runs' mean wall time fits; what
/// did not fit is reported as not tried. Also binds through `inferscope run --numa-node 0`
/// (every Linux host has node 0), so the winner gets `run` and `run --emit numactl` lines.
#[test]
fn tune_budget_says_what_was_not_tried() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let server = format!(
        "python3 {} --port {{port}} --slots {{n}} --service-ms 20 --tokens 2",
        scripted()
    );
    // Each run measures 3 s (plus start and stop), so 16 s cannot hold six candidates; the first
    // run's estimate (3 s + 2 s warm-up allowance + 10 s) fits.
    let args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "n=1,2,3,4,5,6",
        "--budget",
        "16s",
        "--numa-node",
        "0",
        "--concurrency",
        "2",
        "--workload",
        "random:in=8,out=2",
        "--duration",
        "3s",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--out",
        &out.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let t = Instant::now();
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(60));
    let took = t.elapsed();
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let cands = r["candidates"].as_array().unwrap();
    let measured = cands.iter().filter(|c| c["status"] == "measured").count();
    let skipped: Vec<&Value> = cands
        .iter()
        .filter(|c| c["reason"] == "not tried: the --budget was spent")
        .collect();
    assert!((1..=4).contains(&measured), "{measured} measured");
    assert_eq!(measured + skipped.len(), 6);
    for c in &skipped {
        assert_eq!(c["status"], "skipped");
    }
    assert_eq!(r["not_tried"].as_array().unwrap().len(), skipped.len());
    // said before starting (issue 27): the budget cannot run every candidate once
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("the --budget (16s) may be too small to run all 6 candidates once"),
        "{r:#}"
    );
    assert!(
        stderr.contains("too small to run all 6 candidates once"),
        "{stderr}"
    );
    // The budget bounds the run (plus one run's overshoot at most, and start-up of the binary).
    assert!(took < Duration::from_secs(16 + 8), "took {took:?}");
    // Bound through `run`: the recorded pid is the keeper's (its process group: `run` execs the
    // server in it), and it is gone.
    for c in cands {
        for pid in c["server_pids"].as_array().unwrap() {
            assert_gone(pid.as_u64().unwrap());
        }
    }
    let w = &r["winner"];
    assert!(
        w["run_command"]
            .as_str()
            .unwrap()
            .starts_with("inferscope run --numa-node 0 -- python3 "),
        "{w:#}"
    );
    assert!(
        w["run_emit"].as_str().unwrap().contains("numactl "),
        "{w:#}"
    );
}

/// Broken journals (fixtures/bad/tune/EXPECTED.md): one clear error naming the file, exit 2.
#[test]
fn bad_journals() {
    let rows = common::expected_rows("fixtures/bad/tune/EXPECTED.md");
    assert_eq!(rows.len(), 4);
    let dir = tempfile::tempdir().unwrap();
    for (file, message) in rows {
        let path = format!("fixtures/bad/tune/{file}");
        let (code, stdout, stderr) = inferscope(
            &strings(&[
                "tune",
                "--server",
                "s --port {port}",
                "--out",
                &dir.path().display().to_string(),
                "--journal",
                &path,
            ]),
            Duration::from_secs(30),
        );
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stdout.is_empty());
        assert_eq!(
            stderr.lines().next().unwrap(),
            format!("inferscope: error: {path}: {message}"),
            "{file}"
        );
    }
}

/// `tune --objective capacity`: each candidate gets a capacity search; 8 slots of 100 ms (80
/// requests/s) beat 2 slots (20 requests/s), with brackets that do not overlap.
#[test]
fn tune_capacity_objective_ranks_by_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let server = format!(
        "python3 {} --port {{port}} --slots {{n}} --service-ms 100 --tokens 2",
        scripted()
    );
    let args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "n=2,8",
        "--objective",
        "capacity",
        "--slo",
        "ttft=400ms",
        "--attainment",
        "0.95",
        "--max-probes",
        "5",
        "--concurrency",
        "16",
        "--workload",
        "random:in=8,out=2",
        "--duration",
        "2s",
        "--warmup",
        "0",
        "--out",
        &dir.path().join("t").display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(180));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["winner"]["settings"]["n"], "8");
    assert_eq!(r["significant"], true, "{}", r["verdict"]);
    let cap = |n: &str| {
        candidate(&r, "n", n)["capacity"]["requests_per_s"]
            .as_f64()
            .unwrap()
    };
    // within 25 % of N/S: short 2 s probes and 5 of them make a coarser search than the
    // capacity test above
    assert!((cap("8") - 80.0).abs() < 20.0, "{}", cap("8"));
    // Two slots queue more on Poisson bursts, and seed 0's first second at ~12 requests/s
    // brings 26 arrivals: over 2 s probes its edge lies well below N/S (7.6 measured; an exact
    // M/D/2 replay of those arrival times gives the same waits as the server), so only bound it.
    assert!(cap("2") > 2.0 && cap("2") <= 22.0, "{}", cap("2"));
    assert_eq!(
        candidate(&r, "n", "8")["objective_runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// `--baseline CMD` without any `--set`: a two-way comparison, the baseline keyed apart from the
/// single `default` candidate in the journal, so a rerun resumes both and runs nothing.
#[test]
fn tune_baseline_command_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let s = scripted();
    let args = strings(&[
        "tune",
        "--server",
        &format!("python3 {s} --port {{port}} --slots 4 --service-ms 50 --tokens 4"),
        "--baseline",
        &format!("python3 {s} --port {{port}} --slots 1 --service-ms 50 --tokens 4"),
        "--concurrency",
        "4",
        "--workload",
        "random:in=8,out=4",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--repeat",
        "2",
        "--out",
        &dir.path().join("t").display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(60));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    // 4 slots vs 1 at concurrency 4 and a fixed 50 ms service: ~4× the throughput
    assert_eq!(r["winner"]["label"], "default");
    assert_eq!(r["significant"], true, "{}", r["verdict"]);
    assert_eq!(r["baseline"], "baseline");
    let base = &r["candidates"][1];
    assert_eq!(base["label"], "baseline");
    assert!(
        base["settings"]["@baseline"]
            .as_str()
            .unwrap()
            .contains("--slots 1")
    );
    let (code, stdout2, _) = inferscope(&args, Duration::from_secs(60));
    assert_eq!(code, 0);
    let r2: Value = serde_json::from_str(&stdout2).unwrap();
    assert_eq!(r2["winner"], r["winner"]);
    for c in r2["candidates"].as_array().unwrap() {
        assert_eq!(c["objective_runs"].as_array().unwrap().len(), 2, "{c:#}");
        assert!(c["server_pids"].as_array().unwrap().is_empty());
    }
}

/// Issue 27 done-when (`bars`-style): two scripted servers of known speed, 24 and 4 ms per token
/// (8 tokens held for 192 and 32 ms; 4 slots at concurrency 4: ~167 vs ~1000 output tokens/s),
/// and a broken one, with a budget that ends round 2 after its first run. The slower is the
/// baseline (the issue's `--set itl=24,4`). Before the fix the baseline ran first in round 2, the
/// budget ended before the faster one's second run, and "rounds reached" ranked the slower first.
/// Now the leader runs first in a round, a cut round counts for nobody, the faster wins, the
/// broken one is reported failed and no server is left.
///
/// The budget (20 s): the first run's estimate is 5 s + 0 s warm-up + 10 s, which fits. A
/// measured run takes w ≈ 5.5–6.5 s (5 s measured, start and stop), the broken one b ≈ 0.5 s.
/// A run starts while elapsed + the mean wall so far fits: round 2's first run needs about
/// 2w + b + (2w + b)/3 ≤ 20 (w ≤ 7.0 s), and the run after it 3w + b + (3w + b)/4 > 20 to be cut
/// (w > 4.8 s). The test asserts the cut did land in round 2.
#[test]
fn tune_budget_cut_round_never_crowns_the_slower() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let server = format!(
        "sh -c 'if [ {{itl}} = broken ]; then exec python3 {s} --port {{port}} --mode exit; fi; exec python3 {s} --port {{port}} --slots 4 --tokens 8 --service-ms $(({{itl}} * 8))'",
        s = scripted()
    );
    let args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "itl=24,broken,4",
        "--objective",
        "throughput",
        "--budget",
        "20s",
        "--concurrency",
        "4",
        "--workload",
        "random:in=8,out=8",
        "--duration",
        "5s",
        "--warmup",
        "0s",
        "--repeat",
        "3",
        "--grace",
        "5s",
        "--out",
        &out.display().to_string(),
        "--json",
        "--quiet",
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(90));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    eprintln!("{text}\n{stderr}");
    let runs = |v: &str| {
        candidate(&r, "itl", v)["objective_runs"]
            .as_array()
            .unwrap()
            .len()
    };
    // the budget cut round 2 after the leader's run: the faster has 2 runs, the slower 1
    assert_eq!(
        (runs("4"), runs("24")),
        (2, 1),
        "the cut missed round 2:\n{text}"
    );
    assert_eq!(r["winner"]["settings"]["itl"], "4", "{text}");
    assert_eq!(r["candidates"][0]["settings"]["itl"], "4", "{text}");
    assert_eq!(r["candidates"][0]["ranked_runs"], 1, "{text}");
    assert_eq!(r["inconclusive"], false, "{text}");
    let fast = candidate(&r, "itl", "4")["objective"].as_f64().unwrap();
    let slow = candidate(&r, "itl", "24")["objective"].as_f64().unwrap();
    assert!(fast > 3.0 * slow, "{fast} vs {slow}\n{text}");
    assert!(
        r["not_tried"][0]
            .as_str()
            .unwrap()
            .starts_with("round 2 was cut short before `itl=24` ran"),
        "{text}"
    );
    let broken = candidate(&r, "itl", "broken");
    assert_eq!(broken["status"], "failed");
    assert_eq!(
        broken["reason"],
        "the server exited at start-up (exit status: 3)"
    );
    for c in r["candidates"].as_array().unwrap() {
        for pid in c["server_pids"].as_array().unwrap() {
            assert_gone(pid.as_u64().unwrap());
        }
    }
}

/// Issue 33 item 7: a `--set` value with newlines cannot break out of winner.sh's comment line
/// (before: `# inferscope tune winner: x=a` then `touch …` on a line of its own, run by `sh`).
/// The server runs under tune (it sees `INFERSCOPE_TEST_SERVE`); run by hand, the same command
/// exits at once, so running winner.sh only shows whether anything else ran.
#[test]
fn winner_script_quotes_hostile_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let pwned = dir.path().join("pwned");
    let hostile = format!("a\ntouch {}\n#", pwned.display());
    let server = format!(
        "sh -c 'test -n \"$INFERSCOPE_TEST_SERVE\" || exit 0; exec python3 {} --port {{port}} --slots 2 --service-ms 10 --tokens 2' {{x}}",
        scripted()
    );
    let status = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "tune",
            "--server",
            &server,
            "--set",
            &format!("x={hostile}"),
            "--concurrency",
            "2",
            "--workload",
            "random:in=8,out=2",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--out",
            &out.display().to_string(),
            "--quiet",
        ])
        .env("INFERSCOPE_TEST_SERVE", "1")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let script = out.join("winner.sh");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(!pwned.exists(), "tune itself ran the value");
    let run = Command::new("sh")
        .arg(&script)
        .env_remove("INFERSCOPE_TEST_SERVE")
        .output()
        .unwrap();
    assert!(run.status.success(), "{text}\n{run:?}");
    assert!(!pwned.exists(), "winner.sh ran the value:\n{text}");
    // the value is still there, escaped in the comment and quoted in the command
    assert!(text.contains("x=a\\ntouch "), "{text}");
    assert!(text.contains(&format!("'{hostile}'")), "{text}");
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Issue 33 item 5: `--api-key sk-…` in the server command reaches the server, but not stdout,
/// stderr, report.txt, report.json, winner.sh, plan.json or the journal (nor any other file
/// tune writes); a secret-named `--set` value is redacted too, and a rerun still resumes from
/// the redacted journal.
#[test]
fn tune_redacts_secrets_everywhere_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let seen = dir.path().join("key-the-server-got");
    let key = "sk-tuneTestSecret0123456789abcdef";
    let token = "hfsecretvalue42";
    let server = format!(
        "sh -c 'echo \"$2 $4\" > {seen}; exec python3 {s} --port {{port}} --slots {{n}} --service-ms 10 --tokens 2' sh --api-key {key} --hf-token {{hf_token}}",
        seen = seen.display(),
        s = scripted()
    );
    let mut args = strings(&[
        "tune",
        "--server",
        &server,
        "--set",
        "n=1,2",
        "--set",
        &format!("hf_token={token}"),
        "--concurrency",
        "2",
        "--workload",
        "random:in=8,out=2",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--out",
        &out.display().to_string(),
    ]);
    let (code, stdout, stderr) = inferscope(&args, Duration::from_secs(60));
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    // the real command ran with the real secrets
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap().trim(),
        format!("{key} {token}")
    );
    args.push("--json".into());
    let (code, json, stderr2) = inferscope(&args, Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr2}");
    let r: Value = serde_json::from_str(&json).unwrap();
    // resumed from the redacted journal: nothing ran again
    for c in r["candidates"].as_array().unwrap() {
        assert_eq!(c["status"], "measured", "{c:#}");
        assert!(c["server_pids"].as_array().unwrap().is_empty(), "{c:#}");
        assert_eq!(c["settings"]["hf_token"], "<redacted>");
    }
    assert!(
        r["winner"]["command"]
            .as_str()
            .unwrap()
            .contains("--api-key '<redacted>'")
    );
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("json", &json),
        ("stderr of the rerun", &stderr2),
    ] {
        assert!(
            !text.contains(key) && !text.contains(token),
            "{what}:\n{text}"
        );
    }
    let files = files_under(&out);
    for f in ["report.txt", "report.json", "winner.sh", "journal.jsonl"] {
        assert!(files.contains(&out.join(f)), "{f} missing: {files:?}");
    }
    assert!(files.iter().any(|f| f.ends_with("plan.json")));
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains(key) && !text.contains(token),
            "{} holds a secret:\n{text}",
            f.display()
        );
    }
}

/// Processes whose environment holds `marker` (the test's tree: tune, keepers, servers and their
/// `setsid` children all inherit it).
fn marked_processes(marker: &str) -> Vec<i32> {
    let needle = format!("INFERSCOPE_TEST_MARKER={marker}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        // zombies have an empty environ and are not running
        if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Issue 33 item 6: however tune ends — SIGINT, SIGTERM, SIGHUP (an ssh session dropping),
/// SIGQUIT or SIGKILL — no process it started is left, including a server's child that called
/// `setsid` (out of the server's process group and session). Before: SIGHUP and SIGQUIT killed
/// tune at once and left the server under init, SIGKILL too, and the `setsid` child survived
/// every stop. Every process of the test's tree carries a unique marker in its environment.
#[test]
fn tune_leaves_no_process_whatever_signal_ends_it() {
    use std::io::BufRead;
    for (sig, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGKILL, "SIGKILL"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("{}-{name}-{}", std::process::id(), dir.path().display());
        let server = format!(
            "sh -c 'setsid sleep 1000 & exec python3 {} --port {{port}} --slots 2 --service-ms 20 --tokens 2'",
            scripted()
        );
        let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args([
                "tune",
                "--server",
                &server,
                "--concurrency",
                "2",
                "--workload",
                "random:in=8,out=2",
                "--duration",
                "60s",
                "--warmup",
                "0",
                "--repeat",
                "1",
                "--grace",
                "2s",
                "--out",
                &dir.path().join("t").display().to_string(),
            ])
            .env("INFERSCOPE_TEST_MARKER", &marker)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = std::io::BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{name}: no ready line"));
            if line.contains("ready in") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        // the server and its setsid child run (tune, keeper, sh→python, setsid→sleep)
        let before = marked_processes(&marker);
        assert!(before.len() >= 4, "{name}: {before:?}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{name}: tune did not end"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        if sig != libc::SIGKILL {
            assert_eq!(status.code(), Some(130), "{name}: {status:?}");
        }
        // the keeper finishes its stop within the grace after tune's end
        let t = Instant::now();
        let mut left = marked_processes(&marker);
        while !left.is_empty() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
            left = marked_processes(&marker);
        }
        let described: Vec<String> = left
            .iter()
            .map(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                format!(
                    "{p} [{}] {}",
                    stat.trim(),
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
            .collect();
        for &p in &left {
            // SAFETY: cleaning up what the test started, identified by its marker.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        assert!(left.is_empty(), "{name}: left running: {described:?}");
    }
}
