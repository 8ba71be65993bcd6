//! Odd and hostile sysfs/procfs trees: every bad file becomes an unknown reading or a capture
//! problem that names the file and the place; nothing panics, nothing reads outside the root,
//! nothing allocates by what a file claims.

use inferscope_host::{Reading, UnknownReason};
use inferscope_probe::{CaptureOptions, FsRoot, capture};
use std::path::Path;

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn opts() -> CaptureOptions {
    CaptureOptions {
        captured_at: "2026-12-02T00:00:00Z".into(),
        tool: "test".into(),
    }
}

fn malformed_detail<T: std::fmt::Debug>(r: &Reading<T>) -> String {
    match r {
        Reading::Unknown(u) if u.reason == UnknownReason::Malformed => u.detail.clone(),
        other => panic!("expected malformed, got {other:?}"),
    }
}

#[test]
fn garbage_values_become_malformed_readings_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let dev = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    write(r, "sys/devices/system/cpu/online", "0-4294967295\n");
    write(
        r,
        "sys/devices/system/cpu/cpu0/topology/physical_package_id",
        "0\n",
    );
    write(r, "sys/devices/system/cpu/cpu0/topology/core_id", "zero\n");
    write(r, "sys/devices/system/node/node0/cpulist", "0-3,x\n");
    write(r, "sys/devices/system/node/node0/distance", "10 ten\n");
    write(
        r,
        "sys/devices/system/node/node0/meminfo",
        "Node 0 MemTotal: lots kB\n",
    );
    write(r, &format!("{dev}/vendor"), "0x10de\n");
    write(r, &format!("{dev}/class"), "0x030200\n");
    write(r, &format!("{dev}/numa_node"), "minus one\n");
    write(r, &format!("{dev}/current_link_speed"), "fast\n");
    write(r, &format!("{dev}/local_cpulist"), "3-1\n");
    write(r, "sys/devices/pci0000:00/0000:00:01.0/class", "0x060400\n");
    std::fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
        r.join("sys/bus/pci/devices/0000:01:00.0"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        r.join("sys/bus/pci/devices/0000:00:01.0"),
    )
    .unwrap();
    // An absolute link is resolved under the root, never on the host.
    std::os::unix::fs::symlink("/etc/passwd", r.join("sys/bus/pci/devices/0000:02:00.0")).unwrap();
    // A name that is not a PCI address.
    std::os::unix::fs::symlink("/nowhere", r.join("sys/bus/pci/devices/not-a-bus-id")).unwrap();
    write(r, "proc/meminfo", "MemTotal: 100 kB\nSwapTotal: x kB\n");
    write(
        r,
        "proc/self/mounts",
        "tmpfs /dev/shm tmpfs rw,size=12q 0 0\n",
    );

    let snap = capture(&FsRoot::new(r), &opts());

    assert_eq!(snap.host.online_cpus.known().unwrap().len(), 1 << 32);
    assert!(
        malformed_detail(&snap.host.cores)
            .starts_with("/sys/devices/system/cpu/cpu0/topology/core_id: line 1, column 1")
    );
    assert!(
        snap.capture_problems
            .iter()
            .any(|p| p.starts_with("/sys/devices/system/node/node0/cpulist: line 1, column 5")),
        "{:?}",
        snap.capture_problems
    );
    assert!(
        malformed_detail(&snap.numa_nodes[0].distances)
            .starts_with("/sys/devices/system/node/node0/distance: line 1, column 4")
    );
    assert!(
        malformed_detail(&snap.numa_nodes[0].memory_total_bytes)
            .starts_with("/sys/devices/system/node/node0/meminfo: line 1")
    );
    let gpu = &snap.gpus[0];
    assert!(
        malformed_detail(&gpu.numa_node)
            .starts_with(&format!("/{dev}/numa_node: line 1, column 1"))
    );
    assert!(
        malformed_detail(&gpu.local_cpus)
            .starts_with(&format!("/{dev}/local_cpulist: line 1, column 1"))
    );
    let d = snap
        .pci_devices
        .iter()
        .find(|d| d.bus_id == gpu.pci_bus_id)
        .unwrap();
    assert!(
        malformed_detail(&d.link.current_speed).starts_with(&format!("/{dev}/current_link_speed"))
    );
    assert!(
        snap.capture_problems
            .iter()
            .any(|p| p.contains("0000:02:00.0 -> /etc/passwd: no pciDDDD:BB host bridge")),
        "{:?}",
        snap.capture_problems
    );
    assert!(
        snap.capture_problems
            .iter()
            .any(|p| p.contains("not-a-bus-id"))
    );
    assert!(malformed_detail(&snap.settings.swap_total_bytes).starts_with("/proc/meminfo: line 2"));
    assert!(malformed_detail(&snap.settings.dev_shm).contains("size=12q"));
    // A malformed snapshot part does not break validation of the rest.
    snap.validate().unwrap();
}

