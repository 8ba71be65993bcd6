//! Topology queries over a [`Snapshot`]: the GPU/NIC link matrix with `nvidia-smi topo -m`
//! semantics, and GPU → NUMA node → CPU placement.
//!
//! The link class of a pair is derived from the PCI tree alone, so it works from a fixture, a
//! gathered archive or a container without the NVIDIA driver:
//!
//! * different host bridges (root complexes): `NODE` when both sit on the same NUMA node, else
//!   `SYS` (crossing the socket interconnect);
//! * same host bridge, different root ports: `PHB`;
//! * below a common bridge: `PIX` when the path crosses at most one bridge or switch, else `PXB`.
//!
//! sysfs does not say which bridge is a switch's upstream or downstream port without reading
//! privileged config space, so switches are recognised by shape: below a root port, PCIe bridges
//! come in (upstream port, downstream port) pairs, and each pair counts as one switch. This is
//! the same collapsing NCCL applies to its topology graph. NVLink classes (`NV#`) need NVML and
//! are not derived here.

use crate::cpuset::CpuSet;
use crate::ids::{NumaNodeId, PciBusId};
use crate::reading::{Reading, UnknownReason};
use crate::snapshot::{PciDevice, Snapshot};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How two devices are connected, best (`X`) to worst (`SYS`), as in `nvidia-smi topo -m`.
/// Serialised as the matrix cell text (`"PIX"`, `"NV18"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkClass {
    /// The device itself.
    SelfLink,
    /// A bonded set of N NVLinks (from NVML; never derived from the PCI tree).
    NvLink(u32),
    /// At most a single PCIe bridge or switch.
    Pix,
    /// Multiple PCIe bridges, without the host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU's root complex).
    Phb,
    /// Between host bridges within one NUMA node.
    Node,
    /// Across the SMP interconnect between NUMA nodes (QPI/UPI/Infinity Fabric).
    Sys,
    /// Not known: a device whose place in the PCI tree is not in the source (`?`).
    Unknown,
}

impl Serialize for LinkClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LinkClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LinkClass::parse_cell(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown link class {s:?}")))
    }
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkClass::SelfLink => f.write_str("X"),
            LinkClass::NvLink(n) => write!(f, "NV{n}"),
            LinkClass::Pix => f.write_str("PIX"),
            LinkClass::Pxb => f.write_str("PXB"),
            LinkClass::Phb => f.write_str("PHB"),
            LinkClass::Node => f.write_str("NODE"),
            LinkClass::Sys => f.write_str("SYS"),
            LinkClass::Unknown => f.write_str("?"),
        }
    }
}

impl LinkClass {
    /// Parse the matrix cell text (`X`, `PIX`, `NV18`, ...).
    pub fn parse_cell(cell: &str) -> Option<LinkClass> {
        match cell.trim() {
            "X" => Some(LinkClass::SelfLink),
            "PIX" => Some(LinkClass::Pix),
            "PXB" => Some(LinkClass::Pxb),
            "PHB" => Some(LinkClass::Phb),
            "NODE" => Some(LinkClass::Node),
            "SYS" | "SOC" => Some(LinkClass::Sys),
            "?" => Some(LinkClass::Unknown),
            other => other
                .strip_prefix("NV")
                .and_then(|n| n.parse().ok())
                .map(LinkClass::NvLink),
        }
    }
}

/// The legend `nvidia-smi topo -m` prints under its matrix (current driver wording).
pub const NVIDIA_SMI_LEGEND: &[(&str, &str)] = &[
    ("X", "Self"),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    ),
    (
        "PHB",
        "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    ),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "Connection traversing a bonded set of # NVLinks"),
];

/// Placement of one GPU: the right-hand columns of `nvidia-smi topo -m`. `null` in JSON means
/// unknown; `notes` of the matrix says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuPlacement {
    /// Matrix name (`GPU0`), numbered in PCI bus order as nvidia-smi does.
    pub name: String,
    /// PCI address (absent when imported from text that does not carry it).
    pub pci_bus_id: Option<PciBusId>,
    /// CPUs local to the GPU (`CPU Affinity` column).
    pub cpu_affinity: Option<CpuSet>,
    /// NUMA node(s) of the GPU (`NUMA Affinity` column; a list on GB200-class trays).
    pub numa_affinity: Option<Vec<NumaNodeId>>,
    /// NUMA node(s) holding the GPU's own memory (`GPU NUMA ID`; Grace-class GPUs only).
    pub gpu_numa_id: Option<Vec<NumaNodeId>>,
    /// Local CPUs this process may actually use (affinity ∩ cgroup `cpuset.cpus.effective`).
    pub usable_cpus: Option<CpuSet>,
}

