//! Whole benchmarks through `run::execute` against the scripted server: timed runs end on time,
//! sweeps plan their steps below saturation, unreachable servers are input errors.

mod common;

use common::{Mode, start_in_thread};
use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::exec::StopReason;
use inferscope_bench::run::{BenchError, BenchPlan, execute};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use std::time::{Duration, Instant};

fn plan(url: String) -> BenchPlan {
    BenchPlan {
        url,
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
            requests: None,
            duration: Some(Duration::from_secs(1)),
        },
        warmup: Warmup::Duration(Duration::from_millis(200)),
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
        seed: 3,
        slo: "ttft=1s".parse::<Slo>().unwrap(),
        min_requests: 10,
        started_at: "2026-12-02T00:00:00Z".into(),
        tool: "test".into(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Default::default(),
    }
}

fn scripted() -> common::TestServer {
    start_in_thread(Mode::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(2),
        tokens: 4,
        stagger: false,
    })
}

#[test]
fn timed_run_ends_on_time_and_is_valid() {
    let server = scripted();
    let t = Instant::now();
    let out = execute(&plan(server.url()), None, None).unwrap();
    let r = &out.result;
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(r.valid, "{:?}", r.invalid_reasons);
    assert_eq!(r.stop, StopReason::Duration);
    assert_eq!(r.settings.request.model, "scripted");
    assert_eq!(r.server.version.as_deref(), Some("scripted-1.0"));
    assert!(r.stats.requests.warmup > 0);
    assert!(r.stats.duration_s >= 1.0);
    assert_eq!(r.stats.token_count_source, "usage");
    assert!(r.stats.goodput.unwrap().fraction > 0.99);
    let json = serde_json::to_value(r).unwrap();
    for k in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] {
        for f in ["mean", "p50", "p90", "p95", "p99", "p999"] {
            assert!(json[k][f].as_f64().is_some(), "{k}.{f}");
        }
    }
    assert!(json["requests"]["completed"].as_u64().unwrap() > 10);
    assert_eq!(json["requests"]["failed"], 0);
    assert!(json["output_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(json["requests_per_s"].as_f64().unwrap() > 0.0);
    // Round trip through the documented reader.
    // (floats may differ in the last digit: serde_json does not round-trip them exactly)
    let back = inferscope_bench::result::from_json(&json.to_string()).unwrap();
    assert_eq!(back.settings, r.settings);
    assert_eq!(back.stats.requests, r.stats.requests);
    assert_eq!(back.stats.ttft_ms.count, r.stats.ttft_ms.count);
    assert_eq!(back.stop, r.stop);
}

#[test]
fn sweep_steps_rise_below_saturation() {
    let server = scripted();
    let mut p = plan(server.url());
    p.sweep_steps = 2;
    p.warmup = Warmup::None;
    let out = execute(&p, None, None).unwrap();
    let sw = out.result.sweep.as_ref().unwrap();
    assert_eq!(sw.steps.len(), 3);
    let rates: Vec<f64> = sw.steps[1..]
        .iter()
        .map(|s| match s.schedule {
            Schedule::Open { rate, .. } => rate,
            Schedule::Closed { .. } => panic!("closed step after the first"),
        })
        .collect();
    assert!((rates[0] - sw.saturation_requests_per_s / 3.0).abs() < 1e-6);
    assert!((rates[1] - 2.0 * sw.saturation_requests_per_s / 3.0).abs() < 1e-6);
    assert!(out.records.iter().any(|r| r.step == 2));
    let svgs = inferscope_bench::plot::plots(&[("run".into(), &out.result)]);
    assert!(svgs.iter().any(|(n, _)| n == "sweep_ttft.svg"));
}

#[test]
fn unreachable_server_is_an_input_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = execute(&plan(format!("http://127.0.0.1:{port}")), None, None).unwrap_err();
    assert!(matches!(err, BenchError::Unreachable(_)), "{err}");
    assert!(err.to_string().contains("cannot reach"), "{err}");
}

/// Issue 33: a server whose `/v1/models` fails (here HTTP 404 to everything) was reported as
/// "lists no model"; the error now says what failed.
#[test]
fn a_failing_models_endpoint_is_named_not_called_empty() {
    let server = start_in_thread(Mode::NotFound);
    let addr = server.addr;
    let err = execute(&plan(format!("http://{addr}")), None, None).unwrap_err();
    assert!(matches!(err, BenchError::ModelsFailed { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the server at http://{addr} did not list its models: GET /v1/models: HTTP 404; pass --model"
        )
    );
}

/// docs/SECURITY.md: `bench` follows no redirect. A server answering every completion with a
/// 302 to another listener gets `http_status` errors, and the other listener no request.
#[test]
fn redirects_are_errors_and_never_followed() {
    use std::sync::atomic::Ordering;
    let elsewhere = start_in_thread(Mode::Silent);
    let target = format!("{}/v1/completions", elsewhere.url());
    let server = start_in_thread(Mode::Redirect(target));
    let addr = server.addr;
    let mut p = plan(format!("http://{addr}"));
    p.limits = Limits {
        requests: Some(20),
        duration: None,
    };
    p.warmup = Warmup::None;
    let out = execute(&p, None, None).unwrap();
    let errors = &out.result.stats.errors;
    assert!(
        errors.get("http_status").is_some_and(|n| *n > 0),
        "{errors:?}"
    );
    assert_eq!(out.result.stats.requests.completed, 0);
    assert_eq!(
        elsewhere.truth.connections.load(Ordering::SeqCst),
        0,
        "a redirect was followed"
    );
}
