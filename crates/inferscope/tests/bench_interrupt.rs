//! Ctrl-C or SIGTERM during `inferscope bench`: sending stops, requests in flight are cancelled,
//! and the result is still written, marked interrupted, with exit code 1 (docs/bench.md).

use inferscope_testkit::{Mode, Script};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn ctrl_c_writes_an_interrupted_result_and_exits_1() {
    interrupted_by(libc::SIGINT, "Ctrl-C");
}

/// What `timeout`, systemd and Kubernetes send (and `tune` when it is stopped).
#[test]
fn sigterm_writes_an_interrupted_result_and_exits_1() {
    interrupted_by(libc::SIGTERM, "SIGTERM");
}

fn interrupted_by(signal: libc::c_int, name: &str) {
    // Lists one model and streams a token every 20 ms forever.
    let url = Script::new(Mode::NeverEnds(Duration::from_millis(20)))
        .model("endless")
        .start_in_thread()
        .url();
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("r.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args([
            "bench",
            "--url",
            &url,
            "--concurrency",
            "3",
            "--duration",
            "60s",
        ])
        .args(["--dataset", "random:in=4,out=8", "--quiet", "--out"])
        .arg(&out_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the three streams start, then the signal.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "bench did not stop within 10 s of {name}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(r["stop"]["reason"], "interrupted", "{}", r["stop"]);
    assert_eq!(r["valid"], false);
    assert_eq!(r["requests"]["incomplete"], 3, "{}", r["requests"]);
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(r["errors"]["cancelled"], 3, "{}", r["errors"]);
    assert_eq!(r["settings"]["request"]["model"], "endless");
}
