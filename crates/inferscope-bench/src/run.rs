//! A whole benchmark: ask the server who it is, run the schedule (or a sweep), compute the
//! statistics and build the result. The binary only parses flags and writes files; this module
//! owns the tokio runtime so the binary does not depend on tokio.

use crate::client::{RequestSettings, ServerInfo, Target, Unreachable, http_client, server_info};
use crate::dataset::{Dataset, DatasetSpec};
use crate::exec::{Progress, RunConfig, StopReason};
use crate::record::RequestRecord;
use crate::result::{
    BenchResult, ClientUsage, MachineSummary, SCHEMA_VERSION, Settings, Sweep, SweepStep,
    TokenizerSetting, invalid_reasons,
};
use crate::schedule::{Arrival, Limits, Schedule, Warmup, sweep_rates};
use crate::stats::{Slo, compute};
use crate::tokenizer::TokenCounter;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Everything a benchmark needs: its load, requests and limits (bench's settings; not the
/// planner's memory plan, `inferscope_plan::Plan`).
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// Server base URL.
    pub url: String,
    /// Request settings; an empty model means "the first model the server lists".
    pub request: RequestSettings,
    /// Load pattern (for a sweep: the closed-loop saturation step).
    pub schedule: Schedule,
    /// Open-loop steps below saturation (0 = no sweep).
    pub sweep_steps: u32,
    /// When sending stops (per step).
    pub limits: Limits,
    /// Warm-up (per step).
    pub warmup: Warmup,
    /// Hard cap on each step's sending phase.
    pub max_duration: Duration,
    /// Open-loop in-flight cap.
    pub max_inflight: u32,
    /// Open-loop lag that counts as saturation.
    pub max_send_lag: Duration,
    /// Error rate that stops a run.
    pub max_error_rate: f64,
    /// Prompts.
    pub dataset: DatasetSpec,
    /// `max_tokens` for dataset entries that do not say.
    pub default_max_tokens: u32,
    /// Seed.
    pub seed: u64,
    /// SLOs for goodput.
    pub slo: Slo,
    /// Fewest completed requests for a valid run.
    pub min_requests: u64,
    /// RFC 3339 start time (from the caller's clock).
    pub started_at: String,
    /// `inferscope <version>`.
    pub tool: String,
    /// Trace path to record in the result.
    pub trace: Option<String>,
    /// Local tokenizer (`--tokenizer`): counts output tokens when the server reports no usage,
    /// and prompt tokens.
    pub tokenizer: Option<LocalTokenizer>,
    /// Scrape the server's Prometheus endpoint while the run goes (`None`: `--no-server-metrics`).
    pub server_metrics: Option<MetricsScrape>,
    /// More endpoints besides `url` (`--url A --url B ...`) and how requests are spread.
    pub replicas: Replicas,
}

/// Endpoints besides the plan's `url`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replicas {
    /// Base URLs after the first.
    pub urls: Vec<String>,
    /// Round robin or least outstanding.
    pub balance: crate::replicas::Balance,
}

/// Where and how often to scrape engine metrics during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsScrape {
    /// The `/metrics` URL.
    pub url: String,
    /// Time between scrapes.
    pub interval: Duration,
}

/// A loaded `--tokenizer` and how the result file names it.
#[derive(Debug, Clone)]
pub struct LocalTokenizer {
    /// Path and vocabulary size, for the result.
    pub setting: TokenizerSetting,
    /// The tokenizer.
    pub counter: Arc<TokenCounter>,
}

/// Live progress, handed to the caller's callback about twice a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressView {
    /// Seconds since the step began.
    pub elapsed_s: f64,
    /// Step number (0 for a plain run).
    pub step: u32,
    /// Sent (warm-up included).
    pub sent: u64,
    /// In flight.
    pub in_flight: u64,
    /// Completed.
    pub completed: u64,
    /// Failed.
    pub failed: u64,
    /// Completed per second over the last interval.
    pub requests_per_s: f64,
    /// Output tokens per second over the last interval.
    pub tokens_per_s: f64,
}

