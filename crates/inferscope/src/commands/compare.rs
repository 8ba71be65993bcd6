//! `inferscope compare BASE.json CAND.json`: a table of every metric, a significance test from
//! repeated runs or per-request traces, and a verdict. Exit 0 = keep, trade-off (both runs carry
//! the same SLO, attainment held, better on some metrics and worse on others) or inconclusive,
//! 1 = roll back (regression or invalid candidate; also inconclusive with
//! `--fail-on-inconclusive`), 2 = usage or input error.

use anyhow::Context;
use inferscope_bench::compare::{self, Samples, Verdict};
use inferscope_bench::result::BenchResult;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `inferscope compare` flags.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Baseline result (from `inferscope bench --out`).
    pub base: PathBuf,
    /// Candidate result.
    pub cand: PathBuf,
    /// Allowed worsening per metric, e.g. ttft_p99=+5%,tpot_p50=+3%,throughput=-2%,e2e_p99=+20
    /// (bare numbers are absolute: ms for latencies). Default: see docs/bench.md.
    #[arg(long, value_name = "LIST")]
    pub threshold: Option<String>,
    /// Baseline trace (default: the `trace` path recorded in BASE, if it exists).
    #[arg(long, value_name = "FILE")]
    pub base_trace: Option<PathBuf>,
    /// Candidate trace (default: the `trace` path recorded in CAND, if it exists).
    #[arg(long, value_name = "FILE")]
    pub cand_trace: Option<PathBuf>,
    /// Write comparison SVGs (CDFs of both runs; sweep curves) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when the verdict is inconclusive (strict CI); by default inconclusive exits 0.
    #[arg(long)]
    pub fail_on_inconclusive: bool,
    /// After the table, say per threshold how many requests per run (or repeats) would detect a
    /// worsening of its size with 80 % power, from the observed variance.
    #[arg(long)]
    pub explain: bool,
}

fn read_result(path: &Path) -> anyhow::Result<BenchResult> {
    let text = crate::input::read_text(path, "bench result")?;
    inferscope_bench::result::from_json(&text)
        .with_context(|| format!("{}: not an inferscope bench result", path.display()))
}

/// The trace to use: the flag, else the result's recorded path (absolute, or relative to the
/// result file's folder, or to the current folder) when that file exists.
fn trace_path(flag: Option<&Path>, result_path: &Path, r: &BenchResult) -> Option<PathBuf> {
    if let Some(f) = flag {
        return Some(f.to_path_buf());
    }
    let rec = PathBuf::from(r.trace.as_ref()?);
    if rec.is_absolute() || rec.exists() {
        return rec.exists().then_some(rec);
    }
    let beside = result_path.parent()?.join(rec.file_name()?);
    beside.exists().then_some(beside)
}

fn read_samples(path: &Path) -> anyhow::Result<Samples> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let records = inferscope_bench::record::read_trace(&mut std::io::BufReader::new(f))
        .with_context(|| format!("{}", path.display()))?;
    Ok(Samples::from_records(&records))
}

/// Compare two results.
pub fn run(a: CompareArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let given = a
        .threshold
        .as_deref()
        .map(compare::parse_thresholds)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--threshold: {e}"))?;
    let base = read_result(&a.base)?;
    let cand = read_result(&a.cand)?;
    // Without --threshold an SLO both runs carry replaces the defaults of what it bounds.
    let thresholds = given.unwrap_or_else(|| compare::default_thresholds(&base, &cand));
    let bt = trace_path(a.base_trace.as_deref(), &a.base, &base);
    let ct = trace_path(a.cand_trace.as_deref(), &a.cand, &cand);
    let samples = match (bt, ct) {
        (Some(b), Some(c)) => Some((read_samples(&b)?, read_samples(&c)?)),
        _ => None,
    };
    let cmp = compare::compare(
        &base,
        &cand,
        samples.as_ref().map(|(b, c)| (b, c)),
        &thresholds,
    );
    if let Some(dir) = &a.plot {
        super::bench::write_plots(
            dir,
            &[
                ("base".to_string(), &base),
                ("candidate".to_string(), &cand),
            ],
        )?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&cmp))?;
        writeln!(out)?;
    } else {
        compare::write_text(&cmp, out)?;
        if a.explain {
            compare::write_explain(&cmp, out)?;
        }
    }
    Ok(match cmp.verdict {
        Verdict::Keep | Verdict::TradeOff => ExitCode::SUCCESS,
        Verdict::Inconclusive if !a.fail_on_inconclusive => ExitCode::SUCCESS,
        Verdict::Inconclusive | Verdict::RollBack => ExitCode::from(1),
    })
}
