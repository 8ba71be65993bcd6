//! Aggregated rows (part of [`super`], `plan --find --nodes`): one server does both phases,
//! chunked prefill interrupting decode (`TPOT = d(B) + B·c/O`); the batch grid, Little's law and
//! the best operating point under the SLO.

use super::explain::{describe, verdict};
use super::phase::{Phase, budget, gib, meets, round, worst_ratio};
use super::{ClusterFindRequest, ClusterRow, SloTargets};
use crate::cluster::disagg;

/// Decode batches tried per replica.
const BATCHES: [u64; 19] = [
    1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048,
];

/// One aggregated operating point.
#[derive(Debug, Clone, Copy)]
pub(super) struct AggPoint {
    pub(super) batch: u64,
    pub(super) ttft: f64,
    pub(super) tpot: f64,
    pub(super) rps: f64,
    pub(super) u: f64,
}

pub(super) fn agg_point(r: &ClusterFindRequest<'_>, p: &Phase, batch: u64) -> Option<AggPoint> {
    let o = r.workload.output_len.max(1) as f64;
    let d = round(r, p.layout, batch)?;
    let b = batch as f64;
    let c = p.prefill_cost;
    let tpot = d + b * c / o;
    let u = b * c / (o * tpot);
    let ttft = p.ttft_alone + d + disagg::mdl_wait(u, c);
    let rps = f64::from(p.layout.dp) * b / (o * tpot);
    Some(AggPoint {
        batch,
        ttft,
        tpot,
        rps,
        u,
    })
}

pub(super) fn grid(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = BATCHES.iter().copied().filter(|b| *b <= max).collect();
    if max > 0 && !v.contains(&max) {
        v.push(max);
    }
    v
}

/// Little's law fixed point: `batch = per_replica_rate × O × tpot(batch)`.
pub(super) fn littles_batch(
    rate_per_replica: f64,
    o: f64,
    max: u64,
    mut tpot: impl FnMut(u64) -> Option<f64>,
) -> u64 {
    let mut b = 1u64;
    for _ in 0..60 {
        let Some(t) = tpot(b) else { return b };
        let next = (rate_per_replica * o * t).ceil().max(1.0);
        let next = if next > max as f64 {
            max + 1
        } else {
            next as u64
        };
        if next == b || next > max {
            return next;
        }
        b = next;
    }
    b
}