/// Callback for live progress.
pub type ProgressFn = Arc<dyn Fn(ProgressView) + Send + Sync>;

/// Why a benchmark could not run at all (exit code 2 in the binary).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad settings.
    #[error("{0}")]
    Input(String),
    /// The dataset could not be loaded.
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    /// The server does not answer.
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    /// The server lists no model and none was given.
    #[error("the server at {0} lists no model in /v1/models; pass --model")]
    NoModel(String),
    /// `/v1/models` failed (status, timeout, not JSON) and no model was given.
    #[error("the server at {url} did not list its models: GET /v1/models: {why}; pass --model")]
    ModelsFailed {
        /// The server's URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// A capacity search cannot start (its flags, or a saturation run that completed nothing).
    #[error(transparent)]
    Search(#[from] crate::capacity::SearchError),
}

/// The result plus the raw records (for `--trace`); not a check's outcome.
#[derive(Debug)]
pub struct RunOutcome {
    /// The result file.
    pub result: BenchResult,
    /// Every request of every step, warm-up included.
    pub records: Vec<RequestRecord>,
}

/// Run the plan. Blocking: builds its own single-threaded tokio runtime.
pub fn execute(
    plan: &BenchPlan,
    machine: Option<MachineSummary>,
    progress: Option<ProgressFn>,
) -> Result<RunOutcome, BenchError> {
    plan.schedule
        .validate()
        .map_err(|e| BenchError::Input(e.to_string()))?;
    if let DatasetSpec::Sessions(_) = plan.dataset {
        if plan.request.api != crate::client::Api::Chat {
            return Err(BenchError::Input(
                "--dataset sessions: is multi-turn chat: add --api chat".into(),
            ));
        }
        if !matches!(plan.schedule, Schedule::Closed { .. }) || plan.sweep_steps > 0 {
            return Err(BenchError::Input(
                "--dataset sessions: --concurrency counts sessions; --rate and --sweep do not apply"
                    .into(),
            ));
        }
    }
    // A trace ends on its own.
    let is_trace = matches!(plan.dataset, DatasetSpec::Trace { .. });
    if plan.limits.requests.is_none() && plan.limits.duration.is_none() && !is_trace {
        return Err(BenchError::Input(
            "give --requests and/or --duration".into(),
        ));
    }
    let dataset = crate::dataset::load(
        &plan.dataset,
        plan.seed,
        plan.default_max_tokens,
        plan.tokenizer.as_ref().map(|t| &*t.counter),
    )?;
    let rt = client_runtime()
        .map_err(|e| BenchError::Input(format!("cannot start the async runtime: {e}")))?;
    let scraper = plan
        .server_metrics
        .as_ref()
        .map(crate::scrape::Scraper::start);
    let outcome = rt.block_on(execute_async(plan, machine, progress, &dataset));
    let metrics = scraper.map(crate::scrape::Scraper::finish);
    outcome.map(|mut o| {
        if let (Some(p), Some((rate, source))) = (
            o.result.stats.prefix_reuse.as_mut(),
            metrics.as_ref().and_then(crate::reuse::metrics_hit_rate),
        ) {
            p.server_metrics_hit_rate = Some(rate);
            p.server_metrics_hit_rate_source = Some(source);
        }
        o.result.server_metrics = metrics;
        o
    })
}

/// Resolves to true at the first Ctrl-C (SIGINT) or SIGTERM (what `timeout`, systemd, Kubernetes
/// and `tune` stopping a run send): either ends the run early with what was measured, marked
/// interrupted. False when neither can be listened for.
async fn interrupt_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok(),
                t = term.recv() => t.is_some(),
            };
        }
    }
    tokio::signal::ctrl_c().await.is_ok()
}

