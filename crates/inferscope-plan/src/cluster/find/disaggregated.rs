//! Disaggregated (P/D) rows (part of [`super`], `plan --find --nodes`): decode workers run
//! `TPOT = d(B)` undisturbed, prefill workers at the utilisation the TTFT target allows, the KV
//! hand-over between them, and the worker layouts a split may use.

use super::aggregated::{grid, littles_batch};
use super::explain::{describe, verdict};
use super::phase::{Phase, budget, gib, round};
use super::{ClusterFindRequest, ClusterRow, Workers};
use crate::cluster::disagg::{self, KvTransfer};
use crate::cluster::memory::gpu_memory;
use crate::cluster::{IntraLink, Layout};

/// Prefill utilisation the P/D rows stop at without a TTFT target (the M/D/1 wait grows
/// without bound near 1).
const U_CAP: f64 = 0.9;

/// A decode worker's operating point: batch, round time, requests/s per worker.
#[derive(Debug, Clone, Copy)]
pub(super) struct DecodePoint {
    pub(super) batch: u64,
    pub(super) tpot: f64,
    pub(super) rps: f64,
}

pub(super) fn decode_point(
    r: &ClusterFindRequest<'_>,
    p: &Phase,
    batch: u64,
) -> Option<DecodePoint> {
    let d = round(r, p.layout, batch)?;
    let o = r.workload.output_len.max(1) as f64;
    Some(DecodePoint {
        batch,
        tpot: d,
        rps: f64::from(p.layout.dp) * batch as f64 / (o * d),
    })
}

/// The most requests/s a decode worker serves with TPOT within the SLO (or its best TPOT).
pub(super) fn decode_capacity(
    r: &ClusterFindRequest<'_>,
    p: &Phase,
    evaluated: &mut usize,
) -> Option<DecodePoint> {
    let mut best: Option<DecodePoint> = None;
    let mut fastest: Option<DecodePoint> = None;
    for b in grid(p.max_batch) {
        *evaluated += 1;
        let Some(d) = decode_point(r, p, b) else {
            continue;
        };
        if fastest.is_none_or(|f| d.tpot < f.tpot) {
            fastest = Some(d);
        }
        if r.workload.slo.tpot_s.is_none_or(|t| d.tpot <= t) && best.is_none_or(|x| d.rps > x.rps) {
            best = Some(d);
        }
    }
    best.or(fastest)
}

