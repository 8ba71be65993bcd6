//! Tests of the whole search ([`super::find`]): aggregated against P/D on real catalog entries.
#![cfg(test)]

use super::aggregated::agg_point;
use super::disaggregated::decode_point;
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
