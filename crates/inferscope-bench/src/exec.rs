//! Drive one schedule through the client and collect the raw records.
//!
//! One send path for every mode: a closed loop is N workers that each send as soon as their
//! previous request ends (intended time = that moment); an open loop is one dispatcher that
//! sleeps until the next absolute arrival time and spawns the request. Both call the same
//! [`launch`] and feed the same collector, which also watches for saturation.
//!
//! Ending, always on time:
//! * Sending stops at `--requests` measured requests, at `--duration` of measured sending, or at
//!   `max_duration` (a hard cap on the whole sending phase), whichever comes first.
//! * Requests in flight then finish on their own; each is bounded by its `timeout`.
//! * An early stop (saturation, error rate, Ctrl-C) aborts requests in flight at once; they are
//!   recorded with class `cancelled` and counted as incomplete.
//! * Saturation: in an open loop, when the next arrival cannot be sent within `max_send_lag` of
//!   its intended time because `max_inflight` requests are outstanding; in any mode, when more
//!   than `max_error_rate` of the last 50 finished requests failed (after at least 20).

use crate::client::{Target, now_us};
use crate::dataset::Dataset;
use crate::record::{ErrorClass, RequestRecord};
use crate::schedule::{Limits, Schedule, ScheduleError, Warmup};
use crate::tokenizer::TokenCounter;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc, watch};

/// How a run is driven.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Load pattern.
    pub schedule: Schedule,
    /// When sending stops.
    pub limits: Limits,
    /// Warm-up (excluded from statistics).
    pub warmup: Warmup,
    /// Hard cap on the sending phase (warm-up included).
    pub max_duration: Duration,
    /// Most requests in flight in an open loop.
    pub max_inflight: u32,
    /// Open loop: stop as saturated when an arrival is this late for want of a free slot.
    pub max_send_lag: Duration,
    /// Stop when this fraction of recent requests failed (1.0 disables).
    pub max_error_rate: f64,
}

/// Why sending stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
pub enum StopReason {
    /// The requested number of requests was sent.
    Requests,
    /// The requested duration elapsed.
    Duration,
    /// `max_duration` elapsed first.
    MaxDuration,
    /// The server (or the client) could not keep up.
    Saturated(String),
    /// Too many requests failed.
    ErrorRate(String),
    /// Ctrl-C.
    Interrupted,
}

impl StopReason {
    /// An early stop (the run did not finish its plan).
    pub fn is_early(&self) -> bool {
        !matches!(self, StopReason::Requests | StopReason::Duration)
    }
}

/// Live counters (for progress display).
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent (warm-up included).
    pub sent: AtomicU64,
    /// Finished without error.
    pub completed: AtomicU64,
    /// Finished with an error.
    pub failed: AtomicU64,
    /// Output tokens of completed requests.
    pub tokens: AtomicU64,
}

impl Progress {
    /// Requests in flight.
    pub fn in_flight(&self) -> u64 {
        let done = self.completed.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed);
        self.sent.load(Ordering::Relaxed).saturating_sub(done)
    }
}

/// Client CPU time consumed during the run (this process, all threads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// User seconds.
    pub user_s: f64,
    /// System seconds.
    pub system_s: f64,
}

impl CpuUsage {
    /// This process so far (`getrusage(RUSAGE_SELF)`); zero if unavailable.
    pub fn now() -> Self {
        // SAFETY: getrusage writes into the zeroed struct we pass and reads nothing else.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a rusage; RUSAGE_SELF is a valid `who`.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        if rc != 0 {
            return CpuUsage::default();
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuUsage {
            user_s: tv(ru.ru_utime),
            system_s: tv(ru.ru_stime),
        }
    }

