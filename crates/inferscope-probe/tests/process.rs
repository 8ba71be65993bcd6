//! `capture_process`: the live machine with the test's own pid, and hand-built `/proc` trees.

use inferscope_host::{GpuDetails, Reading, Snapshot, UnknownReason};
use inferscope_probe::process::capture_process;
use inferscope_probe::{CaptureOptions, FsRoot, capture};
use std::path::Path;

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn unknown_detail<T: std::fmt::Debug>(r: &Reading<T>, reason: UnknownReason) -> String {
    match r {
        Reading::Unknown(u) if u.reason == reason => u.detail.clone(),
        other => panic!("expected {reason:?}, got {other:?}"),
    }
}

/// The 2-GPU cloud VM snapshot; the second GPU's driver facts list `pids` as compute processes
/// (every other driver field unknown).
fn snapshot_with_gpu_processes(pids: &[u32]) -> Snapshot {
    let text = include_str!("../../inferscope-host/tests/data/minimal-snapshot.json");
    let mut s: Snapshot = serde_json::from_str(text).unwrap();
    let unknown = serde_json::json!({"unknown": {"reason": "not_captured", "detail": "test"}});
    let mut d = serde_json::Map::new();
    for f in [
        "index",
        "uuid",
        "name",
        "serial",
        "memory",
        "bar1",
        "persistence_mode",
        "compute_mode",
        "mig",
        "ecc",
        "memory_repair",
        "clocks",
        "temperature_c",
        "power_draw_mw",
        "power_limit_mw",
        "pcie",
        "nvlinks",
        "cpu_affinity",
        "memory_affinity",
        "gpu_numa_node",
    ] {
        d.insert(f.into(), unknown.clone());
    }
    let procs: Vec<_> = pids
        .iter()
        .map(|p| {
            serde_json::json!({"pid": p, "used_memory_bytes": {"value": 1u64 << 30},
                "name": {"value": "python3"}})
        })
        .collect();
    d.insert("processes".into(), serde_json::json!({ "value": procs }));
    let details: GpuDetails = serde_json::from_value(serde_json::Value::Object(d)).unwrap();
    s.gpus[1].details = Reading::value(details);
    s
}

#[test]
fn live_machine_own_pid() {
    let fs = FsRoot::new("/");
    assert!(fs.is_live());
    let snap = capture(
        &fs,
        &CaptureOptions {
            captured_at: "2026-12-02T00:00:00Z".into(),
            tool: "test".into(),
        },
    );
    let pid = std::process::id();
    let p = capture_process(&fs, pid, &snap);
    assert_eq!(p.pid, pid);
    assert!(!p.name.known().unwrap().is_empty());
    let cpus = p.cpus_allowed.known().expect("Cpus_allowed_list");
    assert!(!cpus.is_empty());
    if let Some(online) = snap.host.online_cpus.known() {
        assert!(!cpus.is_disjoint(online), "{cpus} vs online {online}");
    }
    assert!(
        !p.mems_allowed
            .known()
            .expect("Mems_allowed_list")
            .is_empty()
    );
    // numa_maps exists on NUMA kernels; this process has resident pages somewhere.
    match &p.pages_per_node {
        Reading::Value(pages) => assert!(pages.values().sum::<u64>() > 0, "{pages:?}"),
        Reading::Unknown(u) => assert_eq!(u.reason, UnknownReason::NotPresent, "{u:?}"),
    }
    assert_eq!(
        p.cuda_visible_devices.known().cloned().flatten(),
        std::env::var("CUDA_VISIBLE_DEVICES").ok()
    );
    // The test uses no GPU.
    assert!(p.gpus.is_empty());
}

#[test]
fn hand_built_tree_bad_status_missing_numa_maps() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/4242/comm", b"vllm\n");
    write(
        r,
        "proc/4242/status",
        b"Name:\tvllm\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,x\nMems_allowed_list:\t0-1\n",
    );
    write(
        r,
        "proc/4242/environ",
        b"PATH=/usr/bin\0CUDA_VISIBLE_DEVICES=1,0\0HF_TOKEN=secret\0",
    );
    let snap = snapshot_with_gpu_processes(&[7, 4242]);
    let p = capture_process(&FsRoot::new(r), 4242, &snap);
    assert_eq!(p.name.known().map(String::as_str), Some("vllm"));
    let d = unknown_detail(&p.cpus_allowed, UnknownReason::Malformed);
    assert_eq!(
        d,
        "/proc/4242/status: line 3, column 24: expected a CPU or node number, found \"x\""
    );
    assert_eq!(p.mems_allowed.known().unwrap().to_string(), "0-1");
    let d = unknown_detail(&p.pages_per_node, UnknownReason::NotPresent);
    assert_eq!(d, "/proc/4242/numa_maps: not present");
    assert_eq!(
        p.cuda_visible_devices.known().cloned().flatten().as_deref(),
        Some("1,0")
    );
    assert_eq!(p.gpus, vec![snap.gpus[1].pci_bus_id]);
}

#[test]
fn hand_built_tree_numa_maps_in_4k_pages_and_missing_lines() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/9/status", b"Name:\tllama-server\n");
    write(
        r,
        "proc/9/numa_maps",
        b"7f0000000000 default anon=10 N0=6 N1=4 kernelpagesize_kB=4\n\
7f2000000000 bind:1 file=/dev/hugepages/kv huge N1=2 kernelpagesize_kB=2048\n\
7f4000000000 default\n",
    );
    write(r, "proc/9/environ", b"PATH=/usr/bin\0");
    let snap = snapshot_with_gpu_processes(&[]);
    let p = capture_process(&FsRoot::new(r), 9, &snap);
    let d = unknown_detail(&p.name, UnknownReason::NotPresent);
    assert_eq!(d, "/proc/9/comm: not present");
    let d = unknown_detail(&p.cpus_allowed, UnknownReason::NotPresent);
    assert_eq!(d, "/proc/9/status has no Cpus_allowed_list line");
    let pages = p.pages_per_node.known().unwrap();
    assert_eq!(pages.get(&0), Some(&6));
    assert_eq!(pages.get(&1), Some(&(4 + 2 * 512)));
    assert_eq!(p.cuda_visible_devices, Reading::value(None));
    assert!(p.gpus.is_empty());
}

#[test]
fn malformed_numa_maps_and_vanished_process_are_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/5/numa_maps", b"00400000 default N0=lots\n");
    let snap = snapshot_with_gpu_processes(&[5]);
    let p = capture_process(&FsRoot::new(r), 5, &snap);
    let d = unknown_detail(&p.pages_per_node, UnknownReason::Malformed);
    assert!(d.starts_with("/proc/5/numa_maps: line 1, column 21"), "{d}");
    // Gone from /proc: every reading says so; the driver's list still attributes the GPU.
    let p = capture_process(&FsRoot::new(r), 6, &snapshot_with_gpu_processes(&[6]));
    for detail in [
        unknown_detail(&p.name, UnknownReason::NotPresent),
        unknown_detail(&p.cpus_allowed, UnknownReason::NotPresent),
        unknown_detail(&p.mems_allowed, UnknownReason::NotPresent),
        unknown_detail(&p.pages_per_node, UnknownReason::NotPresent),
        unknown_detail(&p.cuda_visible_devices, UnknownReason::NotPresent),
    ] {
        assert!(detail.starts_with("/proc/6/"), "{detail}");
    }
    assert_eq!(p.gpus.len(), 1);
}
