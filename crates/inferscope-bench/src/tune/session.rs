//! One `inferscope tune` session (I/O): what it is asked ([`Config`]), what it needs from the
//! binary ([`Host`]: the planner, NVML, `run --emit`, the bounded reader), the candidates, and
//! [`run`], which plans, measures round by round, journals, and assembles the [`Report`].
//!
//! The decisions stay pure: grid, halving and journal lines in [`super`], ranking in
//! [`super::ranking`], the verdict in [`super::verdict`], report entries in [`super::report`].

use super::ranking;
use super::report::{self as report, Report, Winner};
use super::secrets::{self, Secrets};
use super::{SetSpec, Settings, State, Template};
use crate::capacity::{Capacity, SearchSettings};
use crate::client::Api;
use crate::dataset::DatasetSpec;
use crate::record::RequestRecord;
use crate::result::BenchResult;
use crate::stats::Slo;
use anyhow::{Context, bail};
use inferscope_launch::emit::{shell_command_line, shell_quote};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to maximise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Requests per second meeting every SLO, at the given load.
    Goodput,
    /// Output tokens per second at the given load.
    Throughput,
    /// Highest Poisson rate whose SLO attainment stays ≥ the attainment target.
    Capacity,
}

impl Objective {
    /// Its name in reports and `compare`'s rows.
    pub fn metric(self) -> &'static str {
        match self {
            Objective::Goodput => "goodput",
            Objective::Throughput => "throughput",
            Objective::Capacity => "capacity",
        }
    }
    /// Its unit.
    pub fn unit(self) -> &'static str {
        match self {
            Objective::Goodput => "good requests/s",
            Objective::Throughput => "output tokens/s",
            Objective::Capacity => "requests/s",
        }
    }
    /// A run's value on this objective.
    pub fn of(self, r: &BenchResult, cap: Option<&Capacity>) -> Option<f64> {
        match self {
            Objective::Throughput => crate::metric::Metric::Throughput.of(&r.stats),
            Objective::Goodput => crate::metric::Metric::Goodput.of(&r.stats),
            Objective::Capacity => cap.and_then(|c| c.requests_per_s),
        }
    }
}

/// A tuning run's settings: `tune`'s flags (docs/tune.md), parsed.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server command template.
    pub server: String,
    /// The `--set` placeholders.
    pub sets: Vec<SetSpec>,
    /// The configuration to beat.
    pub baseline: Option<String>,
    /// Prompts.
    pub workload: DatasetSpec,
    /// Service-level objectives.
    pub slo: Option<Slo>,
    /// What to maximise (default: goodput with an SLO, else throughput).
    pub objective: Option<Objective>,
    /// Closed-loop requests in flight.
    pub concurrency: u32,
    /// Open-loop Poisson rate instead.
    pub rate: Option<f64>,
    /// Measured time of each run.
    pub duration: Duration,
    /// Warm-up: a duration or a number of requests, as written.
    pub warmup: String,
    /// Runs the leader and the baseline get.
    pub repeat: u32,
    /// Wall-time budget.
    pub budget: Option<Duration>,
    /// Journal path (default: `out/journal.jsonl`).
    pub journal: Option<PathBuf>,
    /// Report folder.
    pub out: PathBuf,
    /// Longest wait for readiness.
    pub startup_timeout: Duration,
    /// Wait after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// `inferscope run --gpus` binding (fills `{gpus}`).
    pub gpus: Option<String>,
    /// `inferscope run --numa-node` binding.
    pub numa_node: Option<String>,
    /// Catalog GPU to plan for.
    pub plan_gpu: Option<String>,
    /// GPU memory to plan for.
    pub plan_gpu_memory_gib: Option<f64>,
    /// Capacity's attainment target.
    pub attainment: f64,
    /// Capacity's most probes.
    pub max_probes: u32,
    /// `{port}` of the winning command printed.
    pub serve_port: u16,
    /// OpenAI endpoint.
    pub api: Api,
    /// Model to request.
    pub model: Option<String>,
    /// Default max_tokens.
    pub max_tokens: u32,
    /// Per-request time limit.
    pub timeout: Duration,
    /// Longest silence within a response.
    pub idle_timeout: Duration,
    /// Seed for prompts and arrivals.
    pub seed: u64,
    /// No progress lines.
    pub quiet: bool,
    /// Start time (RFC 3339) written into each result.
    pub started_at: String,
    /// `inferscope <version>`, written into each result.
    pub tool: String,
}

