//! `inferscope tune`: start each candidate server configuration in turn, measure it with
//! `bench`, and say which is best and whether that is significant (docs/tune.md).
//!
//! The decisions (grid, halving, ranking, Pareto front, journal) are pure, in
//! [`inferscope_bench::tune`]; this module does the I/O: planning each candidate with `plan`,
//! starting servers in their own process group (through `inferscope run` when binding is asked),
//! waiting for readiness, measuring, stopping, confirming GPU memory is free, and writing the
//! journal and the report.
//!
//! Exit codes: 0 = at least one candidate measured and the report written; 1 = none could be
//! measured; 2 = usage or input error; 130 = interrupted (the report of what finished is written).

use anyhow::{Context, bail};
use inferscope_bench::capacity::{Capacity, SearchSettings};
use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::compare::{self, Samples, Status};
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::record::{self, RequestRecord};
use inferscope_bench::result::BenchResult;
use inferscope_bench::run::{Outcome, Plan, execute, merge_repeats};
use inferscope_bench::schedule::{Arrival, Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use inferscope_bench::tune::{self as t, JournalLine, SetSpec, Settings, State, Template};
use inferscope_launch::emit::{shell_command_line, shell_quote};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{duration_arg, positive_duration_arg};

pub mod keeper;
mod secrets;
use secrets::Secrets;

/// The run's secrets, learnt before anything is printed or written (see [`secrets`]).
static SECRETS: std::sync::OnceLock<Secrets> = std::sync::OnceLock::new();

/// `text` with the run's secrets replaced.
fn hide(text: &str) -> String {
    SECRETS
        .get()
        .map_or_else(|| text.to_string(), |s| s.hide(text))
}

/// A JSON value with the run's secrets replaced in every string.
fn hide_json(v: serde_json::Value) -> serde_json::Value {
    match SECRETS.get() {
        Some(s) => s.hide_json(v),
        None => v,
    }
}

/// What to maximise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Requests per second meeting every SLO, at the given load.
    Goodput,
    /// Output tokens per second at the given load.
    Throughput,
    /// Highest Poisson rate whose SLO attainment stays ≥ --attainment.
    Capacity,
}

impl Objective {
    fn metric(self) -> &'static str {
        match self {
            Objective::Goodput => "goodput",
            Objective::Throughput => "throughput",
            Objective::Capacity => "capacity",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Objective::Goodput => "good requests/s",
            Objective::Throughput => "output tokens/s",
            Objective::Capacity => "requests/s",
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
    /// Prompts, as bench's --dataset: random:in=512,out=128 | jsonl:FILE | sharegpt:FILE.
    #[arg(long, value_name = "SPEC", default_value = "random:in=512,out=128")]
    pub workload: DatasetSpec,
    /// Service-level objectives, e.g. ttft=500ms,tpot=50ms (needed for goodput and capacity).
    #[arg(long, value_name = "LIST")]
    pub slo: Option<Slo>,
    /// What to maximise [default: goodput with --slo, else throughput].
    #[arg(long, value_enum, value_name = "WHAT")]
    pub objective: Option<Objective>,
    /// Closed-loop load: keep N requests in flight (goodput, throughput; and capacity's
    /// saturation run).
    #[arg(long, value_name = "N", default_value_t = 8, conflicts_with = "rate")]
    pub concurrency: u32,
    /// Open-loop load for goodput/throughput: R Poisson requests per second instead.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
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
    /// Capacity: share of requests that must meet every SLO.
    #[arg(long, value_name = "F", default_value_t = 0.99)]
    pub attainment: f64,
    /// Capacity: most probe runs per candidate.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_probes: u32,
    /// Port {port} gets in the winning command printed for pasting.
    #[arg(long, value_name = "PORT", default_value_t = 8000)]
    pub serve_port: u16,
    /// OpenAI endpoint: completions or chat.
    #[arg(long, value_name = "API", default_value = "completions")]
    pub api: Api,
    /// Model name to request (default: the first the server lists).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// max_tokens for jsonl entries that do not say.
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_tokens: u32,
    /// Total time allowed per request.
    #[arg(long, value_name = "D", default_value = "60s", value_parser = positive_duration_arg)]
    pub timeout: Duration,
    /// Longest silence allowed between bytes of a response (as `bench --idle-timeout`).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = positive_duration_arg)]
    pub idle_timeout: Duration,
    /// Seed for prompts and arrivals (the same for every candidate).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The smallest run-to-run noise assumed (a fraction): `compare`'s default throughput threshold
/// (5 %), since one run each shows no spread.
const NOISE_FLOOR: f64 = 0.05;

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
/// report written.
/// (bench's runtime registers its own Ctrl-C handler later; signal-hook chains to this one.)
fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(s, handler);
        }
    }
}

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// One candidate.
struct Cand {
    settings: Settings,
    /// `settings` as written to reports and the journal (secrets redacted; the journal's key).
    shown: Settings,
    label: String,
    template: Template,
    state: State,
    reason: Option<String>,
    plan: Option<serde_json::Value>,
    /// Runs: result, records, command.
    runs: Vec<(BenchResult, Vec<RequestRecord>, Option<Capacity>)>,
    command: Vec<String>,
    log_tail: Option<String>,
    pids: Vec<u32>,
    gpu_memory: Vec<String>,
    dir: PathBuf,
}

/// A readiness probe: GET path, true on a 2xx answer.
fn http_ok(port: u16, path: &str) -> bool {
    let Ok(addr) = format!("127.0.0.1:{port}").parse() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut head = [0u8; 16];
    let mut n = 0;
    while n < head.len() {
        match s.read(head.get_mut(n..).unwrap_or_default()) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let text = String::from_utf8_lossy(head.get(..n).unwrap_or_default());
    text.starts_with("HTTP/1.") && text.get(9..10) == Some("2")
}

fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free local port")?;
    Ok(l.local_addr()?.port())
}

fn port_busy(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_err()
}

/// The last `n` lines of a file (bounded read of its end).
fn tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    use std::io::Seek;
    let _ = f.seek(std::io::SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.take(64 * 1024).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines
        .get(lines.len().saturating_sub(n)..)
        .unwrap_or_default()
        .join("\n")
}

/// A running server's keeper (keeper.rs), leader of its own process group with the server.
struct Server {
    child: Child,
    pgid: i32,
}

