//! hwloc XML importer: real `lstopo --of xml` outputs in `fixtures/tools/hwloc/` against their
//! reviewed `<name>.expected.json` (`UPDATE_EXPECTED=1` rewrites them), semantic facts checked
//! directly, bad inputs against `<name>.expected-error.txt`, and no panic on damaged input.

use inferscope_formats::hwloc_xml::{self, HwlocTopology};
use inferscope_host::{NumaNodeId, PciBusId, PciClass, PciId, Reading, UnknownReason};
use serde_json::json;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/hwloc")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn load(name: &str) -> HwlocTopology {
    hwloc_xml::parse(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Fixture file names ending in `.xml`, good (`bad == false`) or `bad-*`.
fn fixtures(bad: bool) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".xml") && n.starts_with("bad-") == bad)
        .collect();
    v.sort();
    v
}

fn to_json(t: &HwlocTopology) -> serde_json::Value {
    json!({
        "host": t.host,
        "numa_nodes": t.numa_nodes,
        "pci_devices": t.pci_devices,
        "os_devices": t.os_devices.iter().map(|(bus, name, ty)| {
            json!({"bus_id": bus, "name": name, "osdev_type": ty})
        }).collect::<Vec<_>>(),
        "notes": t.notes,
    })
}

fn bus(s: &str) -> PciBusId {
    s.parse().unwrap()
}

fn dev<'a>(t: &'a HwlocTopology, b: &str) -> &'a inferscope_host::PciDevice {
    t.pci_devices
        .iter()
        .find(|d| d.bus_id == bus(b))
        .unwrap_or_else(|| panic!("no {b}"))
}

#[test]
fn every_fixture_matches_its_expected_json_and_has_a_source() {
    let good = fixtures(false);
    assert!(good.len() >= 4, "{good:?}");
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    for name in good {
        let stem = name.trim_end_matches(".xml");
        assert!(
            dir().join(format!("{stem}.SOURCE.md")).exists(),
            "{stem}.SOURCE.md missing"
        );
        let got = serde_json::to_string_pretty(&to_json(&load(&name))).unwrap() + "\n";
        let path = dir().join(format!("{stem}.expected.json"));
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_EXPECTED=1 writes it)", path.display()));
        // Compared as JSON values, so key order (serde_json's `preserve_order`) cannot matter.
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        let want: serde_json::Value = serde_json::from_str(&want).unwrap();
        assert!(
            got == want,
            "{name} differs from {stem}.expected.json (UPDATE_EXPECTED=1 rewrites it; review the diff)"
        );
    }
}

#[test]
fn bad_inputs_fail_with_their_expected_error() {
    let bad = fixtures(true);
    assert!(bad.len() >= 5, "{bad:?}");
    for name in bad {
        let stem = name.trim_end_matches(".xml");
        let want = read(&format!("{stem}.expected-error.txt"));
        let got = match hwloc_xml::parse(&read(&name)) {
            Ok(_) => panic!("{name} parsed"),
            Err(e) => e.to_string(),
        };
        assert_eq!(got, want.trim_end(), "{name}");
    }
}

#[test]
fn dev_vm_is_one_node_two_cpus_and_two_virtio_functions() {
    let t = load("dev-vm-2core.xml");
    assert_eq!(t.host.hostname.known().map(String::as_str), Some("vm"));
    assert_eq!(
        t.host.cpu_model.known().map(String::as_str),
        Some("AMD EPYC")
    );
    assert_eq!(t.host.sockets.known(), Some(&1));
    assert_eq!(t.host.cores.known(), Some(&2));
    assert_eq!(t.host.threads.known(), Some(&2));
    assert_eq!(t.host.online_cpus.known().unwrap().to_string(), "0-1");
    assert_eq!(t.numa_nodes.len(), 1);
    let n0 = &t.numa_nodes[0];
    assert_eq!(n0.cpus.to_string(), "0-1");
    assert_eq!(n0.memory_total_bytes.known(), Some(&6_133_882_880));
    assert_eq!(
        n0.hugepages
            .iter()
            .map(|p| p.page_size_kib)
            .collect::<Vec<_>>(),
        [2048, 1_048_576]
    );
    assert!(!n0.distances.is_known());
    assert_eq!(t.pci_devices.len(), 2);
    let nic = dev(&t, "0000:00:03.0");
    assert_eq!(nic.root_complex, "pci0000:00");
    assert!(nic.upstream_bridges.is_empty());
    assert_eq!(nic.class.known(), Some(&PciClass(0x020000)));
    assert_eq!(nic.numa_node.known(), Some(&NumaNodeId(0)));
    assert_eq!(nic.local_cpus.known().unwrap().to_string(), "0-1");
    assert!(
        t.os_devices
            .contains(&(bus("0000:00:03.0"), "eth0".to_owned(), 2))
    );
}

