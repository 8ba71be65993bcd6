//! Engine metrics end to end (issue 27 item 3): a real llama-server started with `--metrics`
//! gives `llamacpp:` series in the result, and `compare` names the engine-side difference of
//! two real runs (fixtures/bench/llama-server-metrics-np1-np4, README there).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.take(4096).read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

fn start(bin: &Path, gguf: &Path, log: &Path, slots: u32) -> (Guard, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let logf = std::fs::File::create(log).unwrap();
    let child = Command::new(bin)
        .arg("-m")
        .arg(gguf)
        .args([
            "--alias",
            "tiny",
            "--host",
            "127.0.0.1",
            "--metrics",
            "--port",
        ])
        .arg(port.to_string())
        .args(["-c", "4096", "-np", &slots.to_string(), "-t", "1"])
        .stdin(Stdio::null())
        .stdout(logf.try_clone().unwrap())
        .stderr(logf)
        .spawn()
        .expect("start llama-server");
    let g = Guard(child);
    let t = Instant::now();
    while !healthy(port) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "llama-server did not become healthy: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (g, port)
}

#[test]
fn a_bench_against_llama_server_with_metrics_records_llamacpp_series() {
    let Some((bin, gguf)) = common::llama_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(&bin, &gguf, &dir.path().join("server.log"), 1);
    let out_json = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let (code, stdout, stderr) = common::inferscope(&[
        "bench",
        "--url",
        &format!("http://127.0.0.1:{port}"),
        "--concurrency",
        "4",
        "--requests",
        "24",
        "--dataset",
        "random:in=32,out=64",
        "--server-metrics-interval",
        "100ms",
        "--out",
        out_json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let text = stdout;
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(r["schema_version"], 2);
    let m = &r["server_metrics"];
    assert_eq!(m["status"], "ok", "{m:#}");
    assert_eq!(m["source"], format!("http://127.0.0.1:{port}/metrics"));
    assert_eq!(m["interval_s"], 0.1);
    // A fresh server predicted exactly the run's tokens: the counter's last value says so.
    let predicted = &m["summary"]["llamacpp:tokens_predicted_total"];
    assert_eq!(
        predicted["last"],
        r["output_tokens"].as_f64().unwrap(),
        "{m:#}"
    );
    assert_eq!(r["output_tokens"], 24 * 64);
    // One slot, four in flight: requests wait in llama-server's deferred queue.
    let deferred = m["summary"]["llamacpp:requests_deferred"]["max"]
        .as_f64()
        .unwrap();
    assert!(deferred >= 1.0, "{m:#}");
    assert_eq!(m["summary"]["llamacpp:requests_processing"]["max"], 1.0);
    let series = m["series"]["llamacpp:requests_processing"]
        .as_array()
        .unwrap();
    assert!(series.len() >= 3, "{series:?}");
    assert!(text.contains("server metrics (http://127.0.0.1:"), "{text}");
    assert!(plots.join("server_metrics.svg").is_file());
    eprintln!("{text}");
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/bench/llama-server-metrics-np1-np4")
}

#[test]
fn compare_names_the_engine_side_difference_of_two_real_runs() {
    let d = fixture_dir();
    let read = |n: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join(n)).unwrap()).unwrap()
    };
    let (np1, np4) = (read("np1.json"), read("np4.json"));
    let peak =
        |r: &serde_json::Value, k: &str| r["server_metrics"]["summary"][k]["max"].as_f64().unwrap();
    let (_, text, _) = common::inferscope(&[
        "compare",
        d.join("np1.json").to_str().unwrap(),
        d.join("np4.json").to_str().unwrap(),
    ]);
    let want = format!(
        "engine: requests waiting peaked at {:.0} (candidate) and {:.0} (baseline); requests running peaked at {:.0} (candidate) and {:.0} (baseline)",
        peak(&np4, "llamacpp:requests_deferred"),
        peak(&np1, "llamacpp:requests_deferred"),
        peak(&np4, "llamacpp:requests_processing"),
        peak(&np1, "llamacpp:requests_processing"),
    );
    assert!(text.contains(&want), "want {want}\n{text}");
    // The recorded runs differ where the engine says they should: one slot queues, four do not.
    assert!(peak(&np1, "llamacpp:requests_deferred") >= 1.0);
    assert_eq!(peak(&np1, "llamacpp:requests_processing"), 1.0);
    assert!(peak(&np4, "llamacpp:requests_processing") > 1.0);
    let (_, json, _) = common::inferscope(&[
        "compare",
        "--json",
        d.join("np1.json").to_str().unwrap(),
        d.join("np4.json").to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["server_metrics"][0], want.trim_start_matches("engine: "));
}

/// Bad metrics flags are usage errors (exit 2) naming the flag, before any load is sent.
#[test]
fn bad_server_metrics_flags_exit_2() {
    for (args, says) in [
        (
            vec!["--server-metrics", "localhost:9/metrics"],
            "--server-metrics localhost:9/metrics: expected http://",
        ),
        (
            vec!["--server-metrics-interval", "10ms"],
            "--server-metrics-interval",
        ),
    ] {
        let mut all = vec!["bench", "--url", "http://127.0.0.1:9", "--requests", "1"];
        all.extend(args);
        let (code, _, err) = common::inferscope(&all);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
    }
}
