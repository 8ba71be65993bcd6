//! Which GPUs a check is about (issue 26): the server started from the captured environment
//! sees only the NVIDIA GPUs `CUDA_VISIBLE_DEVICES` leaves visible, so a per-GPU finding on
//! another GPU says nothing about that server. Such findings are reported as
//! [`Status::NotInScope`], never as failures, unless `--all-gpus` asks for every GPU.
//!
//! One mechanism for every per-GPU check ([`Scope::Gpu`]): the check runs on the whole
//! snapshot as always, and its outcomes about hidden GPUs (their subject names the GPU's PCI
//! address, as [`gpu_subject`](crate::checks::support::gpu_subject) writes it) are re-labelled
//! here. Group checks already take their group from the same variable.
//!
//! When the variable is set but cannot be resolved (CUDA's order unknown), every GPU stays in
//! scope: an unresolved scope must not hide a failure.

use crate::{Outcome, Status};
use inferscope_host::cuda::cuda_devices;
use inferscope_host::{GpuVendor, PciBusId, Reading, Snapshot};

/// The GPUs the captured environment hides from a CUDA server, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuScope {
    /// NVIDIA GPUs the server will not see.
    pub hidden: Vec<PciBusId>,
    /// `CUDA_VISIBLE_DEVICES=1,2,3,4 in the snapshot's environment`.
    pub basis: String,
}

/// The scope of the snapshot's environment; `None` when every GPU is in scope (the variable
/// unset or unresolvable, or hiding nothing).
pub fn gpu_scope(s: &Snapshot) -> Option<GpuScope> {
    let list = s.env.get("CUDA_VISIBLE_DEVICES")?;
    let Reading::Value(d) = cuda_devices(s) else {
        return None;
    };
    let hidden: Vec<PciBusId> = s
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .map(|g| g.pci_bus_id)
        .filter(|id| !d.devices.iter().any(|(_, v)| v == id))
        .collect();
    if hidden.is_empty() {
        return None;
    }
    Some(GpuScope {
        hidden,
        basis: format!(
            "CUDA_VISIBLE_DEVICES={list} in the snapshot's environment (CUDA_DEVICE_ORDER={})",
            d.device_order
        ),
    })
}

impl GpuScope {
    /// Re-label an outcome about a hidden GPU as not in scope, keeping what the check found.
    pub(crate) fn apply(&self, o: &mut Outcome) {
        if !self
            .hidden
            .iter()
            .any(|id| o.subject.contains(&format!("({id})")))
        {
            return;
        }
        let found = match o.status {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Unknown => "unknown",
            Status::NotInScope => return,
        };
        o.evidence = format!(
            "not in scope: {} hides this GPU from the server (--all-gpus checks it); the check alone says {found}: {}",
            self.basis, o.evidence
        );
        o.status = Status::NotInScope;
        o.remedy = None;
    }
}
