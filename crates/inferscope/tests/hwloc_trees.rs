//! Consumers of the probe on real trees from hwloc's test suite (fixtures/hwloc-linux): `topo`
//! names the POWER9 box's V100 memory nodes as GPU memory, and offline CPUs reach neither
//! `run`'s plan nor `topo`, checks or labels (the probe leaves them out of every node; the
//! comparison with hwloc itself is crates/inferscope-probe/tests/hwloc_trees.rs).

mod common;

use inferscope::render::topo;
use inferscope_host::{CpuSet, NumaNodeId, Snapshot};
use inferscope_launch::{RunRequest, Target};
use std::path::Path;

/// Unpack `fixtures/hwloc-linux/<name>.tar.bz2` under `dir` and capture it.
fn capture_tree(name: &str, dir: &Path) -> Snapshot {
    let f =
        std::fs::File::open(common::repo().join(format!("fixtures/hwloc-linux/{name}.tar.bz2")))
            .unwrap();
    tar::Archive::new(bzip2::read::BzDecoder::new(f))
        .unpack(dir)
        .unwrap();
    let root = dir.join(name);
    let mut snap =
        inferscope_probe::capture(&inferscope_probe::FsRoot::new(&root), &common::opts());
    snap.source.root = format!("fixtures/hwloc-linux/{name}.tar.bz2");
    snap
}

#[test]
fn topo_shows_the_v100_memory_nodes_as_gpu_memory() {
    let dir = tempfile::tempdir().unwrap();
    let snap = capture_tree("nvidiagpunumanodes", dir.path());
    // GPU -> memory node, as hwloc's nvidiagpunumanodes-kept.console pairs them (PCIBusID=).
    let m = inferscope_host::topology::topo_matrix(&snap);
    let pairs: Vec<(String, Vec<NumaNodeId>)> = m
        .gpus
        .iter()
        .map(|g| {
            (
                g.pci_bus_id.unwrap().to_string(),
                g.gpu_numa_id.clone().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(String, Vec<NumaNodeId>)> = [
        ("0004:05:00.0", 255),
        ("0004:06:00.0", 254),
        ("0006:00:00.0", 253),
        ("0007:00:00.0", 252),
        ("0035:04:00.0", 251),
        ("0035:05:00.0", 250),
    ]
    .iter()
    .map(|(b, n)| (b.to_string(), vec![NumaNodeId(*n)]))
    .collect();
    assert_eq!(pairs, want);
    let mut out = Vec::new();
    topo::write_text(&snap, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for (gpu, node) in [("GPU0", 255), ("GPU5", 250)] {
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no row for node {node}:\n{text}"));
        assert!(row.contains(&format!("(none: {gpu} memory)")), "{row}");
        assert!(row.contains("15.0 GiB"), "{row}");
    }
    insta::assert_snapshot!("topo_text__hwloc_nvidiagpunumanodes", text);
}

#[test]
fn offline_cpus_reach_no_consumer() {
    // (tree, NUMA nodes with CPUs in hwloc's .console)
    for (name, cpu_nodes) in [("offline-cpu0-node0", 1), ("16em64t-4s2c2t-offlines", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let snap = capture_tree(name, dir.path());
        let online = snap.host.online_cpus.known().unwrap().clone();
        let present: CpuSet =
            std::fs::read_dir(dir.path().join(name).join("sys/devices/system/cpu"))
                .unwrap()
                .filter_map(|e| {
                    e.unwrap()
                        .file_name()
                        .to_str()?
                        .strip_prefix("cpu")?
                        .parse()
                        .ok()
                })
                .collect();
        assert!(
            !online.is_empty() && online != present,
            "{name}: the tree has offline CPUs"
        );
        for n in snap.numa_nodes.iter().filter(|n| !n.cpus.is_empty()) {
            assert!(
                n.cpus.is_subset(&online),
                "{name}: node {} has {}",
                n.id,
                n.cpus
            );
            // `run --numa-node N`: the plan binds online CPUs only, all of the node's.
            let plan = inferscope_launch::resolve(
                &snap,
                &RunRequest {
                    target: Target::Nodes(vec![n.id]),
                    mem: None,
                    cpus_per_gpu: None,
                    env: Default::default(),
                    command: vec!["true".into()],
                    device_ids: Default::default(),
                    omp_threads: None,
                    alloc_conf: None,
                },
            )
            .unwrap();
            assert_eq!(plan.cpus, n.cpus, "{name}: node {}", n.id);
        }
        // `topo`'s NUMA rows and the labels count only what the nodes hold.
        for s in inferscope_host::topology::numa_summary(&snap) {
            assert!(s.cpus.is_subset(&online), "{name}: topo node {}", s.id);
        }
        // Checks: CPU001 reads the governors, which are read for online CPUs only.
        if let Some(groups) = snap.settings.cpu_governors.known() {
            for g in groups {
                assert!(
                    g.cpus.is_subset(&online),
                    "{name}: governor group {}",
                    g.cpus
                );
            }
        }
        let findings = inferscope_check::run_defaults(&snap);
        let labels = inferscope_fleet::labels::labels(&snap, &findings);
        let nodes = labels
            .iter()
            .find(|l| l.key.ends_with("numa.nodes"))
            .map(|l| l.value.clone());
        assert_eq!(nodes, Some(cpu_nodes.to_string()), "{name}");
    }
}
