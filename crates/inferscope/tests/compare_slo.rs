//! `inferscope compare` judges against the SLO both runs carry before the default thresholds
//! (issue 26, item 2).
//!
//! The runs are generated here, modelled on the llama-server pair of issue 26 and docs/tune.md
//! (the tiny model of `scripts/setup_llama_server.sh`, closed loop at concurrency 4 on the shared
//! 2-core VM, `--slo ttft=500ms,tpot=50ms`): `-np 1` serves one request at a time, so each waits
//! behind the other three (TTFT ≈ 66 ms) and decodes alone (TPOT 0.5 ms); `-np 4` starts all four
//! at once (TTFT −80 %, ≈ 13 ms) but shares the decode (TPOT 1.6 ms) — throughput +30 %. Both
//! are far inside the SLO: a trade-off each way, not a roll back. Per-request noise: each
//! latency is its mean × (0.7 + 0.3 · Exp(1)); requests follow each other in 4 closed-loop slots.

use inferscope_bench::client::{Api, RequestSettings, ServerInfo};
use inferscope_bench::exec::StopReason;
use inferscope_bench::record::{RequestRecord, write_trace};
use inferscope_bench::result::{BenchResult, ClientUsage, SCHEMA_VERSION, Settings, write_json};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::{Slo, compute};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TOKENS: u64 = 32;
const REQUESTS: u64 = 400;
const SLOTS: usize = 4;

/// splitmix64 uniform in [0, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Mean `mean_ms`, in µs, with an exponential tail.
    fn us(&mut self, mean_ms: f64) -> u64 {
        let e = -(1.0 - self.next()).ln();
        (mean_ms * 1000.0 * (0.7 + 0.3 * e)) as u64
    }
}

/// A closed loop of 4 slots: each request starts when its slot's previous one ended.
fn run(seed: u64, ttft_ms: f64, itl_ms: f64) -> Vec<RequestRecord> {
    let mut rng = Rng(seed);
    let mut free = [0u64; SLOTS];
    (0..REQUESTS)
        .map(|i| {
            let slot = (0..SLOTS).min_by_key(|&k| free[k]).unwrap_or(0);
            let start = free[slot];
            let mut r = RequestRecord::new(i, false, start, start);
            let mut t = start + rng.us(ttft_ms);
            r.push_chunk(t, 1);
            for _ in 1..TOKENS {
                t += rng.us(itl_ms);
                r.push_chunk(t, 1);
            }
            r.end_us = t + 50;
            free[slot] = r.end_us;
            r.usage_output_tokens = Some(TOKENS);
            r.max_tokens = TOKENS as u32;
            r
        })
        .collect()
}

/// `-np 1` and `-np 4` (see the module docs).
fn np1(seed: u64) -> Vec<RequestRecord> {
    run(seed, 66.0, 0.5)
}
fn np4(seed: u64) -> Vec<RequestRecord> {
    run(seed, 13.2, 1.6)
}

fn write_run(dir: &Path, name: &str, recs: &[RequestRecord], slo: &str) -> String {
    let slo: Slo = if slo.is_empty() {
        Slo::default()
    } else {
        slo.parse().unwrap()
    };
    let (stats, _) = compute(recs, &slo);
    let trace = dir.join(format!("{name}.jsonl"));
    write_trace(recs, &mut std::fs::File::create(&trace).unwrap()).unwrap();
    let result = BenchResult {
        schema_version: SCHEMA_VERSION,
        tool: "test".into(),
        started_at: "2026-12-04T00:00:00Z".into(),
        settings: Settings {
            url: "http://127.0.0.1:8000".into(),
            request: RequestSettings {
                api: Api::Completions,
                model: "tiny".into(),
                stream: true,
                ignore_eos: true,
                temperature: 0.0,
                timeout: Duration::from_secs(60),
                idle_timeout: Duration::from_secs(30),
            },
            schedule: Schedule::Closed {
                concurrency: SLOTS as u32,
            },
            limits: Limits {
                requests: Some(REQUESTS),
                duration: None,
            },
            warmup: Warmup::None,
            max_duration_s: 600.0,
            max_inflight: 1024,
            dataset: "random:in=64,out=32,spread=0".into(),
            seed: 0,
            slo,
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
        trace: Some(format!("{name}.jsonl")),
        stats,
        sweep: None,
        repeats: Vec::new(),
        server_metrics: None,
        energy: None,
    };
    let path = dir.join(format!("{name}.json"));
    write_json(&result, &mut std::fs::File::create(&path).unwrap()).unwrap();
    path.display().to_string()
}

/// Exit code, text, JSON.
fn compare(a: &str, b: &str) -> (i32, String, serde_json::Value) {
    let run = |json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_inferscope"));
        c.args(["compare", a, b]);
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let text = run(false);
    let json = run(true);
    assert_eq!(text.status.code(), json.status.code());
    (
        text.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&text.stdout).into_owned() + &String::from_utf8_lossy(&text.stderr),
        serde_json::from_slice(&json.stdout).unwrap_or_default(),
    )
}

const SLO: &str = "ttft=500ms,tpot=50ms";

