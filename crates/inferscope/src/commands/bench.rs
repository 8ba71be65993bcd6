//! `inferscope bench`: drive an OpenAI-compatible server with a bounded, seeded load and write
//! the documented result file (docs/bench.md). Flags are validated here; the work is in
//! `inferscope_bench::run`.
//!
//! Exit codes: 0 = a valid run; 1 = the run finished but is not valid (stopped early because the
//! server saturated or failed too often, interrupted, too few completed requests, shorter than
//! asked); 2 = usage or input error (bad flag, unreadable dataset, server unreachable).

use anyhow::Context;
use inferscope_bench::client::RequestSettings;
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::energy::Energy;
use inferscope_bench::record;
use inferscope_bench::result::{BenchResult, MachineSummary};
use inferscope_bench::run::{
    BenchPlan, LocalTokenizer, MetricsScrape, ProgressFn, ProgressView, Replicas, execute_repeated,
};
use inferscope_bench::schedule::{Arrival, Limits, Schedule, Warmup};
use inferscope_bench::setup;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod load_flags;
pub use load_flags::{CapacityFlags, LoadFlags};

/// `inferscope bench` flags.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Server base URL (`http://HOST:PORT`); load goes only here. Repeat it (`--url A --url B`)
    /// to spread requests over replicas (see --balance); the first is asked for its models.
    #[arg(long = "url", value_name = "URL", required = true)]
    pub urls: Vec<String>,
    /// With several --url: round-robin, or least-outstanding (fewest requests in flight).
    #[arg(long, value_name = "POLICY", default_value = "round-robin")]
    pub balance: inferscope_bench::replicas::Balance,
    /// Prompts, requests, open-loop rate, SLOs and seed (shared with tune).
    #[command(flatten)]
    pub load: LoadFlags,
    /// Closed loop: keep N requests in flight (default 1 when no --rate is given).
    #[arg(long, value_name = "N", conflicts_with = "rate")]
    pub concurrency: Option<u32>,
    /// Inter-arrival gaps for --rate: poisson, constant or gamma:SHAPE (SHAPE < 1 is burstier).
    #[arg(long, value_name = "KIND", default_value = "poisson")]
    pub arrival: Arrival,
    /// Sweep: a closed-loop step at --concurrency (default 16) finds the saturation rate, then N
    /// Poisson steps at k/(N+1) of it; each step runs for --duration/--requests.
    #[arg(long, value_name = "N", conflicts_with = "rate")]
    pub sweep: Option<u32>,
    /// Run the whole benchmark K times against the same server (same prompts): the result keeps
    /// each run's statistics in `repeats`, and `compare` judges on the variance between runs.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000), conflicts_with = "sweep")]
    pub repeat: u32,
    /// Measured sending time (after warm-up), e.g. 30s, 2m. Default 30s when --requests is not given.
    #[arg(long, value_name = "D", value_parser = super::duration_arg)]
    pub duration: Option<Duration>,
    /// Measured requests to send (after warm-up).
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Warm-up excluded from results: a duration (5s) or a number of requests (20).
    #[arg(long, value_name = "D|N")]
    pub warmup: Option<String>,
    /// With --dataset trace:FILE: replay F times faster than the trace's timestamps (0.5 = slower).
    #[arg(long, value_name = "F")]
    pub trace_speed: Option<f64>,
    /// Write the result JSON here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write every request's raw timings here (JSON Lines), for `inferscope compare`.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write SVG latency CDFs (and the sweep curve) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print the result JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Do not stream (whole responses; TTFT/ITL are then undefined).
    #[arg(long)]
    pub no_stream: bool,
    /// Do not send ignore_eos/min_tokens (outputs may then be shorter than asked).
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// Sampling temperature sent with each request.
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    pub temperature: f64,
    /// Hard cap on the sending phase of each step (warm-up included).
    #[arg(long, value_name = "D", default_value = "10m", value_parser = super::duration_arg)]
    pub max_duration: Duration,
    /// Open loop: most requests in flight before arrivals wait (and the run may stop as saturated).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_inflight: u32,
    /// Open loop: stop as saturated when an arrival waits this long for a free slot.
    #[arg(long, value_name = "D", default_value = "1s", value_parser = super::duration_arg)]
    pub max_send_lag: Duration,
    /// Stop when more than this fraction of the last 50 requests failed (1 disables).
    #[arg(long, value_name = "F", default_value_t = 0.5)]
    pub max_error_rate: f64,
    /// Fewest completed requests for the run to be valid.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_requests: u64,
    /// A Hugging Face tokenizer.json of the served model: counts output tokens when the server
    /// sends no usage (exact where one-token-per-chunk is not), counts prompt tokens, and
    /// reports how it agrees with the server's usage when both exist.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// The machine the server runs on, from a snapshot written by `inferscope snapshot` on it,
    /// recorded in the result instead of probing the host bench runs on (`--snapshot`, the old
    /// spelling, still works).
    #[arg(long = "server-snapshot", alias = "snapshot", value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Scrape engine metrics (Prometheus text) from this URL while the run goes, instead of
    /// the default URL/metrics (the engines: `crate::help::server_metrics_help`).
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "no_server_metrics",
        help = crate::help::server_metrics_help()
    )]
    pub server_metrics: Option<String>,
    /// Do not scrape the server's /metrics during the run.
    #[arg(long)]
    pub no_server_metrics: bool,
    /// Time between two scrapes of the server's metrics.
    #[arg(long, value_name = "D", default_value = "1s", value_parser = super::duration_arg)]
    pub server_metrics_interval: Duration,
    /// The server's command line (e.g. "vllm serve M --max-num-seqs 256"), recorded in the
    /// result so `compare` can say which flags differ between two runs.
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,
    /// The server's start-up log: its memory figures (weights, KV cache GiB and tokens, maximum
    /// concurrency, as `mem startup` reads them) are recorded in the result, so `compare` can
    /// say that two runs' servers sized their memory differently. Read before the run.
    #[arg(long, value_name = "FILE")]
    pub startup_log: Option<PathBuf>,
    /// No live progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Find the highest Poisson request rate whose SLO attainment stays at or above
    /// --attainment (needs --slo): a closed-loop run at --concurrency measures saturation, then
    /// open-loop probes of --duration/--requests each bisect below it (docs/tune.md).
    #[arg(long, conflicts_with_all = ["rate", "sweep", "repeat"], requires = "slo")]
    pub find_capacity: bool,
    /// With --find-capacity: its target (shared with tune).
    #[command(flatten)]
    pub capacity: CapacityFlags,
    /// With --find-capacity: stop when the pass/fail bracket is narrower than this fraction.
    #[arg(long, value_name = "F", default_value_t = 0.05)]
    pub capacity_resolution: f64,
}

