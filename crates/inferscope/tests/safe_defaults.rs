//! Safe defaults (issue 10): the metrics exporter listens on loopback unless told otherwise and
//! serves nothing but `GET /metrics`, `/snapshot` and `/healthz`. (`run` refusing to bind from a snapshot or another root is
//! tested in tests/run.rs: `bad_inputs_exit_2_with_one_line_and_run_nothing`,
//! `snapshots_and_roots_plan_for_other_machines`.)

mod common;

use std::process::Command;

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
    let exporter = common::Exporter::start(&[], &[]);
    assert!(exporter.addr.starts_with("127.0.0.1:"), "{}", exporter.addr);
    let ok = exporter.get("/metrics");
    let others = [
        "GET / HTTP/1.1\r\n\r\n",
        "GET /metrics/../../etc/passwd HTTP/1.1\r\n\r\n",
        "GET /debug HTTP/1.1\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "DELETE /metrics HTTP/1.1\r\n\r\n",
    ]
    .map(|r| exporter.request(r));
    // Not HTTP at all, or a head past 8 KiB: hyper refuses it and closes.
    let garbage = exporter.request("garbage\r\n\r\n");
    let huge = exporter.request(&format!(
        "GET /metrics HTTP/1.1\r\nX-A: {}\r\n\r\n",
        "a".repeat(9000)
    ));
    drop(exporter);
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    assert!(huge.starts_with("HTTP/1.1 431 "), "{huge}");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    for (i, r) in others.iter().enumerate() {
        assert!(r.starts_with("HTTP/1.1 404"), "request {i}: {r}");
    }
}