#[test]
fn dgx2_gpus_sit_behind_plx_switches_on_their_socket() {
    let t = load("nvidia-dgx2.xml");
    assert_eq!(t.numa_nodes.len(), 2);
    assert_eq!(t.numa_nodes[0].cpus.to_string(), "0-1");
    assert_eq!(t.numa_nodes[1].cpus.to_string(), "24-25");
    assert_eq!(t.numa_nodes[0].distances.known(), Some(&vec![10, 21]));
    assert_eq!(t.numa_nodes[1].distances.known(), Some(&vec![21, 10]));
    let gpus: Vec<_> = t
        .pci_devices
        .iter()
        .filter(|d| d.class.known() == Some(&PciClass(0x030200)))
        .collect();
    assert_eq!(gpus.len(), 16);
    let g0 = dev(&t, "0000:34:00.0");
    assert_eq!(g0.vendor_id.known(), Some(&PciId(0x10de)));
    assert_eq!(g0.device_id.known(), Some(&PciId(0x1db8)));
    assert_eq!(g0.root_complex, "pci0000:2b");
    assert_eq!(
        g0.upstream_bridges,
        [
            "0000:2b:00.0",
            "0000:2c:00.0",
            "0000:2d:04.0",
            "0000:32:00.0",
            "0000:33:00.0"
        ]
        .map(bus)
    );
    assert_eq!(g0.numa_node.known(), Some(&NumaNodeId(0)));
    let g8 = dev(&t, "0000:b7:00.0");
    assert_eq!(g8.numa_node.known(), Some(&NumaNodeId(1)));
    assert_eq!(g8.local_cpus.known().unwrap().to_string(), "24-25");
    match &g0.link.current_speed {
        Reading::Unknown(u) => {
            assert_eq!(u.reason, UnknownReason::NotCaptured);
            assert!(u.detail.contains("15.753846 GB/s"), "{}", u.detail);
        }
        Reading::Value(v) => panic!("link speed {v} invented"),
    }
    assert!(
        t.os_devices
            .contains(&(bus("0000:34:00.0"), "nvml0".to_owned(), 5))
    );
    // Bridges are devices too, and the host bridge is not one of them.
    assert!(dev(&t, "0000:2b:00.0").is_bridge());
}

#[test]
fn power8_multiword_cpusets_and_gpus_per_socket() {
    let t = load("power8-p100-4gpu.xml");
    assert_eq!(
        t.host.hostname.known().map(String::as_str),
        Some("drac-12.grenoble.grid5000.fr")
    );
    assert_eq!(t.numa_nodes.len(), 2);
    assert_eq!(t.numa_nodes[0].cpus.to_string(), "0-1,8-9,16-17,24-25");
    assert_eq!(
        t.numa_nodes[1].cpus.to_string(),
        "80-81,88-89,96-97,104-105"
    );
    assert_eq!(
        t.host.online_cpus.known().unwrap().to_string(),
        "0-1,8-9,16-17,24-25,80-81,88-89,96-97,104-105"
    );
    let g = dev(&t, "0002:01:00.0");
    assert_eq!(g.root_complex, "pci0002:00");
    assert_eq!(g.upstream_bridges, [bus("0002:00:00.0")]);
    assert_eq!(g.numa_node.known(), Some(&NumaNodeId(0)));
    assert_eq!(
        dev(&t, "000a:01:00.0").numa_node.known(),
        Some(&NumaNodeId(1))
    );
    for name in ["cuda0", "nvml0", "opencl0d0"] {
        assert!(
            t.os_devices
                .iter()
                .any(|(b, n, _)| *b == bus("0002:01:00.0") && n == name),
            "{name}"
        );
    }
    assert!(t.numa_nodes[0].distances.is_known());
}