impl Config {
    /// The objective asked, or the default.
    pub fn objective(&self) -> Objective {
        self.objective.unwrap_or(if self.slo.is_some() {
            Objective::Goodput
        } else {
            Objective::Throughput
        })
    }
    /// Runs per candidate: one for capacity (its search already probes many rates), else
    /// `repeat`.
    pub fn repeats(&self) -> u32 {
        if self.objective() == Objective::Capacity {
            1
        } else {
            self.repeat
        }
    }
    /// The capacity search's settings (bracket resolution: the search's default).
    pub fn search_settings(&self) -> SearchSettings {
        SearchSettings {
            target: self.attainment,
            max_probes: self.max_probes,
            ..SearchSettings::default()
        }
    }
    /// The journal's path.
    pub fn journal_path(&self) -> PathBuf {
        self.journal
            .clone()
            .unwrap_or_else(|| self.out.join("journal.jsonl"))
    }
}

/// What a session needs from the binary: the library must not depend on it.
pub trait Host {
    /// Plan a candidate's filled command: the planner's JSON (or `{"not_planned": why}`), and
    /// why it does not fit when the planner says so. Unknown is never "fits".
    fn plan(&self, words: &[String]) -> (Option<serde_json::Value>, Option<String>);
    /// GPU memory in use per GPU, in MiB.
    fn gpu_used_mib(&self) -> super::server::GpuUsed;
    /// The winner as `inferscope run --emit numactl` prints it, bound as `flag value`.
    fn run_emit(&self, flag: &str, value: &str, words: &[String]) -> String;
    /// Read a file a user handed in whole, bounded (the tool's one bounded reader).
    fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>>;
}

/// One candidate.
#[derive(Debug, Clone)]
pub struct Cand {
    /// Its `--set` values, as run.
    pub settings: Settings,
    /// `settings` as written to reports and the journal (secrets redacted; the journal's key).
    pub shown: Settings,
    /// Its name in tables.
    pub label: String,
    /// Its command template.
    pub template: Template,
    /// Where it is in the rounds.
    pub state: State,
    /// Why it failed, was skipped or not tried.
    pub reason: Option<String>,
    /// The planner's answer.
    pub plan: Option<serde_json::Value>,
    /// Runs: result, records, capacity.
    pub runs: Vec<Run>,
    /// The command last run (or planned).
    pub command: Vec<String>,
    /// The server log's last lines, after a failure.
    pub log_tail: Option<String>,
    /// Keeper pids of its servers.
    pub pids: Vec<u32>,
    /// GPU memory after each stop.
    pub gpu_memory: Vec<String>,
    /// Its folder.
    pub dir: PathBuf,
}

/// One measured run: its result, its request records and (capacity) the search's answer.
pub type Run = (BenchResult, Vec<RequestRecord>, Option<Capacity>);

impl Cand {
    /// A pending candidate; `dir` is its folder.
    pub fn new(settings: Settings, label: String, template: Template, dir: PathBuf) -> Cand {
        Cand {
            shown: secrets::shown_settings(&settings),
            settings,
            label,
            template,
            state: State::Pending,
            reason: None,
            plan: None,
            runs: Vec::new(),
            command: Vec::new(),
            log_tail: None,
            pids: Vec::new(),
            gpu_memory: Vec::new(),
            dir,
        }
    }
    /// Add a measured run with its objective value.
    pub fn push_run(&mut self, run: Run, value: Option<f64>) {
        match &mut self.state {
            State::Measured(r) => r.push(value),
            s => *s = State::Measured(vec![value]),
        }
        self.runs.push(run);
    }
    /// The capacity of its latest run that has one.
    pub fn capacity(&self) -> Option<Capacity> {
        self.runs.iter().rev().find_map(|r| r.2.clone())
    }
}

/// The run's secrets, learnt before anything is printed or written (see [`secrets`]).
static SECRETS: std::sync::OnceLock<Secrets> = std::sync::OnceLock::new();

/// `text` with the run's secrets replaced.
pub fn hide(text: &str) -> String {
    SECRETS
        .get()
        .map_or_else(|| text.to_string(), |s| s.hide(text))
}