#[test]
fn np1_vs_np4_within_the_slo_is_a_trade_off_both_ways() {
    let d = tempfile::tempdir().unwrap();
    let a = write_run(d.path(), "np1", &np1(1), SLO);
    let b = write_run(d.path(), "np4", &np4(2), SLO);
    for (x, y) in [(&a, &b), (&b, &a)] {
        let (code, out, v) = compare(x, y);
        eprintln!("{out}");
        assert_eq!(code, 0, "{out}");
        assert!(!out.contains("roll back"), "{out}");
        assert!(out.contains("verdict: trade-off"), "{out}");
        assert_eq!(v["verdict"], "trade_off", "{v}");
        // The numbers: what got better, what worse, and that the SLO held.
        let better: Vec<&str> = v["trade_off"]["better"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m.as_str())
            .collect();
        let worse: Vec<&str> = v["trade_off"]["worse"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m.as_str())
            .collect();
        let (tpot_side, throughput_side) = if x == &a {
            (&worse, &better)
        } else {
            (&better, &worse)
        };
        assert!(tpot_side.contains(&"tpot_p50"), "{v}");
        assert!(throughput_side.contains(&"throughput"), "{v}");
        assert!(
            out.contains("within the SLO 50 ms") && out.contains("100.0% -> 100.0%"),
            "{out}"
        );
        let att = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == "slo_attainment")
            .unwrap();
        assert_eq!(att["base"], 1.0);
        assert_eq!(att["cand"], 1.0);
    }
}

#[test]
fn a_candidate_past_the_slo_rolls_back_even_if_faster() {
    // Base: queueing TTFT (2 s), TPOT 10 ms. Candidate: TTFT 100 ms, throughput +25 %, but
    // TPOT ~55 ms, past the 50 ms SLO: attainment drops, whatever else improved.
    let slo = "ttft=10s,tpot=50ms";
    let d = tempfile::tempdir().unwrap();
    let a = write_run(d.path(), "base", &run(3, 2000.0, 10.0), slo);
    let b = write_run(d.path(), "cand", &run(4, 100.0, 55.0), slo);
    let (code, out, v) = compare(&a, &b);
    eprintln!("{out}");
    assert_eq!(code, 1, "{out}");
    assert_eq!(v["verdict"], "roll_back", "{v}");
    assert!(out.contains("verdict: roll back"), "{out}");
    assert!(out.contains("slo_attainment: 100.0% ->"), "{out}");
    let tp = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "throughput")
        .unwrap();
    assert_eq!(tp["status"], "better", "{tp}");
}

#[test]
fn without_an_slo_the_thresholds_decide_as_before() {
    let d = tempfile::tempdir().unwrap();
    let a = write_run(d.path(), "np1", &np1(1), "");
    let b = write_run(d.path(), "np4", &np4(2), "");
    // TPOT +220 % one way, throughput −23 % the other: past the default thresholds.
    for (x, y, metric) in [(&a, &b, "tpot_p50"), (&b, &a, "throughput")] {
        let (code, out, v) = compare(x, y);
        assert_eq!(code, 1, "{out}");
        assert_eq!(v["verdict"], "roll_back", "{v}");
        assert!(
            v.get("trade_off").is_none() && v.get("slo").is_none(),
            "{v}"
        );
        assert!(out.contains(&format!("  {metric}: ")), "{out}");
        assert!(!out.contains("slo_attainment"), "{out}");
    }
}

#[test]
fn the_mann_whitney_column_is_named_for_what_it_is() {
    let d = tempfile::tempdir().unwrap();
    let a = write_run(d.path(), "np1", &np1(1), "");
    let b = write_run(d.path(), "np4", &np4(2), "");
    let (_, out, v) = compare(&a, &b);
    assert!(!out.contains("p(worse)"), "{out}");
    assert!(
        out.contains("MW p") && out.contains("one-sided Mann-Whitney p-value"),
        "{out}"
    );
    let tpot = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "tpot_p50")
        .unwrap();
    // TPOT tripled: the p-value that the candidate's values are larger is tiny; the deprecated
    // key carries the same number.
    let p = tpot["mann_whitney_p_greater"].as_f64().unwrap();
    assert!(p < 1e-6, "{tpot}");
    assert_eq!(tpot["p_worse"], tpot["mann_whitney_p_greater"]);
}

/// The real pair (fixtures/bench/llama-server-np1-np4, README there): a trade-off both ways; the
/// same runs with the SLO taken out of both results are judged by the thresholds, as before.
#[test]
fn real_llama_server_np1_np4_pair() {
    let fx =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/bench/llama-server-np1-np4");
    let (a, b) = (fx.join("np1.json"), fx.join("np4.json"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    for (x, y) in [(a, b), (b, a)] {
        let (code, out, v) = compare(x, y);
        assert_eq!(code, 0, "{out}");
        assert_eq!(v["verdict"], "trade_off", "{out}");
    }
    // Without the SLO: copies beside their traces, `settings.slo` emptied.
    let d = tempfile::tempdir().unwrap();
    for n in ["np1", "np4"] {
        let mut r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fx.join(format!("{n}.json"))).unwrap())
                .unwrap();
        r["settings"]["slo"] = serde_json::json!({});
        std::fs::write(d.path().join(format!("{n}.json")), r.to_string()).unwrap();
        std::fs::copy(
            fx.join(format!("{n}.jsonl")),
            d.path().join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    let (a, b) = (d.path().join("np1.json"), d.path().join("np4.json"));
    let (code, out, v) = compare(a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(code, 1, "{out}");
    assert_eq!(v["verdict"], "roll_back", "{out}");
}