#[test]
fn hwloc1_layout_numa_nodes_hold_their_cpus() {
    let t = load("hp-sl390-3gpu-hwloc1.xml");
    assert!(t.notes[0].contains("1.x"));
    assert_eq!(
        t.host.hostname.known().map(String::as_str),
        Some("mirage004")
    );
    assert_eq!(t.host.threads.known(), Some(&24));
    assert_eq!(t.numa_nodes.len(), 2);
    assert_eq!(
        t.numa_nodes[0].cpus.to_string(),
        "0,2,4,6,8,10,12,14,16,18,20,22"
    );
    assert_eq!(t.numa_nodes[1].cpus.len(), 12);
    assert_eq!(t.numa_nodes[0].distances.known(), Some(&vec![10, 20]));
    assert_eq!(t.numa_nodes[1].distances.known(), Some(&vec![20, 10]));
    assert_eq!(
        t.numa_nodes[0].memory_total_bytes.known(),
        Some(&19_316_633_600)
    );
    let gpu = dev(&t, "0000:14:00.0");
    assert_eq!(gpu.vendor_id.known(), Some(&PciId(0x10de)));
    assert_eq!(gpu.root_complex, "pci0000:10");
    assert_eq!(gpu.upstream_bridges, [bus("0000:10:03.0")]);
    assert_eq!(gpu.numa_node.known(), Some(&NumaNodeId(1)));
    assert_eq!(
        dev(&t, "0000:06:00.0").numa_node.known(),
        Some(&NumaNodeId(0))
    );
    assert!(
        t.os_devices
            .contains(&(bus("0000:05:00.0"), "mlx4_0".to_owned(), 3))
    );
}

#[test]
fn ambiguous_or_missing_locality_is_not_guessed() {
    // Two nodes, the host bridge attached to the Machine: no single node covers its CPUs.
    let xml = r#"<?xml version="1.0"?>
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f">
  <object type="Package" os_index="0" cpuset="0x00000003">
   <object type="NUMANode" os_index="0" cpuset="0x00000003" local_memory="1024"/>
   <object type="PU" os_index="0" cpuset="0x00000001"/>
   <object type="PU" os_index="1" cpuset="0x00000002"/>
  </object>
  <object type="Package" os_index="1" cpuset="0x0000000c">
   <object type="NUMANode" os_index="1" cpuset="0x0000000c" local_memory="1024"/>
   <object type="PU" os_index="2" cpuset="0x00000004"/>
   <object type="PU" os_index="3" cpuset="0x00000008"/>
  </object>
  <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-00]">
   <object type="PCIDev" pci_busid="0000:00:01.0" pci_type="0200 [8086:1533] [8086:0000] 03"/>
  </object>
 </object>
</topology>"#;
    let t = hwloc_xml::parse(xml).unwrap();
    let d = &t.pci_devices[0];
    assert_eq!(d.local_cpus.known().unwrap().to_string(), "0-3");
    assert!(!d.numa_node.is_known());
    assert!(!t.numa_nodes[0].distances.is_known());
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("no NUMA distance matrix"))
    );
}

#[test]
fn oversized_input_is_refused_before_parsing() {
    let big = " ".repeat(hwloc_xml::MAX_INPUT_BYTES + 1);
    let e = hwloc_xml::parse(&big).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 1: expected at most 64 MiB of hwloc XML, found 67108865 bytes"
    );
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[test]
fn truncated_and_bit_flipped_fixtures_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut names = fixtures(false);
    names.extend(fixtures(true));
    for name in names {
        let bytes = std::fs::read(dir().join(&name)).unwrap();
        let step = (bytes.len() / 150).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            let _ = hwloc_xml::parse(&String::from_utf8_lossy(&bytes[..cut]));
        }
        for _ in 0..150 {
            let mut b = bytes.clone();
            for _ in 0..(1 + rng.next() % 4) {
                let i = (rng.next() % b.len() as u64) as usize;
                b[i] = match rng.next() % 4 {
                    0 => b[i] ^ (1 << (rng.next() % 8)),
                    1 => b',',
                    2 => b'f',
                    _ => b'"',
                };
            }
            let _ = hwloc_xml::parse(&String::from_utf8_lossy(&b));
        }
    }
}
