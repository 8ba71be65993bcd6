//! `inferscope tune`: start each candidate server configuration in turn, measure it with
//! `bench`, and say which is best and whether that is significant (docs/tune.md).
//!
//! This module parses the flags and renders; the session (servers, rounds, journal, ranking,
//! verdict, report) is [`inferscope_bench::tune::session`], which reaches the planner, NVML and
//! `run --emit` through [`host::BinaryHost`].
//!
//! Exit codes: 0 = at least one candidate measured and the report written; 1 = none could be
//! measured; 2 = usage or input error; 130 = interrupted (the report of what finished is written).

use anyhow::Context;
use inferscope_bench::tune::SetSpec;
use inferscope_bench::tune::report::Report;
use inferscope_bench::tune::session::{self, Config, Objective, hide, hide_json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::bench::{CapacityFlags, LoadFlags};
use super::duration_arg;

mod host;
/// The keeper each server runs under (its hidden entry point is wired in `main`).
pub use inferscope_bench::tune::keeper;

/// What to maximise (the flag's values; [`Objective`] in the library).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ObjectiveArg {
    /// Requests per second meeting every SLO, at the given load.
    Goodput,
    /// Output tokens per second at the given load.
    Throughput,
    /// Highest Poisson rate whose SLO attainment stays ≥ --attainment.
    Capacity,
}

impl From<ObjectiveArg> for Objective {
    fn from(o: ObjectiveArg) -> Objective {
        match o {
            ObjectiveArg::Goodput => Objective::Goodput,
            ObjectiveArg::Throughput => Objective::Throughput,
            ObjectiveArg::Capacity => Objective::Capacity,
        }
    }
}

