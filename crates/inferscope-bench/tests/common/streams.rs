//! 1000 concurrent streams against the scripted server, compared with its truth: shared by the
//! timing test (which checks what always holds) and the `timing_accuracy` benchmark (which
//! measures how close the client's times are).

use inferscope_bench::client::{Target, http_client};
use inferscope_bench::dataset;
use inferscope_bench::exec::{Progress, RunConfig, StopReason, run};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::{Slo, compute};
use inferscope_testkit::{Mode, start_in_thread};
use std::sync::Arc;
use std::time::Duration;

/// What one run of 1000 streams found, against the server's truth.
pub struct Streams {
    /// |measured − true| TTFT per request, ms.
    pub ttft_err_ms: Vec<f64>,
    /// |measured − true| gap per pair of consecutive chunks, ms.
    pub itl_err_ms: Vec<f64>,
    /// True gaps, ms.
    pub itl_true_ms: Vec<f64>,
    /// Chunks the client timed before the server wrote them (more than 1 µs early: the
    /// client's times are whole microseconds), as (request, chunk, µs early).
    pub early: Vec<(usize, usize, f64)>,
    /// Requests whose first token came after every request was sent (all were open at once).
    pub concurrent: usize,
    /// Measured TTFT p50, ms, and the client's CPU seconds.
    pub ttft_p50_ms: f64,
    pub cpu_s: f64,
}

/// p-quantile (nearest rank) of `v`.
pub fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let k = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[k]
}

/// One run: `streams` concurrent streams of `tokens` tokens, `ttft_ms` to the first and
/// `itl_ms` between, staggered so the server writes evenly. The client runs on the product's
/// one-thread runtime pinned to the first CPU; the server on its own thread on the second.
pub fn run_streams(streams: u32, tokens: u32, itl_ms: u64, ttft_ms: u64) -> Streams {
    super::pin_this_thread(0);
    super::runtime().block_on(async {
        let server = start_in_thread(Mode::Stream {
            ttft: Duration::from_millis(ttft_ms),
            itl: Duration::from_millis(itl_ms),
            tokens,
            stagger: true,
        });
        let cfg = RunConfig {
            schedule: Schedule::Closed {
                concurrency: streams,
            },
            limits: Limits {
                requests: Some(u64::from(streams)),
                duration: None,
            },
            warmup: Warmup::None,
            max_duration: Duration::from_secs(60),
            max_inflight: streams,
            max_send_lag: Duration::from_secs(1),
            max_error_rate: 1.0,
        };
        let settings = super::completions(true, Duration::from_secs(30), Duration::from_secs(10));
        let client = http_client(streams as usize, Duration::from_secs(10)).unwrap();
        let target = Target::new(client, &server.url(), settings);
        let ds = dataset::random(8, tokens, 0.0, 1, 16);
        let out = run(&cfg, target, &ds, Arc::new(Progress::default()), None)
            .await
            .unwrap();
        assert_eq!(out.stop, StopReason::Requests);
        assert_eq!(out.records.len(), streams as usize);
        let failed: Vec<_> = out.records.iter().filter(|r| !r.is_ok()).collect();
        assert!(
            failed.is_empty(),
            "failed: {:?}",
            &failed[..failed.len().min(3)]
        );

        // Truth on the client's time base.
        let truth = server.truth.writes.lock().unwrap();
        let to_us = |i: std::time::Instant| i.duration_since(out.t0).as_secs_f64() * 1e6;
        let (mut ttft_err, mut itl_err, mut itl_true, mut early) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (n, r) in out.records.iter().enumerate() {
            let id = r.response_id.as_ref().expect("response id");
            let w = truth.get(id).expect("server wrote this response");
            assert_eq!(r.chunks.len(), tokens as usize);
            assert_eq!(r.output_tokens().0, u64::from(tokens));
            for (k, c) in r.chunks.iter().enumerate() {
                let ahead = to_us(w[k]) - c.0 as f64;
                if ahead > 1.0 {
                    early.push((n, k, ahead));
                }
            }
            // TTFT: measured (first chunk − intended) vs true (server's first write − intended).
            let meas = r.first_token_us.unwrap() as f64 - r.intended_us as f64;
            let tru = to_us(w[0]) - r.intended_us as f64;
            ttft_err.push((meas - tru).abs() / 1000.0);
            for k in 1..w.len() {
                let m = (r.chunks[k].0 as f64 - r.chunks[k - 1].0 as f64) / 1000.0;
                let t = (to_us(w[k]) - to_us(w[k - 1])) / 1000.0;
                itl_err.push((m - t).abs());
                itl_true.push(t);
            }
        }
        let last_sent = out.records.iter().map(|r| r.sent_us).max().unwrap();
        let concurrent = out
            .records
            .iter()
            .filter(|r| r.first_token_us.unwrap() > last_sent)
            .count();
        let (stats, _) = compute(&out.records, &Slo::default());
        Streams {
            ttft_err_ms: ttft_err,
            itl_err_ms: itl_err,
            itl_true_ms: itl_true,
            early,
            concurrent,
            ttft_p50_ms: stats.ttft_ms.p50.unwrap(),
            cpu_s: out.cpu.user_s + out.cpu.system_s,
        }
    })
}