/// A NIC row of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicEntry {
    /// Matrix name (`NIC0`).
    pub name: String,
    /// Device name from the NIC legend (`mlx5_0`).
    pub device: String,
    /// PCI address (absent when imported from text).
    pub pci_bus_id: Option<PciBusId>,
}

/// The `nvidia-smi topo -m` view, whether computed from a snapshot or imported from text.
/// JSON layout is a documented contract (docs/snapshot.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoMatrix {
    /// Names in matrix order: GPUs (`GPU0`...) then NICs (`NIC0`...).
    pub devices: Vec<String>,
    /// `matrix[i][j]` connects `devices[i]` and `devices[j]`; `X` on the diagonal.
    pub matrix: Vec<Vec<LinkClass>>,
    /// One entry per GPU, in matrix order.
    pub gpus: Vec<GpuPlacement>,
    /// One entry per NIC, in matrix order.
    pub nics: Vec<NicEntry>,
    /// Assumptions and unknowns (e.g. a GPU whose NUMA node the kernel does not report).
    pub notes: Vec<String>,
}

/// One NUMA node with what is attached to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Node id.
    pub id: NumaNodeId,
    /// CPUs of the node (empty for memory-only nodes).
    pub cpus: CpuSet,
    /// CPUs of the node this process may use (∩ cgroup); equal to `cpus` when unrestricted.
    pub usable_cpus: Reading<CpuSet>,
    /// `MemTotal` of the node.
    pub memory_total_bytes: Reading<u64>,
    /// `MemFree` of the node.
    pub memory_free_bytes: Reading<u64>,
    /// Labels of GPUs on this node.
    pub gpus: Vec<String>,
    /// Labels of NICs on this node.
    pub nics: Vec<String>,
}

fn device<'a>(snapshot: &'a Snapshot, id: &PciBusId) -> Option<&'a PciDevice> {
    snapshot
        .pci_devices
        .binary_search_by(|d| d.bus_id.cmp(id))
        .ok()
        .and_then(|i| snapshot.pci_devices.get(i))
        .or_else(|| snapshot.pci_devices.iter().find(|d| &d.bus_id == id))
}

/// Number of switch units a path crosses from bridge index `from` to its end.
fn units_from(len: usize, from: usize) -> usize {
    // unit 0 = root port; bridges 1,2 = first switch (upstream, downstream); 3,4 = second ...
    let unit = |i: usize| if i == 0 { 0 } else { i.div_ceil(2) };
    if from >= len {
        return 0;
    }
    unit(len - 1) - unit(from) + 1
}

/// NUMA node to use for link classification: the kernel's, or the node whose CPUs contain the
/// device's local CPUs when the kernel reads -1.
fn effective_node(snapshot: &Snapshot, dev: &PciDevice) -> Option<NumaNodeId> {
    if let Some(n) = dev.numa_node.known() {
        return Some(*n);
    }
    let local = dev.local_cpus.known()?;
    let cpu_nodes: Vec<_> = snapshot
        .numa_nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .collect();
    match cpu_nodes.as_slice() {
        [only] => Some(only.id),
        _ => cpu_nodes
            .iter()
            .find(|n| !local.is_empty() && local.is_subset(&n.cpus))
            .map(|n| n.id),
    }
}

