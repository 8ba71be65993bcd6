//! What one `watch` sample holds: a GPU and a process at one moment.
//!
//! The types live here, beside the tracker that reads them, so the tracker stays pure;
//! `inferscope-probe` fills them (and re-exports them as `inferscope_probe::watch::*`).
//! `None` always means the source could not say, never zero.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU at one moment. `None` = NVML could not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML index.
    pub index: u32,
    /// GPU UUID.
    pub uuid: Option<String>,
    /// PCI bus id (`0000:17:00.0`).
    pub pci_bus_id: Option<String>,
    /// NUMA node of the GPU's PCI device (sysfs).
    pub numa_node: Option<u32>,
    /// Memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Memory in total.
    pub memory_total_bytes: Option<u64>,
    /// GPU utilisation, percent.
    pub utilization_percent: Option<u32>,
    /// PCIe transmit throughput (NVML samples 20 ms), bytes/s.
    pub pcie_tx_bytes_per_s: Option<u64>,
    /// PCIe receive throughput, bytes/s.
    pub pcie_rx_bytes_per_s: Option<u64>,
    /// Current PCIe generation.
    pub pcie_gen: Option<u32>,
    /// Current PCIe width.
    pub pcie_width: Option<u32>,
}

/// One process at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSample {
    /// Pid.
    pub pid: u32,
    /// False once `/proc/PID` is gone.
    pub alive: bool,
    /// `comm`.
    pub name: Option<String>,
    /// Resident set size.
    pub rss_bytes: Option<u64>,
    /// Resident bytes per NUMA node (`numa_maps`); empty when unreadable.
    pub numa_bytes: BTreeMap<u32, u64>,
    /// CPUs its threads last ran on, as a Linux list (`0-3,8`).
    pub cpus_ran_on: Option<String>,
    /// GPU memory per NVML index, from NVML's process lists.
    pub gpu_memory_bytes: BTreeMap<u32, u64>,
    /// Why something is missing (permission, vanished).
    pub problems: Vec<String>,
}
