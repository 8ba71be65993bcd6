//! `plan --find --nodes 1,2,4 --slo …`: aggregated and disaggregated layouts over several nodes,
//! ranked by the pure `inferscope_plan::cluster::find` (docs/planner.md, "Several nodes and
//! disaggregated prefill/decode"). Capture and render only.

use super::plan::PlanArgs;
use anyhow::bail;
use inferscope_plan::arch::Dtype;
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
    let (Some(input_len), Some(output_len), Some(name)) =
        (args.input_len, args.output_len, &args.gpu)
    else {
        bail!("--find --nodes needs --input-len and --output-len (and --gpu)");
    };
    let gpu = gpus::lookup(name).map_err(anyhow::Error::msg)?;
    if c.gpus_per_node == Some(0)
        || c.nodes.contains(&0)
        || c.rate.is_some_and(|r| r.is_nan() || r <= 0.0)
    {
        bail!("--nodes and --gpus-per-node must be at least 1, --rate above 0");
    }
    let slo = c.slo.unwrap_or_default();
    if slo.e2e.is_some() {
        bail!("--slo e2e=…: --find --nodes judges ttft and tpot only");
    }
    let secs = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64());
    let slo = SloTargets {
        ttft_s: secs(slo.ttft),
        tpot_s: secs(slo.tpot),
    };
    let conc = args.concurrency.map(u64::from);
    let w = ClusterWorkload {
        input_len,
        output_len,
        rate: c.rate,
        concurrency: conc,
        slo,
    };
    let mut r = ClusterFindRequest::new(model_spec, arch, gpu, c.nodes.clone(), engine, w);
    r.kv = match args.flags.kv_cache_dtype.as_deref() {
        None | Some("auto") => arch.dtype,
        Some(s) if s.starts_with("fp8") => Dtype::Fp8,
        Some(s) => bail!("--kv-cache-dtype {s}: expected auto or fp8"),
    };
    r.gpus_per_node = c.gpus_per_node.unwrap_or(8);
    r.network = c.network.unwrap_or(r.network);
    r.memory_utilization = args.flags.gpu_memory_utilization.unwrap_or(0.9);
    r.max_batch = args.flags.max_num_seqs.map_or(r.max_batch, u64::from);
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