/// The runtime every measurement runs on (bench, compare's runs, tune, the timing tests).
///
/// One thread does everything: every wake-up (a chunk, a timer, a finished request) is then a
/// plain task switch, never a futex hand-off between threads, which is what the client's system
/// time went to on shared virtual machines (docs/bench.md, "Client cost"). With two worker
/// threads, a chunk read by one worker and timed by another also waited for that hand-off, which
/// is measurement error.
pub fn client_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn pool_size(s: &Schedule, max_inflight: u32) -> usize {
    match s {
        Schedule::Closed { concurrency } => *concurrency as usize,
        Schedule::Open { .. } => max_inflight as usize,
    }
}

async fn execute_async(
    plan: &BenchPlan,
    machine: Option<MachineSummary>,
    progress: Option<ProgressFn>,
    dataset: &Dataset,
) -> Result<RunOutcome, BenchError> {
    let pool = pool_size(&plan.schedule, plan.max_inflight).max(plan.max_inflight as usize);
    let client =
        http_client(pool, plan.request.timeout).map_err(|e| BenchError::Input(e.to_string()))?;
    let info: ServerInfo = server_info(&client, &plan.url).await?;
    let mut request = plan.request.clone();
    if request.model.is_empty() {
        request.model = info
            .models
            .first()
            .cloned()
            .ok_or_else(|| match &info.models_error {
                Some(why) => BenchError::ModelsFailed {
                    url: plan.url.clone(),
                    why: why.clone(),
                },
                None => BenchError::NoModel(plan.url.clone()),
            })?;
    }
    let (int_tx, int_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if interrupt_signal().await {
            let _ = int_tx.send(true);
        }
    });

    let t_start = Instant::now();
    let mut steps: Vec<(Schedule, crate::exec::RunOutput)> = Vec::new();
    let mut schedules = vec![plan.schedule];
    let mut cpu = crate::exec::CpuUsage::default();
    let mut step_no = 0u32;
    while let Some(schedule) = schedules.pop() {
        let cfg = RunConfig {
            schedule,
            limits: plan.limits,
            warmup: plan.warmup,
            max_duration: plan.max_duration,
            max_inflight: plan.max_inflight,
            max_send_lag: plan.max_send_lag,
            max_error_rate: plan.max_error_rate,
        };
        let mut target = Target::new(client.clone(), &plan.url, request.clone());
        if let Some(t) = &plan.tokenizer {
            target = target.with_tokenizer(t.counter.clone());
        }
        target = target.with_replicas(&plan.replicas.urls, plan.replicas.balance);
        let prog = Arc::new(Progress::default());
        let ticker = progress
            .clone()
            .map(|cb| spawn_ticker(cb, prog.clone(), step_no));
        let out = crate::exec::run(&cfg, target, dataset, prog, Some(int_rx.clone()))
            .await
            .map_err(|e| BenchError::Input(e.to_string()))?;
        if let Some(t) = ticker {
            t.abort();
        }
        cpu.user_s += out.cpu.user_s;
        cpu.system_s += out.cpu.system_s;
        let interrupted = out.stop == StopReason::Interrupted;
        if step_no == 0 && plan.sweep_steps > 0 && !interrupted {
            let (st, _) = compute(&out.records, &plan.slo);
            let mut rates = sweep_rates(st.requests_per_s, plan.sweep_steps);
            rates.reverse(); // popped from the end: lowest first
            schedules.extend(
                rates
                    .into_iter()
                    .enumerate()
                    .map(|(i, rate)| Schedule::Open {
                        rate,
                        arrival: Arrival::Poisson,
                        seed: plan.seed.wrapping_add(i as u64 + 1),
                    }),
            );
        }
        steps.push((schedule, out));
        step_no += 1;
        if interrupted {
            break;
        }
    }

    assemble(plan, request, info, machine, steps, cpu, t_start)
}

