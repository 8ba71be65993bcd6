//! The Snapshot: everything inferscope knows about one host at one moment.
//!
//! Capture code fills it, every reasoning step reads it, and it is what users attach to bug
//! reports (`inferscope snapshot > node.json`). It must therefore round-trip through JSON without
//! loss: fields are ordered structs, maps are `BTreeMap`, and there are no floats. The schema is
//! versioned by [`SCHEMA_VERSION`]; new fields are added (with serde defaults), never renamed.

use crate::cpuset::{CpuSet, NodeSet};
use crate::ids::{NumaNodeId, PciBusId, PciClass, PciId};
use crate::reading::Reading;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the Snapshot JSON layout. Bumped only for incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything known about one host at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Layout version of this document ([`SCHEMA_VERSION`] when written by this build).
    pub schema_version: u32,
    /// True only when captured from the running machine (root `/`); binding and other
    /// actions refuse to act on a snapshot that is not live.
    pub is_live: bool,
    /// Capture time, RFC 3339 UTC (`2026-12-02T14:10:29Z`).
    pub captured_at: String,
    /// Where the facts came from.
    pub source: SnapshotSource,
    /// Host identity and CPU inventory.
    pub host: Host,
    /// NUMA nodes in ascending id order (CPU-less memory nodes included).
    pub numa_nodes: Vec<NumaNode>,
    /// Every PCI function, in bus-id order, bridges included.
    pub pci_devices: Vec<PciDevice>,
    /// GPUs (NVIDIA and AMD display/3D controllers) in PCI bus-id order.
    pub gpus: Vec<Gpu>,
    /// High-speed NICs (Mellanox/NVIDIA, Broadcom, Intel network and InfiniBand) in bus-id order.
    pub nics: Vec<Nic>,
    /// Kernel and VM settings that matter for serving.
    pub settings: HostSettings,
    /// Relevant environment variables of the capturing process (secrets redacted).
    pub env: BTreeMap<String, String>,
    /// Driver-wide facts (NVML or an imported `nvidia-smi -q`); unknown without a driver.
    #[serde(default = "not_captured")]
    pub driver: Reading<crate::driver::DriverInfo>,
    /// Driver facts per GPU pair (NVML topology, NVLinks, P2P), each unordered pair once.
    #[serde(default)]
    pub gpu_pairs: Vec<crate::driver::GpuPair>,
    /// CUDA enumeration orders.
    #[serde(default = "not_captured")]
    pub cuda_order: Reading<crate::driver::CudaOrder>,
    /// Problems met during capture that no single reading carries (a malformed node cpulist,
    /// an unreadable PCI device), each naming the file.
    pub capture_problems: Vec<String>,
}

/// Provenance of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotSource {
    /// Root directory sysfs/procfs were read under (`/` when live).
    pub root: String,
    /// The tool and version that wrote it (`inferscope 0.1.0`).
    pub tool: String,
}

/// Host identity and CPU inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// `/proc/sys/kernel/hostname`.
    pub hostname: Reading<String>,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Reading<String>,
    /// CPU model name (`/proc/cpuinfo`).
    pub cpu_model: Reading<String>,
    /// Physical packages (distinct `physical_package_id`).
    pub sockets: Reading<u32>,
    /// Physical cores (distinct package/core pairs).
    pub cores: Reading<u32>,
    /// Online logical CPUs.
    pub threads: Reading<u32>,
    /// `/sys/devices/system/cpu/online`.
    pub online_cpus: Reading<CpuSet>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// Kernel node number.
    pub id: NumaNodeId,
    /// CPUs of the node; empty for CPU-less memory nodes (GH200 HBM, CXL, HBM flat mode).
    pub cpus: CpuSet,
    /// `MemTotal` of the node.
    pub memory_total_bytes: Reading<u64>,
    /// `MemFree` of the node.
    pub memory_free_bytes: Reading<u64>,
    /// SLIT distances: `distances[i]` is the distance to `numa_nodes[i]` of the snapshot.
    pub distances: Reading<Vec<u32>>,
    /// Huge page pools of this node.
    pub hugepages: Vec<HugePagePool>,
}

