//! The NVML source against a stub `libnvidia-ml` (tests/nvml-stub/libnvidia-ml-stub.c) compiled
//! with the system C compiler: present calls fill fields, absent symbols and NOT_SUPPORTED
//! answers each make one field unknown, and the capture never fails as a whole.

use inferscope_host::{LinkClass, Reading, UnknownReason};
use inferscope_probe::nvml;
use std::path::PathBuf;
use std::process::Command;

fn build_stub() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/nvml-stub/libnvidia-ml-stub.c");
    let lib = dir.path().join("libnvidia-ml-stub.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O0", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("this test needs a C compiler ({cc}): {e}"));
    assert!(status.success(), "compiling the NVML stub failed");
    (dir, lib)
}

fn reason<T: std::fmt::Debug>(r: &Reading<T>) -> UnknownReason {
    match r {
        Reading::Unknown(u) => u.reason,
        Reading::Value(v) => panic!("expected unknown, got {v:?}"),
    }
}

#[test]
fn stub_nvml_fills_what_it_answers_and_marks_the_rest_unknown() {
    let (_dir, lib) = build_stub();
    let cap = nvml::capture(Some(lib.as_os_str()), 1);
    let info = cap.info.known().expect("driver info");
    assert_eq!(info.driver_version.known().unwrap(), "550.90.07");
    assert_eq!(info.cuda_driver_version.known().unwrap(), "12.4");
    assert_eq!(info.gpu_count.known(), Some(&2));
    assert_eq!(cap.gpus.len(), 2);
    let (id0, g0) = &cap.gpus[0];
    assert_eq!(id0.to_string(), "0000:18:00.0");
    assert_eq!(g0.name.known().unwrap(), "NVIDIA H100 80GB HBM3");
    assert_eq!(
        g0.uuid.known().unwrap().0,
        "GPU-11111111-1111-1111-1111-111111111111"
    );
    let mem = g0.memory.known().unwrap();
    assert_eq!(mem.total_bytes, 85_520_809_984);
    assert_eq!(mem.reserved_bytes.known(), Some(&559_218_688));
    // NOT_SUPPORTED from the driver:
    let ecc = g0.ecc.known().unwrap();
    assert_eq!(reason(&ecc.mode), UnknownReason::NotSupported);
    assert_eq!(reason(&g0.gpu_numa_node), UnknownReason::NotSupported);
    // Symbols the stub does not export: unknown, not zero, and named.
    assert_eq!(reason(&g0.temperature_c), UnknownReason::NotSupported);
    match &g0.power_draw_mw {
        Reading::Unknown(u) => assert!(u.detail.contains("power usage"), "{}", u.detail),
        v => panic!("{v:?}"),
    }
    let pcie = g0.pcie.known().unwrap();
    assert_eq!(pcie.gen_current.known(), Some(&5));
    assert_eq!(reason(&pcie.width_current), UnknownReason::NotSupported);
    let links = g0.nvlinks.known().unwrap();
    assert_eq!(links.len(), 2);
    assert!(links.iter().all(|l| l.active));
    assert_eq!(
        links[0].remote_pci_bus_id.known().unwrap().to_string(),
        "0000:3a:00.0"
    );
    // One pair, NV2, NVML's own ancestor NODE.
    assert_eq!(cap.pairs.len(), 1);
    let pair = &cap.pairs[0];
    assert_eq!(pair.nvlinks.known(), Some(&2));
    assert_eq!(pair.common_ancestor.known(), Some(&LinkClass::Node));
    assert_eq!(reason(&pair.p2p_read), UnknownReason::NotSupported);
}

#[test]
fn missing_library_is_one_unknown_not_a_failure() {
    let cap = nvml::capture(
        Some(std::ffi::OsStr::new("/nonexistent/libnvidia-ml.so.1")),
        1,
    );
    match &cap.info {
        Reading::Unknown(u) => {
            assert_eq!(u.reason, UnknownReason::NotPresent);
            assert!(u.detail.starts_with("NVML unavailable: "), "{}", u.detail);
        }
        v => panic!("{v:?}"),
    }
    assert!(cap.gpus.is_empty() && cap.pairs.is_empty());
}

/// Driver facts recorded next to a tree (as a gather archive carries them) are merged into the
/// sysfs view: NV# appears in the matrix, details attach to the right GPUs by PCI address, and
/// GPUs NVML does not report say why.
#[test]
fn recorded_driver_facts_merge_into_the_fixture_snapshot() {
    use inferscope_probe::{CaptureOptions, FsRoot, capture, driver, gather};
    let (_dir, lib) = build_stub();
    let cap = nvml::capture(Some(lib.as_os_str()), 1);
    let opts = CaptureOptions {
        captured_at: "2026-12-02T00:00:00Z".into(),
        tool: "test".into(),
    };
    // Unpack a gather of the 8×H100 tree and put the stub's answers in as its recording.
    let tree = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hosts/h100-sxm8-2s-switch-12nic/root");
    let mut archive = Vec::new();
    gather::gather(&tree, &opts, &mut archive).unwrap();
    let root = tempfile::tempdir().unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(archive.as_slice()))
        .unpack(root.path())
        .unwrap();
    std::fs::write(
        root.path().join(driver::RECORDED),
        serde_json::to_vec(&cap).unwrap(),
    )
    .unwrap();
    let snap = capture(&FsRoot::new(root.path()), &opts);
    snap.validate().unwrap();
    assert_eq!(snap.gpus.len(), 8);
    assert!(snap.driver.is_known());
    assert!(snap.gpus[0].details.is_known() && snap.gpus[1].details.is_known());
    match &snap.gpus[2].details {
        Reading::Unknown(u) => assert!(u.detail.contains("does not report this GPU")),
        v => panic!("{v:?}"),
    }
    let m = inferscope_host::topology::topo_matrix(&snap);
    assert_eq!(m.matrix[0][1], LinkClass::NvLink(2));
    assert_eq!(m.matrix[1][0], LinkClass::NvLink(2));
    assert_eq!(
        m.matrix[0][2],
        LinkClass::Node,
        "no NVLink facts: PCIe class stays"
    );
    assert_eq!(
        m.gpus[0].gpu_numa_id, None,
        "NOT_SUPPORTED: no GPU NUMA node"
    );
    assert_eq!(m.gpus[2].gpu_numa_id, None);
    // CUDA order follows NVML's GPUs only.
    let order = snap.cuda_order.known().unwrap();
    assert_eq!(order.pci_bus_id.len(), 2);
    assert_eq!(order.fastest_first.known(), Some(&order.pci_bus_id));
}