impl BenchArgs {
    /// The first `--url` (clap requires one).
    pub fn url(&self) -> &str {
        self.urls.first().map_or("", String::as_str)
    }
}

/// `--warmup`, absent meaning none (the one parser: `Warmup`'s `FromStr`, shared with tune).
pub(crate) fn parse_warmup(s: Option<&str>) -> anyhow::Result<Warmup> {
    s.map_or(Ok(Warmup::None), |s| {
        s.parse().map_err(|e| anyhow::anyhow!("--warmup: {e}"))
    })
}

/// Build the plan from flags (pure apart from the clock passed in).
pub fn plan(a: &BenchArgs, started_at: String) -> anyhow::Result<BenchPlan> {
    setup::check_urls(&a.urls).map_err(anyhow::Error::msg)?;
    let schedule = match (a.load.rate, a.concurrency, a.sweep) {
        (Some(rate), _, _) => Schedule::Open {
            rate,
            arrival: a.arrival,
            seed: a.load.seed,
        },
        (None, c, Some(_)) => Schedule::Closed {
            concurrency: c.unwrap_or(16),
        },
        (None, c, None) => Schedule::Closed {
            concurrency: c.unwrap_or(1),
        },
    };
    schedule.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    if !(0.0..=1.0).contains(&a.max_error_rate) {
        anyhow::bail!("--max-error-rate must be between 0 and 1");
    }
    if a.requests == Some(0) {
        anyhow::bail!("--requests must be at least 1");
    }
    if a.load.timeout.is_zero() || a.load.idle_timeout.is_zero() {
        anyhow::bail!("--timeout and --idle-timeout must be positive");
    }
    if !a.temperature.is_finite() || a.temperature < 0.0 {
        anyhow::bail!("--temperature must be a non-negative number");
    }
    let server_metrics = server_metrics(a)?;
    let mut dataset = a.load.dataset.clone();
    let is_trace = if let DatasetSpec::Trace { speed, .. } = &mut dataset {
        if a.load.rate.is_some() || a.sweep.is_some() || a.find_capacity {
            anyhow::bail!(
                "--dataset trace: sends at the trace's timestamps; --rate, --sweep and --find-capacity do not apply"
            );
        }
        if let Some(f) = a.trace_speed {
            if !inferscope_bench::workload::SPEED_RANGE.contains(&f) {
                anyhow::bail!("--trace-speed {f}: expected a number from 0.001 to 1000000");
            }
            *speed = f;
        }
        true
    } else {
        if a.trace_speed.is_some() {
            anyhow::bail!("--trace-speed needs --dataset trace:FILE");
        }
        false
    };
    let duration = match (a.duration, a.requests) {
        // A trace ends with its last line.
        (None, None) if is_trace => None,
        (None, None) => Some(Duration::from_secs(30)),
        (d, _) => d,
    };
    Ok(BenchPlan {
        url: a.url().to_string(),
        request: RequestSettings {
            api: a.load.api,
            model: a.load.model.clone().unwrap_or_default(),
            stream: !a.no_stream,
            ignore_eos: !a.no_ignore_eos,
            temperature: a.temperature,
            timeout: a.load.timeout,
            idle_timeout: a.load.idle_timeout,
        },
        schedule,
        sweep_steps: a.sweep.unwrap_or(0),
        limits: Limits {
            requests: a.requests,
            duration,
        },
        warmup: parse_warmup(a.warmup.as_deref())?,
        max_duration: a.max_duration,
        max_inflight: a.max_inflight.max(1),
        max_send_lag: a.max_send_lag,
        max_error_rate: a.max_error_rate,
        dataset,
        default_max_tokens: a.load.max_tokens.max(1),
        seed: a.load.seed,
        slo: a.load.slo.unwrap_or_default(),
        min_requests: a.min_requests,
        started_at,
        tool: crate::tool_name(),
        trace: a.trace.as_ref().map(|p| p.display().to_string()),
        tokenizer: None,
        server_metrics,
        replicas: Replicas {
            urls: a.urls.iter().skip(1).cloned().collect(),
            balance: a.balance,
        },
    })
}