#[test]
fn empty_root_gives_unknowns_not_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let snap = capture(&FsRoot::new(dir.path()), &opts());
    assert!(!snap.is_live);
    assert!(snap.gpus.is_empty() && snap.numa_nodes.is_empty());
    for r in [
        &snap.settings.swap_total_bytes,
        &snap.settings.memory_total_bytes,
    ] {
        match r {
            Reading::Unknown(u) => assert_eq!(u.reason, UnknownReason::NotPresent),
            Reading::Value(v) => panic!("got a value {v} from an empty tree"),
        }
    }
    assert_eq!(
        snap.settings.vm_swappiness,
        Reading::unknown(
            UnknownReason::NotPresent,
            "/proc/sys/vm/swappiness: not present"
        )
    );
    snap.validate().unwrap();
}

#[test]
fn device_on_a_node_that_does_not_exist_is_unknown_not_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let dev = "sys/devices/pci0000:00/0000:00:02.0";
    write(r, "sys/devices/system/node/node0/cpulist", "0-1\n");
    write(r, &format!("{dev}/vendor"), "0x1002\n");
    write(r, &format!("{dev}/class"), "0x038000\n");
    write(r, &format!("{dev}/numa_node"), "7\n");
    std::fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:02.0",
        r.join("sys/bus/pci/devices/0000:00:02.0"),
    )
    .unwrap();
    let snap = capture(&FsRoot::new(r), &opts());
    assert_eq!(snap.gpus.len(), 1, "AMD 0x0380 display controller is a GPU");
    assert!(malformed_detail(&snap.gpus[0].numa_node).contains("claims NUMA node 7"));
    snap.validate().unwrap();
}

#[test]
fn garbage_cpumap_local_cpus_and_numa_status_name_the_file_and_the_place() {
    // A reduced gather (hwloc's layout): node without cpulist, PCI device as a directory, the
    // NVIDIA driver's numa_status; every one of them corrupted.
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "sys/devices/system/cpu/online", "0-1\n");
    write(
        r,
        "sys/devices/system/node/node0/cpumap",
        "00000000,0000zz03\n",
    );
    write(
        r,
        "sys/devices/system/node/node0/meminfo",
        "Node 0 MemTotal: 1024 kB\n",
    );
    let dev = "sys/bus/pci/devices/0000:05:00.0";
    write(r, &format!("{dev}/class"), "0x030200\n");
    write(r, &format!("{dev}/local_cpus"), "0xf...f\n");
    write(
        r,
        "proc/driver/nvidia/gpus/0000:05:00.0/numa_status",
        "Node:   x1\n",
    );
    let s = capture(&FsRoot::new(r), &opts());
    assert!(s.numa_nodes[0].cpus.is_empty());
    let problems = s.capture_problems.join("\n");
    assert!(
        problems.contains("/sys/devices/system/node/node0/cpumap: line 1, column 10: expected a 32-bit hex word like 0x000000ff, found \"0000zz03\"")
            && problems.contains("the node's CPUs are unknown"),
        "{problems}"
    );
    assert!(
        problems.contains("/sys/bus/pci/devices/0000:05:00.0 is a directory"),
        "{problems}"
    );
    let g = &s.gpus[0];
    assert!(
        malformed_detail(&g.local_cpus)
            .starts_with("/sys/bus/pci/devices/0000:05:00.0/local_cpus: line 1, column 1:"),
        "{:?}",
        g.local_cpus
    );
    assert!(
        problems.contains("/proc/driver/nvidia/gpus/0000:05:00.0/numa_status: line 1, column 9: expected a node number, found x1"),
        "{problems}"
    );
    assert!(!g.details.is_known());
    s.validate().unwrap();
}
