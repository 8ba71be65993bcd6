//! `plan --find --nodes 1,2,4 --slo …`: aggregated and disaggregated layouts over several nodes,
//! ranked by the pure `inferscope_plan::cluster::find` (docs/planner.md, "Several nodes and
//! disaggregated prefill/decode"). Capture and render only.

use super::plan::PlanArgs;
use anyhow::bail;
use inferscope_plan::arch::Dtype;
use inferscope_plan::cluster::Network;
use inferscope_plan::cluster::find::{self, ClusterFindRequest, ClusterWorkload, SloTargets};
use inferscope_plan::{ModelArch, gpus};
use std::io::Write;
use std::process::ExitCode;

/// Runs the multi-node search; exit 1 when no row meets the SLO.
pub fn run(
    args: &PlanArgs,
    arch: &ModelArch,
    model_spec: &str,
    engine: inferscope_plan::speed::engines::Engine,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let c = &args.cluster;
    let (Some(input_len), Some(output_len)) = (args.input_len, args.output_len) else {
        bail!("--find --nodes needs --input-len and --output-len");
    };
    let Some(name) = &args.gpu else {
        bail!("--find --nodes needs --gpu NAME (one GPU type)");
    };
    let gpu = gpus::lookup(name).map_err(anyhow::Error::msg)?;
    let gpn = c.gpus_per_node.unwrap_or(8);
    if gpn == 0 || c.nodes.contains(&0) {
        bail!("--nodes and --gpus-per-node must be at least 1");
    }
    if c.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        bail!("--rate must be a positive number of requests per second");
    }
    let kv = match args.flags.kv_cache_dtype.as_deref() {
        None | Some("auto") => arch.dtype,
        Some(s) if s.starts_with("fp8") => Dtype::Fp8,
        Some(s) => bail!("--kv-cache-dtype {s}: expected auto or fp8"),
    };
    let slo = c.slo.unwrap_or_default();
    let workload = ClusterWorkload {
        input_len,
        output_len,
        rate: c.rate,
        concurrency: args.concurrency.map(u64::from),
        slo: SloTargets {
            ttft_s: slo.ttft.map(|d| d.as_secs_f64()),
            tpot_s: slo.tpot.map(|d| d.as_secs_f64()),
        },
    };
    let network = c.network.unwrap_or(Network::IbNdr);
    let r = ClusterFindRequest {
        model_id: model_spec.to_string(),
        arch,
        quant: arch.quantization.as_ref(),
        kv,
        gpu,
        nodes: c.nodes.clone(),
        gpus_per_node: gpn,
        network,
        engine,
        memory_utilization: args.flags.gpu_memory_utilization.unwrap_or(0.9),
        max_batch: (args.flags.max_num_seqs.map(u64::from))
            .unwrap_or_else(|| find::default_max_num_seqs(gpu)),
        workload,
    };
    let mut res = find::find(&r);
    let met = res.rows.first().is_some_and(|x| x.meets_slo);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&res))?;
        writeln!(out)?;
    } else {
        res.rows.truncate(args.top.unwrap_or(25));
        inferscope_plan::cluster::render::write_table(&res, out)?;
    }
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