/// The PCIe link class between two devices of the snapshot; `None` if either is unknown.
pub fn pcie_link_class(snapshot: &Snapshot, a: &PciBusId, b: &PciBusId) -> Option<LinkClass> {
    if a == b {
        return Some(LinkClass::SelfLink);
    }
    let da = device(snapshot, a)?;
    let db = device(snapshot, b)?;
    if da.root_complex != db.root_complex {
        return Some(
            match (effective_node(snapshot, da), effective_node(snapshot, db)) {
                (Some(x), Some(y)) if x == y => LinkClass::Node,
                _ => LinkClass::Sys,
            },
        );
    }
    let pa = &da.upstream_bridges;
    let pb = &db.upstream_bridges;
    let common = pa.iter().zip(pb.iter()).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return Some(LinkClass::Phb);
    }
    let crossed = units_from(pa.len(), common - 1) + units_from(pb.len(), common - 1) - 1;
    Some(if crossed <= 1 {
        LinkClass::Pix
    } else {
        LinkClass::Pxb
    })
}

/// Build the GPU/NIC matrix of a snapshot.
pub fn topo_matrix(snapshot: &Snapshot) -> TopoMatrix {
    let gpu_ids = snapshot.gpus.iter().map(|g| g.pci_bus_id);
    let nic_ids = snapshot.nics.iter().map(|n| n.pci_bus_id);
    let ids: Vec<PciBusId> = gpu_ids.chain(nic_ids).collect();
    let devices = (0..snapshot.gpus.len())
        .map(|i| format!("GPU{i}"))
        .chain((0..snapshot.nics.len()).map(|i| format!("NIC{i}")))
        .collect();
    let nvlinks = |x: &PciBusId, y: &PciBusId| -> Option<u32> {
        snapshot
            .gpu_pairs
            .iter()
            .find(|p| (p.a == *x && p.b == *y) || (p.a == *y && p.b == *x))
            .and_then(|p| p.nvlinks.known().copied())
            .filter(|n| *n > 0)
    };
    let matrix: Vec<Vec<LinkClass>> = ids
        .iter()
        .map(|x| {
            ids.iter()
                .map(|y| match nvlinks(x, y) {
                    Some(n) if x != y => LinkClass::NvLink(n),
                    _ => pcie_link_class(snapshot, x, y).unwrap_or(LinkClass::Unknown),
                })
                .collect()
        })
        .collect();
    let cgroup_cpus = allowed_cpus(snapshot);
    let cpu_nodes = snapshot
        .numa_nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .count();
    let mut notes = Vec::new();
    if matrix.iter().flatten().any(|c| *c == LinkClass::Unknown) {
        notes.push(
            "? = link unknown: the device is known from the driver, but its place in the PCI tree is not in this snapshot"
                .to_string(),
        );
    }
    let mut gpus = Vec::new();
    for (i, g) in snapshot.gpus.iter().enumerate() {
        let name = format!("GPU{i}");
        if let Reading::Unknown(u) = &g.numa_node {
            notes.push(format!(
                "{name} ({}): NUMA affinity unknown: {}{}",
                g.pci_bus_id,
                u.detail,
                if cpu_nodes > 1 {
                    "; links to devices on other host bridges are shown as SYS unless its local CPUs place it"
                } else {
                    ""
                }
            ));
        }
        if let Reading::Unknown(u) = &g.local_cpus {
            notes.push(format!("{name}: CPU affinity unknown: {}", u.detail));
        }
        gpus.push(GpuPlacement {
            name,
            pci_bus_id: Some(g.pci_bus_id),
            cpu_affinity: g.local_cpus.known().cloned(),
            numa_affinity: g.numa_node.known().map(|n| vec![*n]),
            // `N/A` from NVML (memory not a NUMA node) and unknown both print as N/A, as
            // nvidia-smi does; `notes` says when it is unknown.
            gpu_numa_id: g
                .details
                .known()
                .and_then(|d| d.gpu_numa_node.known())
                .map(|n| vec![*n]),
            usable_cpus: usable(&g.local_cpus, &cgroup_cpus).into_known(),
        });
    }
    if !gpus.is_empty()
        && let Reading::Unknown(u) = &snapshot.driver
    {
        // The GPU NUMA ID can also come from the driver's /proc/driver/nvidia numa_status.
        let what = if gpus.iter().any(|g| g.gpu_numa_id.is_some()) {
            "NV# links need NVML"
        } else {
            "NV# links and GPU NUMA ID need the NVIDIA driver"
        };
        notes.push(format!("{what}, unknown here: {}", u.detail));
    }
    let nics = snapshot
        .nics
        .iter()
        .enumerate()
        .map(|(i, n)| NicEntry {
            name: format!("NIC{i}"),
            device: n.display_name(),
            pci_bus_id: Some(n.pci_bus_id),
        })
        .collect();
    TopoMatrix {
        devices,
        matrix,
        gpus,
        nics,
        notes,
    }
}

