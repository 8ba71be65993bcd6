//! Each fixture tree models a real `nvidia-smi topo -m` matrix (REAL-topo.txt beside it, with
//! its source). Our matrix, derived from the tree's sysfs alone, must give the same link class
//! in every GPU/NIC cell and the same CPU and NUMA affinity for every GPU.

mod common;

use inferscope_host::topology::{self, LinkClass};
use std::collections::BTreeMap;

struct RealMatrix {
    labels: Vec<String>,
    links: BTreeMap<(String, String), LinkClass>,
    cpu_affinity: BTreeMap<String, String>,
    numa_affinity: BTreeMap<String, String>,
}

/// A deliberately small reader for the clean matrices used here (whitespace-separated cells);
/// the full importer with all the mangled variants is a separate capability.
fn parse_real(text: &str) -> RealMatrix {
    let body = text.split_once("\n---\n").expect("header separator").1;
    let mut lines = body
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('$') && !l.starts_with('>'));
    let header = lines.next().expect("header line");
    let labels: Vec<String> = header
        .split_whitespace()
        .take_while(|t| *t != "CPU")
        .map(str::to_string)
        .collect();
    let has_numa = header.contains("NUMA Affinity");
    let mut m = RealMatrix {
        labels: labels.clone(),
        links: BTreeMap::new(),
        cpu_affinity: BTreeMap::new(),
        numa_affinity: BTreeMap::new(),
    };
    for line in lines {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let Some(row) = toks.first() else { continue };
        if !labels.iter().any(|l| l == row) {
            if line.starts_with("Legend") {
                break;
            }
            continue;
        }
        for (j, col) in labels.iter().enumerate() {
            let cell = toks[1 + j];
            let class = LinkClass::parse_cell(cell).unwrap_or_else(|| panic!("cell {cell}"));
            m.links.insert((row.to_string(), col.clone()), class);
        }
        let rest = &toks[1 + labels.len()..];
        if row.starts_with("GPU") {
            m.cpu_affinity.insert(row.to_string(), rest[0].to_string());
            if has_numa {
                m.numa_affinity.insert(row.to_string(), rest[1].to_string());
            }
        }
    }
    m
}

fn check(name: &str) {
    let real_text = std::fs::read_to_string(
        common::repo()
            .join("fixtures/hosts")
            .join(name)
            .join("REAL-topo.txt"),
    )
    .unwrap();
    let real = parse_real(&real_text);
    let snap = common::capture_fixture(name);
    snap.validate().unwrap();
    let ours = topology::topo_matrix(&snap);
    // Real labels are GPUn / NICn, or RDMA names (mlx5_0) in older drivers.
    let index_of = |label: &str| -> usize {
        ours.devices
            .iter()
            .position(|d| d == label)
            .or_else(|| {
                ours.nics
                    .iter()
                    .find(|n| n.device == label)
                    .and_then(|n| ours.devices.iter().position(|d| *d == n.name))
            })
            .unwrap_or_else(|| panic!("{name}: no endpoint for real label {label}"))
    };
    assert_eq!(
        ours.devices.len(),
        real.labels.len(),
        "{name}: endpoint count"
    );
    let mut diffs = Vec::new();
    for ((row, col), class) in &real.links {
        let got = ours.matrix[index_of(row)][index_of(col)];
        if got != *class {
            diffs.push(format!("{row}-{col}: real {class}, ours {got}"));
        }
    }
    for g in &ours.gpus {
        let cpu = g
            .cpu_affinity
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        if real.cpu_affinity.get(&g.name) != Some(&cpu) {
            diffs.push(format!(
                "{} CPU affinity: real {:?}, ours {cpu}",
                g.name,
                real.cpu_affinity.get(&g.name)
            ));
        }
        if let Some(real_numa) = real.numa_affinity.get(&g.name) {
            let numa = match &g.numa_affinity {
                Some(ids) => ids
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                None => "N/A".into(),
            };
            if *real_numa != numa {
                diffs.push(format!(
                    "{} NUMA affinity: real {real_numa}, ours {numa}",
                    g.name
                ));
            }
        }
    }
    assert!(diffs.is_empty(), "{name}:\n{}", diffs.join("\n"));
    assert!(!real.links.is_empty());
}

#[test]
fn h100_sxm8_two_sockets_switches_twelve_nics() {
    check("h100-sxm8-2s-switch-12nic");
}

#[test]
fn eight_gpus_behind_two_levels_of_plx_switches() {
    check("pcie8-2s-plx-switches");
}

#[test]
fn rtx5090_workstation_phb() {
    check("rtx5090-2gpu-workstation");
}

#[test]
fn cloud_vm_with_unknown_numa_node() {
    check("cloud-vm-2gpu-numa-unknown");
    let snap = common::capture_fixture("cloud-vm-2gpu-numa-unknown");
    // -1 must be "unknown, not reported", never node 0.
    for g in &snap.gpus {
        match &g.numa_node {
            inferscope_host::Reading::Unknown(u) => {
                assert_eq!(u.reason, inferscope_host::UnknownReason::NotReported);
                assert!(u.detail.contains("reads -1"), "{}", u.detail);
            }
            other => panic!("expected unknown, got {other:?}"),
        }
    }
}

#[test]
fn dual_socket_asymmetric_five_gpus() {
    check("dual-socket-5gpu-asymmetric");
}

#[test]
fn every_fixture_tree_is_checked() {
    let checked = [
        "cloud-vm-2gpu-numa-unknown",
        "dual-socket-5gpu-asymmetric",
        "h100-sxm8-2s-switch-12nic",
        "pcie8-2s-plx-switches",
        "rtx5090-2gpu-workstation",
    ];
    let with_real: Vec<String> = common::host_fixtures()
        .into_iter()
        .filter(|n| {
            common::repo()
                .join("fixtures/hosts")
                .join(n)
                .join("REAL-topo.txt")
                .exists()
        })
        .collect();
    assert_eq!(with_real, checked);
}

#[test]
fn gpu_local_cpus_respect_the_cgroup() {
    // The 5-GPU box's process is confined to node 0 (CPUs 0-7,16-23); GPU0 sits on node 1.
    let snap = common::capture_fixture("dual-socket-5gpu-asymmetric");
    let gpu0 = snap.gpus[0].pci_bus_id;
    let gpu1 = snap.gpus[1].pci_bus_id;
    assert_eq!(
        topology::gpu_local_cpus(&snap, &gpu0)
            .known()
            .map(|c| c.to_string()),
        Some(String::new()),
        "no usable CPU is local to GPU0"
    );
    assert_eq!(
        topology::gpu_local_cpus(&snap, &gpu1)
            .known()
            .map(|c| c.to_string()),
        Some("0-7,16-23".to_string())
    );
    // On the VM the node is unknown, so the GPU's local_cpulist is used.
    let vm = common::capture_fixture("cloud-vm-2gpu-numa-unknown");
    assert_eq!(
        topology::gpu_local_cpus(&vm, &vm.gpus[0].pci_bus_id)
            .known()
            .map(|c| c.to_string()),
        Some("0-11".to_string())
    );
}
