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
//!
//! The search and its public types live here; the costing and wording in rooms beside it:
//! `phase.rs` (one layout's figures shared by both kinds, the SLO test), `aggregated.rs` (the
//! aggregated rows), `disaggregated.rs` (the P/D rows), `explain.rs` (labels, assumptions and
//! the explanation).

mod aggregated;
mod disaggregated;
mod explain;
mod phase;
// test-only: the file opens with `#![cfg(test)]` (a top-level `#[cfg(test)]` here would end what
// tests/no_unwrap.rs reads of this file)
mod tests;

use aggregated::aggregated_row;
use disaggregated::{DecodePoint, decode_capacity, kv_of, pd_row, pd_u_max, worker_layouts};
use explain::{assumptions, explain};
pub use explain::{describe, secs};
use phase::{Phase, phase};

use super::disagg::{self, KvTransfer};
use super::{Layout, Network};
use crate::arch::{Dtype, ModelArch, Quantization};
use crate::gpus::GpuSpec;
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

/// Most GPUs one node count may hold (the search grows with the divisors of the GPU count).
pub const MAX_GPUS: u64 = 1024;

/// P/D rows kept per node count (the best ones).
const PD_ROWS_PER_NODE_COUNT: usize = 8;

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
