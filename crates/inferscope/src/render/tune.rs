//! `tune`'s text report (report.txt and stdout without `--json`).

use inferscope_bench::metric::Metric;
use inferscope_bench::tune::report::{CandReport, Report};
use inferscope_bench::tune::session::Config;
use std::io::Write;
use std::time::Duration;

/// Write the text report of a finished tuning run.
pub fn write_text(r: &Report, a: &Config, out: &mut dyn Write) -> std::io::Result<()> {
    let load = match a.rate {
        Some(x) => format!("Poisson {x} requests/s"),
        None => format!("concurrency {}", a.concurrency),
    };
    writeln!(
        out,
        "inferscope tune: objective {} ({}), {load}, workload {}, {} per run",
        r.objective.metric(),
        r.unit,
        a.workload,
        humantime(a.duration)
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<4} {:<28} {:<9} {:>4} {:>14} {:>12} {:>10} {:>10}  note",
        "rank",
        "candidate",
        "status",
        "runs",
        r.objective.metric(),
        "tok/s",
        "TTFT p90",
        "TPOT p90"
    )?;
    for c in &r.candidates {
        let s = c.result.as_ref().map(|x| &x.stats);
        let f = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
        let mut note = c.reason.clone().unwrap_or_default();
        if c.pareto_ttft || c.pareto_tpot {
            note = format!(
                "Pareto {}{}",
                if c.pareto_ttft { "T" } else { "" },
                if c.pareto_tpot { "P" } else { "" }
            ) + &note;
        }
        writeln!(
            out,
            "{:<4} {:<28} {:<9} {:>4} {:>14} {:>12} {:>10} {:>10}  {}",
            c.rank,
            c.label,
            c.status,
            // runs ranked on, and in brackets those of a cut round
            if c.objective_runs.len() > c.ranked_runs {
                format!(
                    "{}(+{})",
                    c.ranked_runs,
                    c.objective_runs.len() - c.ranked_runs
                )
            } else {
                c.ranked_runs.to_string()
            },
            f(c.objective),
            // uncounted tokens are "-", not 0
            f(s.and_then(|s| Metric::Throughput.of(s))),
            f(s.and_then(|s| s.ttft_ms.p90)),
            f(s.and_then(|s| s.tpot_ms.p90)),
            note
        )?;
    }
    writeln!(out)?;
    for w in &r.warnings {
        writeln!(out, "Note: {w}")?;
    }
    writeln!(out, "Verdict: {}", r.verdict)?;
    // What each engine said about itself, beside the verdict (issue 27).
    for c in &r.candidates {
        if let Some(m) = c.result.as_ref().and_then(|x| x.server_metrics.as_ref()) {
            let line = inferscope_bench::server_metrics::describe(m);
            writeln!(out, "  `{}`: {line}", c.label)?;
        }
    }
    if let Some(w) = &r.winner {
        writeln!(out)?;
        if r.inconclusive {
            writeln!(
                out,
                "Top-ranked `{}` (not a winner: the verdict is inconclusive):",
                w.label
            )?;
        } else {
            writeln!(out, "Winner `{}`, ready to paste:", w.label)?;
        }
        writeln!(out, "  {}", w.command)?;
        if let Some(rc) = &w.run_command {
            writeln!(out, "  {rc}")?;
        }
        if let Some(e) = &w.run_emit {
            writeln!(out, "As `inferscope run --emit numactl`:")?;
            for l in e.lines() {
                writeln!(out, "  {l}")?;
            }
        }
    }
    if !r.not_tried.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not tried:")?;
        for n in &r.not_tried {
            writeln!(out, "  - {n}")?;
        }
    }
    let failed: Vec<&CandReport> = r
        .candidates
        .iter()
        .filter(|c| c.log_tail.as_deref().is_some_and(|l| !l.is_empty()))
        .collect();
    if !failed.is_empty() {
        writeln!(out)?;
        writeln!(out, "Server logs of failed candidates (last lines):")?;
        for c in failed {
            writeln!(out, "  {} ({}):", c.label, c.command)?;
            for l in c.log_tail.as_deref().unwrap_or("").lines() {
                writeln!(out, "    | {l}")?;
            }
        }
    }
    writeln!(out)?;
    writeln!(out, "Files: {}", r.files.join(", "))?;
    if r.interrupted {
        writeln!(
            out,
            "Interrupted: the report covers what finished; rerun with the same --journal to continue."
        )?;
    }
    Ok(())
}

fn humantime(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}
