//! Driver facts for a capture: NVML on the live machine, the recorded answers of a gather
//! archive under any other root, and the merge of those facts into the sysfs view.
//!
//! NVML describes the machine inferscope runs on, so it is never asked when the root is not `/`:
//! a fixture tree or an unpacked archive must not be mixed with this host's GPUs. A gather archive
//! records NVML's answers in [`RECORDED`] so `snapshot --root` on it reproduces them.

use crate::fsroot::FsRoot;
use inferscope_host::{
    DriverInfo, Gpu, GpuDetails, GpuPair, GpuVendor, PciBusId, Reading, Snapshot, UnknownReason,
};
use serde::{Deserialize, Serialize};

/// Where a gather archive keeps the recorded driver answers.
pub const RECORDED: &str = ".inferscope-gather/driver.json";

/// Everything the driver said during one capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverCapture {
    /// Driver-wide facts, or why there are none.
    pub info: Reading<DriverInfo>,
    /// Facts per GPU, keyed by PCI address.
    pub gpus: Vec<(PciBusId, GpuDetails)>,
    /// Facts per GPU pair.
    pub pairs: Vec<GpuPair>,
    /// Problems that belong to no single field.
    pub problems: Vec<String>,
}

impl DriverCapture {
    /// No driver facts, for the given reason.
    pub fn unavailable(reason: UnknownReason, detail: String) -> Self {
        DriverCapture {
            info: Reading::unknown(reason, detail),
            gpus: Vec::new(),
            pairs: Vec::new(),
            problems: Vec::new(),
        }
    }
}

/// Driver facts for this root: NVML when live, the recording when the root holds one.
pub fn capture_driver(fs: &FsRoot, max_cpu: u32) -> DriverCapture {
    if fs.is_live() {
        let lib = std::env::var_os(crate::nvml::LIB_ENV);
        let words = (max_cpu as usize / std::os::raw::c_ulong::BITS as usize) + 1;
        return crate::nvml::capture(lib.as_deref(), words);
    }
    match fs.read_string(RECORDED) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            DriverCapture::unavailable(
                UnknownReason::Malformed,
                format!("/{RECORDED}: recorded driver facts do not parse: {e}"),
            )
        }),
        Err(_) => DriverCapture::unavailable(
            UnknownReason::NotCaptured,
            format!(
                "not the live machine: NVML describes the host running inferscope, not the tree under --root; a gather archive carries its NVML answers in {RECORDED}"
            ),
        ),
    }
}

/// Put driver facts into a sysfs snapshot: details onto matching GPUs, GPUs only the driver
/// sees added, pairs and CUDA order filled in.
pub fn merge(snapshot: &mut Snapshot, capture: DriverCapture) {
    let unavailable = match &capture.info {
        Reading::Unknown(u) => Some(u.clone()),
        Reading::Value(_) => None,
    };
    for gpu in &mut snapshot.gpus {
        gpu.details = match (
            &unavailable,
            capture.gpus.iter().find(|(id, _)| *id == gpu.pci_bus_id),
        ) {
            (_, Some((_, d))) => Reading::value(d.clone()),
            (Some(u), None) => Reading::Unknown(u.clone()),
            (None, None) => Reading::unknown(
                UnknownReason::NotPresent,
                match gpu.vendor {
                    GpuVendor::Nvidia => {
                        "the NVIDIA driver does not report this GPU (not bound to nvidia, or hidden by NVIDIA_VISIBLE_DEVICES)"
                    }
                    GpuVendor::Amd => "NVML does not cover AMD GPUs",
                },
            ),
        };
    }
    for (id, d) in &capture.gpus {
        if !snapshot.gpus.iter().any(|g| g.pci_bus_id == *id) {
            fn hidden<T>(id: &PciBusId) -> Reading<T> {
                Reading::unknown(
                    UnknownReason::NotPresent,
                    format!("NVML reports GPU {id} but /sys/bus/pci/devices does not show it"),
                )
            }
            snapshot.gpus.push(Gpu {
                pci_bus_id: *id,
                vendor: GpuVendor::Nvidia,
                device_id: hidden(id),
                numa_node: hidden(id),
                local_cpus: hidden(id),
                details: Reading::value(d.clone()),
            });
        }
    }
    snapshot.gpus.sort_by_key(|g| g.pci_bus_id);
    snapshot.driver = capture.info;
    snapshot.gpu_pairs = capture.pairs;
    snapshot.capture_problems.extend(capture.problems);
    snapshot.cuda_order = inferscope_host::cuda::cuda_order(snapshot);
}
