//! `plan --find --nodes 1,2,4`: ranks multi-node layouts, aggregated and disaggregated
//! prefill/decode, for one GPU type, a workload and an SLO (issue #30, items 1 and 2).
//!
//! For every node count, every valid aggregated layout ([`Layout::enumerate`]) and every P/D
//! split (prefill workers and decode workers, each a layout of its own, filling the same GPUs)
//! is costed with the step model of [`super::step`] and judged against the SLO:
//!
//! * **Aggregated** (one server does both phases, chunked prefill mixing prompts into decode
//!   steps, the engines' default: docs/speed.md "Sources of the layout rules"). Per replica at decode batch `B`: a decode round
//!   takes `d(B)`; each request also costs `c = 1 / prefill requests/s` of replica time, and `B/O`
//!   requests finish per round (`O` output tokens), so the mean time per output token is
//!   `TPOT = d(B) + B·c/O` — prefills interrupt decode. TTFT = the prompt's own prefill pass +
//!   one decode round (the step carrying it) + the M/D/1 wait at prefill utilisation
//!   `u = B·c / (O·TPOT)`.
//! * **Disaggregated**: decode workers run `TPOT = d(B)` undisturbed; prefill workers serve
//!   requests at `u` of their capacity; TTFT = prefill pass + M/D/1 wait + the KV transfer
//!   ([`super::disagg::kv_transfer`]) + one decode round. Workers are counted so that prefill
//!   capacity matches decode demand ([`super::disagg::size_split`]).
//!
//! Without a rate or concurrency, each row takes the largest decode batch whose TPOT and TTFT
//! meet the SLO and memory allows; with `--rate`, the batch follows from Little's law (in-flight
//! decode sequences = rate × O × TPOT); with `--concurrency`, it is given. Rows meeting the SLO
//! rank first, by output tokens/s per GPU, then by end-to-end latency (TTFT + O × TPOT).

use super::disagg::{self, KvTransfer};
use super::memory::{GpuMemory, gpu_memory};
use super::step::{LayoutRequest, Overlap, estimate_layout};
use super::{IntraLink, Layout, Network};
use crate::arch::{Dtype, ModelArch, Quantization};
use crate::gpus::GpuSpec;
use crate::memory::GIB;
use crate::speed::engines::Engine;
use serde::Serialize;

/// Latency targets (from `--slo ttft=…,tpot=…`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SloTargets {
    /// Time to first token, seconds.
    pub ttft_s: Option<f64>,
    /// Time per output token, seconds.
    pub tpot_s: Option<f64>,
}

/// What the deployment serves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterWorkload {
    /// Prompt tokens per request.
    pub input_len: u64,
    /// Output tokens per request.
    pub output_len: u64,
    /// Requests per second offered to the whole deployment, if fixed.
    pub rate: Option<f64>,
    /// Sequences in flight in the whole deployment, if fixed (ignored when `rate` is set).
    pub concurrency: Option<u64>,
    /// The SLO.
    pub slo: SloTargets,
}

/// Everything the search needs.
#[derive(Debug, Clone)]
pub struct ClusterFindRequest<'a> {
    /// The model's id or path, as the user named it (echoed in the result).
    pub model_id: String,
    /// The model.
    pub arch: &'a ModelArch,
    /// Effective quantization (checkpoint or flag).
    pub quant: Option<&'a Quantization>,
    /// KV-cache dtype.
    pub kv: Dtype,
    /// The GPU (catalog entry).
    pub gpu: &'a GpuSpec,
    /// Node counts to try.
    pub nodes: Vec<u32>,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// The network between nodes.
    pub network: Network,
    /// The engine whose fitted efficiency the step model uses.
    pub engine: Engine,
    /// Share of the GPU's memory the engine may use (vLLM `--gpu-memory-utilization`, 0.9).
    pub memory_utilization: f64,
    /// Most sequences one replica decodes at once (vLLM `--max-num-seqs`).
    pub max_batch: u64,
    /// The workload and SLO.
    pub workload: ClusterWorkload,
}

