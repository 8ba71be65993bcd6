//! Measuring the candidates (I/O): planning each before anything starts, then rounds of
//! start-measure-stop chosen by the pure halving ([`super::next_round`]) within the budget.

use super::journal::{self, write_json_file};
use super::secrets;
use super::server::{Server, confirm_gpu_free, free_port, http_ok, port_busy, tail};
use super::session::{Cand, Config, Host, Objective, Run, interrupted, say};
use super::{JournalLine, State, fits_budget, halving, next_round};
use crate::client::RequestSettings;
use crate::record;
use crate::run::{BenchPlan, RunOutcome, execute};
use crate::schedule::{Arrival, Limits, Schedule, Warmup};
use anyhow::{Context, bail};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bench settings every candidate is measured with (the URL is filled per run).
pub fn bench_plan(a: &Config) -> anyhow::Result<BenchPlan> {
    let warmup: Warmup = a
        .warmup
        .parse()
        .map_err(|e| anyhow::anyhow!("--warmup: {e}"))?;
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
    Ok(BenchPlan {
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
        started_at: a.started_at.clone(),
        tool: a.tool.clone(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Default::default(),
    })
}

/// Plan every candidate before starting anything; skip (and journal) those that cannot fit.
pub fn plan_all(
    a: &Config,
    host: &dyn Host,
    journal: &Path,
    cands: &mut [Cand],
) -> anyhow::Result<()> {
    for c in cands.iter_mut() {
        let words = c
            .template
            .fill(&c.settings, a.serve_port, a.gpus.as_deref())
            .map_err(anyhow::Error::msg)?;
        c.command = words.clone();
        let (plan, no_fit) = host.plan(&words);
        if let Some(p) = &plan {
            std::fs::create_dir_all(&c.dir)?;
            write_json_file(&c.dir.join("plan.json"), p)?;
        }
        c.plan = plan;
        if c.state == State::Pending
            && let Some(why) = no_fit
        {
            say(a.quiet, &format!("{}: skipped: {why}", c.label));
            journal::append(
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

/// A run's wall time before any was measured: the duration + warm-up + 10 s (capacity: times
/// the probes).
fn per_run_guess(a: &Config, bench: &BenchPlan) -> f64 {
    let warm_s = match bench.warmup {
        Warmup::Duration(d) => d.as_secs_f64(),
        _ => 2.0,
    };
    let guess = a.duration.as_secs_f64() + warm_s + 10.0;
    if a.objective() == Objective::Capacity {
        guess * (f64::from(a.max_probes) + 1.0)
    } else {
        guess
    }
}

/// Before starting: whether the budget can run round 1 (every candidate once), by the same
/// estimate the budget check uses first; if not, say that only what ran will be ranked.
pub fn budget_warning(
    a: &Config,
    bench: &BenchPlan,
    cands: &[Cand],
    baseline: usize,
    started: Instant,
) -> Option<String> {
    let budget = a.budget?.as_secs_f64();
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let h = halving(&states, baseline, a.repeats());
    if h.round != 1 || h.todo.is_empty() {
        return None;
    }
    let guess = per_run_guess(a, bench);
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

/// Outcome of one start-measure-stop.
enum RunEnd {
    Measured(Box<Run>),
    Failed(String),
    Interrupted,
}

/// Measure candidates round by round until done, interrupted or out of budget; true when the
/// budget stopped it.
pub fn run_rounds(
    a: &Config,
    host: &dyn Host,
    bench: &BenchPlan,
    journal: &Path,
    cands: &mut [Cand],
    baseline: usize,
    started: Instant,
) -> anyhow::Result<bool> {
    let repeats = a.repeats();
    let budget = a.budget.map(|b| b.as_secs_f64());
    let mut walls: Vec<f64> = Vec::new();
    let per_run_guess = per_run_guess(a, bench);
    loop {
        let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
        let round = next_round(&states, baseline, repeats);
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
            if !fits_budget(started.elapsed().as_secs_f64(), estimate, budget) {
                return Ok(true);
            }
            let Some(c) = cands.get_mut(i) else { continue };
            let run_no = c.runs.len() + 1;
            say(a.quiet, &format!("{}: run {run_no}", c.label));
            let t0 = Instant::now();
            let end = run_once(a, host, c, bench, run_no)?;
            walls.push(t0.elapsed().as_secs_f64());
            match end {
                RunEnd::Interrupted => return Ok(false),
                RunEnd::Failed(why) => {
                    say(a.quiet, &format!("{}: failed: {why}", c.label));
                    journal::append(
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
                RunEnd::Measured(m) => record_run(a, journal, c, run_no, *m)?,
            }
        }
    }
}

/// The argv to spawn: the filled command, wrapped in `inferscope run` when binding.
fn spawn_argv(a: &Config, words: &[String]) -> anyhow::Result<Vec<String>> {
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

/// Start the candidate, wait for it, measure once, stop it.
fn run_once(
    a: &Config,
    host: &dyn Host,
    c: &mut Cand,
    bench: &BenchPlan,
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
    let gpu_before = host.gpu_used_mib();
    // Through the keeper, so nothing the server starts outlives tune (keeper.rs). Its stdin is
    // a pipe only tune holds: the keeper sees it close however tune ends.
    let exe = std::env::current_exe().context("finding the inferscope executable")?;
    let kargv = super::keeper::argv(&exe.display().to_string(), a.grace, &argv);
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
            let measured = measure(a, bench, port);
            let died = server.child.try_wait().ok().flatten();
            match (measured, died) {
                (_, Some(st)) => RunEnd::Failed(format!("the server died during the run ({st})")),
                (Err(e), None) => RunEnd::Failed(format!("measuring failed: {e}")),
                (Ok((_, true)), None) => RunEnd::Interrupted,
                (Ok((r, false)), None) => RunEnd::Measured(Box::new(r)),
            }
        }
    };
    let how = server.stop(a.grace);
    say(a.quiet, &format!("{}: server {how}", c.label));
    c.gpu_memory
        .push(confirm_gpu_free(&gpu_before, &|| host.gpu_used_mib()));
    if let RunEnd::Failed(_) = &end {
        c.log_tail = Some(tail(&log, 20));
    }
    Ok(end)
}

/// One measurement of the server on `port`: the run, and whether it was interrupted.
fn measure(
    a: &Config,
    bench: &BenchPlan,
    port: u16,
) -> Result<(Run, bool), crate::run::BenchError> {
    let mut p = bench.clone();
    p.url = format!("http://127.0.0.1:{port}");
    // Each candidate's result carries its engine metrics (issue 27): what tune's JSON report
    // shows beside the verdict.
    p.server_metrics = Some(crate::run::MetricsScrape {
        url: format!("{}/metrics", p.url),
        interval: Duration::from_secs(1),
    });
    match a.objective() {
        Objective::Capacity => {
            crate::capacity::find(&p, a.search_settings(), None, None).map(|r| {
                let best = r.best.and_then(|i| r.probes.get(i).cloned());
                (
                    (
                        best.unwrap_or(r.saturation),
                        r.best_records,
                        Some(r.capacity),
                    ),
                    r.interrupted,
                )
            })
        }
        _ => execute(&p, None, None).map(|o: RunOutcome| {
            let int = o.result.stop == crate::exec::StopReason::Interrupted;
            ((o.result, o.records, None), int)
        }),
    }
}

/// Write a measured run's trace and result, journal it, and add it to the candidate.
fn record_run(
    a: &Config,
    journal: &Path,
    c: &mut Cand,
    run_no: usize,
    m: Run,
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
    let rel = journal::relative(&trace_path, &journal::dir_of(journal));
    let objective = a.objective();
    let v = objective.of(&result, cap.as_ref());
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
    journal::append(
        journal,
        &JournalLine::Run {
            settings: c.shown.clone(),
            command: secrets::shown_words(&c.command),
            result: Box::new(result.clone()),
            trace: rel,
            capacity: cap.clone(),
        },
    )?;
    c.push_run((result, recs, cap), v);
    Ok(())
}

/// What was left out: candidates never tried, and (when the budget ran out) those short of
/// their repeats.
pub fn left_out(
    cands: &mut [Cand],
    out_of_budget: bool,
    repeats: u32,
    baseline: usize,
) -> Vec<String> {
    let mut not_tried: Vec<String> = Vec::new();
    let states: Vec<State> = cands.iter().map(|c| c.state.clone()).collect();
    let h = halving(&states, baseline, repeats);
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
