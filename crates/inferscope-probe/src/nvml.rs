//! NVML, loaded at run time (`libnvidia-ml.so.1` via `dlopen`), so the binary builds and runs on
//! machines without a driver. Each NVML call fills one field; a failed call (old driver without
//! the symbol, `NOT_SUPPORTED` on a GeForce card, `NO_PERMISSION` in a container) makes that one
//! field unknown with NVML's own error as evidence, and the rest of the capture goes on.

use crate::driver::DriverCapture;
use inferscope_host::{
    Bar1Memory, Clocks, CpuSet, DriverInfo, DriverSource, EccState, GpuDetails, GpuMemory, GpuPair,
    GpuPcie, GpuProcess, GpuUuid, LinkClass, MemoryRepair, MigInstance, MigState, NodeSet,
    NumaNodeId, NvLink, NvmlIndex, P2pStatus, PciBusId, PendingMode, Reading, UnknownReason,
};
use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    Clock, ClockId, ComputeMode, EccCounter, MemoryError, P2pCapabilitiesIndex,
    P2pStatus as NvmlP2p, PcieUtilCounter, RetirementCause, TemperatureSensor, TopologyLevel,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use std::ffi::OsStr;

/// Environment variable naming an NVML library to load instead of `libnvidia-ml.so.1`.
pub const LIB_ENV: &str = "INFERSCOPE_NVML_LIB";

/// Most NVLinks per GPU NVML defines (`NVML_NVLINK_MAX_LINKS`).
const MAX_NVLINKS: u32 = 18;

fn reason(e: &NvmlError) -> UnknownReason {
    match e {
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) => UnknownReason::NotSupported,
        NvmlError::NoPermission => UnknownReason::PermissionDenied,
        NvmlError::LibloadingError(_) | NvmlError::NotFound => UnknownReason::NotPresent,
        _ => UnknownReason::ReadError,
    }
}

fn read<T>(what: &str, r: Result<T, NvmlError>) -> Reading<T> {
    match r {
        Ok(v) => Reading::value(v),
        Err(e) => Reading::unknown(reason(&e), format!("NVML {what}: {e}")),
    }
}

/// Decode an NVML affinity bitmask (array of `unsigned long`, least significant word first).
fn mask_bits(words: &[std::os::raw::c_ulong]) -> Vec<u32> {
    let bits = std::os::raw::c_ulong::BITS;
    let mut out = Vec::new();
    for (w, word) in words.iter().enumerate() {
        for b in 0..bits {
            if word >> b & 1 == 1 {
                out.push(w as u32 * bits + b);
            }
        }
    }
    out
}

fn cuda_version(v: i32) -> String {
    format!(
        "{}.{}",
        nvml_wrapper::cuda_driver_version_major(v),
        nvml_wrapper::cuda_driver_version_minor(v)
    )
}

fn link_class(level: TopologyLevel) -> LinkClass {
    match level {
        TopologyLevel::Internal => LinkClass::SelfLink,
        TopologyLevel::Single => LinkClass::Pix,
        TopologyLevel::Multiple => LinkClass::Pxb,
        TopologyLevel::HostBridge => LinkClass::Phb,
        TopologyLevel::Node => LinkClass::Node,
        TopologyLevel::System => LinkClass::Sys,
    }
}

fn p2p(s: NvmlP2p) -> P2pStatus {
    match s {
        NvmlP2p::Ok => P2pStatus::Ok,
        NvmlP2p::ChipsetNotSupported => P2pStatus::ChipsetNotSupported,
        NvmlP2p::GpuNotSupported => P2pStatus::GpuNotSupported,
        NvmlP2p::IohTopologyNotSupported => P2pStatus::TopologyNotSupported,
        NvmlP2p::DisabledByRegkey => P2pStatus::DisabledByRegkey,
        NvmlP2p::NotSupported => P2pStatus::NotSupported,
        NvmlP2p::Unknown => P2pStatus::Unknown,
    }
}

fn bus_id(text: &str) -> Reading<PciBusId> {
    match text.parse() {
        Ok(id) => Reading::value(id),
        Err(e) => Reading::unknown(UnknownReason::Malformed, format!("NVML PCI bus id: {e}")),
    }
}

