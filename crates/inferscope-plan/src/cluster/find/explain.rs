//! The wording of `plan --find --nodes` (part of [`super`]): layout labels, seconds, what a
//! row misses, how rows were built and judged, and why the winner wins.

use super::{ClusterFindRequest, ClusterRow, SloTargets};
use crate::cluster::Layout;

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

pub(super) fn verdict(
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

pub(super) fn assumptions(r: &ClusterFindRequest<'_>) -> Vec<String> {
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

pub(super) fn explain(r: &ClusterFindRequest<'_>, rows: &[ClusterRow]) -> (String, Option<f64>) {
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