/// Evaluates one P/D deployment: `n_p` prefill workers of layout `pre` and `n_d` decode workers
/// of layout `dec` on `nodes` nodes. `dec_point` is the decode worker's capacity point.
#[allow(clippy::too_many_arguments)]
pub(super) fn pd_row(
    r: &ClusterFindRequest<'_>,
    nodes: u32,
    pre: &Phase,
    n_p: u32,
    dec: &Phase,
    n_d: u32,
    dec_point: DecodePoint,
    evaluated: &mut usize,
) -> ClusterRow {
    let w = &r.workload;
    let o = w.output_len.max(1) as f64;
    let gpus = n_p * pre.layout.world() as u32 + n_d * dec.layout.world() as u32;
    let ctx = w.input_len + w.output_len;
    let kv = kv_of(r, &pre.layout, nodes);
    let prefill_rps_worker = f64::from(pre.layout.dp) / pre.prefill_cost;
    let p_cap = f64::from(n_p) * prefill_rps_worker;
    let mut misses = Vec::new();
    // requests/s and the decode batch
    let (rps, dp) = if let Some(rate) = w.rate {
        let per = rate / (f64::from(n_d) * f64::from(dec.layout.dp.max(1)));
        let b = littles_batch(per, o, dec.max_batch, |b| {
            *evaluated += 1;
            round(r, dec.layout, b)
        });
        if rate >= p_cap {
            misses.push(format!("rate {rate:.1}/s ≥ prefill capacity {p_cap:.1}/s"));
        }
        if b > dec.max_batch {
            misses.push(format!(
                "rate {rate:.1}/s needs more than {} sequences per decode replica",
                dec.max_batch
            ));
        }
        let d = decode_point(r, dec, b.min(dec.max_batch)).unwrap_or(dec_point);
        // an overloaded split serves what its slower side can
        (rate.min(p_cap).min(f64::from(n_d) * d.rps), d)
    } else if let Some(c) = w.concurrency {
        let b = c
            .div_ceil(u64::from(n_d) * u64::from(dec.layout.dp.max(1)))
            .max(1);
        if b > dec.max_batch {
            misses.push(format!(
                "{c} sequences need {b} per decode replica; memory holds {}",
                dec.max_batch
            ));
        }
        *evaluated += 1;
        let d = decode_point(r, dec, b.min(dec.max_batch)).unwrap_or(dec_point);
        ((f64::from(n_d) * d.rps).min(p_cap * U_CAP), d)
    } else {
        let rps =
            (f64::from(n_d) * dec_point.rps).min(p_cap * pd_u_max(r, pre, &kv, dec_point.tpot));
        // a prefill-bound split decodes a smaller batch than its capacity point
        let per = rps / (f64::from(n_d) * f64::from(dec.layout.dp.max(1)));
        let b = ((per * o * dec_point.tpot).ceil() as u64).clamp(1, dec_point.batch);
        *evaluated += 1;
        let d = decode_point(r, dec, b).unwrap_or(dec_point);
        (rps, d)
    };
    let u = if p_cap > 0.0 { rps / p_cap } else { 1.0 };
    let ttft = pre.ttft_alone + disagg::mdl_wait(u, pre.prefill_cost) + kv.seconds + dp.tpot;
    let pre_mem = gib(pre.memory.bytes(1, w.input_len));
    let dec_mem = gib(dec.memory.bytes(dp.batch, ctx));
    let misses = verdict(&w.slo, Some(ttft), Some(dp.tpot), misses);
    let out = rps * o;
    ClusterRow {
        kind: "disaggregated".into(),
        nodes,
        gpus,
        label: format!(
            "{n_p}× prefill {} + {n_d}× decode {}",
            describe(&pre.layout),
            describe(&dec.layout)
        ),
        layout: None,
        prefill: Some(Workers {
            layout: pre.layout,
            count: n_p,
            batch_per_replica: 1,
            memory_gib_per_gpu: pre_mem,
        }),
        decode: Some(Workers {
            layout: dec.layout,
            count: n_d,
            batch_per_replica: dp.batch,
            memory_gib_per_gpu: dec_mem,
        }),
        batch_per_replica: dp.batch,
        memory_gib_per_gpu: pre_mem.max(dec_mem),
        budget_gib_per_gpu: gib(budget(r)),
        fits: true,
        ttft_s: Some(ttft),
        tpot_s: Some(dp.tpot),
        kv_transfer: Some(kv),
        prefill_utilisation: u,
        requests_per_s: rps,
        output_tokens_per_s: out,
        output_tokens_per_s_per_gpu: out / f64::from(gpus.max(1)),
        meets_slo: misses.is_empty(),
        misses,
    }
}

/// Prefill utilisation the TTFT target allows (capped at [`U_CAP`]).
pub(super) fn pd_u_max(r: &ClusterFindRequest<'_>, pre: &Phase, kv: &KvTransfer, tpot: f64) -> f64 {
    match r.workload.slo.ttft_s {
        None => U_CAP,
        Some(t) => {
            let slack = t - pre.ttft_alone - kv.seconds - tpot;
            disagg::max_utilisation(slack, pre.prefill_cost).min(U_CAP)
        }
    }
}

pub(super) fn kv_of(r: &ClusterFindRequest<'_>, pre: &Layout, nodes: u32) -> KvTransfer {
    let one = Layout::SINGLE;
    let per_token = gpu_memory(r.arch, r.quant, r.kv, &one, 0).kv_bytes_per_token;
    let same_node = (nodes == 1)
        .then(|| IntraLink::from_gpu(r.gpu, r.gpus_per_node, false).gbps_per_direction * 1e9);
    disagg::kv_transfer(
        r.workload.input_len,
        per_token,
        pre,
        r.arch.mla.is_some(),
        r.network,
        same_node,
    )
}

/// Worker layouts a P/D deployment on `nodes` nodes can use: every valid layout of 1, 2, 4 …
/// GPUs inside one node and of 1, 2, 4 … whole nodes short of all of them (a worker never
/// takes every GPU).
pub(super) fn worker_layouts(r: &ClusterFindRequest<'_>, nodes: u32) -> Vec<Layout> {
    let gpn = r.gpus_per_node;
    let mut out = Vec::new();
    let mut g = 1;
    while g < gpn {
        if gpn.is_multiple_of(g) {
            out.extend(Layout::enumerate(r.arch, 1, g));
        }
        g *= 2;
    }
    let mut k = 1;
    while k < nodes {
        out.extend(Layout::enumerate(r.arch, k, gpn));
        k *= 2;
    }
    out
}
