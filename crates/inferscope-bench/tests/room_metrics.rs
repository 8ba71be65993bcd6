//! Metric names an engine's room registers (`EngineRoom::server_metrics`) are recorded, and
//! the headline and reuse hit rate read them. The SGLang exposition below is written with its
//! metric names (`python/sglang/srt/metrics/collector.py`, as its room cites) and the TGI one
//! with TGI's gauges; neither is a recorded scrape (fixtures/server-metrics holds none).

use inferscope_bench::reuse::metrics_hit_rate;
use inferscope_bench::server_metrics::{ServerMetrics, headline};

const BODY_1: &str = "\
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name=\"m\"} 0.25
sglang:num_running_reqs{model_name=\"m\"} 3
sglang:num_queue_reqs{model_name=\"m\"} 0
sglang:cache_hit_rate{model_name=\"m\"} 0.10
sglang:time_to_first_token_seconds_sum{model_name=\"m\"} 1.5
sglang:time_to_first_token_seconds_count{model_name=\"m\"} 3
sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 1
sglang:unrelated_gauge 7
";

const BODY_2: &str = "\
sglang:token_usage{model_name=\"m\"} 0.5
sglang:num_running_reqs{model_name=\"m\"} 8
sglang:num_queue_reqs{model_name=\"m\"} 2
sglang:cache_hit_rate{model_name=\"m\"} 0.40
";

#[test]
fn registered_names_are_recorded_and_read() {
    let mut m = ServerMetrics::new("http://x/metrics", 1.0);
    m.add_body(0.0, BODY_1);
    m.add_body(1.0, BODY_2);
    assert_eq!(m.status, "ok");
    assert_eq!(m.get("sglang:token_usage").map(|s| s.max), Some(0.5));
    assert!(m.get("sglang:time_to_first_token_seconds_sum").is_some());
    assert!(m.get("sglang:time_to_first_token_seconds_bucket").is_none());
    assert!(m.get("sglang:unrelated_gauge").is_none());
    // preemptions (not exported), KV peak %, waiting peak, running peak
    assert_eq!(headline(&m), [None, Some(50.0), Some(2.0), Some(8.0)]);
    assert_eq!(
        metrics_hit_rate(&m),
        Some((0.40, "sglang:cache_hit_rate".to_string()))
    );
}

/// TGI's gauges (`router/src/`, `metrics::gauge!`), registered by its room.
#[test]
fn tgi_gauges_are_recorded() {
    let mut m = ServerMetrics::new("http://x/metrics", 1.0);
    m.add_body(
        0.0,
        "tgi_queue_size 2\ntgi_batch_current_size 5\ntgi_request_count 9\n",
    );
    assert_eq!(m.get("tgi_queue_size").map(|s| s.max), Some(2.0));
    assert!(m.get("tgi_request_count").is_none());
    assert_eq!(headline(&m), [None, None, Some(2.0), Some(5.0)]);
}

#[test]
fn a_server_with_none_of_the_names_says_which_it_knows() {
    let mut m = ServerMetrics::new("http://x/metrics", 1.0);
    m.add_body(0.0, "other_metric 1\n");
    assert_eq!(m.status, "unknown");
    assert_eq!(
        m.reason.as_deref(),
        Some(
            "http://x/metrics answered, but with none of the engine metrics inferscope knows (vLLM, SGLang, TGI, LMDeploy, llama-server --metrics)"
        )
    );
}
