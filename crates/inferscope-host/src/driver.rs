//! What the GPU driver knows and sysfs does not: NVML facts (or the same facts imported from
//! `nvidia-smi -q`), per GPU and per GPU pair.
//!
//! Every field is a [`Reading`] because NVML answers per call: an old driver lacks a symbol, a
//! GeForce card says `NOT_SUPPORTED` for ECC, a container is denied process lists. One failed
//! call must cost one field, not the whole GPU.

use crate::cpuset::{CpuSet, NodeSet};
use crate::ids::{GpuUuid, NumaNodeId, NvmlIndex, PciBusId};
use crate::reading::Reading;
use crate::topology::LinkClass;
use serde::{Deserialize, Serialize};

/// Where driver facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverSource {
    /// NVML, loaded at run time from `libnvidia-ml.so.1`.
    Nvml,
    /// Imported from `nvidia-smi -q` text.
    NvidiaSmiQ,
    /// Imported from `nvidia-smi -q -x` XML.
    NvidiaSmiXml,
}

/// Driver-wide facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverInfo {
    /// Where these facts came from.
    pub source: DriverSource,
    /// Kernel driver version (`550.90.07`).
    pub driver_version: Reading<String>,
    /// Newest CUDA runtime the driver supports (`12.4`), as `nvidia-smi` prints "CUDA Version".
    pub cuda_driver_version: Reading<String>,
    /// NVML library version.
    pub nvml_version: Reading<String>,
    /// GPUs the driver reports.
    pub gpu_count: Reading<u32>,
}

/// Framebuffer memory as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemory {
    /// Total bytes.
    pub total_bytes: u64,
    /// Used bytes (includes the driver's own reservation on the v1 API).
    pub used_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Reserved by the driver and firmware (v2 API only).
    pub reserved_bytes: Reading<u64>,
}

/// BAR1 aperture (host-visible GPU memory window; matters for GPUDirect RDMA).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar1Memory {
    /// Total bytes.
    pub total_bytes: u64,
    /// Used bytes.
    pub used_bytes: u64,
}

/// Mode with current and pending (after reset) values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingMode {
    /// In force now.
    pub current: bool,
    /// In force after the next GPU reset or reboot.
    pub pending: bool,
}

/// ECC state and error counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccState {
    /// ECC enabled now / after reset.
    pub mode: Reading<PendingMode>,
    /// Uncorrected errors since the last driver load.
    pub volatile_uncorrected: Reading<u64>,
    /// Uncorrected errors over the GPU's lifetime.
    pub aggregate_uncorrected: Reading<u64>,
}

/// Retired pages (pre-Ampere) or row remapping (Ampere and later).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRepair {
    /// Pages retired for single-bit errors (pre-Ampere).
    pub retired_pages_single_bit: Reading<u64>,
    /// Pages retired for double-bit errors (pre-Ampere).
    pub retired_pages_double_bit: Reading<u64>,
    /// A page retirement waits for a reset.
    pub retirement_pending: Reading<bool>,
    /// Rows remapped for correctable errors.
    pub remapped_rows_correctable: Reading<u64>,
    /// Rows remapped for uncorrectable errors.
    pub remapped_rows_uncorrectable: Reading<u64>,
    /// A remap waits for a reset.
    pub remap_pending: Reading<bool>,
    /// A remap failed: the GPU needs service.
    pub remap_failure: Reading<bool>,
}

/// Clocks in MHz.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    /// Current SM clock.
    pub sm_mhz: Reading<u32>,
    /// Current memory clock.
    pub memory_mhz: Reading<u32>,
    /// Maximum SM clock.
    pub sm_max_mhz: Reading<u32>,
    /// Maximum memory clock.
    pub memory_max_mhz: Reading<u32>,
    /// Active clock event (throttle) reasons (`sw_power_cap`, `hw_slowdown`, `sw_thermal_slowdown`, ...).
    pub event_reasons: Reading<Vec<String>>,
}

/// PCIe link as the GPU itself reports it (sysfs reports the same link from the port's side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuPcie {
    /// Current generation.
    pub gen_current: Reading<u32>,
    /// Maximum generation of the GPU and the slot together.
    pub gen_max: Reading<u32>,
    /// Current width (lanes).
    pub width_current: Reading<u32>,
    /// Maximum width.
    pub width_max: Reading<u32>,
    /// Transmit throughput sample, KB/s.
    pub tx_kbytes_per_s: Reading<u32>,
    /// Receive throughput sample, KB/s.
    pub rx_kbytes_per_s: Reading<u32>,
    /// PCIe replay counter (link errors).
    pub replay_counter: Reading<u32>,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    /// Link number on this GPU.
    pub link: u32,
    /// Link is up.
    pub active: bool,
    /// NVLink version.
    pub version: Reading<u32>,
    /// PCI address of the device at the other end (a GPU, or an NVSwitch).
    pub remote_pci_bus_id: Reading<PciBusId>,
}

