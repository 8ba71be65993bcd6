//! `inferscope watch` on real child processes: one that allocates steadily is flagged by the
//! leak detector, one that allocates once and holds is not, and one that exits mid-watch is
//! recorded while the watch goes on. The children are this test binary itself, re-run with
//! `INFERSCOPE_TEST_CHILD` set (no Python needed).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const MIB: usize = 1 << 20;

/// Touch every page so the memory is resident.
fn resident(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    for i in (0..n).step_by(4096) {
        v[i] = 1;
    }
    v
}

/// Not a test: the body of the child processes.
#[test]
#[ignore = "helper run as a child process by the watch tests"]
fn child_allocator() {
    let Ok(mode) = std::env::var("INFERSCOPE_TEST_CHILD") else {
        return;
    };
    let mut hold = Vec::new();
    match mode.as_str() {
        "steady" => {
            println!("ready");
            for _ in 0..80 {
                hold.push(resident(5 * MIB));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        "once" => {
            hold.push(resident(150 * MIB));
            println!("ready");
        }
        "exit" => {
            println!("ready");
            std::thread::sleep(Duration::from_millis(800));
            std::process::exit(0);
        }
        _ => return,
    }
    std::thread::sleep(Duration::from_secs(20));
    drop(hold);
}

fn spawn(mode: &str) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_allocator",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("INFERSCOPE_TEST_CHILD", mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    while !line.contains("ready") {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "child {mode} ended early"
        );
    }
    child
}

fn watch(pids: &[u32], extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["watch".to_string()];
    for p in pids {
        args.push("--pid".into());
        args.push(p.to_string());
    }
    args.extend(["--interval", "100ms", "--duration", "2500ms", "--json"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = common::inferscope(&refs);
    let v = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (code, v, err)
}

#[test]
fn steady_growth_is_flagged_and_allocate_once_is_not() {
    let mut steady = spawn("steady");
    let mut once = spawn("once");
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("w.jsonl");
    let (code, v, err) = watch(
        &[steady.id(), once.id()],
        &["--out", jsonl.to_str().unwrap()],
    );
    let _ = steady.kill();
    let _ = once.kill();
    let _ = steady.wait();
    let _ = once.wait();
    assert_eq!(code, 0, "{err}");
    let procs = v["processes"].as_array().unwrap();
    let by_pid = |pid: u32| procs.iter().find(|p| p["pid"] == pid).unwrap().clone();
    let s = by_pid(steady.id());
    assert_eq!(s["leak"], true, "{s:#}");
    assert_eq!(s["rss_trend"]["verdict"], "steady_growth");
    assert!(
        s["rss_trend"]["confidence"].as_f64().unwrap() > 0.5,
        "{s:#}"
    );
    let o = by_pid(once.id());
    assert_eq!(o["leak"], false, "{o:#}");
    assert_ne!(o["rss_trend"]["verdict"], "steady_growth", "{o:#}");
    assert!(o["rss_max_bytes"].as_u64().unwrap() >= 150 * MIB as u64);
    // One JSON line per sample, each with both processes and their NUMA placement.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 20, "{} samples", lines.len());
    let p0 = &lines[0]["processes"][0];
    assert!(p0["rss_bytes"].as_u64().unwrap() > 0);
    assert!(p0["cpus_ran_on"].is_string(), "{p0}");
    assert!(
        p0["numa_bytes"].as_object().is_some_and(|m| !m.is_empty()),
        "{p0}"
    );
}

#[test]
fn a_process_that_exits_mid_watch_is_recorded_and_the_watch_goes_on() {
    let mut leaving = spawn("exit");
    let mut staying = spawn("once");
    let (code, v, err) = watch(&[leaving.id(), staying.id()], &[]);
    let _ = staying.kill();
    let _ = staying.wait();
    let _ = leaving.wait();
    assert_eq!(code, 0, "{err}");
    assert!(v["duration_s"].as_f64().unwrap() >= 2.0, "{v:#}");
    let procs = v["processes"].as_array().unwrap();
    let gone = procs.iter().find(|p| p["pid"] == leaving.id()).unwrap();
    let t = gone["exited_after_s"].as_f64().unwrap();
    assert!(t > 0.3 && t < 2.0, "{gone:#}");
    let stayed = procs.iter().find(|p| p["pid"] == staying.id()).unwrap();
    assert!(stayed["exited_after_s"].is_null());
    assert!(v["findings"].to_string().contains("exited after"));
}

#[test]
fn bad_pid_and_bad_interval_are_usage_errors() {
    let (code, _, err) = common::inferscope(&["watch", "--pid", "4294967290", "--duration", "1s"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "inferscope: error: no process with pid 4294967290 (is it running, and in this PID namespace?)\n"
    );
    let (code, _, err) = common::inferscope(&["watch", "--pid", "1", "--interval", "soon"]);
    assert_eq!(code, 2);
    // Durations are read by clap with the one parser every command uses (docs/cli.md), so the
    // error is clap's usage error, as for `bench --duration`.
    assert!(
        err.starts_with(
            "error: invalid value 'soon' for '--interval <D>': `soon` is not a duration"
        ),
        "{err}"
    );
}

/// Issue 32: SIGTERM ends a watch like Ctrl-C: the summary is written and the exit is 0 (it
/// used to kill the watch with no summary).
#[test]
fn sigterm_stops_the_watch_with_its_summary() {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let pid = std::process::id().to_string();
        let child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(["watch", "--pid", &pid, "--interval", "100ms", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(800));
        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let procs = v["processes"].as_array().unwrap();
        assert_eq!(procs[0]["pid"], std::process::id(), "{name}: {v:#}");
        assert!(v["duration_s"].as_f64().unwrap() > 0.3, "{name}: {v:#}");
    }
}
