//! ENV003: `CUDA_VISIBLE_DEVICES` indices whose meaning depends on `CUDA_DEVICE_ORDER`.

use super::support::HOST;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::cuda::{CudaDevices, cuda_devices};
use inferscope_host::{PciBusId, Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV003",
    title: "CUDA_VISIBLE_DEVICES indices depend on CUDA_DEVICE_ORDER",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "CUDA numbers GPUs fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, while nvidia-smi, NVML and schedulers number them in PCI order; on a host with mixed GPU models `CUDA_VISIBLE_DEVICES=1` can select a different card than `nvidia-smi -i 1`, so the server lands on a GPU another job uses.",
    run,
};

/// `GPU2 (0000:3c:00.0)`, numbered like nvidia-smi (PCI order of the snapshot).
pub(crate) fn gpu_label(snapshot: &Snapshot, id: &PciBusId) -> String {
    match snapshot.gpus.iter().position(|g| g.pci_bus_id == *id) {
        Some(i) => format!("GPU{i} ({id})"),
        None => id.to_string(),
    }
}

/// `cuda:0 → GPU1 (0000:3b:00.0), cuda:1 → ...`.
pub(crate) fn mapping(snapshot: &Snapshot, d: &CudaDevices) -> String {
    if d.devices.is_empty() {
        return "no GPU visible to CUDA".into();
    }
    let mut m = d
        .devices
        .iter()
        .map(|(o, id)| format!("cuda:{o} → {}", gpu_label(snapshot, id)))
        .collect::<Vec<_>>()
        .join(", ");
    if !d.notes.is_empty() {
        m.push_str(&format!(" ({})", d.notes.join("; ")));
    }
    m
}

/// What CUDA would resolve if `CUDA_DEVICE_ORDER` were `order`.
fn resolve_with_order(snapshot: &Snapshot, order: &str) -> Option<CudaDevices> {
    let mut s = snapshot.clone();
    s.env.insert("CUDA_DEVICE_ORDER".into(), order.into());
    cuda_devices(&s).into_known()
}