/// A pool of huge pages of one size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePagePool {
    /// Page size in KiB (2048, 1048576).
    pub page_size_kib: u64,
    /// `nr_hugepages`.
    pub total: Reading<u64>,
    /// `free_hugepages`.
    pub free: Reading<u64>,
}

/// A PCIe link speed as sysfs reports it (`16.0 GT/s PCIe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpeed {
    /// Transfer rate in tenths of GT/s (160 = 16.0 GT/s).
    pub gt_per_s_tenths: u32,
}

impl LinkSpeed {
    /// PCIe generation for the standard rates (2.5 GT/s = Gen1 ... 128 GT/s = Gen7).
    pub fn generation(&self) -> Option<u8> {
        generation_of_tenths(self.gt_per_s_tenths)
    }
}

impl std::fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{} GT/s",
            self.gt_per_s_tenths / 10,
            self.gt_per_s_tenths % 10
        )
    }
}

/// PCIe generation of a transfer rate given in tenths of GT/s (160 → 4); `None` if non-standard.
pub fn generation_of_tenths(tenths: u32) -> Option<u8> {
    match tenths {
        25 => Some(1),
        50 => Some(2),
        80 => Some(3),
        160 => Some(4),
        320 => Some(5),
        640 => Some(6),
        1280 => Some(7),
        _ => None,
    }
}

/// Current and maximum PCIe link of a function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// `current_link_speed` (idle GPUs downtrain, so compare under load).
    pub current_speed: Reading<LinkSpeed>,
    /// `current_link_width` (lanes).
    pub current_width: Reading<u32>,
    /// `max_link_speed`.
    pub max_speed: Reading<LinkSpeed>,
    /// `max_link_width`.
    pub max_width: Reading<u32>,
}

/// One PCI function from `/sys/bus/pci/devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// Address of the function.
    pub bus_id: PciBusId,
    /// Host bridge (root complex) it hangs off, as the sysfs directory name (`pci0000:17`).
    pub root_complex: String,
    /// Bridges from the root port down to (not including) this device.
    pub upstream_bridges: Vec<PciBusId>,
    /// `vendor`.
    pub vendor_id: Reading<PciId>,
    /// `device`.
    pub device_id: Reading<PciId>,
    /// `class` (24 bits: class, subclass, prog-if).
    pub class: Reading<PciClass>,
    /// Bound kernel driver (`nvidia`, `mlx5_core`, `pcieport`); unknown when none is bound.
    pub driver: Reading<String>,
    /// `numa_node`; unknown (`not_reported`) when the kernel reads -1.
    pub numa_node: Reading<NumaNodeId>,
    /// `local_cpulist`.
    pub local_cpus: Reading<CpuSet>,
    /// Link state.
    pub link: PcieLink,
}

impl PciDevice {
    /// True for PCI-to-PCI bridges (root ports, switch ports): class 0x0604.
    pub fn is_bridge(&self) -> bool {
        matches!(self.class.known(), Some(c) if c.class_and_subclass() == 0x0604)
    }
}

/// GPU vendor, from the PCI vendor id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuVendor {
    /// 0x10de.
    Nvidia,
    /// 0x1002.
    Amd,
}

/// A GPU as the PCI tree shows it. Driver-level facts (NVML) are added by later captures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// PCI address; the stable name of this GPU.
    pub pci_bus_id: PciBusId,
    /// Vendor.
    pub vendor: GpuVendor,
    /// PCI device id (model).
    pub device_id: Reading<PciId>,
    /// NUMA node of the GPU's PCI root, per the kernel.
    pub numa_node: Reading<NumaNodeId>,
    /// CPUs the kernel calls local to the GPU (`local_cpulist`).
    pub local_cpus: Reading<CpuSet>,
    /// What the driver says about this GPU (NVML or imported `nvidia-smi -q`).
    #[serde(default = "not_captured")]
    pub details: Reading<crate::driver::GpuDetails>,
}

/// Default for fields added after a snapshot was written: not captured.
pub fn not_captured<T>() -> Reading<T> {
    Reading::unknown(
        crate::reading::UnknownReason::NotCaptured,
        "not in this snapshot (written before the field existed)",
    )
}

