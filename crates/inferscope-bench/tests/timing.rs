//! The client's timing against a scripted server's truth (issue 8): with 1000 concurrent streams
//! every chunk is counted and none is timed before the server wrote it (the accuracy itself is
//! measured by the `timing_accuracy` benchmark). Also: open-loop Poisson arrivals, as actually
//! scheduled and sent, pass a Kolmogorov–Smirnov test.

mod common;

use common::{Mode, completions, runtime, start, streams};
use inferscope_bench::client::{RequestSettings, Target, http_client};
use inferscope_bench::dataset;
use inferscope_bench::exec::{Progress, RunConfig, StopReason, run};
use inferscope_bench::schedule::{Arrival, Limits, Schedule, Warmup};
use std::sync::Arc;
use std::time::Duration;

fn settings() -> RequestSettings {
    completions(true, Duration::from_secs(30), Duration::from_secs(10))
}

/// The network tests of this file run one at a time: they measure timing on a shared 2-core box.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let k = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[k]
}

/// Issue 8's set-up, 1000 concurrent streams of 10 tokens (100 ms apart: 10,000 chunks/s), with
/// what holds on any machine, however loaded: every stream was open at once, every chunk is
/// counted and attributed to its response, and no chunk is timed before the server wrote it
/// (same process, same monotonic clock). A client that stamped chunks with a stale time (from
/// before the read, or a batch's time) fails here.
///
/// How close the times are is a measurement, not a test: a loaded 2-core machine takes the CPU
/// from a thread for milliseconds at a time, and no bound survives that. It is measured by
/// `cargo bench -p inferscope-bench --bench timing_accuracy` (docs/bench.md, README).
#[test]
fn with_1000_streams_every_chunk_is_counted_and_none_is_timed_before_it_was_written() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = streams::run_streams(1000, 10, 100, 1000);
    assert_eq!(m.concurrent, 1000, "streams were not concurrent");
    assert_eq!(m.itl_err_ms.len(), 1000 * 9);
    assert!(
        m.early.is_empty(),
        "{} chunks timed before the server wrote them, e.g. (request, chunk, µs early) {:?}",
        m.early.len(),
        &m.early[..m.early.len().min(5)]
    );
    eprintln!(
        "1000 streams x 10 tokens: TTFT |error| p99 {:.3} ms, ITL |error| p99 {:.3} ms (not asserted)",
        streams::quantile(m.ttft_err_ms, 0.99),
        streams::quantile(m.itl_err_ms, 0.99)
    );
}

/// Kolmogorov–Smirnov statistic of `xs` against Exp(rate).
fn ks_exp(mut xs: Vec<f64>, rate: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let mut d = 0.0f64;
    for (i, x) in xs.iter().enumerate() {
        let f = 1.0 - (-rate * x).exp();
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    d
}

#[test]
fn poisson_schedule_passes_kolmogorov_smirnov() {
    let rate = 100.0;
    let n = 10_000;
    let a: Vec<f64> = inferscope_bench::schedule::Arrivals::new(rate, Arrival::Poisson, 42)
        .unwrap()
        .take(n + 1)
        .map(|d| d.as_secs_f64())
        .collect();
    let gaps: Vec<f64> = a.windows(2).map(|w| w[1] - w[0]).collect();
    let d = ks_exp(gaps.clone(), rate);
    let crit = 1.358 / (n as f64).sqrt(); // alpha = 0.05
    eprintln!("KS D = {d:.5} (n = {n}, critical {crit:.5} at alpha 0.05)");
    assert!(d < crit, "KS D {d} >= {crit}");
    // And the test has power: constant or gamma(4) gaps at the same rate are rejected.
    let c: Vec<f64> = vec![1.0 / rate; n];
    assert!(ks_exp(c, rate) > crit);
    let g: Vec<f64> =
        inferscope_bench::schedule::Arrivals::new(rate, Arrival::Gamma { shape: 4.0 }, 42)
            .unwrap()
            .take(n + 1)
            .map(|d| d.as_secs_f64())
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
    assert!(ks_exp(g, rate) > crit);
}

#[test]
fn open_loop_poisson_run_sends_on_schedule() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    runtime().block_on(async {
        let server = start(Mode::Stream {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(2),
            tokens: 3,
            stagger: false,
        })
        .await;
        let rate = 50.0;
        let cfg = RunConfig {
            schedule: Schedule::Open {
                rate,
                arrival: Arrival::Poisson,
                seed: 7,
            },
            limits: Limits {
                requests: Some(250),
                duration: None,
            },
            warmup: Warmup::Requests(10),
            max_duration: Duration::from_secs(30),
            max_inflight: 256,
            max_send_lag: Duration::from_secs(1),
            max_error_rate: 0.5,
        };
        let client = http_client(256, Duration::from_secs(5)).unwrap();
        let target = Target::new(client, &server.url(), settings());
        let ds = dataset::random(4, 3, 0.0, 1, 8);
        let out = run(&cfg, target, &ds, Arc::new(Progress::default()), None)
            .await
            .unwrap();
        assert_eq!(out.stop, StopReason::Requests);
        assert_eq!(out.records.len(), 260);
        assert_eq!(out.records.iter().filter(|r| r.warmup).count(), 10);
        assert!(out.records.iter().all(|r| r.is_ok()));
        // Actual send times: gaps fit Exp(rate) (timer granularity is 1 ms, mean gap 10 ms).
        let sent: Vec<f64> = out.records.iter().map(|r| r.sent_us as f64 / 1e6).collect();
        let gaps: Vec<f64> = sent.windows(2).map(|w| (w[1] - w[0]).max(0.0)).collect();
        let d = ks_exp(gaps.clone(), rate);
        let crit = 1.358 / (gaps.len() as f64).sqrt();
        let intended: Vec<f64> = out.records.iter().map(|r| r.intended_us as f64 / 1e6).collect();
        let d_int = ks_exp(intended.windows(2).map(|w| w[1] - w[0]).collect(), rate);
        eprintln!("open loop: KS D of intended gaps = {d_int:.4}");
        assert!(d_int < crit, "KS D (intended) {d_int} >= {crit}");
        let lag: Vec<f64> = out
            .records
            .iter()
            .map(|r| (r.sent_us - r.intended_us) as f64 / 1000.0)
            .collect();
        eprintln!(
            "open loop: KS D of actual send gaps = {d:.4} (critical {crit:.4}); send lag p99 {:.3} ms",
            p99(lag)
        );
        assert!(d < crit, "KS D {d} >= {crit}");
    });
}
