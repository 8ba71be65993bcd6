//! `inferscope compare` on synthetic runs with traces: identical runs are kept, a slower
//! candidate is rolled back with exit code 1, noise alone is not called a regression, and what
//! cannot be judged is inconclusive (exit 0, or 1 with --fail-on-inconclusive).

use inferscope_bench::client::{Api, RequestSettings, ServerInfo};
use inferscope_bench::exec::StopReason;
use inferscope_bench::record::{RequestRecord, write_trace};
use inferscope_bench::result::{BenchResult, ClientUsage, SCHEMA_VERSION, Settings, write_json};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::{Slo, compute};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Deterministic pseudo-random generator (splitmix64) for synthetic latencies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Exponential-ish tail: latency = base * (1 + Exp(1) * 0.3).
    fn latency_us(&mut self, base_us: f64) -> u64 {
        let e = -(1.0 - self.next()).ln();
        (base_us * (1.0 + 0.3 * e)) as u64
    }
}

/// 400 requests: TTFT around `ttft_ms`, 16 tokens each `itl_ms` apart (both with noise).
fn records(seed: u64, ttft_ms: f64, itl_ms: f64) -> Vec<RequestRecord> {
    let mut rng = Rng(seed);
    (0..400u64)
        .map(|i| {
            let intended = i * 20_000;
            let mut r = RequestRecord::new(i, false, intended, intended);
            let mut t = intended + rng.latency_us(ttft_ms * 1000.0);
            r.push_chunk(t, 1);
            for _ in 1..16 {
                t += rng.latency_us(itl_ms * 1000.0);
                r.push_chunk(t, 1);
            }
            r.end_us = t + 100;
            r.usage_output_tokens = Some(16);
            r.max_tokens = 16;
            r
        })
        .collect()
}

fn result(recs: &[RequestRecord], trace: &Path) -> BenchResult {
    let (stats, _) = compute(recs, &Slo::default());
    BenchResult {
        schema_version: SCHEMA_VERSION,
        tool: "test".into(),
        started_at: "2026-12-02T00:00:00Z".into(),
        settings: Settings {
            url: "http://127.0.0.1:1".into(),
            request: RequestSettings {
                api: Api::Completions,
                model: "m".into(),
                stream: true,
                ignore_eos: true,
                temperature: 0.0,
                timeout: Duration::from_secs(60),
                idle_timeout: Duration::from_secs(30),
            },
            schedule: Schedule::Closed { concurrency: 4 },
            limits: Limits {
                requests: Some(400),
                duration: None,
            },
            warmup: Warmup::None,
            max_duration_s: 600.0,
            max_inflight: 1024,
            dataset: "random:in=8,out=16,spread=0".into(),
            seed: 0,
            slo: Slo::default(),
            min_requests: 1,
            sweep_steps: 0,
            tokenizer: None,
        },
        server: ServerInfo::default(),
        machine: None,
        client: ClientUsage::default(),
        valid: true,
        invalid_reasons: vec![],
        stop: StopReason::Requests,
        saturated: false,
        trace: Some(trace.file_name().unwrap().to_string_lossy().into_owned()),
        stats,
        sweep: None,
        repeats: Vec::new(),
        server_metrics: None,
        energy: None,
    }
}

fn write_run(dir: &Path, name: &str, recs: &[RequestRecord]) -> String {
    let trace = dir.join(format!("{name}.jsonl"));
    let mut f = std::fs::File::create(&trace).unwrap();
    write_trace(recs, &mut f).unwrap();
    let res = dir.join(format!("{name}.json"));
    let mut f = std::fs::File::create(&res).unwrap();
    write_json(&result(recs, &trace), &mut f).unwrap();
    res.display().to_string()
}