fn clocks(d: &Device) -> Clocks {
    let event_reasons = read("clock event reasons", d.current_throttle_reasons()).map(|r| {
        r.iter_names()
            .map(|(name, _)| name.to_ascii_lowercase())
            .collect()
    });
    Clocks {
        sm_mhz: read("SM clock", d.clock(Clock::SM, ClockId::Current)),
        memory_mhz: read("memory clock", d.clock(Clock::Memory, ClockId::Current)),
        sm_max_mhz: read("max SM clock", d.max_clock_info(Clock::SM)),
        memory_max_mhz: read("max memory clock", d.max_clock_info(Clock::Memory)),
        event_reasons,
    }
}

/// `nvmlDeviceGetRemappedRows` (Ampere and later), which nvml-wrapper does not wrap.
fn remapped_rows(d: &Device) -> Result<(u32, u32, bool, bool), NvmlError> {
    let sym = nvml_wrapper::error::nvml_sym(d.nvml().lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corrected, mut uncorrected, mut pending, mut failed) = (0, 0, 0, 0);
    // SAFETY: the symbol was resolved from the loaded NVML library, the handle belongs to that
    // library and outlives the call, and the four out-pointers are valid for writes.
    let rc = unsafe {
        sym(
            d.handle(),
            &mut corrected,
            &mut uncorrected,
            &mut pending,
            &mut failed,
        )
    };
    nvml_wrapper::error::nvml_try(rc)?;
    Ok((corrected, uncorrected, pending != 0, failed != 0))
}

fn memory_repair(d: &Device) -> MemoryRepair {
    let count =
        |cause| read("retired pages", d.retired_pages(cause)).map(|pages| pages.len() as u64);
    let remap = read("remapped rows", remapped_rows(d));
    MemoryRepair {
        retired_pages_single_bit: count(RetirementCause::MultipleSingleBitEccErrors),
        retired_pages_double_bit: count(RetirementCause::DoubleBitEccError),
        retirement_pending: read("pending page retirement", d.are_pages_pending_retired()),
        remapped_rows_correctable: remap.clone().map(|r| u64::from(r.0)),
        remapped_rows_uncorrectable: remap.clone().map(|r| u64::from(r.1)),
        remap_pending: remap.clone().map(|r| r.2),
        remap_failure: remap.map(|r| r.3),
    }
}

/// MIG devices of a GPU in MIG mode (at most NVML's 7 per GPU; bounded anyway).
fn mig_instances(d: &Device) -> Vec<MigInstance> {
    let count = d.mig_device_count().unwrap_or(0).min(64);
    (0..count)
        .filter_map(|i| d.mig_device_by_index(i).ok())
        .map(|m| MigInstance {
            uuid: read("MIG UUID", m.uuid()).map(GpuUuid),
            name: read("MIG name", m.name()),
            memory_total_bytes: read("MIG memory", m.memory_info()).map(|x| x.total),
        })
        .collect()
}

