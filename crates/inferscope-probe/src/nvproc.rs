//! The NVIDIA kernel driver's own GPU list, `/proc/driver/nvidia/gpus/<bus id>/`. It is a file,
//! not NVML, so it is read under any root: it names GPUs whose sysfs entry has no vendor id
//! (reduced gathers such as hwloc's trees), and its `numa_status` gives the NUMA node holding a
//! coherent GPU's own memory (POWER9 + NVLink V100s, Grace Hopper), the node NVML calls the
//! `GPU NUMA ID`.

use crate::fsroot::FsRoot;
use inferscope_formats::nvidia_numa_status;
use inferscope_host::{
    Gpu, GpuDetails, GpuVendor, NumaNodeId, PciBusId, PciDevice, Reading, Snapshot, UnknownReason,
    not_captured,
};

const GPUS: &str = "proc/driver/nvidia/gpus";

/// Bus ids the driver lists (empty when it lists none or the directory is absent).
fn listed(fs: &FsRoot) -> Vec<PciBusId> {
    fs.list_dir(GPUS)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Display controllers with no readable vendor id that the NVIDIA driver lists are NVIDIA GPUs.
pub(crate) fn add_unlabelled(fs: &FsRoot, devices: &[PciDevice], gpus: &mut Vec<Gpu>) {
    let listed = listed(fs);
    for d in devices {
        let display = d.class.known().is_some_and(|c| c.base() == 0x03);
        if display
            && !d.vendor_id.is_known()
            && listed.contains(&d.bus_id)
            && !gpus.iter().any(|g| g.pci_bus_id == d.bus_id)
        {
            gpus.push(Gpu {
                pci_bus_id: d.bus_id,
                vendor: GpuVendor::Nvidia,
                device_id: d.device_id.clone(),
                numa_node: d.numa_node.clone(),
                local_cpus: d.local_cpus.clone(),
                details: not_captured(),
            });
        }
    }
    gpus.sort_by_key(|g| g.pci_bus_id);
}

/// Driver facts where NVML gave none: every field unknown for NVML's reason, except the GPU
/// memory node, which `numa_status` states.
fn only_memory_node(why: &Reading<GpuDetails>, node: NumaNodeId) -> GpuDetails {
    fn u<T>(why: &Reading<GpuDetails>) -> Reading<T> {
        match why {
            Reading::Unknown(u) => Reading::Unknown(u.clone()),
            Reading::Value(_) => not_captured(),
        }
    }
    GpuDetails {
        index: u(why),
        uuid: u(why),
        name: u(why),
        serial: u(why),
        memory: u(why),
        bar1: u(why),
        persistence_mode: u(why),
        compute_mode: u(why),
        mig: u(why),
        ecc: u(why),
        memory_repair: u(why),
        clocks: u(why),
        temperature_c: u(why),
        power_draw_mw: u(why),
        power_limit_mw: u(why),
        pcie: u(why),
        nvlinks: u(why),
        cpu_affinity: u(why),
        memory_affinity: u(why),
        gpu_numa_node: Reading::value(node),
        processes: u(why),
    }
}

/// Fill each NVIDIA GPU's memory node from `numa_status` where NVML did not give it. A node
/// the snapshot does not have is a capture problem, not a fact.
pub(crate) fn fill_memory_nodes(fs: &FsRoot, s: &mut Snapshot) {
    let nodes: Vec<NumaNodeId> = s.numa_nodes.iter().map(|n| n.id).collect();
    for g in &mut s.gpus {
        if g.vendor != GpuVendor::Nvidia
            || g.details
                .known()
                .is_some_and(|d| d.gpu_numa_node.is_known())
        {
            continue;
        }
        let rel = format!("{GPUS}/{}/numa_status", g.pci_bus_id);
        let node = match fs.parse(&rel, nvidia_numa_status::parse) {
            Reading::Value(Some(n)) => NumaNodeId(n),
            Reading::Value(None) => continue,
            Reading::Unknown(u) => {
                if u.reason != UnknownReason::NotPresent {
                    s.capture_problems.push(u.detail);
                }
                continue;
            }
        };
        if !nodes.contains(&node) {
            s.capture_problems.push(format!(
                "/{rel} names NUMA node {node}, but /sys/devices/system/node/node{node} does not exist"
            ));
            continue;
        }
        match &mut g.details {
            Reading::Value(d) => d.gpu_numa_node = Reading::value(node),
            other => *other = Reading::value(only_memory_node(other, node)),
        }
    }
}
