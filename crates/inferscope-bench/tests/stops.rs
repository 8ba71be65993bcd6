//! Early stops end a run at once and say why (issue 8: "stops ... on its own when error rate or
//! queueing shows the server is saturated"): open-loop saturation, and an interrupt (Ctrl-C).
//! Requests still in flight are cancelled (counted incomplete, not failed).

mod common;

use common::{Mode, completions, runtime, start};
use inferscope_bench::client::{RequestSettings, Target, http_client};
use inferscope_bench::dataset;
use inferscope_bench::exec::{Progress, RunConfig, RunOutput, StopReason, run};
use inferscope_bench::record::ErrorClass;
use inferscope_bench::schedule::{Arrival, Limits, Schedule, Warmup};
use inferscope_bench::stats::{Slo, compute};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn settings() -> RequestSettings {
    // Long enough that only an early stop can end these runs in time.
    completions(true, Duration::from_secs(60), Duration::from_secs(30))
}

/// Run `cfg` against `mode`; `interrupt_after` sends an interrupt that long after the start.
fn run_with(mode: Mode, cfg: RunConfig, interrupt_after: Option<Duration>) -> RunOutput {
    runtime().block_on(async {
        let server = start(mode).await;
        let client = http_client(64, Duration::from_secs(2)).unwrap();
        let target = Target::new(client, &server.url(), settings());
        let ds = dataset::random(4, 8, 0.0, 1, 4);
        let (int_tx, int_rx) = tokio::sync::watch::channel(false);
        if let Some(after) = interrupt_after {
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = int_tx.send(true);
            });
        }
        run(
            &cfg,
            target,
            &ds,
            Arc::new(Progress::default()),
            Some(int_rx),
        )
        .await
        .unwrap()
    })
}

#[test]
fn open_loop_stops_as_saturated_when_the_server_cannot_keep_up() {
    // 200 requests/s at a server that streams forever, at most 8 in flight: the 9th arrival
    // cannot be sent within 100 ms of its time.
    let cfg = RunConfig {
        schedule: Schedule::Open {
            rate: 200.0,
            arrival: Arrival::Constant,
            seed: 1,
        },
        limits: Limits {
            requests: None,
            duration: Some(Duration::from_secs(30)),
        },
        warmup: Warmup::None,
        max_duration: Duration::from_secs(60),
        max_inflight: 8,
        max_send_lag: Duration::from_millis(100),
        max_error_rate: 1.0,
    };
    let t = Instant::now();
    let out = run_with(Mode::NeverEnds(Duration::from_millis(20)), cfg, None);
    let took = t.elapsed();
    let StopReason::Saturated(why) = &out.stop else {
        panic!("stop {:?}", out.stop);
    };
    assert!(why.contains("8 requests in flight"), "{why}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The 8 in flight were cancelled when the run stopped: incomplete, not failed.
    assert_eq!(out.records.len(), 8);
    assert!(
        out.records
            .iter()
            .all(|r| r.error == Some(ErrorClass::Cancelled))
    );
    let (stats, _) = compute(&out.records, &Slo::default());
    assert_eq!(
        (
            stats.requests.completed,
            stats.requests.failed,
            stats.requests.incomplete
        ),
        (0, 0, 8)
    );
}

#[test]
fn an_interrupt_stops_sending_and_cancels_requests_in_flight() {
    let cfg = RunConfig {
        schedule: Schedule::Closed { concurrency: 4 },
        limits: Limits {
            requests: None,
            duration: Some(Duration::from_secs(30)),
        },
        warmup: Warmup::None,
        max_duration: Duration::from_secs(60),
        max_inflight: 4,
        max_send_lag: Duration::from_secs(1),
        max_error_rate: 1.0,
    };
    let t = Instant::now();
    let out = run_with(
        Mode::NeverEnds(Duration::from_millis(20)),
        cfg,
        Some(Duration::from_millis(300)),
    );
    let took = t.elapsed();
    assert_eq!(out.stop, StopReason::Interrupted);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(out.records.len(), 4);
    for r in &out.records {
        assert_eq!(r.error, Some(ErrorClass::Cancelled), "{r:?}");
        // They were streaming when cancelled: chunks arrived every 20 ms.
        assert!(r.chunks.len() >= 5, "{} chunks", r.chunks.len());
    }
}
