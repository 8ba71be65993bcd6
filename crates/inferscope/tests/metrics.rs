//! `inferscope serve --metrics`: the exposition passes `promtool check metrics` (Debian's
//! `prometheus` package, installed by `.ci/run`), `# HELP`/`# TYPE` appear once per family,
//! GPU series carry gpu/uuid/pci_bus_id/numa_node, and the live endpoint answers over HTTP.

mod common;

use inferscope_probe::watch::{GpuSample, ProcessSample};
use std::io::Write;
use std::process::{Command, Stdio};

fn promtool_check(text: &str) {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!(
            "promtool not found ({e}): install Debian's `prometheus` package \
             (apt-get install -y prometheus), or run the project's test command `scripts/test`, \
             which installs it"
        ),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- input ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn exposition_of_a_gpu_host_passes_promtool() {
    let snap = common::capture_fixture("rtx5090-2gpu-workstation");
    let findings = inferscope_check::run_defaults(&snap);
    let bus = snap.gpus[0].pci_bus_id.to_string();
    let gpus = vec![GpuSample {
        index: 0,
        uuid: Some("GPU-0000-test".into()),
        pci_bus_id: Some(bus),
        memory_used_bytes: Some(1 << 30),
        memory_total_bytes: Some(32 << 30),
        utilization_percent: Some(42),
        pcie_tx_bytes_per_s: Some(1_000_000),
        pcie_rx_bytes_per_s: Some(2_000_000),
        ..GpuSample::default()
    }];
    let procs = vec![ProcessSample {
        pid: 42,
        alive: true,
        name: Some("vllm \"serve\"\\x".into()),
        rss_bytes: Some(1 << 30),
        numa_bytes: [(0, 1 << 29), (1, 1 << 29)].into_iter().collect(),
        ..ProcessSample::default()
    }];
    let text = inferscope_fleet::exposition::write_metrics(&snap, &findings, &gpus, &procs);
    promtool_check(&text);
    let mut families = std::collections::BTreeSet::new();
    for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert!(families.insert(l.to_string()), "TYPE twice: {l}");
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with("# HELP ")).count(),
        families.len()
    );
    let used = text
        .lines()
        .find(|l| l.starts_with("inferscope_gpu_memory_used_bytes{"))
        .unwrap();
    for label in ["gpu=\"0\"", "uuid=\"", "pci_bus_id=\"", "numa_node=\""] {
        assert!(used.contains(label), "{used}");
    }
    assert!(used.ends_with(" 1073741824"), "{used}");
    assert!(text.contains("inferscope_check_status{code=\""));
    assert!(text.contains(r#"name="vllm \"serve\"\\x""#), "{text}");
    assert!(text.contains("inferscope_process_numa_resident_bytes{pid=\"42\""));
}

#[test]
fn live_endpoint_serves_metrics() {
    let exporter = common::Exporter::start(&["--pid", &std::process::id().to_string()], &[]);
    let resp = exporter.get("/metrics");
    let missing = exporter.get("/nope");
    drop(exporter);
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    let body = &resp[resp.find("\r\n\r\n").unwrap() + 4..];
    assert!(body.contains("# TYPE inferscope_info gauge"));
    assert!(
        body.contains("inferscope_process_resident_bytes{pid="),
        "{body}"
    );
    promtool_check(body);
    assert!(missing.starts_with("HTTP/1.1 404"));
}

#[test]
fn serve_without_a_mode_is_a_usage_error() {
    let (code, _, err) = common::inferscope(&["serve"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "inferscope: error: serve: nothing to serve; use --metrics\n"
    );
}
