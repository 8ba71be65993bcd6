//! The GPUs a plan is made for: the model a captured machine (or snapshot) mostly holds, with
//! its torch-visible memory, and the other catalog GPUs worth suggesting. Pure: it takes a
//! [`Snapshot`] and returns data; the binary captures and renders.

use crate::gpus;
use crate::memory::GIB;
use crate::plan::{GpuSpec, PlanRequest};
use inferscope_host::{Gpu, GpuVendor, PciBusId, Snapshot};

/// The GPUs found in a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotGpus {
    /// The model planned for, its count and torch-visible bytes.
    pub spec: GpuSpec,
    /// PCI ids of the GPUs counted.
    pub pci_ids: Vec<PciBusId>,
    /// Where the figures came from, for output.
    pub source: String,
}

/// GPUs from the machine or a snapshot: the most common NVIDIA model, its count, and the
/// torch-visible total (NVML's total minus its reservation when known, else the catalog's).
pub fn from_snapshot(s: &Snapshot) -> Result<SnapshotGpus, String> {
    let all_nvidia = s
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .count();
    // The most common model (by driver name, else PCI device id); ties go to the first seen.
    let model_of = |g: &&Gpu| {
        g.details
            .known()
            .and_then(|d| d.name.known().cloned())
            .unwrap_or_else(|| g.device_id.to_string())
    };
    let mut groups: Vec<(String, Vec<&Gpu>)> = Vec::new();
    for g in s.gpus.iter().filter(|g| g.vendor == GpuVendor::Nvidia) {
        let m = model_of(&g);
        match groups.iter_mut().find(|(k, _)| *k == m) {
            Some((_, v)) => v.push(g),
            None => groups.push((m, vec![g])),
        }
    }
    let nvidia = groups.into_iter().fold(
        Vec::new(),
        |best, (_, v)| if v.len() > best.len() { v } else { best },
    );
    let Some(first) = nvidia.first() else {
        return Err(format!(
            "no NVIDIA GPU in {}: pass --gpu NAME (e.g. h100-sxm, l40s, rtx-4090) or --gpu-memory-gib N",
            s.source.root
        ));
    };
    let by_id = first
        .device_id
        .known()
        .and_then(|id| gpus::by_pci_device_id(id.0));
    let by_name = first
        .details
        .known()
        .and_then(|d| d.name.known())
        .and_then(|n| gpus::lookup(n).ok());
    let spec = by_name.or(by_id);
    // Only when the reservation is known: NVML's total alone overstates what torch sees.
    let nvml_total = first
        .details
        .known()
        .and_then(|d| d.memory.known())
        .and_then(|m| {
            m.reserved_bytes
                .known()
                .map(|r| m.total_bytes.saturating_sub(*r))
        });
    let (name, total, how) = match (spec, nvml_total) {
        (Some(g), Some(t)) => (g.name.clone(), t, "NVML total minus driver reservation"),
        (Some(g), None) => (
            g.name.clone(),
            (g.torch_total_gib * GIB) as u64,
            "catalog torch-visible total (NVML's memory or reservation unknown)",
        ),
        (None, Some(t)) => (
            format!("GPU {}", first.pci_bus_id),
            t,
            "NVML total minus driver reservation",
        ),
        (None, None) => {
            return Err(format!(
                "GPU {} (device id {}) is not in the GPU catalog and its memory is unknown without NVML: pass --gpu NAME or --gpu-memory-gib N",
                first.pci_bus_id, first.device_id
            ));
        }
    };
    let ids = nvidia.iter().map(|g| g.pci_bus_id).collect();
    Ok(SnapshotGpus {
        spec: GpuSpec {
            name: name.clone(),
            total_bytes: total,
            count: nvidia.len() as u32,
        },
        pci_ids: ids,
        source: format!(
            "{name} ×{} from {} ({how}){}",
            nvidia.len(),
            s.source.root,
            if all_nvidia > nvidia.len() {
                format!(
                    "; {} other NVIDIA GPUs of other models not used",
                    all_nvidia - nvidia.len()
                )
            } else {
                String::new()
            }
        ),
    })
}

/// What to change: the planner's suggestions, with other GPU types cut to the three best.
pub fn suggestions_for(req: &PlanRequest, gpu: &GpuSpec) -> Vec<crate::suggest::Suggestion> {
    let others: Vec<GpuSpec> = gpus::all()
        .map(|all| {
            all.iter()
                .filter(|g| g.torch_total_gib * GIB > gpu.total_bytes as f64)
                .map(|g| GpuSpec::from_catalog(g, gpu.count))
                .collect()
        })
        .unwrap_or_default();
    // Other GPU types: keep the three best (those that meet the target first), not the catalog.
    let mut suggestions = crate::suggest::suggest(req, &others);
    let (mut other_gpus, mut rest): (Vec<_>, Vec<_>) = suggestions
        .drain(..)
        .partition(|s| s.kind == crate::suggest::ChangeKind::OtherGpu);
    other_gpus.sort_by(|a, b| {
        b.meets_target.cmp(&a.meets_target).then(if a.meets_target {
            std::cmp::Ordering::Equal
        } else {
            b.max_concurrency.total_cmp(&a.max_concurrency)
        })
    });
    rest.extend(other_gpus.into_iter().take(3));
    rest
}
