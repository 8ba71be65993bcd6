//! Compare the Snapshots of several nodes: each node is reduced to named facts (driver, CUDA,
//! GPUs and their links, PCIe, NUMA layout, kernel and VM settings, environment), facts that are
//! not equal on every node are reported, and the node that disagrees with the majority on the
//! most facts comes first.
//!
//! Facts are compared as text: what a person would compare by eye. Quantities that legitimately
//! wobble between identical machines (memory reserved by firmware) are rounded to GiB; identity
//! (hostname, capture time, serial numbers, UUIDs) is not compared, nor is a GPU's current PCIe
//! generation (idle GPUs lower it; its trained width and maximum speed are compared).

use inferscope_host::{LimitValue, LinkSpeed, Reading, Snapshot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Shown for a fact the snapshot does not know.
const UNKNOWN: &str = "unknown";
/// Shown for an environment variable a node does not set.
const UNSET: &str = "(unset)";

/// One node as it is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Column name (the file name without `.json`, unless names collide).
    pub name: String,
    /// Hostname from the snapshot, when known.
    pub hostname: Option<String>,
    /// Differing facts on which this node holds a value other than the majority's.
    pub odd_fields: usize,
}

/// One fact that is not the same everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDiff {
    /// Fact name (`vm.swappiness`, `gpu3.pcie`, `env.NCCL_IB_HCA`).
    pub field: String,
    /// Value per node, in the order of [`FleetDiff::nodes`].
    pub values: Vec<String>,
    /// The value most nodes hold; `None` when no value is held by more nodes than any other.
    pub majority: Option<String>,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetDiff {
    /// Nodes, the odd one out first (most `odd_fields`; ties keep the input order).
    pub nodes: Vec<Node>,
    /// Facts compared (the union over all nodes).
    pub compared_fields: usize,
    /// Facts that differ, in fact order.
    pub differences: Vec<FieldDiff>,
}

impl FleetDiff {
    /// True when no fact differs.
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
    }
}

fn show<T: ToString>(r: &Reading<T>) -> String {
    r.known().map_or(UNKNOWN.into(), ToString::to_string)
}

fn gib(bytes: u64) -> String {
    format!("{} GiB", (bytes + (1 << 29)) >> 30)
}

fn speed(s: &Reading<LinkSpeed>) -> String {
    match s.known() {
        Some(s) => match s.generation() {
            Some(g) => format!("Gen{g}"),
            None => s.to_string(),
        },
        None => UNKNOWN.into(),
    }
}

fn limit(l: &LimitValue) -> String {
    match l {
        LimitValue::Unlimited => "unlimited".into(),
        LimitValue::Bytes(b) => inferscope_host::units::human_bytes(*b),
    }
}

/// The facts of one snapshot, by name, in display order.
pub fn facts(s: &Snapshot) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| f.push((k.to_string(), v));
    gpu_facts(s, &mut put);
    host_facts(s, &mut put);
    settings_facts(s, &mut put);
    for (k, v) in &s.env {
        put(&format!("env.{k}"), v.clone());
    }
    f
}

/// Adds one fact.
type Put<'a> = dyn FnMut(&str, String) + 'a;

