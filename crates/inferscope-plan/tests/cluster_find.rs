//! `plan --find --nodes` against the one measured P/D-versus-aggregated pair in
//! fixtures/speed/multi-gpu.jsonl (llm-d guides/pd-disaggregation @ 94a3b72: gpt-oss-120b on the
//! same 16 H200, 5,000 input / 250 output tokens at 45 requests/s; aggregated 16 × TP1 against
//! P/D 8 × TP1 prefill + 2 × TP4 decode). Run with `--nocapture` to see both figures.

use inferscope_plan::arch::Dtype;
use inferscope_plan::catalog;
use inferscope_plan::cluster::Layout;
use inferscope_plan::cluster::Network;
use inferscope_plan::cluster::find::{
    ClusterFindRequest, ClusterWorkload, SloTargets, evaluate_aggregated, evaluate_disaggregated,
    find,
};
use inferscope_plan::gpus;
use inferscope_plan::speed::engines::Engine;
use serde_json::Value;

fn record(id: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/speed/multi-gpu.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {path}"))
}

fn l(tp: u32, dp: u32, gpn: u32) -> Layout {
    Layout {
        tp,
        pp: 1,
        dp,
        ep: 1,
        nodes: 1,
        gpus_per_node: gpn,
    }
}

#[test]
fn pd_pair_on_16_h200_picks_the_measured_winner() {
    let pd = record("llmd-pd-vllm-gpt-oss-120b-8p-tp1-2d-tp4-16xh200-5000in-250out-45qps");
    let agg = record("llmd-pd-baseline-vllm-gpt-oss-120b-16x-tp1-16xh200-5000in-250out-45qps");
    // measured means (the README's comparison table): TTFT and ITL
    let pd_ttft = pd["measured_extra"]["ttft_mean_s"].as_f64().unwrap();
    let pd_itl = pd["measured_extra"]["itl_mean_s"].as_f64().unwrap();
    let agg_ttft = agg["measured_extra"]["ttft_mean_ms"].as_f64().unwrap() / 1e3;
    let agg_itl = agg["measured_extra"]["itl_mean_ms"].as_f64().unwrap() / 1e3;
    assert_eq!(pd["workload"]["input_tokens"], 5000);
    assert_eq!(pd["workload"]["request_rate"], 45);
    // An SLO between the two measured TPOTs and above both TTFTs: the measured winner is P/D
    // (ITL 8 ms against 25 ms; TTFT 1.44 s and 0.53 s both under 2 s).
    let slo = SloTargets {
        ttft_s: Some(2.0),
        tpot_s: Some(0.015),
    };
    assert!(pd_ttft <= 2.0 && pd_itl <= 0.015, "P/D measured meets it");
    assert!(agg_itl > 0.015, "aggregated measured misses it");
    let arch = catalog::lookup("openai/gpt-oss-120b").unwrap();
    let gpu = gpus::lookup("H200 SXM").unwrap();
    let r = ClusterFindRequest {
        model_id: "openai/gpt-oss-120b".into(),
        arch: &arch,
        quant: arch.quantization.as_ref(),
        kv: Dtype::Bf16,
        gpu,
        nodes: vec![2],
        gpus_per_node: 8,
        network: Network::IbNdr,
        engine: Engine::Vllm,
        memory_utilization: 0.9,
        max_batch: 1024,
        workload: ClusterWorkload {
            input_len: 5000,
            output_len: 250,
            rate: Some(45.0),
            concurrency: None,
            slo,
        },
    };
    let a = evaluate_aggregated(
        &r,
        Layout {
            tp: 1,
            pp: 1,
            dp: 16,
            ep: 1,
            nodes: 2,
            gpus_per_node: 8,
        },
    )
    .unwrap();
    let d = evaluate_disaggregated(&r, 2, l(1, 1, 1), 8, l(4, 1, 4), 2).unwrap();
    println!("measured aggregated 16×TP1: TTFT {agg_ttft:.3} s, ITL {agg_itl:.4} s");
    println!(
        "model    aggregated 16×TP1: TTFT {:.3} s, TPOT {:.4} s, batch {} per replica, prefill {:.0} % of replica time, misses {:?}",
        a.ttft_s.unwrap(),
        a.tpot_s.unwrap(),
        a.batch_per_replica,
        a.prefill_utilisation * 100.0,
        a.misses
    );
    println!("measured P/D 8×TP1 + 2×TP4: TTFT {pd_ttft:.3} s, ITL {pd_itl:.4} s");
    println!(
        "model    P/D 8×TP1 + 2×TP4: TTFT {:.3} s (KV {:.1} ms), TPOT {:.4} s, decode batch {}, misses {:?}",
        d.ttft_s.unwrap(),
        d.kv_transfer.as_ref().unwrap().seconds * 1e3,
        d.tpot_s.unwrap(),
        d.batch_per_replica,
        d.misses
    );
    // the verdicts as measured: aggregated misses the TPOT target, P/D meets both
    assert!(
        !a.meets_slo && a.misses[0].starts_with("TPOT"),
        "{:?}",
        a.misses
    );
    assert!(d.meets_slo, "{:?}", d.misses);
    // the direction of the measurement: P/D cuts TPOT, raises TTFT
    assert!(d.tpot_s.unwrap() < a.tpot_s.unwrap());
    assert!(d.ttft_s.unwrap() > a.ttft_s.unwrap());
    let res = find(&r);
    for x in res.rows.iter().take(8) {
        println!(
            "{:>13} {:<40} {:>7.0} tok/s/GPU TTFT {:>8.3} s TPOT {:>7.4} s {}",
            x.kind,
            x.label,
            x.output_tokens_per_s_per_gpu,
            x.ttft_s.unwrap_or(f64::NAN),
            x.tpot_s.unwrap_or(f64::NAN),
            if x.meets_slo {
                "meets".to_string()
            } else {
                x.misses.join("; ")
            }
        );
    }
    println!("{}", res.explanation);
    assert_eq!(res.rows[0].kind, "disaggregated", "{}", res.explanation);
}