/// `inferscope tune` flags.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// The server command with placeholders: {NAME} for each --set, {port} (required: a free
    /// port per candidate), {gpus} (--gpus). Split like a shell; quote it as one argument.
    #[arg(long, value_name = "CMD")]
    pub server: String,
    /// A placeholder's values: NAME=v1,v2,... (repeatable; the candidates are every combination,
    /// the first --set varying slowest).
    #[arg(long = "set", value_name = "NAME=V1,V2")]
    pub sets: Vec<SetSpec>,
    /// The configuration to beat (default: the first candidate). Same placeholders as --server
    /// except --set ones.
    #[arg(long, value_name = "CMD")]
    pub baseline: Option<String>,
    /// Prompts, requests, open-loop rate, SLOs and seed (shared with bench).
    #[command(flatten)]
    pub load: LoadFlags,
    /// What to maximise [default: goodput with --slo, else throughput].
    #[arg(long, value_enum, value_name = "WHAT")]
    pub objective: Option<ObjectiveArg>,
    /// Closed-loop load: keep N requests in flight (goodput, throughput; and capacity's
    /// saturation run).
    #[arg(long, value_name = "N", default_value_t = 8, conflicts_with = "rate")]
    pub concurrency: u32,
    /// Measured time of each run (each capacity probe).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = duration_arg)]
    pub duration: Duration,
    /// Warm-up before each run: a duration (5s) or a number of requests (20).
    #[arg(long, value_name = "D|N", default_value = "5s")]
    pub warmup: String,
    /// Runs the leader and the baseline get (the verdict needs ≥ 2 for between-run statistics).
    #[arg(long, value_name = "K", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Wall-time budget for the whole tuning run (e.g. 30m); candidates and repeats that do not
    /// fit are listed as not tried.
    #[arg(long, value_name = "D", value_parser = duration_arg)]
    pub budget: Option<Duration>,
    /// Journal (JSON lines): resumes an interrupted run without re-running what finished
    /// [default: OUT/journal.jsonl].
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Report folder: report.json, report.txt, Pareto SVGs, each candidate's plan, results,
    /// traces and server logs.
    #[arg(long, value_name = "DIR", default_value = "inferscope-tune")]
    pub out: PathBuf,
    /// Longest wait for a server to answer /health or /v1/models.
    #[arg(long, value_name = "D", default_value = "10m", value_parser = duration_arg)]
    pub startup_timeout: Duration,
    /// Wait after SIGTERM before SIGKILL when stopping a server.
    #[arg(long, value_name = "D", default_value = "30s", value_parser = duration_arg)]
    pub grace: Duration,
    /// Bind each server to these GPUs with `inferscope run --gpus` (fills {gpus}).
    #[arg(long, value_name = "LIST", conflicts_with = "numa_node")]
    pub gpus: Option<String>,
    /// Bind each server to these NUMA nodes with `inferscope run --numa-node`.
    #[arg(long, value_name = "NODES")]
    pub numa_node: Option<String>,
    /// Plan candidates for this catalog GPU instead of the machine's (e.g. h100-sxm).
    #[arg(long, value_name = "NAME", conflicts_with = "plan_gpu_memory_gib")]
    pub plan_gpu: Option<String>,
    /// Plan candidates for a GPU of this much memory instead of the machine's.
    #[arg(long, value_name = "GIB")]
    pub plan_gpu_memory_gib: Option<f64>,
    /// Capacity: its target (shared with bench --find-capacity).
    #[command(flatten)]
    pub capacity: CapacityFlags,
    /// Port {port} gets in the winning command printed for pasting.
    #[arg(long, value_name = "PORT", default_value_t = 8000)]
    pub serve_port: u16,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl TuneArgs {
    /// The session's settings.
    fn config(self) -> Config {
        Config {
            server: self.server,
            sets: self.sets,
            baseline: self.baseline,
            workload: self.load.dataset,
            slo: self.load.slo,
            objective: self.objective.map(Objective::from),
            concurrency: self.concurrency,
            rate: self.load.rate,
            duration: self.duration,
            warmup: self.warmup,
            repeat: self.repeat,
            budget: self.budget,
            journal: self.journal,
            out: self.out,
            startup_timeout: self.startup_timeout,
            grace: self.grace,
            gpus: self.gpus,
            numa_node: self.numa_node,
            plan_gpu: self.plan_gpu,
            plan_gpu_memory_gib: self.plan_gpu_memory_gib,
            attainment: self.capacity.attainment,
            max_probes: self.capacity.max_probes,
            serve_port: self.serve_port,
            api: self.load.api,
            model: self.load.model,
            max_tokens: self.load.max_tokens,
            timeout: self.load.timeout,
            idle_timeout: self.load.idle_timeout,
            seed: self.load.seed,
            quiet: self.quiet,
            started_at: crate::clock::now_rfc3339(),
            tool: crate::tool_name(),
        }
    }
}

/// Run `inferscope tune`.
pub fn run(a: TuneArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let json = a.json;
    let cfg = a.config();
    let host = host::BinaryHost {
        plan_gpu: cfg.plan_gpu.clone(),
        plan_gpu_memory_gib: cfg.plan_gpu_memory_gib,
    };
    let report = session::run(&cfg, &host)?;
    write_report(&report, &cfg, json, out)
}

/// Write report.txt and report.json, print the text or JSON, and pick the exit code.
fn write_report(
    report: &Report,
    a: &Config,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let code = if report.interrupted {
        ExitCode::from(130)
    } else if report.winner.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let mut text = Vec::new();
    crate::render::tune::write_text(report, a, &mut text)?;
    let text = hide(&String::from_utf8_lossy(&text));
    let txt = a.out.join("report.txt");
    std::fs::write(&txt, text.as_bytes()).with_context(|| format!("writing {}", txt.display()))?;
    inferscope_bench::tune::journal::write_json_file(&a.out.join("report.json"), report)?;
    if json {
        let hidden = hide_json(serde_json::to_value(report)?);
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&hidden))?;
        writeln!(out)?;
    } else {
        out.write_all(text.as_bytes())?;
    }
    Ok(code)
}