impl Server {
    /// SIGTERM to the group (the keeper then stops every descendant, `setsid` ones included),
    /// SIGKILL to the group if the keeper is not done after `grace` and 5 s more; reaps the
    /// keeper and waits until the group is empty (bounded).
    fn stop(mut self, grace: Duration) -> String {
        let mut how = match self.child.try_wait() {
            Ok(Some(st)) => format!("had exited ({st})"),
            _ => "stopped with SIGTERM".to_string(),
        };
        // SAFETY: plain killpg(2) on the group this process created (workers included).
        unsafe { libc::killpg(self.pgid, libc::SIGTERM) };
        let t = Instant::now();
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if t.elapsed() >= grace + Duration::from_secs(5) {
                // SAFETY: as above.
                unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
                let _ = self.child.wait();
                how = format!("killed with SIGKILL after {}s", grace.as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Workers left in the group after the leader exited.
        let t = Instant::now();
        // SAFETY: signal 0 only checks for existence.
        while unsafe { libc::killpg(self.pgid, 0) } == 0 {
            if t.elapsed() >= grace {
                // SAFETY: as above.
                unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
                how.push_str("; left-over group members killed");
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        how
    }
}

/// GPU memory in use per GPU (MiB; `None` where NVML gives no reading), in NVML order, or why
/// NVML cannot be asked at all.
fn gpu_used_mib() -> Result<Vec<Option<u64>>, String> {
    let cap = inferscope_probe::nvml::capture(None, 64);
    if let inferscope_host::Reading::Unknown(u) = &cap.info {
        return Err(u.detail.clone());
    }
    Ok(cap
        .gpus
        .iter()
        .map(|(_, d)| d.memory.known().map(|m| m.used_bytes >> 20))
        .collect())
}

/// After a stop: wait (bounded) until every GPU is back to its level before the start. A GPU
/// whose memory is not reported before or after makes the answer "unknown", never "free".
fn confirm_gpu_free(before: &Result<Vec<Option<u64>>, String>) -> String {
    let before = match before {
        Ok(b) => b,
        Err(e) => return format!("unknown ({e})"),
    };
    let t = Instant::now();
    loop {
        let now = match gpu_used_mib() {
            Err(e) => return format!("unknown ({e})"),
            Ok(now) if now.len() != before.len() => {
                return format!(
                    "unknown (NVML listed {} GPUs before the start, {} after)",
                    before.len(),
                    now.len()
                );
            }
            Ok(now) => now,
        };
        let (mut over, mut unread) = (Vec::new(), Vec::new());
        for (i, (n, b)) in now.iter().zip(before).enumerate() {
            match (n, b) {
                (Some(n), Some(b)) if *n > b + 256 => {
                    over.push(format!("GPU{i} {} MiB above", n - b))
                }
                (Some(_), Some(_)) => {}
                _ => unread.push(format!("GPU{i}")),
            }
        }
        if over.is_empty() {
            return if unread.is_empty() {
                "free".into()
            } else {
                format!(
                    "unknown (NVML gave no memory reading for {})",
                    unread.join(", ")
                )
            };
        }
        if t.elapsed() > Duration::from_secs(30) {
            return format!("not free after 30 s: {}", over.join(", "));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.chars().take(80).collect()
}

fn say(quiet: bool, msg: &str) {
    if !quiet {
        // A closed stderr must not stop a tuning run (eprintln! would panic).
        let _ = writeln!(std::io::stderr(), "inferscope tune: {}", hide(msg));
    }
}

/// The argv to spawn: the filled command, wrapped in `inferscope run` when binding.
fn spawn_argv(a: &TuneArgs, words: &[String]) -> anyhow::Result<Vec<String>> {
    let bind = match (&a.gpus, &a.numa_node) {
        (Some(g), _) => Some(("--gpus", g)),
        (None, Some(n)) => Some(("--numa-node", n)),
        _ => None,
    };
    Ok(match bind {
        None => words.to_vec(),
        Some((flag, v)) => {
            let exe = std::env::current_exe().context("finding the inferscope executable")?;
            let mut argv = vec![
                exe.display().to_string(),
                "run".into(),
                flag.into(),
                v.clone(),
                "--".into(),
            ];
            argv.extend(words.iter().cloned());
            argv
        }
    })
}

/// Plan a candidate where the engine is modelled: `Ok(Some(reason))` when it does not fit.
fn plan_candidate(a: &TuneArgs, words: &[String]) -> (Option<serde_json::Value>, Option<String>) {
    let args = super::plan::PlanArgs {
        gpu: a.plan_gpu.clone(),
        gpu_memory_gib: a.plan_gpu_memory_gib,
        json: true,
        command: words.to_vec(),
        ..Default::default()
    };
    let mut buf = Vec::new();
    match super::plan::run(&args, &mut buf) {
        Err(e) => (
            Some(serde_json::json!({ "not_planned": format!("{e:#}") })),
            None,
        ),
        Ok(_) => match plan_verdict(&buf) {
            Ok((v, verdict)) => {
                let why = (!verdict.fits).then(|| {
                    format!(
                        "the planner says it does not fit: {}",
                        verdict.problems.join("; ")
                    )
                });
                (Some(v), why)
            }
            // Unknown, never "fits": the candidate runs unplanned, and plan.json says why.
            Err(e) => (
                Some(
                    serde_json::json!({ "not_planned": format!("the planner's output could not be read: {e}") }),
                ),
                None,
            ),
        },
    }
}

/// The planner's verdict on a candidate, typed: what `tune` reads of `plan --json`.
#[derive(Debug, serde::Deserialize)]
struct PlanVerdict {
    /// The candidate fits.
    fits: bool,
    /// Why it does not.
    problems: Vec<String>,
}

/// Read the verdict from `plan --json` output; output without a readable `fits`/`problems` is
/// an error (issue 32: it used to count as "fits").
fn plan_verdict(buf: &[u8]) -> Result<(serde_json::Value, PlanVerdict), String> {
    let v: serde_json::Value = serde_json::from_slice(buf).map_err(|e| e.to_string())?;
    let verdict: PlanVerdict =
        serde::Deserialize::deserialize(&v).map_err(|e: serde_json::Error| e.to_string())?;
    Ok((v, verdict))
}

/// Outcome of one start-measure-stop.
enum RunEnd {
    Measured(Box<(BenchResult, Vec<RequestRecord>, Option<Capacity>)>),
    Failed(String),
    Interrupted,
}

/// Start the candidate, wait for it, measure once, stop it.
fn run_once(
    a: &TuneArgs,
    c: &mut Cand,
    bench: &Plan,
    objective: Objective,
    run_no: usize,
) -> anyhow::Result<RunEnd> {
    let port = free_port()?;
    let words = c
        .template
        .fill(&c.settings, port, a.gpus.as_deref())
        .map_err(anyhow::Error::msg)?;
    c.command = words.clone();
    let argv = spawn_argv(a, &words)?;
    std::fs::create_dir_all(&c.dir).with_context(|| format!("creating {}", c.dir.display()))?;
    let log = c.dir.join(format!("server-{run_no}.log"));
    if port_busy(port) {
        return Ok(RunEnd::Failed(format!("port {port} is busy")));
    }
    let logf =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    if argv.is_empty() {
        bail!("empty server command");
    }
    let gpu_before = gpu_used_mib();
    // Through the keeper, so nothing the server starts outlives tune (keeper.rs). Its stdin is
    // a pipe only tune holds: the keeper sees it close however tune ends.
    let exe = std::env::current_exe().context("finding the inferscope executable")?;
    let kargv = keeper::argv(&exe.display().to_string(), a.grace, &argv);
    let child = match Command::new(&exe)
        .args(kargv.get(1..).unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(logf.try_clone()?)
        .stderr(logf)
        .process_group(0)
        .spawn()
    {
        Ok(ch) => ch,
        Err(e) => {
            return Ok(RunEnd::Failed(format!(
                "cannot start the keeper `{}`: {e}",
                exe.display()
            )));
        }
    };
    let pid = child.id();
    c.pids.push(pid);
    let mut server = Server {
        child,
        pgid: pid as i32,
    };
    let t = Instant::now();
    let ready = loop {
        if interrupted() {
            break Err(None);
        }
        if let Ok(Some(st)) = server.child.try_wait() {
            break Err(Some(format!("the server exited at start-up ({st})")));
        }
        if http_ok(port, "/health") || http_ok(port, "/v1/models") {
            break Ok(t.elapsed());
        }
        if t.elapsed() > a.startup_timeout {
            break Err(Some(format!(
                "the server did not become ready (GET /health or /v1/models) within {}s",
                a.startup_timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let end = match ready {
        Err(None) => RunEnd::Interrupted,
        Err(Some(why)) => RunEnd::Failed(why),
        Ok(up) => {
            say(
                a.quiet,
                &format!(
                    "{} ready in {:.1}s on port {port}",
                    c.label,
                    up.as_secs_f64()
                ),
            );
            let mut p = bench.clone();
            p.url = format!("http://127.0.0.1:{port}");
            // Each candidate's result carries its engine metrics (issue 27): what tune's JSON
            // report shows beside the verdict.
            p.server_metrics = Some(inferscope_bench::run::MetricsScrape {
                url: format!("{}/metrics", p.url),
                interval: Duration::from_secs(1),
            });
            let measured = match objective {
                Objective::Capacity => super::capacity::find(&p, search_settings(a), None, None)
                    .map(|r| {
                        let best = r.best.and_then(|i| r.probes.get(i).cloned());
                        (
                            best.unwrap_or(r.saturation),
                            r.best_records,
                            Some(r.capacity),
                            r.interrupted,
                        )
                    }),
                _ => execute(&p, None, None).map(|o: Outcome| {
                    let int = o.result.stop == inferscope_bench::exec::StopReason::Interrupted;
                    (o.result, o.records, None, int)
                }),
            };
            let died = server.child.try_wait().ok().flatten();
            match (measured, died) {
                (_, Some(st)) => RunEnd::Failed(format!("the server died during the run ({st})")),
                (Err(e), None) => RunEnd::Failed(format!("measuring failed: {e}")),
                (Ok((_, _, _, true)), None) => RunEnd::Interrupted,
                (Ok((r, recs, cap, false)), None) => RunEnd::Measured(Box::new((r, recs, cap))),
            }
        }
    };
    let how = server.stop(a.grace);
    say(a.quiet, &format!("{}: server {how}", c.label));
    c.gpu_memory.push(confirm_gpu_free(&gpu_before));
    if let RunEnd::Failed(_) = &end {
        c.log_tail = Some(tail(&log, 20));
    }
    Ok(end)
}

fn objective_of(o: Objective, r: &BenchResult, cap: Option<&Capacity>) -> Option<f64> {
    match o {
        Objective::Throughput => compare::stats_value(&r.stats, "throughput"),
        Objective::Goodput => r.stats.goodput.map(|g| g.requests_per_s),
        Objective::Capacity => cap.and_then(|c| c.requests_per_s),
    }
}

fn fingerprint(a: &TuneArgs, objective: Objective) -> String {
    let sets: Vec<String> = a
        .sets
        .iter()
        .map(|s| {
            let v: Vec<String> = s
                .values
                .iter()
                .map(|v| secrets::shown_value(&s.name, v))
                .collect();
            format!("{}={}", s.name, v.join(","))
        })
        .collect();
    let load = match a.rate {
        Some(r) => format!("rate {r}"),
        None => format!("concurrency {}", a.concurrency),
    };
    // Everything a journaled run or skip depends on: the servers, the load and requests, the
    // objective (with capacity's target), and the planner's GPU. Not: the budget, repeats,
    // timeouts of starting and stopping, the output folder (a resume may change them).
    // Secrets redacted: the journal is written to disk (two runs differing only in a secret
    // measure the same thing).
    hide(&format!(
        "server `{}` baseline `{}` sets [{}] workload {} {load} duration {:?} warmup {} objective {} slo {} seed {} gpus {:?} numa {:?} api {:?} model {:?} max_tokens {} timeout {:?} idle_timeout {:?} attainment {} max_probes {} plan_gpu {:?} plan_gpu_memory_gib {:?}",
        secrets::shown_line(&a.server),
        secrets::shown_line(a.baseline.as_deref().unwrap_or("")),
        sets.join(" "),
        a.workload,
        a.duration,
        a.warmup,
        objective.metric(),
        serde_json::to_string(&a.slo).unwrap_or_default(),
        a.seed,
        a.gpus,
        a.numa_node,
        a.api,
        a.model,
        a.max_tokens,
        a.timeout,
        a.idle_timeout,
        a.attainment,
        a.max_probes,
        a.plan_gpu,
        a.plan_gpu_memory_gib
    ))
}

fn bench_plan(a: &TuneArgs) -> anyhow::Result<Plan> {
    let warmup = super::bench::parse_warmup(Some(&a.warmup))?;
    let schedule = match a.rate {
        Some(rate) => Schedule::Open {
            rate,
            arrival: Arrival::Poisson,
            seed: a.seed,
        },
        None => Schedule::Closed {
            concurrency: a.concurrency,
        },
    };
    schedule.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Plan {
        url: String::new(),
        request: RequestSettings {
            api: a.api,
            model: a.model.clone().unwrap_or_default(),
            stream: true,
            ignore_eos: true,
            temperature: 0.0,
            timeout: a.timeout,
            idle_timeout: a.idle_timeout,
        },
        schedule,
        sweep_steps: 0,
        limits: Limits {
            requests: None,
            duration: Some(a.duration),
        },
        warmup,
        max_duration: a.duration * 3 + Duration::from_secs(60),
        max_inflight: 1024,
        max_send_lag: Duration::from_secs(1),
        max_error_rate: 0.5,
        dataset: a.workload.clone(),
        default_max_tokens: a.max_tokens.max(1),
        seed: a.seed,
        slo: a.slo.unwrap_or_default(),
        min_requests: 1,
        started_at: crate::clock::now_rfc3339(),
        tool: crate::tool_name(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Default::default(),
    })
}

fn write_json_file(path: &Path, v: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(&hide_json(serde_json::to_value(v)?))?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

fn append_journal(path: &Path, line: &JournalLine) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut text = serde_json::to_string(&hide_json(serde_json::to_value(line)?))?;
    text.push('\n');
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_data())
        .with_context(|| format!("writing {}", path.display()))
}

/// The JSON report (contract: `winner`, `candidates[].settings/status/reason/result`, `verdict`).
#[derive(Serialize)]
struct Report {
    winner: Option<Winner>,
    candidates: Vec<CandReport>,
    verdict: String,
    significant: bool,
    objective: Objective,
    unit: &'static str,
    baseline: String,
    comparison: Option<compare::Comparison>,
    not_tried: Vec<String>,
    /// Said before starting (a --budget too small to run every candidate once).
    warnings: Vec<String>,
    /// Another measured candidate beats the top-ranked one by more than the noise: no winner.
    inconclusive: bool,
    interrupted: bool,
    elapsed_s: f64,
    files: Vec<String>,
}

#[derive(Serialize)]
struct Winner {
    settings: Settings,
    command: String,
    label: String,
    run_command: Option<String>,
    run_emit: Option<String>,
}

#[derive(Serialize)]
struct CandReport {
    rank: usize,
    label: String,
    settings: Settings,
    status: &'static str,
    reason: Option<String>,
    result: Option<BenchResult>,
    objective: Option<f64>,
    objective_runs: Vec<Option<f64>>,
    /// How many of `objective_runs` (the first ones) `rank` and `objective` are on.
    ranked_runs: usize,
    capacity: Option<Capacity>,
    command: String,
    plan: Option<serde_json::Value>,
    log_tail: Option<String>,
    server_pids: Vec<u32>,
    gpu_memory_after_stop: Vec<String>,
    dir: String,
    pareto_ttft: bool,
    pareto_tpot: bool,
}

/// Run `inferscope tune`. Secrets of the command lines are learnt first, so that no message,
/// error included, shows them.
pub fn run(a: TuneArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut s = Secrets::default();
    s.learn_tune(
        &a.server,
        a.baseline.as_deref(),
        &a.sets,
        a.serve_port,
        a.gpus.as_deref(),
    );
    let _ = SECRETS.set(s);
    run_tune(a, out).map_err(|e| {
        let full = format!("{e:#}");
        let shown = hide(&full);
        if shown == full {
            e
        } else {
            anyhow::anyhow!(shown)
        }
    })
}

fn run_tune(a: TuneArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let (objective, template, grid, bench) = check_args(&a)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let journal = a
        .journal
        .clone()
        .unwrap_or_else(|| a.out.join("journal.jsonl"));
    let fp = fingerprint(&a, objective);
    let mut cands = candidates(&a, &template, grid)?;
    // The baseline is candidate 0: the --baseline one when given, else the first of the grid.
    let baseline = 0usize;
    resume(&a, objective, &journal, &fp, &mut cands)?;
    plan_all(&a, &journal, &mut cands)?;

    catch_signals();
    let repeats = repeats_of(&a, objective);
    let warnings: Vec<String> = budget_warning(&a, objective, &bench, &cands, baseline, started)
        .into_iter()
        .collect();
    for w in &warnings {
        // Said even with --quiet: it changes what the report can conclude.
        let _ = writeln!(std::io::stderr(), "inferscope tune: {w}");
    }
    let out_of_budget = run_rounds(
        &a, objective, &bench, &journal, &mut cands, baseline, started,
    )?;
    let not_tried = left_out(&mut cands, out_of_budget, repeats, baseline);
    let report = build_report(
        &a, objective, &cands, baseline, not_tried, warnings, started,
    )?;
    write_report(&report, &a, out)
}

/// Check the flags and the server template; the objective, template, grid and bench plan.
/// The capacity search's settings (the bracket resolution is capacity search's default).
fn search_settings(a: &TuneArgs) -> SearchSettings {
    SearchSettings {
        target: a.attainment,
        max_probes: a.max_probes,
        ..SearchSettings::default()
    }
}

fn check_args(a: &TuneArgs) -> anyhow::Result<(Objective, Template, Vec<Settings>, Plan)> {
    let objective = a.objective.unwrap_or(if a.slo.is_some() {
        Objective::Goodput
    } else {
        Objective::Throughput
    });
    if matches!(objective, Objective::Goodput | Objective::Capacity) && a.slo.is_none() {
        bail!(
            "--objective {} needs --slo (e.g. ttft=500ms,tpot=50ms)",
            objective.metric()
        );
    }
    if objective == Objective::Capacity && a.rate.is_some() {
        bail!("--objective capacity searches the rate itself; drop --rate");
    }
    if a.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    search_settings(a).validate().map_err(anyhow::Error::msg)?;
    let template = Template::parse(&a.server).map_err(|e| anyhow::anyhow!("--server: {e}"))?;
    let names: Vec<String> = a.sets.iter().map(|s| s.name.clone()).collect();
    template
        .check("--server", &names, a.gpus.is_some())
        .map_err(anyhow::Error::msg)?;
    let grid = t::grid(&a.sets).map_err(anyhow::Error::msg)?;
    let bench = bench_plan(a)?;
    Ok((objective, template, grid, bench))
}

/// The candidates: the --baseline one first when given, then the grid in order.
fn candidates(a: &TuneArgs, template: &Template, grid: Vec<Settings>) -> anyhow::Result<Vec<Cand>> {
    let mut cands: Vec<Cand> = Vec::new();
    if let Some(b) = &a.baseline {
        let bt = Template::parse(b).map_err(|e| anyhow::anyhow!("--baseline: {e}"))?;
        bt.check("--baseline", &[], a.gpus.is_some())
            .map_err(anyhow::Error::msg)?;
        // `@` cannot start a --set name, so the baseline's journal key never collides with a
        // grid candidate's (not even the single empty one of a run without --set).
        let key: Settings = [("@baseline".to_string(), b.clone())].into();
        cands.push(new_cand(a, 0, key, "baseline".into(), bt));
    }
    for s in grid {
        // The label names folders and fills every table: built from the redacted settings.
        let label = hide(&t::label(&secrets::shown_settings(&s), &a.sets));
        cands.push(new_cand(a, cands.len(), s, label, template.clone()));
    }
    Ok(cands)
}

/// The directory a journal's trace paths are relative to.
fn journal_dir(journal: &Path) -> PathBuf {
    journal.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Read the journal (writing its header when new) and restore each candidate's records.
fn resume(
    a: &TuneArgs,
    objective: Objective,
    journal: &Path,
    fp: &str,
    cands: &mut [Cand],
) -> anyhow::Result<()> {
    // The one bounded reader (docs/SECURITY.md): a huge journal is refused, never read whole.
    let read = crate::input::read_bytes(journal).and_then(|b| {
        String::from_utf8(b).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a tune journal: not UTF-8 text",
            )
        })
    });
    let (old, fresh) = match read {
        Ok(text) => (
            t::read_journal(&journal.display().to_string(), &text, fp)
                .map_err(anyhow::Error::msg)?,
            // an empty file (created by hand, or cut before its header) gets one
            text.trim().is_empty(),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), true),
        Err(e) => bail!("{}: {e}", journal.display()),
    };
    if fresh {
        append_journal(
            journal,
            &JournalLine::Header {
                version: t::JOURNAL_VERSION,
                fingerprint: fp.to_string(),
            },
        )?;
    }
    let mut resumed = 0usize;
    for line in old {
        let key = match &line {
            JournalLine::Run { settings, .. }
            | JournalLine::Failed { settings, .. }
            | JournalLine::Skipped { settings, .. } => settings.clone(),
            JournalLine::Header { .. } => continue,
        };
        let Some(c) = cands.iter_mut().find(|c| c.shown == key) else {
            continue;
        };
        resumed += 1;
        restore(objective, journal, c, line)?;
    }
    if resumed > 0 {
        say(
            a.quiet,
            &format!("resuming from {}: {resumed} records", journal.display()),
        );
    }
    Ok(())
}

/// Apply one journal line to its candidate (a run's trace is read back from its file).
fn restore(
    objective: Objective,
    journal: &Path,
    c: &mut Cand,
    line: JournalLine,
) -> anyhow::Result<()> {
    match line {
        JournalLine::Run {
            command,
            result,
            trace,
            capacity,
            ..
        } => {
            let path = journal_dir(journal).join(&trace);
            let f = std::fs::File::open(&path).with_context(|| {
                format!(
                    "{}: its trace {} is missing",
                    journal.display(),
                    path.display()
                )
            })?;
            let recs = record::read_trace(&mut std::io::BufReader::new(f))
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let v = objective_of(objective, &result, capacity.as_ref());
            match &mut c.state {
                State::Measured(r) => r.push(v),
                s => *s = State::Measured(vec![v]),
            }
            c.runs.push((*result, recs, capacity));
            c.command = command;
        }
        JournalLine::Failed {
            command,
            reason,
            log_tail,
            ..
        } => {
            c.state = State::Failed;
            c.reason = Some(reason);
            c.log_tail = Some(log_tail);
            c.command = command;
        }
        JournalLine::Skipped { reason, .. } => {
            c.state = State::Skipped;
            c.reason = Some(reason);
        }
        JournalLine::Header { .. } => {}
    }
    Ok(())
}

/// Plan every candidate before starting anything; skip (and journal) those that cannot fit.
fn plan_all(a: &TuneArgs, journal: &Path, cands: &mut [Cand]) -> anyhow::Result<()> {
    for c in cands.iter_mut() {
        let words = c
            .template
            .fill(&c.settings, a.serve_port, a.gpus.as_deref())
            .map_err(anyhow::Error::msg)?;
        c.command = words.clone();
        let (plan, no_fit) = plan_candidate(a, &words);
        if let Some(p) = &plan {
            std::fs::create_dir_all(&c.dir)?;
            write_json_file(&c.dir.join("plan.json"), p)?;
        }
        c.plan = plan;
        if c.state == State::Pending
            && let Some(why) = no_fit
        {
            say(a.quiet, &format!("{}: skipped: {why}", c.label));
            append_journal(
                journal,
                &JournalLine::Skipped {
                    settings: c.shown.clone(),
                    reason: why.clone(),
                },
            )?;
            c.state = State::Skipped;
            c.reason = Some(why);
        }
    }
    Ok(())
}

/// Runs per candidate: one for capacity (its search already probes many rates), else --repeat.
fn repeats_of(a: &TuneArgs, objective: Objective) -> u32 {
    if objective == Objective::Capacity {
        1
    } else {
        a.repeat
    }
}

/// A run's wall time before any was measured: `--duration` + warm-up + 10 s (capacity: times
/// the probes).
fn per_run_guess(a: &TuneArgs, objective: Objective, bench: &Plan) -> f64 {
    let warm_s = match bench.warmup {
        Warmup::Duration(d) => d.as_secs_f64(),
        _ => 2.0,
    };
    let guess = a.duration.as_secs_f64() + warm_s + 10.0;
    if objective == Objective::Capacity {
        guess * (f64::from(a.max_probes) + 1.0)
    } else {
        guess
    }
}

/// Before starting: whether the --budget can run round 1 (every candidate once), by the same
/// estimate the budget check uses first; if not, say that only what ran will be ranked.
fn budget_warning(
    a: &TuneArgs,
    objective: Objective,
    bench: &Plan,
    cands: &[Cand],
    baseline: usize,
    started: Instant,
) -> Option<String> {
    let budget = a.budget?.as_secs_f64();
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let h = t::halving(&states, baseline, repeats_of(a, objective));
    if h.round != 1 || h.todo.is_empty() {
        return None;
    }
    let guess = per_run_guess(a, objective, bench);
    let need = guess * h.todo.len() as f64;
    let left = budget - started.elapsed().as_secs_f64();
    (need > left).then(|| {
        format!(
            "the --budget ({}s) may be too small to run all {} candidates once (estimated {:.0}s each before any run, {:.0}s in all): only the candidates that run are ranked; the others are listed as not tried",
            budget,
            h.todo.len(),
            guess,
            need
        )
    })
}

/// Measure candidates round by round until done, interrupted or out of --budget; true when the
/// budget stopped it.
fn run_rounds(
    a: &TuneArgs,
    objective: Objective,
    bench: &Plan,
    journal: &Path,
    cands: &mut [Cand],
    baseline: usize,
    started: Instant,
) -> anyhow::Result<bool> {
    let repeats = repeats_of(a, objective);
    let budget = a.budget.map(|b| b.as_secs_f64());
    let mut walls: Vec<f64> = Vec::new();
    let per_run_guess = per_run_guess(a, objective, bench);
    loop {
        let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
        let round = t::next_round(&states, baseline, repeats);
        if round.is_empty() {
            return Ok(false);
        }
        for i in round {
            if interrupted() {
                return Ok(false);
            }
            let estimate = if walls.is_empty() {
                per_run_guess
            } else {
                walls.iter().sum::<f64>() / walls.len() as f64
            };
            if !t::fits_budget(started.elapsed().as_secs_f64(), estimate, budget) {
                return Ok(true);
            }
            let Some(c) = cands.get_mut(i) else { continue };
            let run_no = c.runs.len() + 1;
            say(a.quiet, &format!("{}: run {run_no}", c.label));
            let t0 = Instant::now();
            let end = run_once(a, c, bench, objective, run_no)?;
            walls.push(t0.elapsed().as_secs_f64());
            match end {
                RunEnd::Interrupted => return Ok(false),
                RunEnd::Failed(why) => {
                    say(a.quiet, &format!("{}: failed: {why}", c.label));
                    append_journal(
                        journal,
                        &JournalLine::Failed {
                            settings: c.shown.clone(),
                            command: secrets::shown_words(&c.command),
                            reason: why.clone(),
                            log_tail: c.log_tail.clone().unwrap_or_default(),
                        },
                    )?;
                    c.state = State::Failed;
                    c.reason = Some(why);
                }
                RunEnd::Measured(m) => record_run(a, objective, journal, c, run_no, *m)?,
            }
        }
    }
}

/// Write a measured run's trace and result, journal it, and add it to the candidate.
fn record_run(
    a: &TuneArgs,
    objective: Objective,
    journal: &Path,
    c: &mut Cand,
    run_no: usize,
    m: (BenchResult, Vec<RequestRecord>, Option<Capacity>),
) -> anyhow::Result<()> {
    let (result, recs, cap) = m;
    let trace_name = format!("run-{run_no}.trace.jsonl");
    let trace_path = c.dir.join(&trace_name);
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(&trace_path)
            .with_context(|| format!("creating {}", trace_path.display()))?,
    );
    record::write_trace(&recs, &mut w)?;
    w.flush()?;
    write_json_file(&c.dir.join(format!("run-{run_no}.json")), &result)?;
    let rel = pathdiff(&trace_path, &journal_dir(journal));
    let v = objective_of(objective, &result, cap.as_ref());
    say(
        a.quiet,
        &format!(
            "{}: {} {}",
            c.label,
            v.map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "unknown".into()),
            objective.unit()
        ),
    );
    append_journal(
        journal,
        &JournalLine::Run {
            settings: c.shown.clone(),
            command: secrets::shown_words(&c.command),
            result: Box::new(result.clone()),
            trace: rel,
            capacity: cap.clone(),
        },
    )?;
    match &mut c.state {
        State::Measured(r) => r.push(v),
        s => *s = State::Measured(vec![v]),
    }
    c.runs.push((result, recs, cap));
    Ok(())
}

/// What was left out: candidates never tried, and (when the budget ran out) those short of
/// their repeats.
fn left_out(cands: &mut [Cand], out_of_budget: bool, repeats: u32, baseline: usize) -> Vec<String> {
    let mut not_tried: Vec<String> = Vec::new();
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let h = t::halving(&states, baseline, repeats);
    if !h.todo.is_empty() && h.round > 1 {
        let cut: Vec<String> = cands
            .iter()
            .enumerate()
            .filter(
                |(i, _)| matches!(states.get(*i), Some(State::Measured(r)) if r.len() >= h.round),
            )
            .map(|(_, c)| format!("`{}`", c.label))
            .collect();
        if !cut.is_empty() {
            not_tried.push(format!(
                "round {} was cut short before {} ran: it does not count toward any rank, so the run of round {} of {} is left out of the ranking and verdict",
                h.round,
                h.todo.iter().filter_map(|&i| cands.get(i)).map(|c| format!("`{}`", c.label)).collect::<Vec<_>>().join(", "),
                h.round,
                cut.join(", ")
            ));
        }
    }
    for c in cands.iter_mut() {
        match &c.state {
            State::Pending => {
                let why = if interrupted() {
                    "not tried: interrupted"
                } else {
                    "not tried: the --budget was spent"
                };
                not_tried.push(format!("{}: {why}", c.label));
                c.reason = Some(why.into());
            }
            State::Measured(r) if out_of_budget && (r.len() as u32) < repeats => {
                not_tried.push(format!(
                    "{}: {} of {repeats} runs (the --budget was spent)",
                    c.label,
                    r.len()
                ));
            }
            _ => {}
        }
    }
    not_tried
}

/// Write report.txt and report.json, print the text or JSON, and pick the exit code.
fn write_report(report: &Report, a: &TuneArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let code = if report.interrupted {
        ExitCode::from(130)
    } else if report.winner.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let mut text = Vec::new();
    write_text(report, a, &mut text)?;
    let text = hide(&String::from_utf8_lossy(&text));
    std::fs::write(a.out.join("report.txt"), text.as_bytes())
        .with_context(|| format!("writing {}", a.out.join("report.txt").display()))?;
    write_json_file(&a.out.join("report.json"), report)?;
    if a.json {
        let hidden = hide_json(serde_json::to_value(report)?);
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&hidden))?;
        writeln!(out)?;
    } else {
        out.write_all(text.as_bytes())?;
    }
    Ok(code)
}

/// `path` relative to `base` when it is under it, else as it is.
fn pathdiff(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, b) = (abs(path), abs(base));
    p.strip_prefix(&b)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

/// Candidate `index` (in grid order, the same on every resume); its folder name starts with the
/// index because two labels can slug alike (characters outside `[A-Za-z0-9.-]`, past 80).
fn new_cand(
    a: &TuneArgs,
    index: usize,
    settings: Settings,
    label: String,
    template: Template,
) -> Cand {
    let dir = a
        .out
        .join("candidates")
        .join(format!("{index:02}-{}", slug(&label)));
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

/// A candidate's first `n` runs merged (pooled statistics, `repeats` per run for `compare`).
fn merged(c: &Cand, n: usize, slo: &Slo) -> Option<Outcome> {
    let outs: Vec<Outcome> = c
        .runs
        .iter()
        .take(n)
        .map(|(r, recs, _)| Outcome {
            result: r.clone(),
            records: recs.clone(),
        })
        .collect();
    if outs.len() <= 1 {
        return outs.into_iter().next();
    }
    merge_repeats(outs, slo)
}

/// Rank the candidates, write the Pareto SVGs and winner.sh, and assemble the report.
fn build_report(
    a: &TuneArgs,
    objective: Objective,
    cands: &[Cand],
    baseline: usize,
    not_tried: Vec<String>,
    warnings: Vec<String>,
    started: Instant,
) -> anyhow::Result<Report> {
    let slo = a.slo.unwrap_or_default();
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let repeats = repeats_of(a, objective);
    let order = t::ranking(&states, baseline, repeats);
    // Each candidate is shown and judged on the runs it is ranked on (complete rounds only).
    let counted = t::counted_runs(&states, baseline, repeats);
    let merged_all: Vec<Option<Outcome>> = cands
        .iter()
        .zip(&counted)
        .map(|(c, &n)| merged(c, n, &slo))
        .collect();
    let (fronts, mut files) = pareto(a, cands, &merged_all)?;

    let winner_idx = order
        .first()
        .copied()
        .filter(|&i| matches!(states.get(i), Some(State::Measured(_))));
    let label_of = |i: usize| cands.get(i).map(|c| c.label.clone()).unwrap_or_default();
    let base_label = label_of(baseline);
    let (mut verdict, mut significant, comparison) = verdict(
        objective,
        cands,
        &slo,
        &counted,
        winner_idx,
        baseline,
        &base_label,
    );
    // Never a winner that another measured candidate beats by more than the noise.
    let noise = t::noise(&states, &counted, NOISE_FLOOR);
    let contender =
        winner_idx.and_then(|w| t::contender(&states, &counted, w, noise).map(|c| (w, c)));
    if let Some((w, (z, zv, wv, n))) = contender {
        let on = if n > 0 {
            format!("on the {n} run(s) they have in common")
        } else {
            "each on its own ranked runs".into()
        };
        verdict = format!(
            "inconclusive: `{}` ranks first, but `{}` measured {zv:.1} {} against its {wv:.1} {on}, more than the run-to-run noise ({:.1} %); measure again with more --repeat or a longer --duration",
            label_of(w),
            label_of(z),
            objective.unit(),
            noise * 100.0
        );
        significant = false;
    }
    let inconclusive = contender.is_some();
    let winner = winner_idx
        .and_then(|i| cands.get(i))
        .map(|c| winner_of(a, c));
    if let Some(w) = &winner {
        let p = a.out.join("winner.sh");
        // Every value is quoted in the exec line; the comment gets the label with its control
        // characters escaped, so a newline in a --set value cannot start a command line.
        let body = format!(
            "#!/bin/sh\n# inferscope tune {}: {}\nexec {}\n",
            if inconclusive {
                "top-ranked (inconclusive)"
            } else {
                "winner"
            },
            comment_safe(&w.label),
            w.run_command.as_deref().unwrap_or(&w.command)
        );
        std::fs::write(&p, hide(&body)).with_context(|| format!("writing {}", p.display()))?;
        files.push(p.display().to_string());
    }
    let reports = cand_reports(cands, &merged_all, &order, &fronts, &counted);
    files.push(a.out.join("report.json").display().to_string());
    files.push(a.out.join("report.txt").display().to_string());
    Ok(Report {
        winner,
        candidates: reports,
        verdict,
        significant,
        objective,
        unit: objective.unit(),
        baseline: base_label,
        comparison,
        not_tried,
        warnings,
        inconclusive,
        interrupted: interrupted(),
        elapsed_s: started.elapsed().as_secs_f64(),
        files,
    })
}

/// Text for a `#` comment line of a script: control characters (a newline above all, which
/// would end the comment and start a command) written as escapes.
fn comment_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A merged outcome's p90 TTFT (`fam` "ttft") or TPOT (any other), in ms.
fn p90(o: &Option<Outcome>, fam: &str) -> Option<f64> {
    o.as_ref().and_then(|o| match fam {
        "ttft" => o.result.stats.ttft_ms.p90,
        _ => o.result.stats.tpot_ms.p90,
    })
}

/// A merged outcome's output throughput.
fn thr(o: &Option<Outcome>) -> Option<f64> {
    o.as_ref()
        .and_then(|o| compare::stats_value(&o.result.stats, "throughput"))
}

/// Per candidate, whether it is on the throughput-vs-p90 TTFT and TPOT Pareto fronts.
type Fronts = (Vec<bool>, Vec<bool>);

/// The throughput-vs-p90 Pareto fronts (TTFT, TPOT) and their SVG files, written to --out.
fn pareto(
    a: &TuneArgs,
    cands: &[Cand],
    merged_all: &[Option<Outcome>],
) -> anyhow::Result<(Fronts, Vec<String>)> {
    let front_ttft = t::pareto_front(
        &merged_all
            .iter()
            .map(|o| (thr(o), p90(o, "ttft")))
            .collect::<Vec<_>>(),
    );
    let front_tpot = t::pareto_front(
        &merged_all
            .iter()
            .map(|o| (thr(o), p90(o, "tpot")))
            .collect::<Vec<_>>(),
    );
    let mut files = Vec::new();
    for (fam, front) in [("ttft", &front_ttft), ("tpot", &front_tpot)] {
        let pts: Vec<inferscope_bench::plot::ParetoPoint> = cands
            .iter()
            .zip(merged_all.iter())
            .zip(front.iter())
            .filter_map(|((c, o), f)| Some((c.label.clone(), thr(o)?, p90(o, fam)?, *f)))
            .collect();
        let svg = inferscope_bench::plot::pareto_svg(
            &format!("tune: throughput vs p90 {}", fam.to_uppercase()),
            &format!("p90 {} (ms)", fam.to_uppercase()),
            &pts,
        );
        let p = a.out.join(format!("pareto_{fam}.svg"));
        std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
        files.push(p.display().to_string());
    }
    Ok(((front_ttft, front_tpot), files))
}

/// The winner's command line, and (when binding was asked) its `inferscope run` forms.
fn winner_of(a: &TuneArgs, c: &Cand) -> Winner {
    let words = c
        .template
        .fill(&c.settings, a.serve_port, a.gpus.as_deref())
        .unwrap_or_else(|_| c.command.clone());
    // What is printed and written is redacted; the user pastes their own secret back.
    let words = secrets::shown_words(&words);
    let line = shell_command_line(&words);
    let bind = match (&a.gpus, &a.numa_node) {
        (Some(g), _) => Some(("--gpus", g.clone())),
        (None, Some(n)) => Some(("--numa-node", n.clone())),
        _ => None,
    };
    let run_command = bind
        .as_ref()
        .map(|(f, v)| format!("inferscope run {f} {} -- {line}", shell_quote(v)));
    let run_emit = bind.map(|(f, v)| {
        let args = super::run::RunArgs {
            gpus: (f == "--gpus").then(|| v.clone()),
            numa_node: (f == "--numa-node").then(|| v.clone()),
            mem: None,
            cpus_per_gpu: None,
            device_ids: super::run::DeviceIdsArg::Index,
            omp_threads: None,
            alloc_conf: None,
            dry_run: false,
            json: false,
            emit: Some(super::run::EmitArg::Numactl),
            image: None,
            engine_version: None,
            snapshot: None,
            root: None,
            command: words.iter().map(Into::into).collect(),
        };
        let mut buf = Vec::new();
        match super::run::run(args, &mut buf) {
            Ok(_) => String::from_utf8_lossy(&buf).into_owned(),
            Err(e) => format!("(run --emit numactl failed: {e:#})"),
        }
    });
    Winner {
        settings: c.shown.clone(),
        command: line,
        label: c.label.clone(),
        run_command,
        run_emit,
    }
}

/// One report entry per candidate, in rank order.
fn cand_reports(
    cands: &[Cand],
    merged_all: &[Option<Outcome>],
    order: &[usize],
    (front_ttft, front_tpot): &Fronts,
    counted: &[usize],
) -> Vec<CandReport> {
    let mut reports = Vec::new();
    for (rank, &i) in order.iter().enumerate() {
        let (Some(c), Some(m)) = (cands.get(i), merged_all.get(i)) else {
            continue;
        };
        let runs = match &c.state {
            State::Measured(r) => r.clone(),
            _ => Vec::new(),
        };
        let ranked_runs = counted.get(i).copied().unwrap_or(0);
        reports.push(CandReport {
            rank: rank + 1,
            label: c.label.clone(),
            settings: c.shown.clone(),
            status: match c.state {
                State::Measured(_) => "measured",
                State::Failed => "failed",
                State::Skipped | State::Pending => "skipped",
            },
            reason: c.reason.clone(),
            result: m.as_ref().map(|o| o.result.clone()),
            objective: t::mean_objective(runs.get(..ranked_runs).unwrap_or_default()),
            objective_runs: runs,
            ranked_runs,
            capacity: c.runs.iter().rev().find_map(|r| r.2.clone()),
            command: shell_command_line(&secrets::shown_words(&c.command)),
            plan: c.plan.clone(),
            log_tail: c.log_tail.clone(),
            server_pids: c.pids.clone(),
            gpu_memory_after_stop: c.gpu_memory.clone(),
            dir: c.dir.display().to_string(),
            pareto_ttft: front_ttft.get(i).copied().unwrap_or(false),
            pareto_tpot: front_tpot.get(i).copied().unwrap_or(false),
        });
    }
    reports
}

/// The verdict sentence, whether it is significant, and compare's table.
fn verdict(
    objective: Objective,
    cands: &[Cand],
    slo: &Slo,
    counted: &[usize],
    winner: Option<usize>,
    baseline: usize,
    base_label: &str,
) -> (String, bool, Option<compare::Comparison>) {
    let Some(w) = winner else {
        return ("no candidate could be measured".into(), false, None);
    };
    let wl = cands.get(w).map(|c| c.label.clone()).unwrap_or_default();
    if w == baseline {
        return (
            format!("no candidate is better than the baseline `{base_label}`: it ranks first"),
            false,
            None,
        );
    }
    // Judged on the runs both have in common (the same rounds), not one's extra runs.
    let common = counted
        .get(w)
        .copied()
        .unwrap_or(0)
        .min(counted.get(baseline).copied().unwrap_or(0));
    let run = |i: usize| cands.get(i).and_then(|c| merged(c, common, slo));
    let (Some(bo), Some(wo)) = (run(baseline), run(w)) else {
        return (
            format!(
                "`{wl}` ranks first; the baseline `{base_label}` was not measured, so nothing can be said about significance"
            ),
            false,
            None,
        );
    };
    if objective == Objective::Capacity {
        let cap = |i: usize| {
            cands
                .get(i)
                .and_then(|c| c.runs.iter().rev().find_map(|r| r.2.clone()))
        };
        let (bc, wc) = (cap(baseline), cap(w));
        let (b, wv) = (
            bc.as_ref().and_then(|c| c.requests_per_s),
            wc.as_ref().and_then(|c| c.requests_per_s),
        );
        let b_fail = bc.as_ref().and_then(|c| c.failing_rate);
        let sig = match (wv, b_fail) {
            (Some(w), Some(f)) => w >= f,
            _ => false,
        };
        let fmt = |v: Option<f64>| {
            v.map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "none".into())
        };
        return (
            format!(
                "`{wl}` sustains {} requests/s within the SLO against the baseline `{base_label}`'s {}; {}",
                fmt(wv),
                fmt(b),
                if sig {
                    "significant: it passed a rate the baseline failed"
                } else {
                    "not distinguishable: the search brackets overlap"
                }
            ),
            sig,
            None,
        );
    }
    let thresholds = compare::parse_thresholds(compare::DEFAULT_THRESHOLDS).unwrap_or_default();
    let sb = Samples::from_records(&bo.records);
    let sw = Samples::from_records(&wo.records);
    let c = compare::compare(&bo.result, &wo.result, Some((&sb, &sw)), &thresholds);
    let metric = objective.metric();
    let row = c.rows.iter().find(|r| r.metric == metric);
    let (sig, desc) = match row {
        Some(r) => {
            let method = match r.method {
                compare::Method::BetweenRuns => "between runs",
                compare::Method::ClusterBootstrap => "request-level cluster bootstrap",
                compare::Method::None => "no evidence",
            };
            let how = match (r.samples, r.ci95) {
                (Some(s), Some([lo, hi])) => format!(
                    "; 95 % interval of the difference [{lo:+.1}, {hi:+.1}], {} vs {} {}, {method}",
                    s.base, s.cand, s.unit
                ),
                _ => format!("; {method}"),
            };
            (
                // "better" without evidence (no traces, no repeats) is not significance
                r.status == Status::Better && r.method != compare::Method::None,
                format!(
                    "{} {} vs {} {}{}{how}",
                    r.cand
                        .map(|v| format!("{v:.1}"))
                        .unwrap_or_else(|| "unknown".into()),
                    objective.unit(),
                    r.base
                        .map(|v| format!("{v:.1}"))
                        .unwrap_or_else(|| "unknown".into()),
                    objective.unit(),
                    r.delta_pct
                        .map(|d| format!(" ({d:+.1} %)"))
                        .unwrap_or_default()
                ),
            )
        }
        None => (false, "no comparable value".into()),
    };
    let runs_of = |i: usize| cands.get(i).map_or(0, |c| c.runs.len());
    let desc = if runs_of(w) > common || runs_of(baseline) > common {
        format!("{desc} (on their first {common} run(s), the complete rounds they have in common)")
    } else {
        desc
    };
    let text = if sig {
        format!("`{wl}` is better than the baseline `{base_label}`: {desc}; significant")
    } else {
        format!(
            "no candidate is distinguishable from the baseline `{base_label}`: the best, `{wl}`, has {desc}; not significant"
        )
    };
    (text, sig, Some(c))
}

fn write_text(r: &Report, a: &TuneArgs, out: &mut dyn Write) -> std::io::Result<()> {
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
            f(s.and_then(|s| compare::stats_value(s, "throughput"))),
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

#[cfg(test)]
mod plan_verdict_tests {
    use super::*;

    fn planned(model: &str, gpu: &str) -> Vec<u8> {
        let args = super::super::plan::PlanArgs {
            model: Some(model.into()),
            gpu: Some(gpu.into()),
            json: true,
            ..Default::default()
        };
        let mut buf = Vec::new();
        super::super::plan::run(&args, &mut buf).unwrap();
        buf
    }

    #[test]
    fn the_planners_own_output_gives_its_verdict() {
        let (_, v) = plan_verdict(&planned("meta-llama/Llama-3.1-8B-Instruct", "l40s")).unwrap();
        assert!(v.fits && v.problems.is_empty(), "{v:?}");
        let (_, v) = plan_verdict(&planned("meta-llama/Llama-3.1-70B-Instruct", "l40s")).unwrap();
        assert!(!v.fits && !v.problems.is_empty(), "{v:?}");
    }

    #[test]
    fn unreadable_output_is_an_error_never_fits() {
        for bad in [
            &b""[..],
            b"{\"fits\": tr",
            b"{\"hello\": 1}",
            b"{\"fits\": \"yes\", \"problems\": []}",
        ] {
            let e = plan_verdict(bad).unwrap_err();
            assert!(!e.is_empty(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(
            plan_verdict(b"{\"hello\": 1}")
                .unwrap_err()
                .contains("`fits`")
        );
    }
}