    /// `self − earlier`.
    pub fn since(&self, earlier: &CpuUsage) -> CpuUsage {
        CpuUsage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// Every request, warm-up included, sorted by sequence number.
    pub records: Vec<RequestRecord>,
    /// The instant all `*_us` times count from.
    pub t0: Instant,
    /// Why sending stopped.
    pub stop: StopReason,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Client CPU during the run.
    pub cpu: CpuUsage,
}

/// One prepared request: body, `max_tokens`, prompt length in the dataset's unit, the
/// prompt's token count per the local tokenizer (counted when the dataset was built), and the
/// prompt length a prefix cache could serve.
type PreparedBody = (Bytes, u32, u32, Option<u64>, Option<u32>);

struct Shared {
    target: Target,
    bodies: Vec<PreparedBody>,
    /// Prompts built as they are sent (traces, shared prefixes) instead of `bodies`.
    lazy: Option<Arc<crate::workload::Lazy>>,
    t0: Instant,
    abort: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<RequestRecord>,
    progress: Arc<Progress>,
}

impl Shared {
    /// The body for request `seq` (cycling). An empty dataset (the loaders never build one)
    /// sends an empty body, which the server rejects, rather than panicking.
    fn body(&self, seq: u64) -> PreparedBody {
        if let Some(l) = &self.lazy {
            return l.prompt(seq).map_or_else(Default::default, |p| {
                (
                    crate::client::body(self.target.settings(), &p),
                    p.max_tokens,
                    p.len,
                    p.tokens,
                    p.reusable,
                )
            });
        }
        let n = self.bodies.len().max(1) as u64;
        self.bodies
            .get((seq % n) as usize)
            .cloned()
            .unwrap_or_default()
    }
}

/// Send request `seq` and deliver its record to the collector. An open loop's in-flight `slot`
/// is given back as soon as the record is delivered, before the body's end is drained: a slow
/// terminator must not count against `max_inflight` (and stop the run as saturated).
async fn launch(
    sh: &Shared,
    seq: u64,
    warmup: bool,
    intended_us: u64,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    let prepared = sh.body(seq);
    launch_with(sh, seq, warmup, intended_us, slot, prepared, None).await;
}

/// [`launch`] with a body prepared by the caller; for a session turn (`session`, `turn`), the
/// reply's text is returned (the next turn re-sends it), `None` when the turn failed.
async fn launch_with(
    sh: &Shared,
    seq: u64,
    warmup: bool,
    intended_us: u64,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    prepared: PreparedBody,
    session: Option<(u64, u32)>,
) -> Option<String> {
    let (body, max_tokens, prompt_len, prompt_tokens, reusable) = prepared;
    let mut rec = RequestRecord::new(seq, warmup, intended_us, now_us(sh.t0));
    rec.max_tokens = max_tokens;
    rec.prompt_len = prompt_len;
    rec.tokenizer_input_tokens = prompt_tokens;
    rec.reusable_prefix = reusable;
    if let Some((s, t)) = session {
        rec.session = Some(s);
        rec.turn = Some(t);
    }
    sh.progress.sent.fetch_add(1, Ordering::Relaxed);
    let mut abort = sh.abort.clone();
    let mut rest = None;
    let finished = {
        let fut = sh.target.send_keep(body, &mut rec, sh.t0);
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => {
                rest = r;
                true
            }
            _ = abort.wait_for(|a| *a) => false,
        }
    };
    if !finished {
        rec.end_us = now_us(sh.t0);
        rec.fail(
            ErrorClass::Cancelled,
            "run stopped before the response ended",
        );
    }
    if rec.is_ok() {
        sh.progress.completed.fetch_add(1, Ordering::Relaxed);
        sh.progress
            .tokens
            .fetch_add(rec.output_tokens().0, Ordering::Relaxed);
    } else {
        sh.progress.failed.fetch_add(1, Ordering::Relaxed);
    }
    let reply = match session {
        // Kept in the record too when the tokenizer counts it after the run.
        Some(_) if rec.is_ok() && sh.target.tokenizer().is_some() => rec.generated_text.clone(),
        Some(_) if rec.is_ok() => rec.generated_text.take(),
        _ => None,
    };
    let _ = sh.tx.send(rec);
    drop(slot);
    // The record is complete and delivered: now read the body's end so the next request of this
    // slot reuses the connection.
    if let Some(rest) = rest {
        tokio::select! {
            () = rest.drain() => {}
            _ = abort.wait_for(|a| *a) => {}
        }
    }
    reply
}

/// Tracks the measured window and decides, per request, whether sending may go on.
struct Gate {
    limits: Limits,
    warmup: Warmup,
    max_duration_us: u64,
    /// Intended time of the first measured request (`u64::MAX` until then).
    measure_start: AtomicU64,
    stopped: AtomicBool,
    stop_reason: std::sync::Mutex<Option<StopReason>>,
}