/// Driver, GPU models, links and peer-to-peer, and per GPU its bus, node, PCIe link and memory.
fn gpu_facts(s: &Snapshot, put: &mut Put<'_>) {
    let driver = s.driver.known();
    put(
        "driver.version",
        driver.map_or(UNKNOWN.into(), |d| show(&d.driver_version)),
    );
    put(
        "driver.cuda",
        driver.map_or(UNKNOWN.into(), |d| show(&d.cuda_driver_version)),
    );
    put("gpu.count", s.gpus.len().to_string());
    let mut models: BTreeMap<String, usize> = BTreeMap::new();
    for g in &s.gpus {
        let name = g
            .details
            .known()
            .and_then(|d| d.name.known().cloned())
            .or_else(|| g.device_id.known().map(|id| format!("PCI device {id}")))
            .unwrap_or_else(|| UNKNOWN.into());
        *models.entry(name).or_default() += 1;
    }
    put(
        "gpu.models",
        models
            .iter()
            .map(|(m, n)| format!("{n}x {m}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let links: Option<(usize, usize)> = if s.gpus.is_empty() || driver.is_none() {
        None
    } else {
        s.gpus.iter().try_fold((0, 0), |(up, all), g| {
            let l = g.details.known()?.nvlinks.known()?;
            Some((up + l.iter().filter(|l| l.active).count(), all + l.len()))
        })
    };
    put(
        "gpu.nvlinks",
        links.map_or(UNKNOWN.into(), |(up, all)| format!("{up} of {all} up")),
    );
    if driver.is_some() && s.gpus.len() > 1 {
        let ok = s
            .gpu_pairs
            .iter()
            .filter(|p| {
                p.nvlinks.known().is_some_and(|n| *n > 0)
                    || (p.p2p_read.known() == Some(&inferscope_host::P2pStatus::Ok)
                        && p.p2p_write.known() == Some(&inferscope_host::P2pStatus::Ok))
            })
            .count();
        let pairs = s.gpus.len() * (s.gpus.len() - 1) / 2;
        put("gpu.p2p_pairs", format!("{ok} of {pairs}"));
    } else {
        put("gpu.p2p_pairs", UNKNOWN.into());
    }
    for (i, g) in s.gpus.iter().enumerate() {
        put(&format!("gpu{i}.pci_bus_id"), g.pci_bus_id.to_string());
        put(&format!("gpu{i}.numa_node"), show(&g.numa_node));
        let pcie = s
            .pci_devices
            .iter()
            .find(|d| d.bus_id == g.pci_bus_id)
            .map_or(UNKNOWN.into(), |d| {
                let l = &d.link;
                // The current generation is left out: idle GPUs drop it to save power, so it
                // differs between identical nodes; the width does not.
                format!(
                    "x{} of x{}, {} max",
                    show(&l.current_width),
                    show(&l.max_width),
                    speed(&l.max_speed),
                )
            });
        put(&format!("gpu{i}.pcie"), pcie);
        if let Some(d) = g.details.known() {
            put(
                &format!("gpu{i}.memory"),
                d.memory
                    .known()
                    .map_or(UNKNOWN.into(), |m| gib(m.total_bytes)),
            );
        }
    }
}

/// NICs, kernel, CPUs, memory and the NUMA layout.
fn host_facts(s: &Snapshot, put: &mut Put<'_>) {
    let rdma = s.nics.iter().filter(|n| !n.rdma_devices.is_empty()).count();
    put("nic.count", format!("{} ({rdma} RDMA)", s.nics.len()));

    put("host.kernel", show(&s.host.kernel));
    put("host.cpu_model", show(&s.host.cpu_model));
    put(
        "host.cpus",
        format!(
            "{} sockets, {} cores, {} threads",
            show(&s.host.sockets),
            show(&s.host.cores),
            show(&s.host.threads)
        ),
    );
    put(
        "host.memory",
        s.settings
            .memory_total_bytes
            .known()
            .map_or(UNKNOWN.into(), |b| gib(*b)),
    );
    put("numa.nodes", s.numa_nodes.len().to_string());
    for n in &s.numa_nodes {
        let gpus: Vec<String> = s
            .gpus
            .iter()
            .enumerate()
            .filter(|(_, g)| g.numa_node.known() == Some(&n.id))
            .map(|(i, _)| format!("GPU{i}"))
            .collect();
        put(
            &format!("numa{}", n.id),
            format!(
                "{} CPUs, {}, GPUs: {}",
                n.cpus.len(),
                n.memory_total_bytes
                    .known()
                    .map_or(UNKNOWN.into(), |b| gib(*b)),
                if gpus.is_empty() {
                    "none".to_string()
                } else {
                    gpus.join(",")
                }
            ),
        );
    }
}

/// Kernel and VM settings, limits and the cgroup.
fn settings_facts(s: &Snapshot, put: &mut Put<'_>) {
    let st = &s.settings;
    put("vm.thp_enabled", show(&st.thp_enabled));
    put("vm.thp_defrag", show(&st.thp_defrag));
    put("vm.swappiness", show(&st.vm_swappiness));
    put("vm.zone_reclaim_mode", show(&st.vm_zone_reclaim_mode));
    put("kernel.numa_balancing", show(&st.kernel_numa_balancing));
    put(
        "vm.hugepages",
        if st.hugepages.is_empty() {
            "none".into()
        } else {
            st.hugepages
                .iter()
                .map(|p| format!("{} kB: {}", p.page_size_kib, show(&p.total)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    put(
        "swap",
        st.swap_total_bytes
            .known()
            .map_or(UNKNOWN.into(), |b| inferscope_host::units::human_bytes(*b)),
    );
    put(
        "cpu.governor",
        st.cpu_governors.known().map_or(UNKNOWN.into(), |g| {
            g.iter()
                .map(|g| format!("{} ({})", g.governor, g.cpus))
                .collect::<Vec<_>>()
                .join(", ")
        }),
    );
    put(
        "dev_shm",
        st.dev_shm.known().map_or(UNKNOWN.into(), |d| {
            inferscope_host::units::human_bytes(d.bytes)
        }),
    );
    put(
        "memlock",
        st.memlock_limit.known().map_or(UNKNOWN.into(), |l| {
            format!("soft {}, hard {}", limit(&l.soft), limit(&l.hard))
        }),
    );
    put(
        "iommu",
        st.kernel_iommu_params.known().map_or(UNKNOWN.into(), |p| {
            if p.is_empty() {
                "(none on the command line)".into()
            } else {
                p.join(" ")
            }
        }),
    );
    put(
        "cgroup.cpus",
        st.cgroup
            .known()
            .map_or(UNKNOWN.into(), |c| show(&c.cpus_effective)),
    );
    put(
        "cgroup.memory_max",
        st.cgroup
            .known()
            .map_or(UNKNOWN.into(), |c| show(&c.memory_max.as_ref().map(limit))),
    );
}

/// Compare named snapshots (at least one; more than one to learn anything).
pub fn diff(nodes: &[(String, &Snapshot)]) -> FleetDiff {
    let per_node: Vec<BTreeMap<String, String>> = nodes
        .iter()
        .map(|(_, s)| facts(s).into_iter().collect())
        .collect();
    // Fact order: the first node's order, then facts only later nodes have, in their order.
    let mut order: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for (_, s) in nodes {
        for (k, _) in facts(s) {
            if seen.insert(k.clone()) {
                order.push(k);
            }
        }
    }
    let mut odd = vec![0usize; nodes.len()];
    let mut differences = Vec::new();
    for field in &order {
        let missing = if field.starts_with("env.") {
            UNSET
        } else {
            "(absent)"
        };
        let values: Vec<String> = per_node
            .iter()
            .map(|m| m.get(field).cloned().unwrap_or_else(|| missing.into()))
            .collect();
        if values
            .first()
            .is_none_or(|first| values.iter().all(|v| v == first))
        {
            continue;
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &values {
            *counts.entry(v).or_default() += 1;
        }
        let top = counts.values().copied().max().unwrap_or(0);
        let majority = (counts.values().filter(|c| **c == top).count() == 1)
            .then(|| {
                counts
                    .iter()
                    .find(|(_, c)| **c == top)
                    .map(|(v, _)| v.to_string())
            })
            .flatten();
        for (count, v) in odd.iter_mut().zip(&values) {
            if majority.as_ref() != Some(v) {
                *count += 1;
            }
        }
        differences.push(FieldDiff {
            field: field.clone(),
            values,
            majority,
        });
    }
    // (position, odd count) per node, most odd first; the sort is stable.
    let mut idx: Vec<(usize, usize)> = odd.iter().copied().enumerate().collect();
    idx.sort_by_key(|&(_, odd_fields)| std::cmp::Reverse(odd_fields));
    let out_nodes = idx
        .iter()
        .filter_map(|&(i, odd_fields)| {
            let (name, s) = nodes.get(i)?;
            Some(Node {
                name: name.clone(),
                hostname: s.host.hostname.known().cloned(),
                odd_fields,
            })
        })
        .collect();
    for d in &mut differences {
        d.values = idx
            .iter()
            .filter_map(|&(i, _)| d.values.get(i).cloned())
            .collect();
    }
    FleetDiff {
        nodes: out_nodes,
        compared_fields: order.len(),
        differences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::node;

    fn fact(s: &Snapshot, name: &str) -> Option<String> {
        facts(s)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    #[test]
    fn facts_read_the_snapshot() {
        let a = node("a");
        assert_eq!(fact(&a, "driver.version").as_deref(), Some("565.57.01"));
        assert_eq!(fact(&a, "gpu.count").as_deref(), Some("8"));
        assert_eq!(fact(&a, "vm.swappiness").as_deref(), Some("10"));
        assert_eq!(fact(&a, "vm.thp_enabled").as_deref(), Some("madvise"));
        assert_eq!(
            fact(&a, "gpu3.pcie").as_deref(),
            Some("x16 of x16, Gen5 max")
        );
        // Identity is not a fact: the hostname differs between a and c.
        assert!(facts(&a).iter().all(|(k, _)| !k.contains("hostname")));
    }

    #[test]
    fn planted_node_comes_first_with_the_majority_named() {
        let (a, b, c) = (node("a"), node("b"), node("c"));
        let d = diff(&[("a".into(), &a), ("c".into(), &c), ("b".into(), &b)]);
        let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(d.nodes.first().map(|n| n.odd_fields), Some(3));
        let fields: Vec<&str> = d.differences.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["gpu3.pcie", "vm.thp_enabled", "vm.swappiness"]);
        let swap = d.differences.last().unwrap();
        assert_eq!(swap.values, ["60", "10", "10"]);
        assert_eq!(swap.majority.as_deref(), Some("10"));
        assert_eq!(d.compared_fields, facts(&a).len());
    }

    #[test]
    fn equal_nodes_are_identical_and_two_have_no_majority() {
        let (a, b, c) = (node("a"), node("b"), node("c"));
        assert!(diff(&[("a".into(), &a), ("c".into(), &c)]).identical());
        let d = diff(&[("a".into(), &a), ("b".into(), &b)]);
        assert!(d.differences.iter().all(|f| f.majority.is_none()));
        // Every value is odd without a majority; ties keep the input order.
        let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(d.nodes.iter().all(|n| n.odd_fields == 3));
    }

    #[test]
    fn a_variable_set_on_one_node_only_is_unset_elsewhere() {
        let (a, mut b) = (node("a"), node("b"));
        b.env.insert("NCCL_DEBUG".into(), "INFO".into());
        let d = diff(&[("a".into(), &a), ("b".into(), &b)]);
        let env = d
            .differences
            .iter()
            .find(|f| f.field == "env.NCCL_DEBUG")
            .unwrap();
        assert_eq!(env.values, [UNSET, "INFO"]);
    }
}