/// `--server-metrics` and its companions, checked by the library.
fn server_metrics(a: &BenchArgs) -> anyhow::Result<Option<MetricsScrape>> {
    setup::metrics_scrape(
        a.no_server_metrics,
        a.server_metrics_interval,
        a.server_metrics.as_deref(),
        a.url(),
    )
    .map_err(anyhow::Error::msg)
}

/// Read and load `--tokenizer FILE` (bounded: the size is checked before reading).
pub fn load_tokenizer(path: &Path) -> anyhow::Result<LocalTokenizer> {
    setup::load_tokenizer(path).map_err(anyhow::Error::msg)
}

fn machine(snapshot: Option<&Path>) -> anyhow::Result<Option<MachineSummary>> {
    let snap = match snapshot {
        Some(f) => crate::load::snapshot_file(f)?,
        None => super::capture_root(Path::new("/"))?,
    };
    Ok(Some(MachineSummary::from_snapshot(&snap)))
}

fn progress_printer() -> ProgressFn {
    Arc::new(|p: ProgressView| {
        let mut e = std::io::stderr().lock();
        let step = if p.step > 0 {
            format!("step {} ", p.step)
        } else {
            String::new()
        };
        let _ = write!(
            e,
            "\r\x1b[2K{step}{:6.1}s  sent {}  in flight {}  done {}  errors {}  {:.1} req/s  {:.0} tok/s",
            p.elapsed_s,
            p.sent,
            p.in_flight,
            p.completed,
            p.failed,
            p.requests_per_s,
            p.tokens_per_s
        );
        let _ = e.flush();
    })
}

fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    f(&mut w).with_context(|| format!("writing {}", path.display()))?;
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Write the SVG plots of labelled results into `dir`.
pub fn write_plots(dir: &Path, results: &[(String, &BenchResult)]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, svg) in inferscope_bench::plot::plots(results) {
        let p = dir.join(name);
        std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

/// `--startup-log`: the figures `mem startup` reads, for the result.
fn startup_figures(path: &Path) -> anyhow::Result<inferscope_bench::client::StartupFigures> {
    let r = super::mem::startup_report(Some(path), &Default::default())
        .map_err(|e| anyhow::anyhow!("--startup-log: {e:#}"))?;
    let m = &r.measured;
    Ok(inferscope_bench::client::StartupFigures {
        log: path.display().to_string(),
        engine: r.engine.to_string(),
        engine_version: r.engine_version.clone(),
        failed: r.failed,
        weights_gib: m.weights_gib,
        kv_cache_gib: m.kv_cache_gib,
        kv_cache_tokens: m.kv_cache_tokens,
        max_concurrency: m.max_concurrency,
        max_model_len: m.max_model_len,
    })
}

fn read_energy() -> Result<Vec<u64>, String> {
    let lib = std::env::var_os(inferscope_probe::nvml::LIB_ENV);
    inferscope_probe::nvml::total_energy_mj(lib.as_deref())
}

/// NVML's energy counters before the run, when the server runs on this machine: every `--url`
/// is a loopback address or this host's name, and a `--server-snapshot`, if given, is of this
/// host. Otherwise why not.
fn energy_counters(a: &BenchArgs, server_host: Option<&str>) -> Result<Vec<u64>, String> {
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok();
    if let Some(why) = setup::energy_not_here(&a.urls, here.as_deref(), server_host) {
        return Err(why);
    }
    read_energy()
}

/// Run the benchmark.
pub fn run(a: BenchArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut plan = plan(&a, crate::clock::now_rfc3339())?;
    if let Some(p) = &a.tokenizer {
        plan.tokenizer = Some(load_tokenizer(p)?);
    }
    let machine = machine(a.snapshot.as_deref())?;
    // Read before the run: a log that cannot be read must not cost a benchmark.
    let startup = a.startup_log.as_deref().map(startup_figures).transpose()?;
    let show = !a.quiet && std::io::stderr().is_terminal();
    if a.find_capacity {
        return run_capacity(&a, &plan, machine, show, out);
    }
    let server_host = a
        .snapshot
        .as_ref()
        .and_then(|_| machine.as_ref()?.hostname.clone());
    let energy_before = energy_counters(&a, server_host.as_deref());
    let mut outcome = execute_repeated(&plan, machine, show.then(progress_printer), a.repeat)?;
    let tokens: u64 = outcome
        .records
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.output_tokens().0)
        .sum();
    outcome.result.energy = Some(match energy_before {
        Ok(before) => match read_energy() {
            Ok(after) => Energy::from_counters(&before, &after, tokens),
            Err(e) => Energy::unknown(e),
        },
        Err(e) => Energy::unknown(e),
    });
    // No engine serves its own command line: the user says it, and `compare` diffs it.
    outcome.result.server.command = a
        .server_cmd
        .as_deref()
        .map(|c| inferscope_host::redact::scrub(c).into_owned());
    outcome.result.server.startup = startup;
    if show {
        eprint!("\r\x1b[2K");
    }
    let r = &outcome.result;
    if let Some(p) = &a.out {
        write_file(p, |w| inferscope_bench::result::write_json(r, w))?;
    }
    if let Some(p) = &a.trace {
        write_file(p, |w| record::write_trace(&outcome.records, w))?;
    }
    if let Some(dir) = &a.plot {
        write_plots(dir, &[("run".to_string(), r)])?;
    }
    if a.json {
        inferscope_bench::result::write_json(r, out)?;
    } else {
        inferscope_bench::result::write_text(r, out)?;
    }
    Ok(if r.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `bench --find-capacity`.
fn run_capacity(
    a: &BenchArgs,
    plan: &BenchPlan,
    machine: Option<MachineSummary>,
    show: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let settings = inferscope_bench::capacity::SearchSettings {
        target: a.capacity.attainment,
        resolution: a.capacity_resolution,
        max_probes: a.capacity.max_probes,
    };
    settings.validate().map_err(anyhow::Error::msg)?;
    let run =
        inferscope_bench::capacity::find(plan, settings, machine, show.then(progress_printer))?;
    if show {
        eprint!("\r\x1b[2K");
    }
    let json = serde_json::json!({
        "capacity": run.capacity,
        "saturation": run.saturation,
        "probes": run.probes,
    });
    if let Some(p) = &a.out {
        write_file(p, |w| {
            serde_json::to_writer_pretty(&mut *w, &json)?;
            writeln!(w)
        })?;
    }
    if let Some(p) = &a.trace {
        write_file(p, |w| record::write_trace(&run.best_records, w))?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &json)?;
        writeln!(out)?;
    } else {
        super::capacity::write_text(&run.capacity, out)?;
    }
    Ok(if run.interrupted {
        ExitCode::from(130)
    } else if run.capacity.requests_per_s.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
