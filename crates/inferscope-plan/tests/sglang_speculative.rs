//! SGLang speculative decoding (issue 29: MTP per engine): the draft's weights and KV pool as
//! each release sizes them (`engines::sglang::speculative`), from the 0.5.10.post1 and
//! 0.5.14–0.5.23 wheels; DeepSeek-R1's own NextN layer as the draft (its config, in the
//! catalog: one MTP layer, MLA 512 + 64, bf16 KV, 61 decoder layers).

use inferscope_plan::engine::{Engine, parse_command};
use inferscope_plan::memory::GIB;
use inferscope_plan::plan::{GpuSpec, Plan, PlanRequest, plan};

fn h200(count: u32) -> GpuSpec {
    GpuSpec {
        name: "NVIDIA H200".into(),
        total_bytes: (139.8 * GIB) as u64,
        count,
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn sglang(model: &str, version: &str, extra: &str) -> Plan {
    let s = parse_command(&words(&format!(
        "python -m sglang.launch_server --model-path {model} --tp 8 --context-length 32768 {extra}"
    )))
    .unwrap();
    assert_eq!(s.engine, Engine::Sglang);
    assert!(s.ignored.is_empty(), "{:?}", s.ignored);
    let arch = inferscope_plan::catalog::lookup(model).unwrap();
    let mut r = PlanRequest::new(arch, model, h200(8));
    r.apply_engine(&s);
    r.engine_version = Some(version.into());
    plan(&r)
}

fn rule<'a>(p: &'a Plan, name: &str) -> Option<&'a str> {
    p.engine_rules
        .as_ref()
        .and_then(|e| e.rules.iter().find(|r| r.rule == name))
        .map(|r| r.value.as_str())
}

const R1: &str = "deepseek-ai/DeepSeek-R1";

#[test]
fn nextn_before_0_5_14_reserves_4_gib_and_keeps_the_draft_outside() {
    let plain = sglang(R1, "0.5.13", "");
    let spec = sglang(R1, "0.5.13", "--speculative-algorithm NEXTN");
    assert!(spec.problems.is_empty(), "{:?}", spec.problems);
    // the default fraction gives 4096 MiB more to the rest: 4 GiB less KV budget, over the
    // fraction of the same free memory
    let f = |p: &Plan| {
        rule(p, "mem_fraction_static")
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let gpu_mib = 139.8 * 1024.0;
    assert!(((f(&plain) - f(&spec)) * gpu_mib - 4096.0).abs() < 0.001 * gpu_mib);
    // the target's cell is its own 61 layers: same bytes per token
    assert_eq!(spec.kv_bytes_per_token, plain.kv_bytes_per_token);
    // the draft is DeepSeek's own NextN layer (the draft path defaults to the model), its KV
    // pool one MLA layer for as many tokens, out of the rest
    let draft = rule(&spec, "speculative_draft").unwrap();
    assert!(
        draft.contains("NextN") && draft.contains("1152 B per token"),
        "{draft}"
    );
    assert_eq!(
        rule(&spec, "speculative_max_running_requests"),
        Some("48: speculative decoding's default")
    );
}

#[test]
fn nextn_from_0_5_14_prices_the_draft_into_the_budget() {
    let plain = sglang(R1, "0.5.23", "");
    let spec = sglang(
        R1,
        "0.5.23",
        "--speculative-algorithm EAGLE --speculative-num-steps 3",
    );
    assert!(spec.problems.is_empty(), "{:?}", spec.problems);
    // no reserve: the fraction is the plain one
    assert_eq!(
        rule(&spec, "mem_fraction_static"),
        rule(&plain, "mem_fraction_static")
    );
    // cell + ⌊cell × 1 / 61⌋: 61 × 1152 + 1152
    assert_eq!(plain.kv_bytes_per_token, 61 * 1152);
    assert_eq!(spec.kv_bytes_per_token, 62 * 1152);
    // the NextN layer's weights (an MLA attention and a 256-expert MoE layer, fp8, over 8
    // GPUs: ~1.4 GiB) load inside the fraction
    let grew = (spec.weights_bytes_per_gpu - plain.weights_bytes_per_gpu) as f64 / GIB;
    assert!((1.2..1.6).contains(&grew), "{grew:.2} GiB");
    // fewer tokens: the draft's weights and its layer's KV come out of the same budget
    assert!(spec.kv_cache_tokens < plain.kv_cache_tokens);
}

#[test]
fn ngram_has_no_draft_and_unmodelled_cases_are_refused() {
    let ngram = sglang(R1, "0.5.23", "--speculative-algorithm NGRAM");
    assert!(ngram.problems.is_empty());
    assert_eq!(ngram.kv_bytes_per_token, 61 * 1152);
    // a release before 0.5.10's rules
    let old = sglang(R1, "0.4.9", "--speculative-algorithm EAGLE");
    assert!(
        !old.fits && old.problems[0].contains("modelled from 0.5.10"),
        "{:?}",
        old.problems
    );
    // a STANDALONE draft model of unknown size
    let sa = sglang(
        R1,
        "0.5.23",
        "--speculative-algorithm STANDALONE --speculative-draft-model-path some/small-model",
    );
    assert!(sa.problems[0].contains("STANDALONE"), "{:?}", sa.problems);
    // a hybrid model: the Mamba pool's per-draft-token states are not modelled
    let cfg = include_str!("../../../fixtures/hub/Qwen--Qwen3.5-9B/config.json");
    let arch = inferscope_plan::arch::from_hf_config(cfg).unwrap();
    let s = parse_command(&words(
        "python -m sglang.launch_server --model-path Qwen/Qwen3.5-9B --speculative-algorithm EAGLE \
         --speculative-draft-model-path Qwen/Qwen3.5-9B",
    ))
    .unwrap();
    let mut r = PlanRequest::new(arch, "Qwen/Qwen3.5-9B", h200(1));
    r.apply_engine(&s);
    let p = plan(&r);
    assert!(
        p.problems[0].contains("hybrid model is not modelled"),
        "{:?}",
        p.problems
    );
    // SGLang's own parser refuses an algorithm it does not know
    let bad = parse_command(&words(
        "python -m sglang.launch_server --model-path x --speculative-algorithm MEDUSA",
    ))
    .unwrap_err();
    assert!(bad.to_string().contains("expected one of EAGLE"), "{bad}");
}