enum Admit {
    Send { warmup: bool },
    Stop,
}

impl Gate {
    fn stop(&self, reason: StopReason) {
        if let Ok(mut r) = self.stop_reason.lock()
            && r.is_none()
        {
            *r = Some(reason);
        }
        self.stopped.store(true, Ordering::SeqCst);
    }

    fn admit(&self, seq: u64, intended_us: u64) -> Admit {
        if self.stopped.load(Ordering::SeqCst) {
            return Admit::Stop;
        }
        if intended_us >= self.max_duration_us {
            self.stop(StopReason::MaxDuration);
            return Admit::Stop;
        }
        let intended = Duration::from_micros(intended_us);
        if self.warmup.covers(seq, intended) {
            return Admit::Send { warmup: true };
        }
        let warm_n = match self.warmup {
            Warmup::Requests(n) => n,
            _ => 0,
        };
        // The first measured request may be sent by several workers at once; take the earliest.
        let start = self
            .measure_start
            .fetch_min(intended_us, Ordering::SeqCst)
            .min(intended_us);
        if let Some(n) = self.limits.requests
            && seq.saturating_sub(warm_n) >= n
        {
            self.stop(StopReason::Requests);
            return Admit::Stop;
        }
        if let Some(d) = self.limits.duration
            && intended_us.saturating_sub(start) >= u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
        {
            self.stop(StopReason::Duration);
            return Admit::Stop;
        }
        Admit::Send { warmup: false }
    }
}

/// Run the schedule against the target. Never panics on anything the server does; returns an
/// error only for an invalid schedule.
pub async fn run(
    cfg: &RunConfig,
    target: Target,
    dataset: &Dataset,
    progress: Arc<Progress>,
    interrupt: Option<watch::Receiver<bool>>,
) -> Result<RunOutput, ScheduleError> {
    cfg.schedule.validate()?;
    // A trace's own timestamps replace the schedule: it is replayed as an open loop.
    let arrivals: Option<ArrivalIter> = match dataset.lazy.as_ref().and_then(|l| l.arrivals()) {
        Some(a) => Some(Box::new(a)),
        None => match cfg.schedule.arrivals() {
            Some(a) => Some(Box::new(a?)),
            None => None,
        },
    };
    let bodies: Vec<PreparedBody> = dataset
        .prompts
        .iter()
        .map(|p| {
            (
                crate::client::body(target.settings(), p),
                p.max_tokens,
                p.len,
                p.tokens,
                p.reusable,
            )
        })
        .collect();
    let counter = target.tokenizer().cloned();
    let target = if dataset.sessions.is_some() {
        target.keeping_text()
    } else {
        target
    };
    let (abort_tx, abort_rx) = watch::channel(false);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cpu0 = CpuUsage::now();
    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        target,
        bodies,
        lazy: dataset.lazy.clone(),
        t0,
        abort: abort_rx,
        tx,
        progress: progress.clone(),
    });
    let gate = Arc::new(Gate {
        limits: cfg.limits,
        warmup: cfg.warmup,
        max_duration_us: u64::try_from(cfg.max_duration.as_micros()).unwrap_or(u64::MAX),
        measure_start: AtomicU64::new(u64::MAX),
        stopped: AtomicBool::new(false),
        stop_reason: std::sync::Mutex::new(None),
    });
    let (stop_tx, stop_rx) = watch::channel(false);

    let mut senders = match (&dataset.sessions, cfg.schedule) {
        (Some(spec), Schedule::Closed { concurrency }) => {
            spawn_sessions(spec, concurrency, &shared, &gate, &stop_rx)
        }
        _ => spawn_senders(cfg, arrivals, &shared, &gate, &stop_rx),
    };
    // The collector keeps the only other sender alive through `shared`; drop ours so the channel
    // closes when the last request task ends.
    let shared_weak = Arc::downgrade(&shared);
    drop(shared);

    let mut records = Vec::new();
    let mut recent: VecDeque<bool> = VecDeque::with_capacity(50);
    let mut interrupt = interrupt;
    let _ = &mut interrupt;
    let mut senders_done = false;
    let mut aborted = false;
    loop {
        tokio::select! {
            r = rx.recv() => {
                let Some(r) = r else { break };
                if !r.warmup && !r.is_cancelled() {
                    if recent.len() == 50 {
                        recent.pop_front();
                    }
                    recent.push_back(r.is_ok());
                    let failed = recent.iter().filter(|ok| !**ok).count();
                    if recent.len() >= 20
                        && cfg.max_error_rate < 1.0
                        && failed as f64 / recent.len() as f64 > cfg.max_error_rate
                        && !aborted
                    {
                        gate.stop(StopReason::ErrorRate(format!(
                            "{failed} of the last {} requests failed",
                            recent.len()
                        )));
                    }
                }
                records.push(r);
            }
            s = senders.join_next(), if !senders_done => {
                if s.is_none() {
                    senders_done = true;
                }
            }
            _ = async {
                match interrupt.as_mut() {
                    Some(i) => { let _ = i.wait_for(|v| *v).await; }
                    None => std::future::pending::<()>().await,
                }
            }, if !aborted => {
                gate.stop(StopReason::Interrupted);
            }
        }
        let reason = gate.stop_reason.lock().ok().and_then(|r| r.clone());
        if let Some(reason) = reason {
            let _ = stop_tx.send(true);
            if reason.is_early() && !aborted && !matches!(reason, StopReason::MaxDuration) {
                aborted = true;
                let _ = abort_tx.send(true);
            }
        }
        if senders_done && shared_weak.strong_count() == 0 && rx.is_empty() {
            // Every request task has delivered and dropped its handle.
            while let Ok(r) = rx.try_recv() {
                records.push(r);
            }
            break;
        }
    }
    records.sort_by_key(|r| r.seq);
    let stop = gate
        .stop_reason
        .lock()
        .ok()
        .and_then(|r| r.clone())
        .unwrap_or(StopReason::Requests);
    let (elapsed, cpu) = (t0.elapsed(), CpuUsage::now().since(&cpu0));
    if let Some(counter) = counter {
        count_generated_after_run(&mut records, &counter);
        if let Some(l) = &dataset.lazy {
            count_lazy_prompts(&mut records, l, &counter);
        }
    }
    Ok(RunOutput {
        records,
        t0,
        stop,
        elapsed,
        cpu,
    })
}

