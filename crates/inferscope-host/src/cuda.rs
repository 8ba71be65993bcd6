//! Which physical GPU is `cuda:N`? CUDA numbers the GPUs it can see in `CUDA_DEVICE_ORDER`
//! (`FASTEST_FIRST` by default, or `PCI_BUS_ID`), then `CUDA_VISIBLE_DEVICES` picks and reorders
//! them. Getting this wrong is how a server lands on the GPU another job is using, so the
//! mapping is computed from the snapshot's recorded orders and environment, never guessed.
//!
//! `CUDA_VISIBLE_DEVICES` rules followed here (CUDA programming guide, "CUDA Environment
//! Variables"): a comma-separated list of indices or UUIDs (`GPU-...`, unique prefixes allowed,
//! `MIG-...` for MIG instances); parsing stops at the first entry that is invalid, and the
//! devices before it stay visible. A repeated device is treated the same way (an assumption:
//! CUDA never lists one device twice, and the guide does not say more).

use crate::driver::CudaOrder;
use crate::ids::{CudaOrdinal, PciBusId};
use crate::reading::{Reading, UnknownReason};
use crate::snapshot::{Gpu, GpuVendor, Snapshot};
use serde::{Deserialize, Serialize};

/// The GPUs a CUDA process started with this snapshot's environment would see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaDevices {
    /// `CUDA_DEVICE_ORDER` in effect (`FASTEST_FIRST` when unset).
    pub device_order: String,
    /// `CUDA_VISIBLE_DEVICES` as set, if set.
    pub visible_devices: Option<String>,
    /// `cuda:N` → PCI address, in ordinal order.
    pub devices: Vec<(CudaOrdinal, PciBusId)>,
    /// Why the list is shorter than the variable suggests (invalid or repeated entries).
    pub notes: Vec<String>,
}

/// Resolve `cuda:N` for the snapshot's environment.
pub fn cuda_devices(snapshot: &Snapshot) -> Reading<CudaDevices> {
    let order = match &snapshot.cuda_order {
        Reading::Value(o) => o,
        Reading::Unknown(u) => return Reading::Unknown(u.clone()),
    };
    let device_order = snapshot
        .env
        .get("CUDA_DEVICE_ORDER")
        .cloned()
        .unwrap_or_else(|| "FASTEST_FIRST".to_string());
    let base: Vec<PciBusId> = match device_order.as_str() {
        "PCI_BUS_ID" => order.pci_bus_id.clone(),
        _ => match &order.fastest_first {
            Reading::Value(v) => v.clone(),
            Reading::Unknown(u) => return Reading::Unknown(u.clone()),
        },
    };
    let visible = snapshot.env.get("CUDA_VISIBLE_DEVICES").cloned();
    let mut notes = Vec::new();
    let devices = match &visible {
        None => base.clone(),
        Some(list) => select(snapshot, &base, list, &mut notes),
    };
    Reading::value(CudaDevices {
        device_order,
        visible_devices: visible,
        devices: devices
            .into_iter()
            .enumerate()
            .map(|(i, id)| (CudaOrdinal(i as u32), id))
            .collect(),
        notes,
    })
}

fn select(
    snapshot: &Snapshot,
    base: &[PciBusId],
    list: &str,
    notes: &mut Vec<String>,
) -> Vec<PciBusId> {
    let mut out: Vec<PciBusId> = Vec::new();
    if list.trim().is_empty() {
        notes.push("CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU".into());
        return out;
    }
    for entry in list.split(',') {
        let e = entry.trim();
        let found = if let Ok(i) = e.parse::<usize>() {
            base.get(i).copied()
        } else if e.starts_with("GPU-") || e.starts_with("MIG-") {
            let matches: Vec<PciBusId> = base
                .iter()
                .copied()
                .filter(|id| {
                    snapshot
                        .gpus
                        .iter()
                        .find(|g| g.pci_bus_id == *id)
                        .and_then(|g| g.details.known())
                        .and_then(|d| d.uuid.known())
                        .is_some_and(|u| u.0.starts_with(e))
                })
                .collect();
            match matches.as_slice() {
                [one] => Some(*one),
                [] => None,
                _ => {
                    notes.push(format!(
                        "entry {e:?} matches several GPU UUIDs; CUDA stops here"
                    ));
                    break;
                }
            }
        } else {
            None
        };
        match found {
            Some(id) if out.contains(&id) => {
                notes.push(format!(
                    "entry {e:?} repeats a device; treated as invalid, so the list ends here"
                ));
                break;
            }
            Some(id) => out.push(id),
            None => {
                notes.push(format!(
                    "entry {e:?} names no GPU CUDA can see ({} visible); CUDA ignores it and everything after it",
                    base.len()
                ));
                break;
            }
        }
    }
    out
}

/// Unknown when there is nothing to resolve.
pub fn no_gpus() -> Reading<CudaDevices> {
    Reading::unknown(UnknownReason::NotPresent, "no NVIDIA GPU visible to CUDA")
}