/// Report progress every 500 ms while a step runs (aborted when it ends).
fn spawn_ticker(cb: ProgressFn, prog: Arc<Progress>, step: u32) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let t = Instant::now();
        let (mut last_c, mut last_tok, mut last_t) = (0u64, 0u64, 0.0f64);
        let mut iv = tokio::time::interval(Duration::from_millis(500));
        loop {
            iv.tick().await;
            let el = t.elapsed().as_secs_f64();
            let c = prog.completed.load(Ordering::Relaxed);
            let tok = prog.tokens.load(Ordering::Relaxed);
            let dt = (el - last_t).max(1e-3);
            cb(ProgressView {
                elapsed_s: el,
                step,
                sent: prog.sent.load(Ordering::Relaxed),
                in_flight: prog.in_flight(),
                completed: c,
                failed: prog.failed.load(Ordering::Relaxed),
                requests_per_s: (c - last_c) as f64 / dt,
                tokens_per_s: tok.saturating_sub(last_tok) as f64 / dt,
            });
            (last_c, last_tok, last_t) = (c, tok, el);
        }
    })
}

/// The result of the finished steps: statistics per step, the first step as the top level.
fn assemble(
    plan: &BenchPlan,
    request: RequestSettings,
    info: ServerInfo,
    machine: Option<MachineSummary>,
    steps: Vec<(Schedule, crate::exec::RunOutput)>,
    cpu: crate::exec::CpuUsage,
    t_start: Instant,
) -> Result<RunOutcome, BenchError> {
    let mut all_records = Vec::new();
    let mut sweep_steps = Vec::new();
    let mut top = None;
    let mut all_valid = true;
    let mut tokens_all = 0u64;
    for (i, (schedule, out)) in steps.into_iter().enumerate() {
        let (stats, _) = compute(&out.records, &plan.slo);
        let why = invalid_reasons(&out.stop, &stats, &plan.limits, plan.min_requests);
        all_valid &= why.is_empty();
        tokens_all += out
            .records
            .iter()
            .filter(|r| r.is_ok())
            .map(|r| r.output_tokens().0)
            .sum::<u64>();
        if plan.sweep_steps > 0 {
            sweep_steps.push(SweepStep {
                schedule,
                stop: out.stop.clone(),
                valid: why.is_empty(),
                stats: stats.clone(),
            });
        }
        if i == 0 {
            top = Some((stats, why, out.stop.clone()));
        }
        all_records.extend(out.records.into_iter().map(|mut r| {
            r.step = i as u32;
            r
        }));
    }
    let Some((mut stats, mut why, stop)) = top else {
        return Err(BenchError::Input("no step ran".into()));
    };
    if !plan.replicas.urls.is_empty() {
        let mut urls = vec![plan.url.clone()];
        urls.extend(plan.replicas.urls.iter().cloned());
        let first: Vec<RequestRecord> = all_records
            .iter()
            .filter(|r| r.step == 0)
            .cloned()
            .collect();
        stats.endpoints = crate::replicas::per_endpoint(&first, &urls);
    }
    if plan.sweep_steps > 0 && !all_valid && why.is_empty() {
        why.push("a sweep step was not valid (see sweep.steps)".into());
    }
    let saturated = matches!(stop, StopReason::Saturated(_) | StopReason::ErrorRate(_));
    let sweep = (plan.sweep_steps > 0).then_some(Sweep {
        saturation_requests_per_s: stats.requests_per_s,
        steps: sweep_steps,
    });
    let result = BenchResult {
        schema_version: SCHEMA_VERSION,
        tool: plan.tool.clone(),
        started_at: plan.started_at.clone(),
        settings: Settings {
            // Result files get shared: never write credentials embedded in the URL.
            url: inferscope_host::redact::scrub(&plan.url).into_owned(),
            request,
            schedule: plan.schedule,
            limits: plan.limits,
            warmup: plan.warmup,
            max_duration_s: plan.max_duration.as_secs_f64(),
            max_inflight: plan.max_inflight,
            dataset: plan.dataset.to_string(),
            seed: plan.seed,
            slo: plan.slo,
            min_requests: plan.min_requests,
            sweep_steps: plan.sweep_steps,
            tokenizer: plan.tokenizer.as_ref().map(|t| t.setting.clone()),
        },
        server: info,
        machine,
        client: ClientUsage::new(cpu, t_start.elapsed().as_secs_f64(), tokens_all),
        valid: why.is_empty(),
        invalid_reasons: why,
        stop,
        saturated,
        trace: plan.trace.clone(),
        stats,
        sweep,
        repeats: Vec::new(),
        server_metrics: None,
        energy: None,
    };
    Ok(RunOutcome {
        result,
        records: all_records,
    })
}