impl<'a> ClusterFindRequest<'a> {
    /// A request with the defaults `plan --find --nodes` uses: the checkpoint's quantization,
    /// KV in the model's dtype, 8 GPUs per node, `ib-ndr`, 90 % of GPU memory and vLLM's default
    /// `--max-num-seqs` for the GPU ([`default_max_num_seqs`]).
    pub fn new(
        model_id: &str,
        arch: &'a ModelArch,
        gpu: &'a GpuSpec,
        nodes: Vec<u32>,
        engine: Engine,
        workload: ClusterWorkload,
    ) -> Self {
        ClusterFindRequest {
            model_id: model_id.to_string(),
            arch,
            quant: arch.quantization.as_ref(),
            kv: arch.dtype,
            gpu,
            nodes,
            gpus_per_node: 8,
            network: Network::IbNdr,
            engine,
            memory_utilization: 0.9,
            max_batch: default_max_num_seqs(gpu),
            workload,
        }
    }
}

/// A group of identical workers of a P/D row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workers {
    /// Each worker's layout.
    pub layout: Layout,
    /// How many.
    pub count: u32,
    /// Sequences per replica (per DP rank) of each worker: the decode batch, or 1 prompt.
    pub batch_per_replica: u64,
    /// Memory of the fullest GPU, GiB (weights + KV of that batch).
    pub memory_gib_per_gpu: f64,
}

/// One ranked option.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterRow {
    /// `aggregated` or `disaggregated`.
    pub kind: String,
    /// Nodes used.
    pub nodes: u32,
    /// GPUs used.
    pub gpus: u32,
    /// Short description (`TP8 PP2`, `2× prefill DP16/EP16 + 1× decode TP16`).
    pub label: String,
    /// The aggregated layout.
    pub layout: Option<Layout>,
    /// P/D: the prefill workers.
    pub prefill: Option<Workers>,
    /// P/D: the decode workers.
    pub decode: Option<Workers>,
    /// Decode sequences per replica (per DP rank under DP attention).
    pub batch_per_replica: u64,
    /// The fullest GPU's memory (weights + KV of its batch), GiB.
    pub memory_gib_per_gpu: f64,
    /// Memory the engine may use per GPU, GiB.
    pub budget_gib_per_gpu: f64,
    /// Weights and at least one sequence fit.
    pub fits: bool,
    /// Mean time to first token, s (None: does not fit).
    pub ttft_s: Option<f64>,
    /// Mean time per output token, s.
    pub tpot_s: Option<f64>,
    /// P/D: the KV hand-over per request (included in `ttft_s`).
    pub kv_transfer: Option<KvTransfer>,
    /// Aggregated: share of each replica's time spent prefilling; P/D: share of the prefill
    /// workers' capacity in use.
    pub prefill_utilisation: f64,
    /// Requests/s served.
    pub requests_per_s: f64,
    /// Output tokens/s of the whole deployment.
    pub output_tokens_per_s: f64,
    /// Output tokens/s per GPU: what ranks.
    pub output_tokens_per_s_per_gpu: f64,
    /// Meets memory and every SLO target.
    pub meets_slo: bool,
    /// What it misses, in words (empty when it meets the SLO).
    pub misses: Vec<String>,
}

/// The search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterFindResult {
    /// The model as named.
    pub model: String,
    /// The GPU (catalog name).
    pub gpu: String,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// The network between nodes (`--network` spelling).
    pub network: &'static str,
    /// Whose fitted efficiency the step times use.
    pub engine: &'static str,
    /// The workload and SLO searched for.
    pub workload: ClusterWorkload,
    /// Ranked rows: SLO-meeting first.
    pub rows: Vec<ClusterRow>,
    /// Why the first row wins and by how much, in words.
    pub explanation: String,
    /// The winner's output tokens/s per GPU over the best row of the other kind (None when
    /// there is no winner or no row of the other kind fits).
    pub margin_over_other_kind: Option<f64>,
    /// Node counts or kinds without a row, and why.
    pub notes: Vec<String>,
    /// How rows were built and judged.
    pub assumptions: Vec<String>,
    /// Layout × batch (× split) points evaluated.
    pub evaluated: usize,
}