/// CUDA's two enumeration orders over the GPUs CUDA can see (NVIDIA GPUs the driver reports,
/// or, without a driver, NVIDIA GPUs bound to `nvidia` in sysfs).
pub fn cuda_order(snapshot: &Snapshot) -> Reading<CudaOrder> {
    let driver_known = snapshot.driver.is_known();
    let visible: Vec<&Gpu> = snapshot
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .filter(|g| !driver_known || g.details.is_known())
        .collect();
    if visible.is_empty() {
        return Reading::unknown(UnknownReason::NotPresent, "no NVIDIA GPU visible to CUDA");
    }
    let pci_bus_id: Vec<PciBusId> = visible.iter().map(|g| g.pci_bus_id).collect();
    // FASTEST_FIRST ranks by a CUDA-runtime heuristic; with identical GPUs it keeps PCI order.
    let model = |g: &Gpu| -> Option<String> {
        match g.details.known().and_then(|d| d.name.known()) {
            Some(name) => Some(name.clone()),
            None => g.device_id.known().map(|id| id.to_string()),
        }
    };
    let models: Vec<Option<String>> = visible.iter().map(|g| model(g)).collect();
    let first = models.first().cloned().flatten();
    // One GPU has one order, whatever its model.
    let fastest_first = if visible.len() == 1
        || (first.is_some() && models.iter().all(|m| *m == first))
    {
        Reading::value(pci_bus_id.clone())
    } else if models.iter().any(Option::is_none) {
        // Not the same as "different models": with names unknown (a tree under --root, no
        // NVML) we cannot tell whether CUDA's heuristic would reorder them.
        Reading::unknown(
            UnknownReason::NotCaptured,
            "GPU models unknown (no name or device id): CUDA's FASTEST_FIRST order cannot be predicted; set CUDA_DEVICE_ORDER=PCI_BUS_ID to make ordinals follow PCI addresses",
        )
    } else {
        Reading::unknown(
            UnknownReason::NotSupported,
            "GPUs of different models: CUDA's FASTEST_FIRST order is computed by the CUDA runtime; set CUDA_DEVICE_ORDER=PCI_BUS_ID to make ordinals follow PCI addresses",
        )
    };
    Reading::value(CudaOrder {
        pci_bus_id,
        fastest_first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap_with(order: Vec<&str>, env: &[(&str, &str)]) -> Snapshot {
        let text = include_str!("../tests/data/minimal-snapshot.json");
        let mut s: Snapshot = serde_json::from_str(text).unwrap();
        let ids: Vec<PciBusId> = order.iter().map(|x| x.parse().unwrap()).collect();
        s.cuda_order = Reading::value(CudaOrder {
            pci_bus_id: ids.clone(),
            fastest_first: Reading::value(ids),
        });
        s.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s
    }

    fn ids(r: &Reading<CudaDevices>) -> Vec<String> {
        r.known()
            .unwrap()
            .devices
            .iter()
            .map(|(_, id)| id.to_string())
            .collect()
    }

    #[test]
    fn visible_devices_reorder_and_stop_at_invalid_entries() {
        let order = vec!["0000:18:00.0", "0000:3a:00.0", "0000:4b:00.0"];
        let s = snap_with(order.clone(), &[]);
        assert_eq!(ids(&cuda_devices(&s)), order);
        let s = snap_with(order.clone(), &[("CUDA_VISIBLE_DEVICES", "2,0")]);
        assert_eq!(ids(&cuda_devices(&s)), ["0000:4b:00.0", "0000:18:00.0"]);
        let s = snap_with(order.clone(), &[("CUDA_VISIBLE_DEVICES", "1,7,0")]);
        let r = cuda_devices(&s);
        assert_eq!(ids(&r), ["0000:3a:00.0"]);
        assert!(r.known().unwrap().notes[0].contains("\"7\""));
        let s = snap_with(order.clone(), &[("CUDA_VISIBLE_DEVICES", "0,0")]);
        assert_eq!(ids(&cuda_devices(&s)), ["0000:18:00.0"]);
        let s = snap_with(order, &[("CUDA_VISIBLE_DEVICES", "")]);
        assert!(ids(&cuda_devices(&s)).is_empty());
    }

    #[test]
    fn one_gpu_of_unknown_model_has_one_order() {
        let text = include_str!("../tests/data/minimal-snapshot.json");
        let mut s: Snapshot = serde_json::from_str(text).unwrap();
        for g in &mut s.gpus {
            g.device_id = Reading::unknown(UnknownReason::NotCaptured, "test");
        }
        // two GPUs of unknown model: CUDA's heuristic could reorder them
        let two = cuda_order(&s);
        assert!(!two.known().unwrap().fastest_first.is_known());
        // one GPU: nothing to reorder
        s.gpus.truncate(1);
        let one = cuda_order(&s);
        assert_eq!(
            one.known().unwrap().fastest_first.known(),
            Some(&vec![s.gpus[0].pci_bus_id])
        );
    }

    #[test]
    fn mixed_models_make_default_order_unknown_but_pci_order_known() {
        let mut s = snap_with(vec!["0000:18:00.0"], &[]);
        if let Reading::Value(o) = &mut s.cuda_order {
            o.fastest_first = Reading::unknown(UnknownReason::NotSupported, "mixed");
        }
        assert!(!cuda_devices(&s).is_known());
        s.env
            .insert("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into());
        assert_eq!(ids(&cuda_devices(&s)), ["0000:18:00.0"]);
    }
}
