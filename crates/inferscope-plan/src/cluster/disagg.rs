//! Disaggregated prefill/decode (issue #30, item 2): prefill workers and decode workers on
//! separate GPUs, the prompt's KV cache moved from one to the other over the interconnect.
//!
//! Three pieces, all arithmetic:
//!
//! * [`kv_transfer`]: the KV bytes of a prompt (input tokens × the whole model's KV bytes per
//!   token, `crate::memory::kv_bytes_per_token_layer` summed over every layer at TP 1) sent over
//!   the prefill worker's NICs: `α + bytes / (streams × bandwidth)`, one stream per GPU holding a
//!   distinct share of the sequence's KV (TP ranks of non-MLA attention hold different heads;
//!   an MLA latent is the same on every TP rank, so only pipeline stages add streams). This is
//!   what the engines' P/D connectors do: each rank reads/writes its own KV blocks over its own
//!   RDMA NIC (docs/research/multinode.md, "KV transfer for P/D"; docs/speed.md "Sources of the
//!   layout rules").
//!   It is added to TTFT whole: layer-wise overlap with the prefill is not counted.
//! * [`mdl_wait`]: queueing before a prefill starts, M/D/1 (Poisson arrivals, one deterministic
//!   server): mean wait `u × S / (2 (1 − u))` at utilisation `u` and service time `S`
//!   (Pollaczek–Khinchine with zero service variance).
//! * [`size_split`]: how many prefill and decode workers fill the GPUs so that prefill capacity
//!   (requests/s) matches decode demand — DistServe's per-phase goodput sizing (Zhong et al.,
//!   OSDI 2024) with the same per-phase step model as the aggregated rows (`super::step`).

use super::{Layout, Network};
use serde::Serialize;

/// One KV hand-over from a prefill worker to a decode worker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvTransfer {
    /// Bytes of one prompt's KV cache (all layers).
    pub bytes: u64,
    /// Parallel streams (GPUs of the prefill worker that each send their share).
    pub streams: u32,
    /// Seconds: latency + bytes / (streams × bytes per second).
    pub seconds: f64,
    /// The link it crosses (`ib-ndr`, ..., or `intra-node` when P and D share one node).
    pub link: String,
}

/// The KV hand-over of a prompt of `input_tokens` with `kv_bytes_per_token` over the whole model,
/// from a prefill worker with layout `prefill` over `network` (or, when `same_node`, over the
/// node's GPU link at `intra_bytes_per_s`). `mla`: the KV is one latent replicated on TP ranks.
pub fn kv_transfer(
    input_tokens: u64,
    kv_bytes_per_token: u64,
    prefill: &Layout,
    mla: bool,
    network: Network,
    same_node: Option<f64>,
) -> KvTransfer {
    let bytes = input_tokens.saturating_mul(kv_bytes_per_token);
    let tp_streams = if mla { 1 } else { prefill.tp.max(1) };
    let streams = tp_streams.saturating_mul(prefill.pp.max(1));
    let (latency, bw, link) = match same_node {
        Some(b) => (
            network.spec().latency_s.min(10e-6),
            b,
            String::from("intra-node"),
        ),
        None => {
            let s = network.spec();
            (s.latency_s, s.bytes_per_s(), network.cli_id().to_string())
        }
    };
    let seconds = latency + bytes as f64 / (f64::from(streams) * bw.max(1.0));
    KvTransfer {
        bytes,
        streams,
        seconds,
        link,
    }
}

/// Mean wait in an M/D/1 queue at utilisation `u` (0 ≤ u < 1) with service time `service_s`;
/// infinite at u ≥ 1.
pub fn mdl_wait(u: f64, service_s: f64) -> f64 {
    if !(0.0..1.0).contains(&u) {
        return f64::INFINITY;
    }
    u * service_s / (2.0 * (1.0 - u))
}

/// Highest utilisation whose M/D/1 wait stays within `slack_s` for service time `service_s`
/// (the inverse of [`mdl_wait`]: u = 2s / (S + 2s)); 0 when there is no slack.
pub fn max_utilisation(slack_s: f64, service_s: f64) -> f64 {
    if slack_s <= 0.0 || !slack_s.is_finite() {
        return if slack_s == f64::INFINITY { 1.0 } else { 0.0 };
    }
    2.0 * slack_s / (service_s.max(0.0) + 2.0 * slack_s)
}

/// One P/D split over a fixed number of GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Split {
    /// Prefill workers.
    pub prefill_workers: u32,
    /// Decode workers.
    pub decode_workers: u32,
    /// Requests/s the split serves: the smaller of the prefill and the decode side.
    pub requests_per_s: f64,
    /// Share of the prefill side's capacity in use (for the TTFT queueing).
    pub prefill_utilisation: f64,
}