/// A network adapter function worth knowing for GPU serving (RDMA, high speed Ethernet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    /// PCI address.
    pub pci_bus_id: PciBusId,
    /// PCI vendor id.
    pub vendor_id: PciId,
    /// RDMA device names (`mlx5_0`), from the function's `infiniband/` directory.
    pub rdma_devices: Vec<String>,
    /// Network interface names (`ibp24s0`, `eth0`), from the function's `net/` directory.
    pub net_devices: Vec<String>,
    /// NUMA node of the NIC, per the kernel.
    pub numa_node: Reading<NumaNodeId>,
}

impl Nic {
    /// The name `nvidia-smi topo -m` uses: the RDMA device if any, else the netdev, else the bus id.
    pub fn display_name(&self) -> String {
        self.rdma_devices
            .first()
            .or(self.net_devices.first())
            .cloned()
            .unwrap_or_else(|| self.pci_bus_id.to_string())
    }
}

/// A resource limit with soft and hard values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimit {
    /// Soft limit (the one in force).
    pub soft: LimitValue,
    /// Hard limit (the ceiling an unprivileged process may raise to).
    pub hard: LimitValue,
}

/// A limit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitValue {
    /// No limit.
    Unlimited,
    /// A limit in bytes.
    Bytes(u64),
}

/// Size of the `/dev/shm` tmpfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShmSize {
    /// Size in bytes.
    pub bytes: u64,
    /// How the size was found: `mount_option` (explicit `size=`), `percent_of_ram`
    /// (`size=N%`), or `kernel_default` (no option: the kernel uses half of RAM).
    pub basis: String,
}

/// Frequency governor of a group of CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GovernorGroup {
    /// `scaling_governor` (`performance`, `powersave`, `schedutil`).
    pub governor: String,
    /// CPUs using it.
    pub cpus: CpuSet,
}

/// Control group of the capturing process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroup {
    /// 1 or 2.
    pub version: u8,
    /// Path within the hierarchy (`/user.slice/...`).
    pub path: String,
    /// CPUs this process may run on (`cpuset.cpus.effective`).
    pub cpus_effective: Reading<CpuSet>,
    /// NUMA nodes this process may allocate from (`cpuset.mems.effective`).
    pub mems_effective: Reading<NodeSet>,
    /// Memory limit (`memory.max` / `memory.limit_in_bytes`).
    pub memory_max: Reading<LimitValue>,
}

/// Kernel and VM settings that matter for serving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSettings {
    /// Host RAM (`MemTotal`).
    pub memory_total_bytes: Reading<u64>,
    /// `MemAvailable`.
    pub memory_available_bytes: Reading<u64>,
    /// Transparent huge pages mode (`always`, `madvise`, `never`).
    pub thp_enabled: Reading<String>,
    /// THP defrag mode.
    pub thp_defrag: Reading<String>,
    /// System-wide huge page pools.
    pub hugepages: Vec<HugePagePool>,
    /// `SwapTotal`.
    pub swap_total_bytes: Reading<u64>,
    /// `SwapTotal - SwapFree`.
    pub swap_used_bytes: Reading<u64>,
    /// `vm.swappiness`.
    pub vm_swappiness: Reading<u32>,
    /// `vm.zone_reclaim_mode`.
    pub vm_zone_reclaim_mode: Reading<u32>,
    /// `kernel.numa_balancing` (0 off, 1 on, 2 memory tiering).
    pub kernel_numa_balancing: Reading<u32>,
    /// CPU frequency governors grouped by value; unknown where cpufreq is absent (VMs).
    pub cpu_governors: Reading<Vec<GovernorGroup>>,
    /// Size of `/dev/shm`, which NCCL and multi-process servers use for shared buffers.
    pub dev_shm: Reading<ShmSize>,
    /// `RLIMIT_MEMLOCK` of the capturing process (pinned host buffers, RDMA).
    pub memlock_limit: Reading<ResourceLimit>,
    /// IOMMU-related kernel command-line parameters (`intel_iommu=on`, `iommu=pt`).
    pub kernel_iommu_params: Reading<Vec<String>>,
    /// Control group of the capturing process.
    pub cgroup: Reading<Cgroup>,
}
