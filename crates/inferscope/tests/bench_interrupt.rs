//! Ctrl-C or SIGTERM during `inferscope bench`: sending stops, requests in flight are cancelled,
//! and the result is still written, marked interrupted, with exit code 1 (docs/bench.md).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One connection of a server that lists one model and streams a token every 20 ms forever.
fn serve(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if request_line.starts_with("GET /v1/models") {
            let b = r#"{"object":"list","data":[{"id":"endless","object":"model"}]}"#;
            let r = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
                b.len()
            );
            if out.write_all(r.as_bytes()).is_err() {
                return;
            }
        } else if request_line.starts_with("GET") {
            if out
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        } else {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            if out.write_all(head.as_bytes()).is_err() {
                return;
            }
            loop {
                let data = "data: {\"id\":\"x\",\"choices\":[{\"text\":\" t\"}]}\n\n";
                let c = format!("{:x}\r\n{data}\r\n", data.len());
                if out.write_all(c.as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

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
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            std::thread::spawn(move || serve(s));
        }
    });
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
