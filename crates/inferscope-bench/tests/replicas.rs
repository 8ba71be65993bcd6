//! Several endpoints (`--url A --url B`): round robin splits requests evenly, least-outstanding
//! sends more to the faster replica, and the result reports each endpoint.

mod common;

use common::{Mode, start_in_thread};
use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::replicas::Balance;
use inferscope_bench::run::{BenchPlan, Replicas, execute};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn server(ttft_ms: u64) -> common::TestServer {
    start_in_thread(Mode::Stream {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(1),
        tokens: 4,
        stagger: false,
    })
}

fn plan(urls: &[String], balance: Balance) -> BenchPlan {
    BenchPlan {
        url: urls[0].clone(),
        request: RequestSettings {
            api: Api::Completions,
            model: String::new(),
            stream: true,
            ignore_eos: true,
            temperature: 0.0,
            timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
        },
        schedule: Schedule::Closed { concurrency: 4 },
        sweep_steps: 0,
        limits: Limits {
            requests: Some(60),
            duration: None,
        },
        warmup: Warmup::None,
        max_duration: Duration::from_secs(30),
        max_inflight: 64,
        max_send_lag: Duration::from_secs(1),
        max_error_rate: 0.5,
        dataset: DatasetSpec::Random {
            input: 8,
            output: 4,
            spread: 0.0,
        },
        default_max_tokens: 4,
        seed: 1,
        slo: Slo::default(),
        min_requests: 1,
        started_at: "2026-12-04T00:00:00Z".into(),
        tool: "test".into(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Replicas {
            urls: urls[1..].to_vec(),
            balance,
        },
    }
}

#[test]
fn round_robin_splits_evenly_and_reports_each_endpoint() {
    let (a, b) = (server(2), server(2));
    let out = execute(&plan(&[a.url(), b.url()], Balance::RoundRobin), None, None).unwrap();
    assert_eq!(out.result.stats.requests.completed, 60);
    assert_eq!(a.truth.requests.load(Ordering::Relaxed), 30);
    assert_eq!(b.truth.requests.load(Ordering::Relaxed), 30);
    let e = &out.result.stats.endpoints;
    assert_eq!(e.len(), 2);
    assert_eq!((e[0].url.as_str(), e[0].completed), (a.url().as_str(), 30));
    assert_eq!((e[1].url.as_str(), e[1].completed), (b.url().as_str(), 30));
    assert_eq!(
        e[0].output_tokens + e[1].output_tokens,
        out.result.stats.output_tokens
    );
    assert!(
        out.records
            .iter()
            .all(|r| r.endpoint == Some((r.seq % 2) as u32))
    );
}

#[test]
fn least_outstanding_favours_the_faster_replica() {
    let (slow, fast) = (server(60), server(2));
    let out = execute(
        &plan(&[slow.url(), fast.url()], Balance::LeastOutstanding),
        None,
        None,
    )
    .unwrap();
    assert_eq!(out.result.stats.requests.completed, 60);
    let (s, f) = (
        slow.truth.requests.load(Ordering::Relaxed),
        fast.truth.requests.load(Ordering::Relaxed),
    );
    // With 4 in flight, the slow one holds about 2 at a time for 60 ms while the fast one
    // turns its 2 over every few ms: most requests go to the fast one.
    assert!(f > 3 * s, "fast {f}, slow {s}");
    let e = &out.result.stats.endpoints;
    assert!(e[0].ttft_ms.p50.unwrap() > e[1].ttft_ms.p50.unwrap());
}

#[test]
fn one_url_records_no_endpoint() {
    let a = server(2);
    let out = execute(&plan(&[a.url()], Balance::RoundRobin), None, None).unwrap();
    assert!(out.result.stats.endpoints.is_empty());
    assert!(out.records.iter().all(|r| r.endpoint.is_none()));
}
