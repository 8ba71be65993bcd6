//! The exporter survives its network (issue 18): 200 idle connections and a slowloris sender do
//! not hold up `/metrics`, they are closed by the header timeout, `/snapshot` and `/healthz`
//! answer, keep-alive serves several requests on one connection, and memory stays bounded with
//! more connections open than the server serves at once.
//!
//! Figures (time to scrape, resident memory) are printed, not asserted:
//! `cargo test -p inferscope --test exporter -- --nocapture`.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ROOT: &str = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";
const NO_NVML: (&str, &str) = ("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");

fn start() -> common::Exporter {
    common::Exporter::start(&["--root", ROOT], &[NO_NVML])
}

/// One `GET /metrics` on a fresh connection: (seconds, response).
fn timed_scrape(e: &common::Exporter) -> (f64, String) {
    let t = Instant::now();
    let r = e.get("/metrics");
    (t.elapsed().as_secs_f64(), r)
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2] * 1000.0
}

/// The exporter's resident memory, KiB (its `VmRSS`).
fn rss_kib(e: &common::Exporter) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap()
}

/// True while the server has neither answered nor closed `s`.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let open = matches!(s.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// Seconds until the server closes `s` (read returns 0 or an error), at most `limit`.
fn closed_within(mut s: TcpStream, limit: Duration) -> Option<f64> {
    let t = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(t.elapsed().as_secs_f64()),
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return None;
            }
            Err(_) => return Some(t.elapsed().as_secs_f64()),
        }
    }
}

#[test]
fn idle_connections_and_slowloris_do_not_hold_up_scrapes() {
    let e = start();
    let (_, warm) = timed_scrape(&e);
    assert!(warm.starts_with("HTTP/1.1 200 OK\r\n"), "{warm}");
    let before: Vec<f64> = (0..7).map(|_| timed_scrape(&e).0).collect();
    let rss_before = rss_kib(&e);

    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&e.addr).unwrap())
        .collect();
    // Slowloris: a request head that never ends, one byte every 50 ms.
    let mut slow = TcpStream::connect(&e.addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let slow_reader = slow.try_clone().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let sender = std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if slow.write_all(b"X").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    std::thread::sleep(Duration::from_millis(300));

    let mut during = Vec::new();
    for _ in 0..7 {
        let (t, r) = timed_scrape(&e);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("inferscope_gpu_info{"), "{r}");
        during.push(t);
    }
    let rss_during = rss_kib(&e);
    // The scrapes were answered while every idle connection and the slowloris sender were still
    // held open: they did not wait for those to time out (the old server took 5 s each).
    let open = idle.iter().filter(|s| still_open(s)).count();
    assert_eq!(open, 200, "idle connections closed before the scrapes");
    assert!(still_open(&slow_reader));
    println!(
        "exporter: /metrics median {:.1} ms alone, {:.1} ms with 200 idle connections and a \
         slowloris sender (max {:.1} ms); RSS {} KiB before, {} KiB with them",
        median_ms(before),
        median_ms(during.clone()),
        during.iter().cloned().fold(0.0, f64::max) * 1000.0,
        rss_before,
        rss_during
    );

    // Then the header timeout (5 s) closes them all, slowloris included.
    let slow_closed = closed_within(slow_reader, Duration::from_secs(15));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.join().unwrap();
    assert!(slow_closed.is_some(), "slowloris connection never closed");
    let mut last = 0.0f64;
    for s in idle {
        let t = closed_within(s, Duration::from_secs(15)).expect("idle connection never closed");
        last = last.max(t);
    }
    println!(
        "exporter: slowloris closed after {:.1} s; idle connections all closed {:.1} s later",
        slow_closed.unwrap_or_default(),
        last
    );
}