/// vLLM's default `--max-num-seqs` for a GPU: 1024 on GPUs with ≥ 70 GiB other than the A100,
/// else 256 (vLLM 0.9.0+ `EngineArgs._set_default_args`, `vllm/engine/arg_utils.py`, as read for
/// the memory planner in `engines/vllm/rules.rs` `profile_batch`).
pub fn default_max_num_seqs(gpu: &GpuSpec) -> u64 {
    if gpu.torch_total_gib >= 70.0 && !gpu.name.contains("A100") {
        1024
    } else {
        256
    }
}

/// Decode batches tried per replica.
const BATCHES: [u64; 19] = [
    1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048,
];

/// Prefill utilisation the P/D rows stop at without a TTFT target (the M/D/1 wait grows
/// without bound near 1).
const U_CAP: f64 = 0.9;

/// Most GPUs one node count may hold (the search grows with the divisors of the GPU count).
pub const MAX_GPUS: u64 = 1024;

/// P/D rows kept per node count (the best ones).
const PD_ROWS_PER_NODE_COUNT: usize = 8;

/// Figures of one layout that do not depend on the batch.
#[derive(Debug, Clone)]
struct Phase {
    layout: Layout,
    memory: GpuMemory,
    /// Largest decode batch per replica memory allows (capped at `max_batch`).
    max_batch: u64,
    /// One prompt alone, s.
    ttft_alone: f64,
    /// Replica time per request under saturating prefill, s.
    prefill_cost: f64,
}

fn budget(r: &ClusterFindRequest<'_>) -> u64 {
    (r.gpu.torch_total_gib * GIB * r.memory_utilization.clamp(0.0, 1.0)) as u64
}

fn gib(b: u64) -> f64 {
    b as f64 / GIB
}

