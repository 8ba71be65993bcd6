//! `bench` reads LMDeploy's Prometheus series (issue 32 item 4). No real LMDeploy scrape is in
//! the fixtures: the exposition below is written in the shape `prometheus_client` gives the
//! gauges and histograms 0.18.0 `lmdeploy/metrics/loggers.py` `PrometheusStatLogger` defines
//! (labels `model_name` and `engine` = the DP rank; `*_created` samples; histogram buckets).

use inferscope_bench::server_metrics::{ServerMetrics, headline, parse};
use inferscope_plan::engines::lmdeploy::env;

const BODY: &str = "\
# HELP lmdeploy:num_requests_running Number of requests currently running.
# TYPE lmdeploy:num_requests_running gauge
lmdeploy:num_requests_running{engine=\"0\",model_name=\"qwen\"} 12.0
lmdeploy:num_requests_running{engine=\"1\",model_name=\"qwen\"} 3.0
# TYPE lmdeploy:num_requests_waiting gauge
lmdeploy:num_requests_waiting{engine=\"0\",model_name=\"qwen\"} 4.0
lmdeploy:num_requests_waiting{engine=\"1\",model_name=\"qwen\"} 0.0
# TYPE lmdeploy:gpu_cache_usage_perc gauge
lmdeploy:gpu_cache_usage_perc{engine=\"0\",model_name=\"qwen\"} 0.62
lmdeploy:gpu_cache_usage_perc{engine=\"1\",model_name=\"qwen\"} 0.25
# TYPE lmdeploy:time_to_first_token_seconds histogram
lmdeploy:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.1\",model_name=\"qwen\"} 2.0
lmdeploy:time_to_first_token_seconds_count{engine=\"0\",model_name=\"qwen\"} 5.0
lmdeploy:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"qwen\"} 1.5
lmdeploy:time_to_first_token_seconds_created{engine=\"0\",model_name=\"qwen\"} 1.7e9
";

#[test]
fn lmdeploy_series_are_recorded_and_folded_across_dp_ranks() {
    assert!(env::is_lmdeploy_metrics(BODY));
    let m = parse(BODY);
    // a fraction takes the fullest rank; counts add up
    assert_eq!(m["lmdeploy:gpu_cache_usage_perc"], 0.62);
    assert_eq!(m["lmdeploy:num_requests_running"], 15.0);
    assert_eq!(m["lmdeploy:num_requests_waiting"], 4.0);
    assert_eq!(m["lmdeploy:time_to_first_token_seconds_count"], 5.0);
    assert!(!m.contains_key("lmdeploy:time_to_first_token_seconds_bucket"));
    assert!(!m.contains_key("lmdeploy:time_to_first_token_seconds_created"));
    let mut sm = ServerMetrics::new("http://x/metrics", 1.0);
    sm.add_body(0.0, BODY);
    let [_, kv, waiting, running] = headline(&sm);
    assert_eq!(kv, Some(62.0));
    assert_eq!((waiting, running), (Some(4.0), Some(15.0)));
}

#[test]
fn every_gauge_the_room_names_for_bench_is_one_bench_records() {
    // the room's table of LMDeploy metrics and bench's list agree on what bench reads
    for (meaning, name) in env::METRICS {
        let wanted = !parse(&format!("{name} 1\n{name}_sum 1\n")).is_empty();
        let read_by_bench = matches!(
            *meaning,
            "running_requests"
                | "waiting_requests"
                | "kv_cache_usage_fraction"
                | "ttft_seconds"
                | "tpot_seconds"
        );
        assert_eq!(wanted, read_by_bench, "{name}");
    }
}