/// Run the plan `repeat` times (K ≥ 2) against the same server, with the same prompts, and
/// merge: the top-level statistics pool every run's measured requests, `repeats` keeps each
/// run's statistics (what `compare` judges between-run variance on), the run is valid when
/// every repeat is, and client usage is summed. Trace records carry their run in `repeat`.
/// `repeat` ≤ 1 is a plain [`execute`].
pub fn execute_repeated(
    plan: &BenchPlan,
    machine: Option<MachineSummary>,
    progress: Option<ProgressFn>,
    repeat: u32,
) -> Result<RunOutcome, BenchError> {
    if repeat <= 1 {
        return execute(plan, machine, progress);
    }
    if plan.sweep_steps > 0 {
        return Err(BenchError::Input(
            "--repeat and --sweep cannot be combined".into(),
        ));
    }
    let mut outcomes = Vec::new();
    for _ in 0..repeat {
        let o = execute(plan, machine.clone(), progress.clone())?;
        let interrupted = o.result.stop == StopReason::Interrupted;
        outcomes.push(o);
        if interrupted {
            break;
        }
    }
    merge_repeats(outcomes, &plan.slo).ok_or_else(|| BenchError::Input("no repeat ran".into()))
}

/// Merge the outcomes of repeated runs (pure; see [`execute_repeated`]).
pub fn merge_repeats(outcomes: Vec<RunOutcome>, slo: &Slo) -> Option<RunOutcome> {
    let mut it = outcomes.into_iter();
    let first = it.next()?;
    let mut result = first.result;
    let mut records = first.records;
    let mut repeats = vec![result.stats.clone()];
    let mut why: Vec<String> = result
        .invalid_reasons
        .iter()
        .map(|w| format!("run 1: {w}"))
        .collect();
    let (mut user, mut system, mut wall) = (
        result.client.cpu_user_s,
        result.client.cpu_system_s,
        result.client.wall_s,
    );
    for (i, o) in it.enumerate() {
        let run = i as u32 + 1;
        why.extend(
            o.result
                .invalid_reasons
                .iter()
                .map(|w| format!("run {}: {w}", run + 1)),
        );
        user += o.result.client.cpu_user_s;
        system += o.result.client.cpu_system_s;
        wall += o.result.client.wall_s;
        if o.result.stop != StopReason::Requests && o.result.stop != StopReason::Duration {
            result.stop = o.result.stop.clone();
        }
        result.saturated |= o.result.saturated;
        if let (Some(mine), Some(theirs)) = (&mut result.server_metrics, &o.result.server_metrics) {
            // Each run's clock starts at 0: place it after the runs before it.
            mine.append(theirs, wall - o.result.client.wall_s);
        }
        repeats.push(o.result.stats);
        // Each run's clock starts at 0: shift it after the previous run so the pooled window
        // (and so throughput) is the sum of the runs', not their overlap.
        let offset = records.iter().map(|r| r.end_us).max().unwrap_or(0) + 1;
        records.extend(o.records.into_iter().map(|mut r| {
            r.repeat = run;
            r.intended_us += offset;
            r.sent_us += offset;
            r.end_us += offset;
            r.first_token_us = r.first_token_us.map(|t| t + offset);
            for c in r.chunks.iter_mut() {
                c.0 += offset;
            }
            r
        }));
    }
    let tokens: u64 = records
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.output_tokens().0)
        .sum();
    let (stats, _) = compute(&records, slo);
    result.client = ClientUsage::new(
        crate::exec::CpuUsage {
            user_s: user,
            system_s: system,
        },
        wall,
        tokens,
    );
    result.stats = stats;
    result.valid = why.is_empty();
    result.invalid_reasons = why;
    result.repeats = repeats;
    Some(RunOutcome { result, records })
}
