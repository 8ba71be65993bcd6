//! The figures shared by both kinds of row (part of [`super`], `plan --find --nodes`): one
//! layout's batch-independent [`Phase`], the decode round at a batch, the memory budget, and
//! whether a point meets the SLO.

use super::{ClusterFindRequest, SloTargets};
use crate::cluster::Layout;
use crate::cluster::memory::GpuMemory;
use crate::cluster::step::{LayoutRequest, Overlap, estimate_layout};
use crate::memory::GIB;

/// Figures of one layout that do not depend on the batch.
#[derive(Debug, Clone)]
pub(super) struct Phase {
    pub(super) layout: Layout,
    pub(super) memory: GpuMemory,
    /// Largest decode batch per replica memory allows (capped at `max_batch`).
    pub(super) max_batch: u64,
    /// One prompt alone, s.
    pub(super) ttft_alone: f64,
    /// Replica time per request under saturating prefill, s.
    pub(super) prefill_cost: f64,
}

pub(super) fn budget(r: &ClusterFindRequest<'_>) -> u64 {
    (r.gpu.torch_total_gib * GIB * r.memory_utilization.clamp(0.0, 1.0)) as u64
}

pub(super) fn gib(b: u64) -> f64 {
    b as f64 / GIB
}

pub(super) fn layout_request<'a>(
    r: &'a ClusterFindRequest<'a>,
    l: Layout,
    batch: u64,
) -> LayoutRequest<'a> {
    let w = &r.workload;
    LayoutRequest {
        arch: r.arch,
        quant: r.quant,
        kv: r.kv,
        gpu: r.gpu,
        layout: l,
        network: r.network,
        force_pcie: false,
        engine: r.engine,
        batch: batch.max(1),
        // mean decode context: the prompt plus half the output
        context: w.input_len + w.output_len / 2,
        prompt_tokens: w.input_len.max(1),
        overlap: Overlap::default(),
        eager: false,
    }
}

/// Decode round time at `batch` per replica.
pub(super) fn round(r: &ClusterFindRequest<'_>, l: Layout, batch: u64) -> Option<f64> {
    estimate_layout(&layout_request(r, l, batch))
        .ok()
        .map(|(_, e)| e.expected.round_s)
        .filter(|t| t.is_finite() && *t > 0.0)
}

pub(super) fn phase(r: &ClusterFindRequest<'_>, l: Layout) -> Option<Phase> {
    let (memory, e) = estimate_layout(&layout_request(r, l, 1)).ok()?;
    let ctx = r.workload.input_len + r.workload.output_len;
    let max_batch = memory
        .kv_tokens(budget(r))
        .checked_div(ctx.max(1))
        .unwrap_or(0)
        .min(r.max_batch);
    let gpus_per_replica = f64::from(l.tp.max(1)) * f64::from(l.pp.max(1));
    let prefill_rps = e.expected.prefill_tokens_per_s_per_gpu * gpus_per_replica
        / r.workload.input_len.max(1) as f64;
    if !(prefill_rps.is_finite() && prefill_rps > 0.0) {
        return None;
    }
    Some(Phase {
        layout: l,
        memory,
        max_batch,
        ttft_alone: e.expected.ttft_s,
        prefill_cost: 1.0 / prefill_rps,
    })
}

pub(super) fn meets(slo: &SloTargets, ttft: f64, tpot: f64) -> bool {
    slo.ttft_s.is_none_or(|t| ttft <= t) && slo.tpot_s.is_none_or(|t| tpot <= t)
}

/// How far a point is from the SLO (≤ 1: meets).
pub(super) fn worst_ratio(slo: &SloTargets, ttft: f64, tpot: f64) -> f64 {
    let a = slo.ttft_s.map_or(0.0, |t| ttft / t);
    let b = slo.tpot_s.map_or(0.0, |t| tpot / t);
    a.max(b)
}