/// A JSON value with the run's secrets replaced in every string.
pub fn hide_json(v: serde_json::Value) -> serde_json::Value {
    match SECRETS.get() {
        Some(s) => s.hide_json(v),
        None => v,
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    if sig == libc::SIGHUP || sig == libc::SIGQUIT {
        // A running measurement listens for SIGINT/SIGTERM: make a dropped ssh session (SIGHUP)
        // or SIGQUIT stop it the same way. kill(2) is async-signal-safe.
        // SAFETY: signalling ourselves.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    }
}

/// Catch Ctrl-C, SIGTERM, SIGHUP and SIGQUIT from here on: the server must be stopped and the
/// report written. (bench's runtime registers its own Ctrl-C handler later; signal-hook chains
/// to this one.)
fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(s, handler);
        }
    }
}

/// Whether a stop signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A progress line on stderr (redacted), unless quiet.
pub fn say(quiet: bool, msg: &str) {
    if !quiet {
        // A closed stderr must not stop a tuning run (eprintln! would panic).
        let _ = writeln!(std::io::stderr(), "inferscope tune: {}", hide(msg));
    }
}

/// Run a tuning session. Secrets of the command lines are learnt first, so that no message,
/// error included, shows them.
pub fn run(cfg: &Config, host: &dyn Host) -> anyhow::Result<Report> {
    let mut s = Secrets::default();
    s.learn_tune(
        &cfg.server,
        cfg.baseline.as_deref(),
        &cfg.sets,
        cfg.serve_port,
        cfg.gpus.as_deref(),
    );
    let _ = SECRETS.set(s);
    session(cfg, host).map_err(|e| {
        let full = format!("{e:#}");
        let shown = hide(&full);
        if shown == full {
            e
        } else {
            anyhow::anyhow!(shown)
        }
    })
}

fn session(cfg: &Config, host: &dyn Host) -> anyhow::Result<Report> {
    let started = Instant::now();
    let (template, grid, bench) = check(cfg)?;
    std::fs::create_dir_all(&cfg.out)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", cfg.out.display()))?;
    let journal = cfg.journal_path();
    let fp = super::journal::fingerprint(cfg);
    let mut cands = candidates(cfg, &template, grid)?;
    // The baseline is candidate 0: the --baseline one when given, else the first of the grid.
    let baseline = 0usize;
    super::journal::resume(cfg, host, &journal, &fp, &mut cands)?;
    super::rounds::plan_all(cfg, host, &journal, &mut cands)?;
    catch_signals();
    let warnings: Vec<String> =
        super::rounds::budget_warning(cfg, &bench, &cands, baseline, started)
            .into_iter()
            .collect();
    for w in &warnings {
        // Said even with --quiet: it changes what the report can conclude.
        let _ = writeln!(std::io::stderr(), "inferscope tune: {w}");
    }
    let out_of_budget =
        super::rounds::run_rounds(cfg, host, &bench, &journal, &mut cands, baseline, started)?;
    let not_tried = super::rounds::left_out(&mut cands, out_of_budget, cfg.repeats(), baseline);
    build_report(cfg, host, &cands, baseline, not_tried, warnings, started)
}

/// Check the settings and the server template; the template, grid and bench plan.
fn check(cfg: &Config) -> anyhow::Result<(Template, Vec<Settings>, crate::run::BenchPlan)> {
    let objective = cfg.objective();
    if matches!(objective, Objective::Goodput | Objective::Capacity) && cfg.slo.is_none() {
        bail!(
            "--objective {} needs --slo (e.g. ttft=500ms,tpot=50ms)",
            objective.metric()
        );
    }
    if objective == Objective::Capacity && cfg.rate.is_some() {
        bail!("--objective capacity searches the rate itself; drop --rate");
    }
    if cfg.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    cfg.search_settings()
        .validate()
        .map_err(anyhow::Error::msg)?;
    let template = Template::parse(&cfg.server).map_err(|e| anyhow::anyhow!("--server: {e}"))?;
    let names: Vec<String> = cfg.sets.iter().map(|s| s.name.clone()).collect();
    template
        .check("--server", &names, cfg.gpus.is_some())
        .map_err(anyhow::Error::msg)?;
    let grid = super::grid(&cfg.sets).map_err(anyhow::Error::msg)?;
    let bench = super::rounds::bench_plan(cfg)?;
    Ok((template, grid, bench))
}