fn uuids(snapshot: &Snapshot, d: Option<&CudaDevices>) -> Option<String> {
    let d = d?;
    let list: Option<Vec<String>> = d
        .devices
        .iter()
        .map(|(_, id)| {
            snapshot
                .gpus
                .iter()
                .find(|g| g.pci_bus_id == *id)?
                .details
                .known()?
                .uuid
                .known()
                .map(|u| u.0.clone())
        })
        .collect();
    list.filter(|l| !l.is_empty()).map(|l| l.join(","))
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let Some(cvd) = s.env.get("CUDA_VISIBLE_DEVICES") else {
        return vec![Outcome::pass(
            HOST,
            "CUDA_VISIBLE_DEVICES is not set: CUDA uses every GPU, no index is interpreted",
        )];
    };
    let entries: Vec<&str> = cvd.split(',').map(str::trim).collect();
    if !entries.iter().any(|e| e.parse::<u32>().is_ok()) {
        let what = if cvd.trim().is_empty() {
            "empty (CUDA sees no GPU)"
        } else {
            "UUIDs, which name GPUs whatever the order"
        };
        return vec![Outcome::pass(
            HOST,
            format!("CUDA_VISIBLE_DEVICES={cvd:?} holds no indices: {what}"),
        )];
    }
    let order_var = s.env.get("CUDA_DEVICE_ORDER").map(String::as_str);
    let order = match need(&s.cuda_order, HOST, "CUDA device order") {
        Ok(o) => o,
        Err(o) => {
            return vec![Outcome::unknown(
                HOST,
                format!(
                    "CUDA_VISIBLE_DEVICES={cvd:?} uses indices, but {}",
                    o.evidence
                ),
            )];
        }
    };
    let resolved = cuda_devices(s);
    let resolved_known = resolved.known();
    let pci = resolve_with_order(s, "PCI_BUS_ID");
    let pci_map = pci
        .as_ref()
        .map(|d| mapping(s, d))
        .unwrap_or_else(|| "unknown".into());
    if order_var == Some("PCI_BUS_ID") {
        return vec![Outcome::pass(
            HOST,
            format!(
                "CUDA_VISIBLE_DEVICES={cvd:?} with CUDA_DEVICE_ORDER=PCI_BUS_ID: indices follow nvidia-smi; {pci_map}"
            ),
        )];
    }
    let shown_order = match order_var {
        Some(v) => format!("CUDA_DEVICE_ORDER={v:?} (anything but PCI_BUS_ID means FASTEST_FIRST)"),
        None => "CUDA_DEVICE_ORDER unset (FASTEST_FIRST)".to_string(),
    };
    // The GPUs nvidia-smi's numbering names: what the user most likely meant.
    let use_uuids = uuids(s, pci.as_ref())
        .map(|u| format!(", or name the GPUs by UUID: `export CUDA_VISIBLE_DEVICES={u}`"))
        .unwrap_or_else(|| ", or name the GPUs by UUID (`nvidia-smi -L`)".to_string());
    let remedy = format!(
        "`export CUDA_DEVICE_ORDER=PCI_BUS_ID` wherever CUDA_VISIBLE_DEVICES is set (container env, systemd unit, launcher){use_uuids}."
    );
    match &order.fastest_first {
        Reading::Value(ff) if *ff == order.pci_bus_id => vec![Outcome::pass(
            HOST,
            format!(
                "CUDA_VISIBLE_DEVICES={cvd:?}, {shown_order}: all GPUs are the same model, so FASTEST_FIRST keeps PCI order; {pci_map}"
            ),
        )],
        Reading::Value(_) => {
            let ff_map = resolved_known
                .map(|d| mapping(s, d))
                .unwrap_or_else(|| "unknown".into());
            vec![Outcome::fail(
                HOST,
                format!(
                    "CUDA_VISIBLE_DEVICES={cvd:?}, {shown_order}: FASTEST_FIRST differs from PCI order, so CUDA resolves {ff_map}; nvidia-smi's numbering would give {pci_map}"
                ),
                remedy,
            )]
        }
        Reading::Unknown(u) => vec![Outcome::fail(
            HOST,
            format!(
                "CUDA_VISIBLE_DEVICES={cvd:?}, {shown_order}: the FASTEST_FIRST order is not predictable here ({}), so the indices may select other GPUs than nvidia-smi's {pci_map}",
                u.detail
            ),
            remedy,
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{CudaOrder, UnknownReason};

    #[test]
    fn identical_gpus_keep_pci_order_and_pass_with_the_mapping() {
        // The asymmetric box: CUDA_VISIBLE_DEVICES=1,2,3,4, five identical GPUs.
        let out = check(&CHECK, &fixture("asymmetric"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0]
                .evidence
                .contains("cuda:0 → GPU1 (0000:3b:00.0), cuda:1 → GPU2 (0000:3c:00.0)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn mixed_models_with_indices_fail() {
        let mut s = fixture("asymmetric");
        if let Reading::Value(o) = &mut s.cuda_order {
            o.fastest_first = Reading::unknown(
                UnknownReason::NotSupported,
                "GPUs of different models: CUDA's FASTEST_FIRST order is computed by the CUDA runtime",
            );
        }
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("cuda:0 → GPU1 (0000:3b:00.0)"));
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap()
                .starts_with("`export CUDA_DEVICE_ORDER=PCI_BUS_ID`")
        );
        // Setting the order fixes it.
        s.env
            .insert("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn known_fastest_first_that_differs_fails_with_both_mappings() {
        let mut s = h100_with_driver();
        s.env.insert("CUDA_VISIBLE_DEVICES".into(), "0,1".into());
        if let Reading::Value(CudaOrder {
            pci_bus_id,
            fastest_first,
        }) = &mut s.cuda_order
        {
            let mut ff = pci_bus_id.clone();
            ff.swap(0, 4);
            *fastest_first = Reading::value(ff);
        }
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("cuda:0 → GPU4 (0000:9a:00.0)"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0].remedy.as_deref().unwrap().contains(
                "CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000,GPU-00000001"
            ),
            "{:?}",
            out[0].remedy
        );
    }

    #[test]
    fn unset_or_uuids_pass() {
        assert_eq!(statuses(&check(&CHECK, &fixture("plx"))), [Status::Pass]);
        let mut s = fixture("asymmetric");
        s.env.insert(
            "CUDA_VISIBLE_DEVICES".into(),
            "GPU-5f2c1a3e,GPU-9b1e".into(),
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn indices_without_any_gpu_order_are_unknown() {
        let mut s = fixture("dev-vm");
        s.env.insert("CUDA_VISIBLE_DEVICES".into(), "0".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("no NVIDIA GPU visible"),
            "{}",
            out[0].evidence
        );
    }
}
