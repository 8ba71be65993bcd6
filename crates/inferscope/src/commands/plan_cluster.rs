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
        write(&res, out)?;
    }
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write(res: &find::ClusterFindResult, out: &mut dyn Write) -> std::io::Result<()> {
    let w = &res.workload;
    let target = |t: Option<f64>| t.map_or("none".to_string(), find::secs);
    writeln!(
        out,
        "Model {} on {} ({} per node, {} between nodes, {} speed)",
        res.model, res.gpu, res.gpus_per_node, res.network, res.engine
    )?;
    let load = match (w.rate, w.concurrency) {
        (Some(x), _) => format!(", {x} requests/s"),
        (None, Some(c)) => format!(", {c} in flight"),
        _ => String::new(),
    };
    writeln!(
        out,
        "Workload {} input + {} output tokens{load}; SLO TTFT ≤ {}, TPOT ≤ {}\n",
        w.input_len,
        w.output_len,
        target(w.slo.ttft_s),
        target(w.slo.tpot_s)
    )?;
    let lw = res
        .rows
        .iter()
        .map(|x| x.label.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        out,
        "{:>3} {:>5} {:>4} {:<5} {:<lw$} {:>5} {:>13} {:>9} {:>9} {:>8}  SLO",
        "#", "nodes", "GPUs", "kind", "layout", "batch", "GiB/GPU", "tok/s/GPU", "TTFT", "TPOT"
    )?;
    for (i, x) in res.rows.iter().enumerate() {
        let kind = if x.kind == "aggregated" { "agg" } else { "P/D" };
        let opt = |v: Option<f64>| v.map_or("-".to_string(), find::secs);
        writeln!(
            out,
            "{:>3} {:>5} {:>4} {:<5} {:<lw$} {:>5} {:>13} {:>9.0} {:>9} {:>8}  {}",
            i + 1,
            x.nodes,
            x.gpus,
            kind,
            x.label,
            x.batch_per_replica,
            format!("{:.1}/{:.1}", x.memory_gib_per_gpu, x.budget_gib_per_gpu),
            x.output_tokens_per_s_per_gpu,
            opt(x.ttft_s),
            opt(x.tpot_s),
            if x.meets_slo {
                "meets".to_string()
            } else {
                format!("misses: {}", x.misses.join("; "))
            }
        )?;
    }
    writeln!(out, "\nWinner: {}", res.explanation)?;
    for n in &res.notes {
        writeln!(out, "Note: {n}")?;
    }
    writeln!(out, "\nAssumptions:")?;
    for a in &res.assumptions {
        writeln!(out, "  - {a}")?;
    }
    Ok(())
}