#[test]
fn memory_stays_bounded_past_the_connection_limit() {
    let e = start();
    let _ = e.get("/metrics");
    let rss_before = rss_kib(&e);
    // More connections than the server takes at once (512; the rest wait in the backlog), each
    // with almost 8 KiB of an unfinished request head.
    let head = format!("GET /metrics HTTP/1.1\r\nX-A: {}", "a".repeat(8000));
    let conns: Vec<TcpStream> = (0..600)
        .map(|_| {
            let mut s = TcpStream::connect(&e.addr).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    let rss_full = rss_kib(&e);
    drop(conns);
    // Past 8 KiB a head is refused (431), not buffered further.
    let mut big = TcpStream::connect(&e.addr).unwrap();
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX-A: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    // The server may close before taking all of it; the answer is what counts.
    let _ = big.write_all(huge.as_bytes());
    let mut refused = String::new();
    let _ = big.read_to_string(&mut refused);
    println!(
        "exporter: RSS {rss_before} KiB idle, {rss_full} KiB with 600 connections each holding \
         8,000 bytes of a request head"
    );
    assert!(refused.starts_with("HTTP/1.1 431 "), "{refused}");
    // 512 connections x (8 KiB head buffer + hyper's state) stay far below this; unbounded
    // buffering of 600 x 8 KiB heads plus growth would not.
    assert!(
        rss_full < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_full} KiB"
    );
    let ok = e.get("/metrics");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
}

#[test]
fn keep_alive_snapshot_and_healthz() {
    let e = start();
    let mut s = TcpStream::connect(&e.addr).unwrap();
    // Three requests on one connection; the last asks the server to close.
    s.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /snapshot HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert_eq!(r.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{r}");
    assert!(r.contains("\r\n\r\nok\n"), "{r}");
    assert!(r.contains("# TYPE inferscope_info gauge"), "{r}");
    let json = &r[r.rfind("\r\n\r\n").unwrap() + 4..];
    let snap: serde_json::Value = serde_json::from_str(json).unwrap();
    // The fixture's host, read under --root.
    assert_eq!(snap["host"]["hostname"]["value"], "xe9680-gpu07");
    assert_eq!(snap["gpus"].as_array().unwrap().len(), 8);
}

#[test]
fn nfd_feature_file_holds_the_labels() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inferscope");
    let e = common::Exporter::start(
        &["--root", ROOT, "--nfd-features", file.to_str().unwrap()],
        &[NO_NVML],
    );
    let t = Instant::now();
    while !file.exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let written = std::fs::read_to_string(&file).unwrap();
    drop(e);
    // The same labels `inferscope labels` prints for that root, under a comment header.
    let (code, kv, err) = common::inferscope(&["labels", "--root", ROOT, "--format", "kv"]);
    assert_eq!(code, 0, "{err}");
    let body: String = written
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(body, kv);
    assert!(written.starts_with("# Node Feature Discovery local features written by"));
    assert!(kv.contains("inferscope-gpu.count=8\n"), "{kv}");
    // Only the file itself is left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn nfd_feature_file_in_a_missing_directory_is_a_usage_error() {
    let (code, _, err) = common::inferscope(&[
        "serve",
        "--metrics",
        "--nfd-features",
        "/nonexistent-dir/inferscope",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "inferscope: error: --nfd-features /nonexistent-dir/inferscope: no such directory /nonexistent-dir\n"
    );
    // An interval without a file, or below 10 s, is refused by the parser.
    let (code, _, err) = common::inferscope(&["serve", "--metrics", "--nfd-interval", "60"]);
    assert_eq!(code, 2);
    assert!(err.contains("--nfd-features <FILE>"), "{err}");
    let (code, _, err) = common::inferscope(&[
        "serve",
        "--metrics",
        "--nfd-features",
        "/tmp/x",
        "--nfd-interval",
        "5",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("5 is not in 10..=86400"), "{err}");
}

#[test]
fn a_burst_of_requests_is_answered_by_shared_captures() {
    let e = start();
    let (alone, _) = timed_scrape(&e);
    // 300 connections each asking for a snapshot and metrics at once, reading nothing yet.
    let burst: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(&e.addr).unwrap();
            s.write_all(
                b"GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .unwrap();
            s
        })
        .collect();
    let (during, r) = timed_scrape(&e);
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    let rss = rss_kib(&e);
    // Every queued request was answered, snapshot first.
    for mut s in burst {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = [0u8; 17];
        s.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200 OK\r\n");
    }
    println!(
        "exporter: /metrics took {:.1} ms alone, {:.1} ms behind 600 queued requests on 300 \
         connections (RSS {rss} KiB)",
        alone * 1000.0,
        during * 1000.0
    );
}

#[test]
fn snapshot_endpoint_redacts_secrets() {
    // This fixture's proc/self/environ holds HF_TOKEN=hf_FAKE... (a planted, fake token).
    let root = "fixtures/hosts/rtx5090-2gpu-workstation/root";
    let environ = std::fs::read(common::repo().join(root).join("proc/self/environ")).unwrap();
    assert!(String::from_utf8_lossy(&environ).contains("HF_TOKEN=hf_FAKE"));
    let e = common::Exporter::start(&["--root", root], &[NO_NVML]);
    let r = e.get("/snapshot");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains("content-type: application/json\r\n"), "{r}");
    assert!(r.contains("\"HF_TOKEN\""), "{r}");
    assert!(!r.contains("hf_FAKE"), "secret value served");
}
