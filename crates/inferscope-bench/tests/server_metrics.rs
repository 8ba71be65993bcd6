//! Engine metrics during a bench (issue 27 item 3): a scripted completions server plus a
//! scripted `/metrics` on the same server serving the real llama-server exposition (fixtures/server-metrics), and
//! an unreachable metrics URL that leaves the run valid with "unknown".

mod common;

use common::{Mode, Script, start_in_thread};
use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::dataset::DatasetSpec;
use inferscope_bench::run::{BenchPlan, MetricsScrape, execute};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn plan(url: String, metrics: Option<MetricsScrape>) -> BenchPlan {
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
        schedule: Schedule::Closed { concurrency: 2 },
        sweep_steps: 0,
        limits: Limits {
            requests: None,
            duration: Some(Duration::from_millis(1200)),
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
        seed: 3,
        slo: Slo::default(),
        min_requests: 1,
        started_at: "2026-12-04T00:00:00Z".into(),
        tool: "test".into(),
        trace: None,
        tokenizer: None,
        server_metrics: metrics,
        replicas: Default::default(),
    }
}

fn stream() -> Mode {
    Mode::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(2),
        tokens: 4,
        stagger: false,
    }
}

fn completions() -> common::TestServer {
    start_in_thread(stream())
}

/// The scripted completions server with a `/metrics` answering the real llama-server exposition,
/// `llamacpp:requests_processing` set to the scrape's number (0, 1, 2, ...) so the series is
/// known; every other line is the captured text, verbatim. Returns the server and its metrics URL.
fn with_metrics() -> (common::TestServer, String) {
    let real = inferscope_testkit::metrics_fixture("llama-server");
    assert!(real.contains("\nllamacpp:requests_processing 0\n"));
    let server = Script::new(stream())
        .metrics(move |k| {
            real.replace(
                "\nllamacpp:requests_processing 0\n",
                &format!("\nllamacpp:requests_processing {k}\n"),
            )
        })
        .start_in_thread();
    let url = format!("{}/metrics", server.url());
    (server, url)
}

#[test]
fn a_bench_records_the_servers_metrics_as_series_and_summary() {
    let (server, url) = with_metrics();
    let interval = Duration::from_millis(200);
    let out = execute(
        &plan(
            server.url(),
            Some(MetricsScrape {
                url: url.clone(),
                interval,
            }),
        ),
        None,
        None,
    )
    .unwrap();
    let r = &out.result;
    assert!(r.valid, "{:?}", r.invalid_reasons);
    let m = r.server_metrics.as_ref().expect("server_metrics recorded");
    let served = server.truth.scrapes.load(Ordering::SeqCst);
    assert_eq!(m.status, "ok");
    assert_eq!(m.reason, None);
    assert_eq!(m.source, url);
    assert_eq!(m.interval_s, 0.2);
    assert_eq!(m.scrapes, served);
    assert_eq!(m.failed_scrapes, 0);
    // 1.2 s at 0.2 s: the first scrape, about 6 more, and the last one at the end.
    assert!((6..=12).contains(&served), "{served} scrapes");
    let proc_ = &m.series["llamacpp:requests_processing"];
    let values: Vec<f64> = proc_.iter().map(|p| p[1]).collect();
    let expected: Vec<f64> = (0..served).map(|k| k as f64).collect();
    assert_eq!(values, expected);
    assert!(proc_.windows(2).all(|w| w[1][0] > w[0][0]), "{proc_:?}");
    assert!(proc_[0][0] < 0.1, "first scrape at start: {proc_:?}");
    let s = m.summary["llamacpp:requests_processing"];
    assert_eq!(
        (s.first, s.last, s.max),
        (0.0, (served - 1) as f64, (served - 1) as f64)
    );
    let t = m.summary["llamacpp:tokens_predicted_total"];
    assert_eq!((t.first, t.last, t.max), (16.0, 16.0, 16.0));
    assert!(!m.series.contains_key("llamacpp:prompt_seconds_total"));
    // The contract keys, exactly.
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["schema_version"], 2);
    let sm = &json["server_metrics"];
    assert_eq!(sm["source"], url);
    assert_eq!(sm["interval_s"], 0.2);
    assert_eq!(sm["series"]["llamacpp:requests_processing"][1][1], 1.0);
    assert_eq!(
        sm["summary"]["llamacpp:tokens_predicted_total"]["max"],
        16.0
    );
    // And a plot of them.
    let plots = inferscope_bench::plot::plots(&[("run".to_string(), r)]);
    let svg = &plots
        .iter()
        .find(|(n, _)| n == "server_metrics.svg")
        .expect("server_metrics.svg")
        .1;
    assert!(svg.contains("llamacpp:requests_processing (max"), "{svg}");
}

#[test]
fn an_unreachable_metrics_url_leaves_the_run_valid_and_unknown() {
    let server = completions();
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let out = execute(
        &plan(
            server.url(),
            Some(MetricsScrape {
                url: url.clone(),
                interval: Duration::from_millis(300),
            }),
        ),
        None,
        None,
    )
    .unwrap();
    let r = &out.result;
    assert!(r.valid, "{:?}", r.invalid_reasons);
    let m = r.server_metrics.as_ref().unwrap();
    assert_eq!(m.status, "unknown");
    assert!(m.series.is_empty() && m.summary.is_empty());
    assert!(m.scrapes >= 2 && m.failed_scrapes == m.scrapes, "{m:?}");
    let why = m.reason.as_deref().unwrap();
    assert!(why.starts_with(&format!("GET {url}: ")), "{why}");
    let mut text = Vec::new();
    inferscope_bench::result::write_text(r, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("server metrics: unknown (GET "), "{text}");
    assert!(text.contains("run: valid"), "{text}");
}

/// The scripted completions server has no `/metrics` (404): unknown, with the status named.
#[test]
fn a_server_without_metrics_is_unknown_not_an_error() {
    let server = completions();
    let url = format!("{}/metrics", server.url());
    let out = execute(
        &plan(
            server.url(),
            Some(MetricsScrape {
                url,
                interval: Duration::from_millis(500),
            }),
        ),
        None,
        None,
    )
    .unwrap();
    let m = out.result.server_metrics.as_ref().unwrap();
    assert!(out.result.valid);
    assert_eq!(m.status, "unknown");
    assert!(
        m.reason.as_deref().unwrap().contains("HTTP status"),
        "{m:?}"
    );
}