/// CPUs the capturing process may use, from its cgroup (unknown if not readable).
pub fn allowed_cpus(snapshot: &Snapshot) -> Reading<CpuSet> {
    match &snapshot.settings.cgroup {
        Reading::Value(cg) => cg.cpus_effective.clone(),
        Reading::Unknown(u) => Reading::Unknown(u.clone()),
    }
}

fn usable(local: &Reading<CpuSet>, allowed: &Reading<CpuSet>) -> Reading<CpuSet> {
    match (local, allowed) {
        (Reading::Value(l), Reading::Value(a)) => Reading::value(l.intersection(a)),
        (Reading::Value(l), Reading::Unknown(u)) => Reading::unknown(
            u.reason,
            format!(
                "cgroup CPU limit unknown ({}); local CPUs are {l}",
                u.detail
            ),
        ),
        (Reading::Unknown(u), _) => Reading::Unknown(u.clone()),
    }
}

/// NUMA nodes with their CPUs, memory and the GPUs/NICs attached to them.
pub fn numa_summary(snapshot: &Snapshot) -> Vec<NodeSummary> {
    let allowed = allowed_cpus(snapshot);
    snapshot
        .numa_nodes
        .iter()
        .map(|n| {
            let on_node = |node: &Reading<NumaNodeId>| node.known() == Some(&n.id);
            NodeSummary {
                id: n.id,
                cpus: n.cpus.clone(),
                usable_cpus: usable(&Reading::value(n.cpus.clone()), &allowed),
                memory_total_bytes: n.memory_total_bytes.clone(),
                memory_free_bytes: n.memory_free_bytes.clone(),
                gpus: snapshot
                    .gpus
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| on_node(&g.numa_node))
                    .map(|(i, _)| format!("GPU{i}"))
                    .collect(),
                nics: snapshot
                    .nics
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| on_node(&x.numa_node))
                    .map(|(i, _)| format!("NIC{i}"))
                    .collect(),
            }
        })
        .collect()
}

/// The CPUs local to a GPU that this process may use: GPU → NUMA node → node CPUs, intersected
/// with the cgroup. Falls back to the GPU's `local_cpulist` when its node is unknown.
pub fn gpu_local_cpus(snapshot: &Snapshot, gpu: &PciBusId) -> Reading<CpuSet> {
    let Some(g) = snapshot.gpus.iter().find(|g| &g.pci_bus_id == gpu) else {
        return Reading::unknown(
            UnknownReason::NotPresent,
            format!("no GPU at {gpu} in this snapshot"),
        );
    };
    let node_cpus = match g.numa_node.known() {
        Some(id) => match snapshot.numa_nodes.iter().find(|n| n.id == *id) {
            Some(n) => Reading::value(n.cpus.clone()),
            None => g.local_cpus.clone(),
        },
        None => g.local_cpus.clone(),
    };
    usable(&node_cpus, &allowed_cpus(snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_class_cells_round_trip() {
        for cell in ["X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "?"] {
            let c = LinkClass::parse_cell(cell).unwrap();
            assert_eq!(c.to_string(), cell);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{cell}\""));
            assert_eq!(serde_json::from_str::<LinkClass>(&json).unwrap(), c);
        }
        assert_eq!(LinkClass::parse_cell("SOC"), Some(LinkClass::Sys));
        assert!(LinkClass::parse_cell("NVX").is_none());
        assert!(LinkClass::NvLink(4) < LinkClass::Pix && LinkClass::Node < LinkClass::Sys);
    }

    #[test]
    fn switch_units_along_a_path() {
        // [root port] -> 1 unit; [RP, US, DS] from the US -> 1; two switch levels -> 2
        assert_eq!(units_from(1, 0), 1);
        assert_eq!(units_from(3, 1), 1);
        assert_eq!(units_from(5, 1), 2);
        assert_eq!(units_from(5, 3), 1);
        assert_eq!(units_from(3, 0), 2);
        assert_eq!(units_from(0, 0), 0);
    }
}