/// A MIG GPU instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstance {
    /// MIG device UUID (`MIG-...`).
    pub uuid: Reading<GpuUuid>,
    /// Profile name (`1g.10gb`).
    pub name: Reading<String>,
    /// Memory of the instance.
    pub memory_total_bytes: Reading<u64>,
}

/// MIG state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigState {
    /// MIG mode now / after reset.
    pub mode: PendingMode,
    /// Instances (empty when MIG is off).
    pub instances: Vec<MigInstance>,
}

/// A process using the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Process id as the driver reports it (host PID namespace; may differ inside containers).
    pub pid: u32,
    /// GPU memory used by the process.
    pub used_memory_bytes: Reading<u64>,
    /// Process name, when the source gives it.
    pub name: Reading<String>,
}

/// Everything the driver says about one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDetails {
    /// NVML index (`nvidia-smi -i N`).
    pub index: Reading<NvmlIndex>,
    /// UUID.
    pub uuid: Reading<GpuUuid>,
    /// Product name (`NVIDIA H100 80GB HBM3`).
    pub name: Reading<String>,
    /// Board serial.
    pub serial: Reading<String>,
    /// Framebuffer memory.
    pub memory: Reading<GpuMemory>,
    /// BAR1 memory.
    pub bar1: Reading<Bar1Memory>,
    /// Persistence mode.
    pub persistence_mode: Reading<bool>,
    /// Compute mode (`default`, `exclusive_process`, `prohibited`).
    pub compute_mode: Reading<String>,
    /// MIG.
    pub mig: Reading<MigState>,
    /// ECC.
    pub ecc: Reading<EccState>,
    /// Retired pages and row remapping.
    pub memory_repair: Reading<MemoryRepair>,
    /// Clocks and clock event reasons.
    pub clocks: Reading<Clocks>,
    /// GPU temperature, °C.
    pub temperature_c: Reading<u32>,
    /// Power draw, milliwatts.
    pub power_draw_mw: Reading<u32>,
    /// Enforced power limit, milliwatts.
    pub power_limit_mw: Reading<u32>,
    /// PCIe link from the GPU's side.
    pub pcie: Reading<GpuPcie>,
    /// NVLinks.
    pub nvlinks: Reading<Vec<NvLink>>,
    /// CPUs NVML calls ideal for this GPU.
    pub cpu_affinity: Reading<CpuSet>,
    /// NUMA nodes NVML calls ideal for this GPU's host memory.
    pub memory_affinity: Reading<NodeSet>,
    /// NUMA node of the GPU's own memory (Grace-class coherent GPUs; `GPU NUMA ID`).
    pub gpu_numa_node: Reading<NumaNodeId>,
    /// Running compute processes.
    pub processes: Reading<Vec<GpuProcess>>,
}

/// Peer-to-peer capability as NVML reports it (`nvidia-smi topo -p2p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum P2pStatus {
    /// Supported (`OK`).
    Ok,
    /// Chipset not supported (`CNS`).
    ChipsetNotSupported,
    /// GPU not supported (`GNS`).
    GpuNotSupported,
    /// Topology not supported (`TNS`).
    TopologyNotSupported,
    /// Disabled by registry key (`DR`).
    DisabledByRegkey,
    /// Not supported (`NS`).
    NotSupported,
    /// Unknown (`U`).
    Unknown,
}

/// Driver facts about a pair of GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuPair {
    /// First GPU.
    pub a: PciBusId,
    /// Second GPU.
    pub b: PciBusId,
    /// NVML's own topology common ancestor (`nvmlDeviceGetTopologyCommonAncestor`).
    pub common_ancestor: Reading<LinkClass>,
    /// Active NVLinks between the two (direct links; NVSwitch systems report per-link remotes).
    pub nvlinks: Reading<u32>,
    /// P2P read capability.
    pub p2p_read: Reading<P2pStatus>,
    /// P2P write capability.
    pub p2p_write: Reading<P2pStatus>,
}

/// The orders in which CUDA numbers the GPUs, so `CUDA_VISIBLE_DEVICES=1` can be resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaOrder {
    /// Order under `CUDA_DEVICE_ORDER=PCI_BUS_ID` (by PCI address).
    pub pci_bus_id: Vec<PciBusId>,
    /// Order under the default `CUDA_DEVICE_ORDER=FASTEST_FIRST`; unknown when the GPUs differ in
    /// model, since the ranking is computed by the CUDA runtime.
    pub fastest_first: Reading<Vec<PciBusId>>,
}