/// The split of `gpus` GPUs into `n_p` prefill workers of `gpus_p` GPUs and `n_d` decode workers
/// of `gpus_d` GPUs (n_p × gpus_p + n_d × gpus_d = gpus, both ≥ 1) that serves the most
/// requests/s, each prefill worker serving `prefill_rps` requests/s at most (already capped at
/// the utilisation TTFT allows) and each decode worker `decode_rps`. Ties go to fewer prefill
/// workers. None when no split uses exactly `gpus`.
pub fn size_split(
    gpus: u32,
    gpus_p: u32,
    prefill_rps: f64,
    gpus_d: u32,
    decode_rps: f64,
) -> Option<Split> {
    if gpus_p == 0 || gpus_d == 0 {
        return None;
    }
    let mut best: Option<Split> = None;
    for n_p in 1..=gpus / gpus_p {
        let rest = gpus - n_p * gpus_p;
        if rest == 0 || !rest.is_multiple_of(gpus_d) {
            continue;
        }
        let n_d = rest / gpus_d;
        let p = f64::from(n_p) * prefill_rps;
        let d = f64::from(n_d) * decode_rps;
        let rps = p.min(d);
        let s = Split {
            prefill_workers: n_p,
            decode_workers: n_d,
            requests_per_s: rps,
            prefill_utilisation: if p > 0.0 { rps / p } else { 0.0 },
        };
        if best.is_none_or(|b| rps > b.requests_per_s * (1.0 + 1e-9)) {
            best = Some(s);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(tp: u32, pp: u32, dp: u32, ep: u32, nodes: u32, gpn: u32) -> Layout {
        Layout {
            tp,
            pp,
            dp,
            ep,
            nodes,
            gpus_per_node: gpn,
        }
    }

    #[test]
    fn kv_transfer_of_a_deepseek_prompt_over_ndr() {
        // DeepSeek-V3/R1: MLA latent 512 + rope 64 = 576 values × 2 B × 61 layers = 70,272 B per
        // token (docs/research/multinode.md). 2,000 tokens = 140,544,000 B.
        let per_token = 576 * 2 * 61;
        assert_eq!(per_token, 70_272);
        // DP attention (tp 1): one rank holds the sequence, one NIC at 50 GB/s × 0.86
        let t = kv_transfer(
            2000,
            per_token,
            &l(1, 1, 16, 16, 2, 8),
            true,
            Network::IbNdr,
            None,
        );
        assert_eq!(t.bytes, 140_544_000);
        assert_eq!(t.streams, 1);
        let want = 10e-6 + 140_544_000.0 / (50e9 * 0.86);
        assert!((t.seconds - want).abs() < 1e-12, "{} vs {want}", t.seconds);
        // ≈ 3.3 ms: the research note's "~3 ms at 50 GB/s"
        assert!(t.seconds > 3.0e-3 && t.seconds < 3.5e-3);
        // MLA under TP 8: the latent is the same on every rank, still one stream
        let t8 = kv_transfer(
            2000,
            per_token,
            &l(8, 2, 1, 1, 2, 8),
            true,
            Network::IbNdr,
            None,
        );
        assert_eq!(t8.streams, 2);
        // GQA under TP 4: four ranks send four different head slices at once
        let g = kv_transfer(
            1000,
            1000,
            &l(4, 1, 1, 1, 1, 4),
            false,
            Network::Eth100,
            None,
        );
        assert_eq!(g.streams, 4);
        let want = 50e-6 + 1e6 / (4.0 * 12.5e9 * 0.4);
        assert!((g.seconds - want).abs() < 1e-12);
        // same node: the GPU link
        let n = kv_transfer(
            1000,
            1000,
            &l(1, 1, 1, 1, 1, 1),
            false,
            Network::IbNdr,
            Some(450e9),
        );
        assert_eq!(n.link, "intra-node");
        assert!((n.seconds - (10e-6 + 1e6 / 450e9)).abs() < 1e-12);
    }

    #[test]
    fn queueing_wait_and_its_inverse() {
        assert_eq!(mdl_wait(0.0, 1.0), 0.0);
        assert!((mdl_wait(0.5, 1.0) - 0.5).abs() < 1e-12);
        assert!(mdl_wait(1.0, 1.0).is_infinite());
        for u in [0.1, 0.5, 0.9] {
            let w = mdl_wait(u, 0.2);
            assert!((max_utilisation(w, 0.2) - u).abs() < 1e-9);
        }
        assert_eq!(max_utilisation(-1.0, 0.2), 0.0);
        assert_eq!(max_utilisation(f64::INFINITY, 0.2), 1.0);
    }

    #[test]
    fn split_balances_prefill_and_decode() {
        // 16 GPUs, prefill workers of 1 GPU at 2 req/s, decode workers of 4 GPUs at 10 req/s:
        // n_p + 4 n_d = 16 → (4,3): min(8, 30) = 8; (8,2): min(16, 20) = 16; (12,1): min(24,10)
        let s = size_split(16, 1, 2.0, 4, 10.0).unwrap();
        assert_eq!((s.prefill_workers, s.decode_workers), (8, 2));
        assert!((s.requests_per_s - 16.0).abs() < 1e-12);
        assert!((s.prefill_utilisation - 1.0).abs() < 1e-12);
        // the balance: neither side can be moved a worker without lowering the minimum
        let s = size_split(32, 16, 5.0, 16, 3.0).unwrap();
        assert_eq!((s.prefill_workers, s.decode_workers), (1, 1));
        assert!((s.requests_per_s - 3.0).abs() < 1e-12);
        assert!((s.prefill_utilisation - 0.6).abs() < 1e-12);
        // no exact fill
        assert!(size_split(16, 16, 1.0, 16, 1.0).is_none());
        assert!(size_split(8, 0, 1.0, 1, 1.0).is_none());
    }
}