fn details(d: &Device, cpu_words: usize) -> GpuDetails {
    let ecc = EccState {
        mode: read("ECC mode", d.is_ecc_enabled()).map(|m| PendingMode {
            current: m.currently_enabled,
            pending: m.pending_enabled,
        }),
        volatile_uncorrected: read(
            "volatile uncorrected ECC errors",
            d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
        ),
        aggregate_uncorrected: read(
            "aggregate uncorrected ECC errors",
            d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate),
        ),
    };
    let mig = read("MIG mode", d.mig_mode()).map(|m| MigState {
        mode: PendingMode {
            current: m.current == 1,
            pending: m.pending == 1,
        },
        instances: if m.current == 1 {
            mig_instances(d)
        } else {
            Vec::new()
        },
    });
    let pcie = GpuPcie {
        gen_current: read("PCIe generation", d.current_pcie_link_gen()),
        gen_max: read("max PCIe generation", d.max_pcie_link_gen()),
        width_current: read("PCIe width", d.current_pcie_link_width()),
        width_max: read("max PCIe width", d.max_pcie_link_width()),
        tx_kbytes_per_s: read(
            "PCIe TX throughput",
            d.pcie_throughput(PcieUtilCounter::Send),
        ),
        rx_kbytes_per_s: read(
            "PCIe RX throughput",
            d.pcie_throughput(PcieUtilCounter::Receive),
        ),
        replay_counter: read("PCIe replay counter", d.pcie_replay_counter()),
    };
    let nvlinks = {
        let mut links = Vec::new();
        let mut first_err = None;
        for l in 0..MAX_NVLINKS {
            let w = d.link_wrapper_for(l);
            match w.is_active() {
                Ok(active) => links.push(NvLink {
                    link: l,
                    active,
                    version: read("NVLink version", w.version()),
                    remote_pci_bus_id: read("NVLink remote PCI info", w.remote_pci_info())
                        .and_then(|p| bus_id(&p.bus_id)),
                }),
                // Links past the GPU's count answer INVALID_ARGUMENT; stop at the first.
                Err(NvmlError::InvalidArg) => break,
                Err(e) => {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        match (links.is_empty(), first_err) {
            (true, Some(e)) => read::<Vec<NvLink>>("NVLink state", Err(e)),
            _ => Reading::value(links),
        }
    };
    let processes = read("running compute processes", d.running_compute_processes()).map(|ps| {
        ps.into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                used_memory_bytes: match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Reading::value(b),
                    UsedGpuMemory::Unavailable => Reading::unknown(
                        UnknownReason::NotReported,
                        "NVML reports the process's memory as unavailable (MIG, or Windows WDDM)",
                    ),
                },
                name: Reading::unknown(
                    UnknownReason::NotCaptured,
                    "process names are read from /proc by later captures",
                ),
            })
            .collect()
    });
    GpuDetails {
        index: read("index", d.index()).map(NvmlIndex),
        uuid: read("UUID", d.uuid()).map(GpuUuid),
        name: read("name", d.name()),
        serial: read("serial", d.serial()),
        memory: read("memory info", d.memory_info()).map(|m| GpuMemory {
            total_bytes: m.total,
            used_bytes: m.used,
            free_bytes: m.free,
            reserved_bytes: Reading::value(m.reserved),
        }),
        bar1: read("BAR1 memory info", d.bar1_memory_info()).map(|b| Bar1Memory {
            total_bytes: b.total,
            used_bytes: b.used,
        }),
        persistence_mode: read("persistence mode", d.is_in_persistent_mode()),
        compute_mode: read("compute mode", d.compute_mode()).map(|m| {
            match m {
                ComputeMode::Default => "default",
                ComputeMode::ExclusiveThread => "exclusive_thread",
                ComputeMode::Prohibited => "prohibited",
                ComputeMode::ExclusiveProcess => "exclusive_process",
            }
            .to_string()
        }),
        mig,
        ecc: Reading::value(ecc),
        memory_repair: Reading::value(memory_repair(d)),
        clocks: Reading::value(clocks(d)),
        temperature_c: read("temperature", d.temperature(TemperatureSensor::Gpu)),
        power_draw_mw: read("power usage", d.power_usage()),
        power_limit_mw: read("enforced power limit", d.enforced_power_limit()),
        pcie: Reading::value(pcie),
        nvlinks,
        cpu_affinity: read("CPU affinity", d.cpu_affinity(cpu_words))
            .map(|w| mask_bits(&w).into_iter().collect::<CpuSet>()),
        memory_affinity: read("memory affinity", d.memory_affinity(cpu_words, 0))
            .map(|w| mask_bits(&w).into_iter().collect::<NodeSet>()),
        gpu_numa_node: read("GPU NUMA node", d.numa_node_id()).map(NumaNodeId),
        processes,
    }
}