/// The candidates: the --baseline one first when given, then the grid in order. Candidate
/// `index` (the same on every resume) has a folder starting with the index, because two labels
/// can slug alike.
fn candidates(cfg: &Config, template: &Template, grid: Vec<Settings>) -> anyhow::Result<Vec<Cand>> {
    let dir = |index: usize, label: &str| {
        cfg.out
            .join("candidates")
            .join(format!("{index:02}-{}", super::server::slug(label)))
    };
    let mut cands: Vec<Cand> = Vec::new();
    if let Some(b) = &cfg.baseline {
        let bt = Template::parse(b).map_err(|e| anyhow::anyhow!("--baseline: {e}"))?;
        bt.check("--baseline", &[], cfg.gpus.is_some())
            .map_err(anyhow::Error::msg)?;
        // `@` cannot start a --set name, so the baseline's journal key never collides with a
        // grid candidate's (not even the single empty one of a run without --set).
        let key: Settings = [("@baseline".to_string(), b.clone())].into();
        cands.push(Cand::new(key, "baseline".into(), bt, dir(0, "baseline")));
    }
    for s in grid {
        // The label names folders and fills every table: built from the redacted settings.
        let label = hide(&super::label(&secrets::shown_settings(&s), &cfg.sets));
        let d = dir(cands.len(), &label);
        cands.push(Cand::new(s, label, template.clone(), d));
    }
    Ok(cands)
}

/// Rank the candidates, judge them, write the Pareto SVGs and winner.sh, and assemble the
/// report.
fn build_report(
    cfg: &Config,
    host: &dyn Host,
    cands: &[Cand],
    baseline: usize,
    not_tried: Vec<String>,
    warnings: Vec<String>,
    started: Instant,
) -> anyhow::Result<Report> {
    let slo = cfg.slo.unwrap_or_default();
    let objective = cfg.objective();
    let r = ranking::rank(cands, baseline, cfg.repeats(), &slo);
    let v = super::verdict::judge(objective, cands, &slo, &r, baseline);
    let mut files = Vec::new();
    for (fam, front) in ranking::plotted(&r) {
        let name = fam.name().to_uppercase();
        let svg = crate::plot::pareto_svg(
            &format!("tune: throughput vs p90 {name}"),
            &format!("p90 {name} (ms)"),
            &ranking::pareto_points(cands, &r, fam, front),
        );
        let p = cfg.out.join(format!("pareto_{}.svg", fam.name()));
        std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
        files.push(p.display().to_string());
    }
    let winner = r
        .top
        .and_then(|i| cands.get(i))
        .map(|c| winner_of(cfg, host, c));
    if let Some(w) = &winner {
        let p = cfg.out.join("winner.sh");
        let body = report::winner_script(w, v.inconclusive);
        std::fs::write(&p, hide(&body)).with_context(|| format!("writing {}", p.display()))?;
        files.push(p.display().to_string());
    }
    files.push(cfg.out.join("report.json").display().to_string());
    files.push(cfg.out.join("report.txt").display().to_string());
    Ok(Report {
        winner,
        candidates: report::cand_reports(cands, &r),
        verdict: v.text,
        significant: v.significant,
        objective,
        unit: objective.unit(),
        baseline: cands
            .get(baseline)
            .map(|c| c.label.clone())
            .unwrap_or_default(),
        comparison: v.comparison,
        not_tried,
        warnings,
        inconclusive: v.inconclusive,
        interrupted: interrupted(),
        elapsed_s: started.elapsed().as_secs_f64(),
        files,
    })
}

/// The winner's command line, and (when binding was asked) its `inferscope run` forms.
fn winner_of(cfg: &Config, host: &dyn Host, c: &Cand) -> Winner {
    let words = c
        .template
        .fill(&c.settings, cfg.serve_port, cfg.gpus.as_deref())
        .unwrap_or_else(|_| c.command.clone());
    // What is printed and written is redacted; the user pastes their own secret back.
    let words = secrets::shown_words(&words);
    let line = shell_command_line(&words);
    let bind = match (&cfg.gpus, &cfg.numa_node) {
        (Some(g), _) => Some(("--gpus", g.clone())),
        (None, Some(n)) => Some(("--numa-node", n.clone())),
        _ => None,
    };
    Winner {
        settings: c.shown.clone(),
        command: line.clone(),
        label: c.label.clone(),
        run_command: bind
            .as_ref()
            .map(|(f, v)| format!("inferscope run {f} {} -- {line}", shell_quote(v))),
        run_emit: bind.map(|(f, v)| host.run_emit(f, &v, &words)),
    }
}
