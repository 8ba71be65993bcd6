//! `sessions:` workloads against the scripted server: every turn re-sends the history exactly
//! (system prompt, each user message, each reply as streamed) plus one new user message, and
//! the result reports TTFT per turn against turn 1.

mod common;

use common::{Mode, start_in_thread};
use inferscope_bench::client::{Api, RequestSettings};
use inferscope_bench::run::{BenchError, BenchPlan, execute};
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::Slo;
use serde_json::Value;
use std::time::Duration;

fn plan(url: String, api: Api) -> BenchPlan {
    BenchPlan {
        url,
        request: RequestSettings {
            api,
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
            requests: Some(16),
            duration: None,
        },
        warmup: Warmup::None,
        max_duration: Duration::from_secs(30),
        max_inflight: 64,
        max_send_lag: Duration::from_secs(1),
        max_error_rate: 0.5,
        dataset: "sessions:turns=4,think=20ms,user=6,out=4,system=5"
            .parse()
            .unwrap(),
        default_max_tokens: 4,
        seed: 3,
        slo: Slo::default(),
        min_requests: 1,
        started_at: "2026-12-04T00:00:00Z".into(),
        tool: "test".into(),
        trace: None,
        tokenizer: None,
        server_metrics: None,
        replicas: Default::default(),
    }
}

#[test]
fn every_turn_resends_the_history_exactly() {
    let server = start_in_thread(Mode::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 4,
        stagger: false,
    });
    let out = execute(&plan(server.url(), Api::Chat), None, None).unwrap();
    assert_eq!(out.result.stats.requests.completed, 16);
    let bodies: Vec<Value> = server
        .truth
        .bodies
        .lock()
        .unwrap()
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    assert_eq!(bodies.len(), 16);
    let msgs = |b: &Value| b["messages"].as_array().unwrap().clone();
    // The scripted server streams " tok0 tok1 tok2 tok3" to every request.
    let reply = serde_json::json!({"role": "assistant", "content": " tok0 tok1 tok2 tok3"});
    let mut turns_seen = [0usize; 4];
    for b in &bodies {
        let m = msgs(b);
        assert_eq!(m[0]["role"], "system");
        assert_eq!(
            m[0],
            msgs(&bodies[0])[0],
            "one system prompt for all sessions"
        );
        let last = m.last().unwrap();
        assert_eq!(last["role"], "user");
        let name = last["content"].as_str().unwrap().split(' ').next().unwrap();
        let (s, t) = name[1..].split_once('t').unwrap();
        let t: usize = t.parse().unwrap();
        assert_eq!(
            m.len(),
            2 + 2 * t,
            "{name}: system + {t} exchanges + the new message"
        );
        assert_eq!(last["content"].as_str().unwrap().split(' ').count(), 6);
        turns_seen[t] += 1;
        if t > 0 {
            // The previous turn of this session was sent earlier, and this body is exactly it
            // plus the reply and one new user message.
            let prev_name = format!("s{s}t{}", t - 1);
            let prev = bodies
                .iter()
                .map(msgs)
                .find(|p| {
                    p.last().unwrap()["content"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("{prev_name} "))
                })
                .unwrap_or_else(|| panic!("no earlier {prev_name}"));
            assert_eq!(
                m[..m.len() - 2],
                prev[..],
                "{name}: history re-sent exactly"
            );
            assert_eq!(m[m.len() - 2], reply, "{name}: the reply as streamed");
        }
    }
    assert_eq!(turns_seen, [4, 4, 4, 4], "4 sessions of 4 turns");
    let turns = &out.result.stats.turns;
    assert_eq!(turns.len(), 4);
    assert!(turns.iter().all(|t| t.ttft_ms.count == 4));
    assert_eq!(turns[0].p50_vs_turn1, Some(1.0));
    assert!(turns[3].p50_vs_turn1.is_some());
    // Per request: the history before the new message is what a prefix cache could serve.
    let trace: Vec<_> = out.records.iter().filter(|r| r.turn == Some(1)).collect();
    assert!(trace.iter().all(|r| r.reusable_prefix == Some(5 + 6 + 4)));
    assert!(trace.iter().all(|r| r.prompt_len == 5 + 6 + 4 + 6));
}

#[test]
fn sessions_need_the_chat_api() {
    let e = execute(
        &plan("http://127.0.0.1:9".into(), Api::Completions),
        None,
        None,
    )
    .unwrap_err();
    assert!(matches!(e, BenchError::Input(m) if m.contains("add --api chat")));
}