fn compare(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn identical_runs_are_kept() {
    let d = tempfile::tempdir().unwrap();
    let recs = records(1, 100.0, 10.0);
    let a = write_run(d.path(), "a", &recs);
    let b = write_run(d.path(), "b", &recs);
    let (code, out) = compare(&[&a, &b]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict: keep"), "{out}");
    assert!(!out.contains("REGRESSION"), "{out}");
    assert!(
        !out.contains("no per-request traces"),
        "traces were found: {out}"
    );
}

#[test]
fn slower_candidate_is_rolled_back_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let a = write_run(d.path(), "a", &records(1, 100.0, 10.0));
    let b = write_run(d.path(), "b", &records(2, 130.0, 12.0));
    let (code, out) = compare(&[
        &a,
        &b,
        "--threshold",
        "ttft_p99=+5%,tpot_p50=+3%,throughput=-2%",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("verdict: roll back"), "{out}");
    assert!(out.contains("tpot_p50:"), "{out}");
    // 400 requests put 4 above a p99: too few to judge it, whatever the delta.
    let p99 = out.lines().find(|l| l.starts_with("ttft_p99")).unwrap();
    assert!(p99.ends_with("inconclusive"), "{p99}");
    // JSON output carries the same verdict.
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(["compare", &a, &b, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "roll_back");
    assert_eq!(v["significance_tested"], true);
}

#[test]
fn noise_only_differences_are_not_called_a_regression() {
    let d = tempfile::tempdir().unwrap();
    // Same distributions, different random draws: tails differ by chance.
    let base = records(1, 100.0, 10.0);
    let cand = records(99, 100.0, 10.0);
    let a = write_run(d.path(), "a", &base);
    let b = write_run(d.path(), "b", &cand);
    // Tight thresholds that noise alone exceeds on some metric.
    let th = "ttft_p99=+1%,ttft_p999=+1%,e2e_p99=+1%,itl_p99=+1%,tpot_p99=+1%,ttft_mean=+1%";
    let (code, out) = compare(&[&a, &b, "--threshold", th]);
    eprintln!("{out}");
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("REGRESSION"), "{out}");
    assert!(
        out.contains("inconclusive (need >= 1000 requests)"),
        "a p99 of 400 requests is not judged: {out}"
    );
    assert!(out.contains("verdict: inconclusive"), "{out}");
    let (code, out) = compare(&[&a, &b, "--threshold", th, "--fail-on-inconclusive"]);
    assert_eq!(code, 1, "{out}");
    // --explain sizes each threshold from the observed variance.
    let (_, out) = compare(&[&a, &b, "--threshold", th, "--explain"]);
    assert!(out.contains("ttft_mean"), "{out}");
    assert!(out.contains("requests per run"), "{out}");
    // Without traces the deltas past a threshold cannot be told from noise: inconclusive.
    for f in ["a.jsonl", "b.jsonl"] {
        std::fs::remove_file(d.path().join(f)).unwrap();
    }
    let (code2, out2) = compare(&[&a, &b, "--threshold", th]);
    assert!(out2.contains("no per-request traces"), "{out2}");
    assert!(out2.contains("verdict: inconclusive"), "{out2}");
    assert_eq!(code2, 0, "{out2}");
}

#[test]
fn bad_inputs_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let a = write_run(d.path(), "a", &records(1, 100.0, 10.0));
    let (code, out) = compare(&[&a, bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("bad.json"), "{out}");
    let (code, out) = compare(&[&a, &a, "--threshold", "ttft_p42=+5%"]);
    assert_eq!(code, 2, "{out}");
}

/// `bench --startup-log` records the server's start-up memory; `compare` names what differs.
/// Two real vLLM start-ups of the same server (fixtures/tools/vllm-logs, headers say how they
/// were captured): one sized 1,048,576 KV tokens, the other failed under a block override.
#[test]
fn compare_names_the_start_up_memory_that_differs() {
    use inferscope_bench::client::StartupFigures;
    let figures = |file: &str| {
        let path = format!(
            "{}/../../fixtures/tools/vllm-logs/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read(&path).unwrap();
        let log = inferscope_formats::startup_log::parse(&text[..]).unwrap();
        let r = inferscope_mem::startup::analyse(&log, &Default::default());
        StartupFigures {
            log: path,
            engine: r.engine.to_string(),
            engine_version: r.engine_version.clone(),
            failed: r.failed,
            weights_gib: r.measured.weights_gib,
            kv_cache_gib: r.measured.kv_cache_gib,
            kv_cache_tokens: r.measured.kv_cache_tokens,
            max_concurrency: r.measured.max_concurrency,
            max_model_len: r.measured.max_model_len,
        }
    };
    let d = tempfile::tempdir().unwrap();
    let recs = records(1, 100.0, 10.0);
    let write = |name: &str, startup: Option<StartupFigures>| {
        let trace = d.path().join(format!("{name}.jsonl"));
        write_trace(&recs, &mut std::fs::File::create(&trace).unwrap()).unwrap();
        let mut r = result(&recs, &trace);
        r.server.startup = startup;
        let res = d.path().join(format!("{name}.json"));
        write_json(&r, &mut std::fs::File::create(&res).unwrap()).unwrap();
        res.display().to_string()
    };
    let a = write("a", Some(figures("cpu-0.32.0-tiny-llama.log")));
    let b = write("b", Some(figures("cpu-0.32.0-block-override-fail.log")));
    let none = write("c", None);
    let (_, out) = compare(&[&a, &b]);
    assert!(
        out.contains("differs: server start-up kv_cache_tokens: 1048576 -> null"),
        "{out}"
    );
    assert!(
        out.contains("differs: server start-up failed: false -> true"),
        "{out}"
    );
    // where the logs were is not a difference between the servers
    assert!(!out.contains("start-up log:"), "{out}");
    let (_, out) = compare(&[&a, &a]);
    assert!(!out.contains("start-up"), "{out}");
    let (_, out) = compare(&[&a, &none]);
    assert!(out.contains("log given for one run only"), "{out}");
}