/// Count each record's kept generated text with the local tokenizer and drop the text. Done
/// once the run is over (and outside its CPU figure): counting as each response ended ran on
/// the client's one thread and delayed the chunks of every other stream, by milliseconds for a
/// long answer.
pub fn count_generated_after_run(records: &mut [RequestRecord], counter: &TokenCounter) {
    for r in records {
        if let Some(text) = r.generated_text.take() {
            r.tokenizer_output_tokens = counter.count_generated(&text);
        }
    }
}

/// Start `concurrency` session workers: each runs one conversation after another, every turn
/// re-sending the history and the previous reply (see [`crate::sessions`]).
fn spawn_sessions(
    spec: &crate::sessions::Sessions,
    concurrency: u32,
    shared: &Arc<Shared>,
    gate: &Arc<Gate>,
    stop_rx: &watch::Receiver<bool>,
) -> tokio::task::JoinSet<()> {
    let mut senders = tokio::task::JoinSet::new();
    let next = Arc::new(AtomicU64::new(0));
    let next_session = Arc::new(AtomicU64::new(0));
    for _ in 0..concurrency {
        let (sh, gate, next, next_session) = (
            shared.clone(),
            gate.clone(),
            next.clone(),
            next_session.clone(),
        );
        let (spec, mut stop_rx) = (spec.clone(), stop_rx.clone());
        senders.spawn(async move {
            loop {
                let sid = next_session.fetch_add(1, Ordering::SeqCst);
                let mut h = crate::sessions::History::new(&spec);
                for turn in 0..spec.turns {
                    if turn > 0 && !spec.think.is_zero() {
                        tokio::select! {
                            () = tokio::time::sleep(spec.think) => {}
                            _ = stop_rx.wait_for(|s| *s) => return,
                        }
                    }
                    let intended = now_us(sh.t0);
                    let seq = next.fetch_add(1, Ordering::SeqCst);
                    let warmup = match gate.admit(seq, intended) {
                        Admit::Stop => return,
                        Admit::Send { warmup } => warmup,
                    };
                    h.push_user(&spec, sid, turn);
                    let prepared = (
                        h.body(sh.target.settings(), spec.output),
                        spec.output,
                        h.words(),
                        None,
                        Some(h.words_before()),
                    );
                    let reply = launch_with(
                        &sh,
                        seq,
                        warmup,
                        intended,
                        None,
                        prepared,
                        Some((sid, turn)),
                    )
                    .await;
                    match reply {
                        Some(text) => h.push_reply(text),
                        // A failed turn ends its conversation.
                        None => break,
                    }
                }
            }
        });
    }
    senders
}

