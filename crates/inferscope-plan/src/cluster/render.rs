//! Text rendering of [`super::find::ClusterFindResult`] (`plan --find --nodes`), to any writer.
//! Kept beside the result so the binary stays a thin shell (it only parses flags and picks this
//! or JSON).

use super::find;
use std::io::Write;

/// The ranked table, the winner's explanation, notes and assumptions, as `plan --find --nodes`
/// prints them.
pub fn write_table(res: &find::ClusterFindResult, out: &mut dyn Write) -> std::io::Result<()> {
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