fn layout_request<'a>(r: &'a ClusterFindRequest<'a>, l: Layout, batch: u64) -> LayoutRequest<'a> {
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
fn round(r: &ClusterFindRequest<'_>, l: Layout, batch: u64) -> Option<f64> {
    estimate_layout(&layout_request(r, l, batch))
        .ok()
        .map(|(_, e)| e.expected.round_s)
        .filter(|t| t.is_finite() && *t > 0.0)
}

fn phase(r: &ClusterFindRequest<'_>, l: Layout) -> Option<Phase> {
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

/// Short layout text: `TP8 PP2`, `DP16/EP16`, `TP4 DP2 EP8`.
pub fn describe(l: &Layout) -> String {
    let mut parts = Vec::new();
    if l.tp == 1 && l.pp == 1 && l.dp > 1 && l.ep == l.dp {
        return format!("DP{}/EP{}", l.dp, l.ep);
    }
    parts.push(format!("TP{}", l.tp));
    if l.pp > 1 {
        parts.push(format!("PP{}", l.pp));
    }
    if l.dp > 1 {
        parts.push(format!("DP{}", l.dp));
    }
    if l.ep > 1 {
        parts.push(format!("EP{}", l.ep));
    }
    parts.join(" ")
}

fn verdict(
    slo: &SloTargets,
    ttft: Option<f64>,
    tpot: Option<f64>,
    mut misses: Vec<String>,
) -> Vec<String> {
    if let (Some(want), Some(got)) = (slo.ttft_s, ttft)
        && got > want
    {
        misses.push(format!("TTFT {} > {}", secs(got), secs(want)));
    }
    if let (Some(want), Some(got)) = (slo.tpot_s, tpot)
        && got > want
    {
        misses.push(format!("TPOT {} > {}", secs(got), secs(want)));
    }
    misses
}

/// Seconds in words: `1.24 s`, `48.2 ms`.
pub fn secs(s: f64) -> String {
    if !s.is_finite() {
        "unbounded".into()
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// One aggregated operating point.
#[derive(Debug, Clone, Copy)]
struct AggPoint {
    batch: u64,
    ttft: f64,
    tpot: f64,
    rps: f64,
    u: f64,
}

fn agg_point(r: &ClusterFindRequest<'_>, p: &Phase, batch: u64) -> Option<AggPoint> {
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

fn meets(slo: &SloTargets, ttft: f64, tpot: f64) -> bool {
    slo.ttft_s.is_none_or(|t| ttft <= t) && slo.tpot_s.is_none_or(|t| tpot <= t)
}

/// How far a point is from the SLO (≤ 1: meets).
fn worst_ratio(slo: &SloTargets, ttft: f64, tpot: f64) -> f64 {
    let a = slo.ttft_s.map_or(0.0, |t| ttft / t);
    let b = slo.tpot_s.map_or(0.0, |t| tpot / t);
    a.max(b)
}

fn grid(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = BATCHES.iter().copied().filter(|b| *b <= max).collect();
    if max > 0 && !v.contains(&max) {
        v.push(max);
    }
    v
}

/// Little's law fixed point: `batch = per_replica_rate × O × tpot(batch)`.
fn littles_batch(
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

fn aggregated_row(r: &ClusterFindRequest<'_>, p: &Phase, evaluated: &mut usize) -> ClusterRow {
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

fn best_point(slo: &SloTargets, pts: &[AggPoint]) -> Option<AggPoint> {
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

/// A decode worker's operating point: batch, round time, requests/s per worker.
#[derive(Debug, Clone, Copy)]
struct DecodePoint {
    batch: u64,
    tpot: f64,
    rps: f64,
}

fn decode_point(r: &ClusterFindRequest<'_>, p: &Phase, batch: u64) -> Option<DecodePoint> {
    let d = round(r, p.layout, batch)?;
    let o = r.workload.output_len.max(1) as f64;
    Some(DecodePoint {
        batch,
        tpot: d,
        rps: f64::from(p.layout.dp) * batch as f64 / (o * d),
    })
}

/// The most requests/s a decode worker serves with TPOT within the SLO (or its best TPOT).
fn decode_capacity(
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
fn pd_row(
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
fn pd_u_max(r: &ClusterFindRequest<'_>, pre: &Phase, kv: &KvTransfer, tpot: f64) -> f64 {
    match r.workload.slo.ttft_s {
        None => U_CAP,
        Some(t) => {
            let slack = t - pre.ttft_alone - kv.seconds - tpot;
            disagg::max_utilisation(slack, pre.prefill_cost).min(U_CAP)
        }
    }
}

fn kv_of(r: &ClusterFindRequest<'_>, pre: &Layout, nodes: u32) -> KvTransfer {
    let one = Layout {
        tp: 1,
        pp: 1,
        dp: 1,
        ep: 1,
        nodes: 1,
        gpus_per_node: 1,
    };
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
fn worker_layouts(r: &ClusterFindRequest<'_>, nodes: u32) -> Vec<Layout> {
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

fn rank(rows: &mut [ClusterRow], o: f64) {
    let e2e =
        |r: &ClusterRow| r.ttft_s.unwrap_or(f64::INFINITY) + o * r.tpot_s.unwrap_or(f64::INFINITY);
    rows.sort_by(|a, b| {
        b.meets_slo
            .cmp(&a.meets_slo)
            .then(b.fits.cmp(&a.fits))
            .then(
                b.output_tokens_per_s_per_gpu
                    .total_cmp(&a.output_tokens_per_s_per_gpu),
            )
            .then(e2e(a).total_cmp(&e2e(b)))
    });
}

/// Ranks aggregated and disaggregated layouts over the request's node counts.
pub fn find(r: &ClusterFindRequest<'_>) -> ClusterFindResult {
    let mut evaluated = 0usize;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let o = r.workload.output_len.max(1) as f64;
    for &nodes in &r.nodes {
        if u64::from(nodes) * u64::from(r.gpus_per_node) > MAX_GPUS {
            notes.push(format!(
                "{nodes} node(s) × {} GPUs: more than {MAX_GPUS} GPUs, not searched",
                r.gpus_per_node
            ));
            continue;
        }
        if nodes == 0 || r.gpus_per_node == 0 {
            notes.push(format!(
                "{nodes} node(s) × {} GPUs: nothing to place",
                r.gpus_per_node
            ));
            continue;
        }
        // aggregated
        let mut agg: Vec<ClusterRow> = Layout::enumerate(r.arch, nodes, r.gpus_per_node)
            .into_iter()
            .filter_map(|l| phase(r, l))
            .map(|p| aggregated_row(r, &p, &mut evaluated))
            .collect();
        if agg.is_empty() {
            notes.push(format!(
                "{nodes} node(s): no valid layout of the model over {} GPUs",
                nodes * r.gpus_per_node
            ));
        }
        rank(&mut agg, o);
        // keep every fitting row, and of the rest only the closest to fitting
        let (fit, mut nofit): (Vec<_>, Vec<_>) = agg.into_iter().partition(|x| x.fits);
        if fit.is_empty() {
            nofit.sort_by(|a, b| a.memory_gib_per_gpu.total_cmp(&b.memory_gib_per_gpu));
            if let Some(x) = nofit.into_iter().next() {
                notes.push(format!(
                    "{nodes} node(s): no aggregated layout fits; the smallest per-GPU weights are {:.1} GiB ({}) against {:.1} GiB",
                    x.memory_gib_per_gpu, x.label, x.budget_gib_per_gpu
                ));
                rows.push(x);
            }
        }
        rows.extend(fit);
        // disaggregated
        let total = nodes * r.gpus_per_node;
        let phases: Vec<Phase> = worker_layouts(r, nodes)
            .into_iter()
            .filter_map(|l| phase(r, l))
            .filter(|p| p.max_batch > 0)
            .collect();
        let decodes: Vec<(Phase, DecodePoint)> = phases
            .iter()
            .filter_map(|p| decode_capacity(r, p, &mut evaluated).map(|d| (p.clone(), d)))
            .collect();
        let mut pd = Vec::new();
        for pre in &phases {
            let gp = pre.layout.world() as u32;
            let kv = kv_of(r, &pre.layout, nodes);
            for (dec, dpt) in &decodes {
                let gd = dec.layout.world() as u32;
                let prefill_rps = f64::from(pre.layout.dp) / pre.prefill_cost
                    * pd_u_max(r, pre, &kv, dpt.tpot).max(1e-6);
                let Some(s) = disagg::size_split(total, gp, prefill_rps, gd, dpt.rps) else {
                    continue;
                };
                evaluated += 1;
                pd.push(pd_row(
                    r,
                    nodes,
                    pre,
                    s.prefill_workers,
                    dec,
                    s.decode_workers,
                    *dpt,
                    &mut evaluated,
                ));
            }
        }
        if pd.is_empty() {
            let smallest = phases.iter().map(|p| p.layout.world()).min();
            notes.push(match smallest {
                Some(g) => format!(
                    "{nodes} node(s): no P/D split: the smallest worker that holds the weights has {g} GPUs, and a prefill plus a decode worker must fill exactly {total}"
                ),
                None => format!(
                    "{nodes} node(s): no P/D split: no worker smaller than the whole deployment holds the weights"
                ),
            });
        }
        rank(&mut pd, o);
        pd.truncate(PD_ROWS_PER_NODE_COUNT);
        rows.extend(pd);
    }
    rank(&mut rows, o);
    let (explanation, margin) = explain(r, &rows);
    ClusterFindResult {
        model: r.model_id.clone(),
        gpu: r.gpu.name.clone(),
        gpus_per_node: r.gpus_per_node,
        network: r.network.cli_id(),
        engine: r.engine.cli_id(),
        workload: r.workload.clone(),
        rows,
        explanation,
        margin_over_other_kind: margin,
        notes,
        assumptions: assumptions(r),
        evaluated,
    }
}

/// One aggregated layout judged as [`find`] judges it (None: the step model has no figure).
pub fn evaluate_aggregated(r: &ClusterFindRequest<'_>, layout: Layout) -> Option<ClusterRow> {
    let mut n = 0;
    phase(r, layout).map(|p| aggregated_row(r, &p, &mut n))
}

/// One given P/D deployment (`n_p` prefill workers of `prefill`, `n_d` decode workers of
/// `decode`, on `nodes` nodes) judged as [`find`] judges its own splits. None when a worker's
/// weights do not fit or the step model has no figure.
pub fn evaluate_disaggregated(
    r: &ClusterFindRequest<'_>,
    nodes: u32,
    prefill: Layout,
    n_p: u32,
    decode: Layout,
    n_d: u32,
) -> Option<ClusterRow> {
    let mut n = 0;
    let pre = phase(r, prefill).filter(|p| p.max_batch > 0)?;
    let dec = phase(r, decode).filter(|p| p.max_batch > 0)?;
    let dpt = decode_capacity(r, &dec, &mut n)?;
    Some(pd_row(r, nodes, &pre, n_p, &dec, n_d, dpt, &mut n))
}

fn assumptions(r: &ClusterFindRequest<'_>) -> Vec<String> {
    let w = &r.workload;
    let mut a = vec![
        format!(
            "memory per GPU: {:.0} % of {} GiB ({}); weights + KV of the decode batch at {} tokens (input + output) must fit; activations and CUDA graphs come out of the rest",
            r.memory_utilization * 100.0,
            r.gpu.torch_total_gib,
            r.gpu.name,
            w.input_len + w.output_len
        ),
        format!(
            "step times: the multi-GPU model of docs/speed.md (\"Multi-GPU and multi-node\") with the fitted efficiency of {}; network {} ({})",
            r.engine.cli_id(),
            r.network.cli_id(),
            r.network.spec().source
        ),
        "aggregated: chunked prefill shares the replica with decode: TPOT = decode round + batch × prefill time per request / output length; TTFT = the prompt's prefill + one decode round + M/D/1 queueing at the prefill utilisation".into(),
        "disaggregated: decode rounds are not interrupted; TTFT = prefill + M/D/1 queueing + KV transfer (whole prompt's KV over the prefill GPUs' NICs, not overlapped with the prefill) + one decode round; workers sized so prefill capacity (at the utilisation the TTFT target allows, at most 90 %) matches decode demand".into(),
        format!(
            "decode batch per replica: at most {} (--max-num-seqs); two-batch overlap, MTP/speculative decoding, prefix caching and the router's own latency are not modelled",
            r.max_batch
        ),
    ];
    match (w.rate, w.concurrency) {
        (Some(rate), _) => a.push(format!(
            "rate {rate} requests/s: decode batch from Little's law (rate × output × TPOT)"
        )),
        (None, Some(c)) => a.push(format!("{c} sequences in flight over the deployment")),
        (None, None) => a.push(
            "no rate or concurrency: each row takes the decode batch with the most throughput that meets the SLO"
                .into(),
        ),
    }
    a
}

fn explain(r: &ClusterFindRequest<'_>, rows: &[ClusterRow]) -> (String, Option<f64>) {
    let Some(win) = rows.first().filter(|x| x.meets_slo) else {
        let closest = rows
            .iter()
            .find(|x| x.fits)
            .map(|x| {
                format!(
                    " The closest: {} on {} node(s), which misses {}.",
                    x.label,
                    x.nodes,
                    x.misses.join(", ")
                )
            })
            .unwrap_or_default();
        return (
            format!("No layout meets the SLO on the node counts tried.{closest}"),
            None,
        );
    };
    let other = rows
        .iter()
        .filter(|x| x.kind != win.kind && x.fits)
        .find(|x| x.meets_slo)
        .or_else(|| rows.iter().find(|x| x.kind != win.kind && x.fits));
    let o = r.workload.output_len.max(1) as f64;
    let tpot = win.tpot_s.unwrap_or(0.0);
    let ttft = win.ttft_s.unwrap_or(0.0);
    let mut s = format!(
        "{} on {} node(s) ({} GPUs) wins: {:.0} output tokens/s per GPU at TTFT {} and TPOT {}.",
        win.label,
        win.nodes,
        win.gpus,
        win.output_tokens_per_s_per_gpu,
        secs(ttft),
        secs(tpot)
    );
    if win.kind == "disaggregated" {
        if let (Some(d), Some(kv)) = (&win.decode, &win.kv_transfer) {
            s.push_str(&format!(
                " Decode runs batch {} per replica with no prefill interrupting it, so TPOT is the decode round alone; the prefill workers run at {:.0} % of their capacity; the KV transfer adds {} to TTFT ({:.0} MB per request over {}, {} stream(s)).",
                d.batch_per_replica,
                win.prefill_utilisation * 100.0,
                secs(kv.seconds),
                kv.bytes as f64 / 1e6,
                kv.link,
                kv.streams
            ));
        }
    } else {
        s.push_str(&format!(
            " Every GPU both prefills and decodes (batch {} per replica); prefills take {:.0} % of each replica's time, which TPOT absorbs, and no KV crosses the network.",
            win.batch_per_replica,
            win.prefill_utilisation * 100.0
        ));
    }
    let Some(x) = other else {
        s.push_str(&format!(
            " No {} row fits to compare with.",
            if win.kind == "disaggregated" {
                "aggregated"
            } else {
                "disaggregated"
            }
        ));
        return (s, None);
    };
    let ratio = if x.output_tokens_per_s_per_gpu > 0.0 {
        win.output_tokens_per_s_per_gpu / x.output_tokens_per_s_per_gpu
    } else {
        f64::INFINITY
    };
    let verdict = if x.meets_slo {
        "which also meets the SLO".to_string()
    } else {
        format!("which misses {}", x.misses.join(", "))
    };
    s.push_str(&format!(
        " The best {} row, {} on {} node(s), gives {:.0} tokens/s per GPU at TTFT {} and TPOT {} ({verdict}); ",
        x.kind,
        x.label,
        x.nodes,
        x.output_tokens_per_s_per_gpu,
        secs(x.ttft_s.unwrap_or(f64::NAN)),
        secs(x.tpot_s.unwrap_or(f64::NAN)),
    ));
    if ratio.is_finite() && (ratio - 1.0).abs() > 0.005 {
        s.push_str(&format!(
            "the winner gives {ratio:.2}× its throughput per GPU ({:+.0} %).",
            (ratio - 1.0) * 100.0
        ));
    } else {
        let e = |r: &ClusterRow| r.ttft_s.unwrap_or(0.0) + o * r.tpot_s.unwrap_or(0.0);
        s.push_str(&format!(
            "the same throughput per GPU, and the winner's end-to-end latency is {} against {}.",
            secs(e(win)),
            secs(e(x))
        ));
    }
    if x.kind == "aggregated" {
        let held = if r.workload.rate.is_none() && r.workload.concurrency.is_none() && x.meets_slo {
            format!(
                ", which holds its batch to {} per replica to keep TPOT within the target",
                x.batch_per_replica
            )
        } else {
            String::from(", time every decode step waits for")
        };
        s.push_str(&format!(
            " Aggregated, prefills share the decode GPUs ({:.0} % of replica time){held}.",
            x.prefill_utilisation * 100.0,
        ));
    }
    (s, (ratio.is_finite()).then_some(ratio))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        arch: &'a ModelArch,
        gpu: &'a GpuSpec,
        nodes: Vec<u32>,
        w: ClusterWorkload,
    ) -> ClusterFindRequest<'a> {
        ClusterFindRequest {
            model_id: String::new(),
            arch,
            quant: arch.quantization.as_ref(),
            kv: Dtype::Bf16,
            gpu,
            nodes,
            gpus_per_node: 8,
            network: Network::IbNdr,
            engine: Engine::Vllm,
            memory_utilization: 0.9,
            max_batch: 1024,
            workload: w,
        }
    }

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

    #[test]
    fn prefill_interrupts_aggregated_decode_but_not_pd() {
        let arch = crate::catalog::lookup("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        let gpu = crate::gpus::lookup("H100 SXM").unwrap();
        let w = ClusterWorkload {
            input_len: 2000,
            output_len: 500,
            rate: None,
            concurrency: None,
            slo: SloTargets {
                ttft_s: Some(2.0),
                tpot_s: Some(0.05),
            },
        };
        let r = req(&arch, gpu, vec![1, 2], w);
        let l = Layout {
            tp: 8,
            pp: 1,
            dp: 1,
            ep: 1,
            nodes: 1,
            gpus_per_node: 8,
        };
        let p = phase(&r, l).unwrap();
        let a = agg_point(&r, &p, 64).unwrap();
        let d = decode_point(&r, &p, 64).unwrap();
        // aggregated TPOT = decode round + 64 × prefill cost / 500
        assert!((a.tpot - (d.tpot + 64.0 * p.prefill_cost / 500.0)).abs() < 1e-12);
        assert!(a.tpot > d.tpot);
        let res = find(&r);
        assert!(
            res.rows
                .iter()
                .any(|x| x.kind == "aggregated" && x.nodes == 1)
        );
        assert!(
            res.rows
                .iter()
                .any(|x| x.kind == "disaggregated" && x.nodes == 2)
        );
        // every meeting row really meets, and ranks above every missing one
        let first_miss = res
            .rows
            .iter()
            .position(|x| !x.meets_slo)
            .unwrap_or(res.rows.len());
        assert!(
            res.rows[..first_miss]
                .iter()
                .all(|x| x.ttft_s.unwrap() <= 2.0 && x.tpot_s.unwrap() <= 0.05)
        );
        assert!(
            res.rows[first_miss..]
                .iter()
                .all(|x| !x.meets_slo && !x.misses.is_empty())
        );
        // P/D rows fill exactly the node count's GPUs
        for x in res.rows.iter().filter(|x| x.kind == "disaggregated") {
            let (p, d) = (x.prefill.as_ref().unwrap(), x.decode.as_ref().unwrap());
            assert_eq!(
                p.count * p.layout.world() as u32 + d.count * d.layout.world() as u32,
                x.gpus
            );
            assert_eq!(x.gpus, x.nodes * 8);
        }
        assert!(!res.explanation.is_empty());
    }

    #[test]
    fn a_fixed_rate_is_served_or_named_as_the_miss() {
        let arch = crate::catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap();
        let gpu = crate::gpus::lookup("L40S").unwrap();
        let w = |rate: f64| ClusterWorkload {
            input_len: 1000,
            output_len: 200,
            rate: Some(rate),
            concurrency: None,
            slo: SloTargets {
                ttft_s: Some(2.0),
                tpot_s: Some(0.1),
            },
        };
        let r = req(&arch, gpu, vec![1], w(5.0));
        let res = find(&r);
        assert!(res.rows[0].meets_slo, "{:?}", res.rows[0]);
        for x in res.rows.iter().filter(|x| x.meets_slo) {
            assert!((x.requests_per_s - 5.0).abs() < 1e-9, "{x:?}");
            assert!((x.output_tokens_per_s_per_gpu - 5.0 * 200.0 / 8.0).abs() < 1e-6);
        }
        // 1,000 requests/s of 1,000-token prompts is beyond 8 L40S: every row says why, and
        // none claims to serve more than it can
        let r = req(&arch, gpu, vec![1], w(1000.0));
        let res = find(&r);
        assert!(res.rows.iter().all(|x| !x.meets_slo));
        assert!(
            res.rows
                .iter()
                .all(|x| x.misses.iter().any(|m| m.contains("rate"))),
            "{:?}",
            res.rows
        );
        assert!(res.rows.iter().all(|x| x.requests_per_s < 1000.0));
        assert!(res.explanation.starts_with("No layout meets the SLO"));
    }
}