/// Count the prompts of a workload built at send time, once the run is over (counting a
/// long prompt as it is sent would delay the sends after it): the prompt is built again from
/// the same seed, so the count is of the text that was sent.
pub fn count_lazy_prompts(
    records: &mut [RequestRecord],
    lazy: &crate::workload::Lazy,
    counter: &TokenCounter,
) {
    for r in records {
        if let Some(p) = lazy.prompt(r.seq) {
            r.tokenizer_input_tokens = counter.count_prompt(&p.text);
        }
    }
}

/// Intended send offsets of an open loop: generated from the schedule, or a trace's.
type ArrivalIter = Box<dyn Iterator<Item = Duration> + Send>;

/// Start the senders, once per run: `concurrency` closed-loop tasks, or one open-loop task that
/// sends at each arrival time and stops the run when the server cannot keep up.
fn spawn_senders(
    cfg: &RunConfig,
    arrivals: Option<ArrivalIter>,
    shared: &Arc<Shared>,
    gate: &Arc<Gate>,
    stop_rx: &watch::Receiver<bool>,
) -> tokio::task::JoinSet<()> {
    let mut senders = tokio::task::JoinSet::new();
    match (cfg.schedule, arrivals) {
        (Schedule::Closed { concurrency }, None) => {
            let next = Arc::new(AtomicU64::new(0));
            for _ in 0..concurrency {
                let (sh, gate, next) = (shared.clone(), gate.clone(), next.clone());
                senders.spawn(async move {
                    loop {
                        let intended = now_us(sh.t0);
                        let seq = next.fetch_add(1, Ordering::SeqCst);
                        match gate.admit(seq, intended) {
                            Admit::Stop => break,
                            Admit::Send { warmup } => {
                                launch(&sh, seq, warmup, intended, None).await
                            }
                        }
                    }
                });
            }
        }
        (_, Some(arrivals)) => {
            let (sh, gate) = (shared.clone(), gate.clone());
            let slots = Arc::new(Semaphore::new(cfg.max_inflight.max(1) as usize));
            let max_lag = cfg.max_send_lag;
            let max_inflight = cfg.max_inflight;
            let mut stop_rx = stop_rx.clone();
            senders.spawn(async move {
                let start = tokio::time::Instant::from_std(sh.t0);
                for (seq, at) in (0u64..).zip(arrivals) {
                    let intended = u64::try_from(at.as_micros()).unwrap_or(u64::MAX);
                    let when = start + at;
                    if tokio::time::Instant::now() < when {
                        tokio::select! {
                            () = tokio::time::sleep_until(when) => {}
                            _ = stop_rx.wait_for(|s| *s) => break,
                        }
                    }
                    let warmup = match gate.admit(seq, intended) {
                        Admit::Stop => break,
                        Admit::Send { warmup } => warmup,
                    };
                    let permit = match slots.clone().try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => {
                            let late = when + max_lag;
                            tokio::select! {
                                p = slots.clone().acquire_owned() => match p {
                                    Ok(p) => p,
                                    Err(_) => break,
                                },
                                () = tokio::time::sleep_until(late) => {
                                    gate.stop(StopReason::Saturated(format!(
                                        "{max_inflight} requests in flight and the next arrival \
                                         was {max_lag:?} late: the server cannot keep up with the rate"
                                    )));
                                    break;
                                }
                                _ = stop_rx.wait_for(|s| *s) => break,
                            }
                        }
                    };
                    let sh2 = sh.clone();
                    tokio::spawn(async move {
                        launch(&sh2, seq, warmup, intended, Some(permit)).await;
                    });
                }
            });
        }
        (Schedule::Open { .. }, None) => {}
    }
    senders
}