pub(super) fn aggregated_row(
    r: &ClusterFindRequest<'_>,
    p: &Phase,
    evaluated: &mut usize,
) -> ClusterRow {
    let w = &r.workload;
    let l = p.layout;
    let gpus = l.world() as u32;
    let ctx = w.input_len + w.output_len;
    let mut row = ClusterRow {
        kind: "aggregated".into(),
        nodes: l.nodes,
        gpus,
        label: describe(&l),
        layout: Some(l),
        prefill: None,
        decode: None,
        batch_per_replica: 0,
        memory_gib_per_gpu: gib(p.memory.weight_bytes()),
        budget_gib_per_gpu: gib(budget(r)),
        fits: p.max_batch > 0,
        ttft_s: None,
        tpot_s: None,
        kv_transfer: None,
        prefill_utilisation: 0.0,
        requests_per_s: 0.0,
        output_tokens_per_s: 0.0,
        output_tokens_per_s_per_gpu: 0.0,
        meets_slo: false,
        misses: Vec::new(),
    };
    if !row.fits {
        row.misses.push(format!(
            "memory: weights {:.1} GiB + one sequence's KV exceed {:.1} GiB per GPU",
            gib(p.memory.weight_bytes()),
            gib(budget(r))
        ));
        return row;
    }
    let o = w.output_len.max(1) as f64;
    let mut extra = Vec::new();
    let point = if let Some(rate) = w.rate {
        let per = rate / f64::from(l.dp.max(1));
        if per * p.prefill_cost >= 1.0 {
            extra.push(format!(
                "rate {rate:.1}/s: prefill alone needs {:.0} % of each replica",
                per * p.prefill_cost * 100.0
            ));
        }
        let b = littles_batch(per, o, p.max_batch, |b| {
            *evaluated += 1;
            agg_point(r, p, b).map(|a| a.tpot)
        });
        if b > p.max_batch {
            extra.push(format!(
                "rate {rate:.1}/s needs more than {} sequences per replica (memory or --max-num-seqs)",
                p.max_batch
            ));
        }
        agg_point(r, p, b.min(p.max_batch)).map(|mut a| {
            if extra.is_empty() {
                a.rps = rate;
                a.u = per * p.prefill_cost;
                let d = a.tpot - a.batch as f64 * p.prefill_cost / o;
                a.ttft = p.ttft_alone + d + disagg::mdl_wait(a.u, p.prefill_cost);
            }
            a
        })
    } else if let Some(c) = w.concurrency {
        let b = c.div_ceil(u64::from(l.dp.max(1))).max(1);
        if b > p.max_batch {
            extra.push(format!(
                "{c} sequences need {b} per replica; memory holds {}",
                p.max_batch
            ));
        }
        *evaluated += 1;
        agg_point(r, p, b.min(p.max_batch))
    } else {
        let mut pts = Vec::new();
        for b in grid(p.max_batch) {
            *evaluated += 1;
            if let Some(a) = agg_point(r, p, b) {
                pts.push(a);
            }
        }
        best_point(&w.slo, &pts)
    };
    let Some(a) = point else {
        row.misses.push("no speed figure for this layout".into());
        return row;
    };
    row.batch_per_replica = a.batch;
    row.memory_gib_per_gpu = gib(p.memory.bytes(a.batch, ctx));
    row.ttft_s = Some(a.ttft);
    row.tpot_s = Some(a.tpot);
    row.requests_per_s = a.rps;
    row.prefill_utilisation = a.u;
    row.output_tokens_per_s = a.rps * o;
    row.output_tokens_per_s_per_gpu = row.output_tokens_per_s / f64::from(gpus.max(1));
    row.misses = verdict(&w.slo, row.ttft_s, row.tpot_s, extra);
    row.meets_slo = row.misses.is_empty();
    row
}

pub(super) fn best_point(slo: &SloTargets, pts: &[AggPoint]) -> Option<AggPoint> {
    let meeting = pts
        .iter()
        .filter(|a| meets(slo, a.ttft, a.tpot))
        .max_by(|a, b| a.rps.total_cmp(&b.rps));
    meeting.copied().or_else(|| {
        pts.iter()
            .min_by(|a, b| {
                worst_ratio(slo, a.ttft, a.tpot).total_cmp(&worst_ratio(slo, b.ttft, b.tpot))
            })
            .copied()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_filter_names_what_is_missed() {
        let slo = SloTargets {
            ttft_s: Some(2.0),
            tpot_s: Some(0.05),
        };
        assert!(verdict(&slo, Some(1.9), Some(0.05), vec![]).is_empty());
        let m = verdict(&slo, Some(2.5), Some(0.06), vec![]);
        assert_eq!(m, vec!["TTFT 2.50 s > 2.00 s", "TPOT 60.0 ms > 50.0 ms"]);
        assert!(meets(&slo, 2.0, 0.05) && !meets(&slo, 2.0, 0.051));
        assert!(meets(&SloTargets::default(), 1e9, 1e9));
        // best point: the most throughput among meeting points, else the least violation
        let pts = [
            AggPoint {
                batch: 8,
                ttft: 0.5,
                tpot: 0.02,
                rps: 1.0,
                u: 0.1,
            },
            AggPoint {
                batch: 64,
                ttft: 0.9,
                tpot: 0.045,
                rps: 5.0,
                u: 0.3,
            },
            AggPoint {
                batch: 128,
                ttft: 1.2,
                tpot: 0.07,
                rps: 7.0,
                u: 0.4,
            },
        ];
        assert_eq!(best_point(&slo, &pts).unwrap().batch, 64);
        let tight = SloTargets {
            ttft_s: None,
            tpot_s: Some(0.01),
        };
        assert_eq!(best_point(&tight, &pts).unwrap().batch, 8);
    }
}
