//! The binary as users run it: exit codes, errors on bad input, the no-GPU message.

mod common;

use std::process::Command;

use common::inferscope;

#[test]
fn topo_on_a_fixture_root_and_on_its_snapshot_agree() {
    let root = "fixtures/hosts/pcie8-2s-plx-switches/root";
    let (code, from_root, err) = inferscope(&["topo", "--root", root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        from_root.contains("GPU0     X      PIX     PXB"),
        "{from_root}"
    );
    let (code, json, _) = inferscope(&["snapshot", "--root", root]);
    assert_eq!(code, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    std::fs::write(&file, json).unwrap();
    let (code, from_file, err) = inferscope(&["topo", "--snapshot", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(from_root, from_file);
}

#[test]
fn topo_json_is_machine_readable() {
    let (code, out, _) = inferscope(&[
        "topo",
        "--json",
        "--root",
        "fixtures/hosts/rtx5090-2gpu-workstation/root",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["devices"][1], "GPU1");
    assert_eq!(v["matrix"][0][1], "PHB");
    assert_eq!(v["matrix"][1][1], "X");
    assert_eq!(v["gpus"][0]["name"], "GPU0");
    assert_eq!(v["gpus"][0]["cpu_affinity"], "0-63");
    assert_eq!(v["gpus"][0]["numa_affinity"][0], 0);
    assert_eq!(v["numa_nodes"][0]["gpus"][1], "GPU1");
}

#[test]
fn host_without_gpu_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("sys/devices/system/node/node0")).unwrap();
    std::fs::write(root.join("sys/devices/system/node/node0/cpulist"), "0-3\n").unwrap();
    let (code, out, err) = inferscope(&["topo", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("No GPU found"), "{out}");
    assert!(out.contains("0-3"), "{out}");
}

#[test]
fn missing_root_is_a_usage_error() {
    let (code, _, err) = inferscope(&["snapshot", "--root", "/nonexistent/inferscope"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "inferscope: error: --root /nonexistent/inferscope: not a directory"
    );
}

#[test]
fn root_and_snapshot_conflict() {
    let (code, _, err) = inferscope(&["topo", "--root", "/", "--snapshot", "x.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn gather_writes_an_archive() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.tar.gz");
    let (code, msg, err) = inferscope(&[
        "gather",
        "--root",
        "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(msg.contains("8 GPUs, 12 NICs, 2 NUMA nodes"), "{msg}");
    assert!(std::fs::metadata(&out).unwrap().len() > 1000);
}

/// Every file in fixtures/bad/snapshot gives exactly the error listed in its EXPECTED.md row,
/// exit code 2, and no panic.
#[test]
fn bad_snapshot_files_give_one_clear_error() {
    let dir = common::repo().join("fixtures/bad/snapshot");
    let expected = std::fs::read_to_string(dir.join("EXPECTED.md")).unwrap();
    let mut rows = 0;
    for line in expected.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let file = cells[1].trim_matches('`');
        let message = cells[2];
        let path = format!("fixtures/bad/snapshot/{file}");
        let (code, out, err) = inferscope(&["topo", "--snapshot", &path]);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(out.is_empty(), "{file}");
        assert!(!err.contains("panicked"), "{file}: {err}");
        assert_eq!(
            err.trim(),
            format!("inferscope: error: {path}: {message}"),
            "{file}"
        );
        rows += 1;
    }
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name() != "EXPECTED.md")
        .count();
    assert_eq!(rows, files, "every bad file has a row in EXPECTED.md");
}

#[test]
fn snapshot_without_a_driver_says_so_in_one_line_and_succeeds() {
    // This machine (and CI) has no NVIDIA driver; point NVML at a path that cannot load, so the
    // test means the same on a GPU machine.
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .arg("snapshot")
        .env("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("inferscope: note: NVML unavailable: "),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["driver"]["unknown"]["reason"], "not_present");
}
