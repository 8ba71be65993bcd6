//! Safe defaults (issue 10): the metrics exporter listens on loopback unless told otherwise and
//! serves nothing but `GET /metrics`. (`run` refusing to bind from a snapshot or another root is
//! tested in tests/run.rs: `bad_inputs_exit_2_with_one_line_and_run_nothing`,
//! `snapshots_and_roots_plan_for_other_machines`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

#[test]
fn metrics_exporter_defaults_to_loopback() {
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:9400]"), "{help}");
}

#[test]
fn metrics_exporter_serves_only_get_metrics() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(["serve", "--metrics", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("inferscope: serving metrics on http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let request = |raw: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        resp
    };
    let ok = request("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let others = [
        "GET / HTTP/1.1\r\n\r\n",
        "GET /metrics/../../etc/passwd HTTP/1.1\r\n\r\n",
        "GET /debug HTTP/1.1\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "DELETE /metrics HTTP/1.1\r\n\r\n",
        "garbage\r\n\r\n",
    ]
    .map(request);
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    for (i, r) in others.iter().enumerate() {
        assert!(r.starts_with("HTTP/1.1 404"), "request {i}: {r}");
    }
}