/// Active NVLinks connecting two GPUs, as `nvidia-smi topo -m` counts them: links whose remote end
/// is the other GPU, or, on NVSwitch systems (remote ends that are not GPUs of this host), the
/// smaller of the two GPUs' switch links, since every switch-attached GPU reaches every other
/// through the fabric. One fabric per host is assumed (true of HGX/DGX boards).
pub fn nvlinks_between(
    gpus: &[(PciBusId, GpuDetails)],
    a: &PciBusId,
    b: &PciBusId,
) -> Reading<u32> {
    let links = |id: &PciBusId| -> Reading<Vec<NvLink>> {
        match gpus.iter().find(|(g, _)| g == id) {
            Some((_, d)) => d.nvlinks.clone(),
            None => Reading::unknown(UnknownReason::NotPresent, format!("no NVML facts for {id}")),
        }
    };
    let (la, lb) = match (links(a), links(b)) {
        (Reading::Value(x), Reading::Value(y)) => (x, y),
        (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => return Reading::Unknown(u),
    };
    let is_gpu = |id: &PciBusId| gpus.iter().any(|(g, _)| g == id);
    let direct = la
        .iter()
        .filter(|l| l.active && l.remote_pci_bus_id.known() == Some(b))
        .count() as u32;
    if direct > 0 {
        return Reading::value(direct);
    }
    let to_switch = |ls: &[NvLink]| {
        ls.iter()
            .filter(|l| l.active && l.remote_pci_bus_id.known().is_some_and(|r| !is_gpu(r)))
            .count() as u32
    };
    Reading::value(to_switch(&la).min(to_switch(&lb)))
}

/// Capture every GPU NVML reports. `cpu_words` is the size of affinity masks in machine words
/// (enough for the highest online CPU).
pub fn capture(lib_path: Option<&OsStr>, cpu_words: usize) -> DriverCapture {
    let nvml = match lib_path {
        Some(p) => Nvml::builder().lib_path(p).init(),
        None => Nvml::init(),
    };
    let nvml = match nvml {
        Ok(n) => n,
        Err(e) => return DriverCapture::unavailable(reason(&e), format!("NVML unavailable: {e}")),
    };
    let count = read("device count", nvml.device_count());
    let info = DriverInfo {
        source: DriverSource::Nvml,
        driver_version: read("driver version", nvml.sys_driver_version()),
        cuda_driver_version: read("CUDA driver version", nvml.sys_cuda_driver_version())
            .map(cuda_version),
        nvml_version: read("NVML version", nvml.sys_nvml_version()),
        gpu_count: count.clone(),
    };
    let mut gpus = Vec::new();
    let mut devices = Vec::new();
    let mut problems = Vec::new();
    for i in 0..count.known().copied().unwrap_or(0).min(1024) {
        let d = match nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => {
                problems.push(format!("NVML device {i}: {e}"));
                continue;
            }
        };
        let Some(id) = read("PCI info", d.pci_info())
            .and_then(|p| bus_id(&p.bus_id))
            .into_known()
        else {
            problems.push(format!("NVML device {i}: no usable PCI bus id"));
            continue;
        };
        gpus.push((id, details(&d, cpu_words)));
        devices.push((id, i, d));
    }
    let mut pairs = Vec::new();
    for (i, (a_id, _, a)) in devices.iter().enumerate() {
        for (b_id, b_index, b) in devices.iter().skip(i + 1) {
            let nvlinks = nvlinks_between(&gpus, a_id, b_id);
            pairs.push(GpuPair {
                a: *a_id,
                b: *b_id,
                // The binding takes the other device by value; fetch a second handle to it.
                common_ancestor: read(
                    "topology common ancestor",
                    nvml.device_by_index(*b_index)
                        .and_then(|other| a.topology_common_ancestor(other)),
                )
                .map(link_class),
                nvlinks,
                p2p_read: read(
                    "P2P read status",
                    a.p2p_status(b, P2pCapabilitiesIndex::Read),
                )
                .map(p2p),
                p2p_write: read(
                    "P2P write status",
                    a.p2p_status(b, P2pCapabilitiesIndex::Write),
                )
                .map(p2p),
            });
        }
    }
    DriverCapture {
        info: Reading::value(info),
        gpus,
        pairs,
        problems,
    }
}

/// Every GPU's total energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ since the driver
/// loaded; Volta and later), read once for `bench`'s energy per token; `Err` names the first
/// failure (no NVML, no GPU, an older GPU without the counter), since a partial sum would be
/// wrong.
pub fn total_energy_mj(lib_path: Option<&OsStr>) -> Result<Vec<u64>, String> {
    let nvml = match lib_path {
        Some(p) => Nvml::builder().lib_path(p).init(),
        None => Nvml::init(),
    }
    .map_err(|e| format!("NVML unavailable: {e}"))?;
    let n = nvml
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    if n == 0 {
        return Err("NVML lists no GPU".into());
    }
    (0..n.min(1024))
        .map(|i| {
            nvml.device_by_index(i)
                .and_then(|d| d.total_energy_consumption())
                .map_err(|e| format!("NVML GPU {i} total energy: {e}"))
        })
        .collect()
}
