//! Hybrid attention/state-space models (issue 29 item 2): their layer types parsed from real
//! configs (`fixtures/hub/*/config.json`, sources in `fixtures/hub/SOURCES-arch.md`), the state
//! bytes per sequence computed here independently from the config with vLLM's formulas, the
//! paging checked against real vLLM start-ups (`fixtures/hub/startups-arch.jsonl`), and the
//! engines whose state pool is not modelled refused by name.

use inferscope_plan::arch::{AttentionKind, Dtype, ModelArch, from_hf_config};
use inferscope_plan::engine::Engine;
use inferscope_plan::hybrid;
use inferscope_plan::memory::{EngineVersion, GIB};
use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
use inferscope_plan::state::StateKind;
use serde_json::Value;

fn hub(name: &str) -> String {
    let p = format!(
        "{}/../../fixtures/hub/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn arch(name: &str) -> ModelArch {
    from_hf_config(&hub(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The text part of a config, as a JSON object.
fn text(name: &str) -> Value {
    let v: Value = serde_json::from_str(&hub(name)).unwrap();
    v.get("text_config").cloned().unwrap_or(v)
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k}"))
}

fn count(a: &ModelArch, kind: AttentionKind) -> usize {
    a.layers.iter().filter(|l| l.kind == kind).count()
}

fn h100(count: u32) -> GpuSpec {
    GpuSpec {
        name: "H100 80GB HBM3".into(),
        total_bytes: (79.19 * GIB) as u64,
        count,
    }
}

#[test]
fn layer_types_of_real_hybrid_configs() {
    // Qwen3-Next has no layer_types: every 4th layer is full attention (full_attention_interval)
    let q = arch("Qwen--Qwen3-Next-80B-A3B-Instruct");
    assert_eq!(count(&q, AttentionKind::Full), 12);
    assert_eq!(count(&q, AttentionKind::NoKv), 36);
    assert_eq!(q.state_layers.len(), 36);
    assert_eq!(q.state_layers[0].layer_type, "linear_attention");
    assert!(matches!(
        q.state_layers[0].state,
        StateKind::GatedDeltaNet {
            key_heads: 16,
            value_heads: 32,
            ..
        }
    ));
    assert_eq!(q.layers[3].kind, AttentionKind::Full);
    // Nemotron-H: `*` attention, `M` Mamba-2, `-` MLP only (no cache at all)
    let n = arch("nvidia--NVIDIA-Nemotron-Nano-9B-v2");
    assert_eq!(count(&n, AttentionKind::Full), 4);
    assert_eq!(n.state_layers.len(), 27);
    assert!(matches!(
        n.state_layers[0].state,
        StateKind::Mamba2 {
            intermediate: 10_240,
            groups: 8,
            heads: 128,
            head_dim: 80,
            state_size: 128,
            conv_kernel: 4
        }
    ));
    // Granite-4.0-H: layer_types `mamba` / `attention`
    let g = arch("ibm-granite--granite-4.0-h-1b");
    assert_eq!(count(&g, AttentionKind::Full), 4);
    assert_eq!(g.state_layers.len(), 36);
    // Jamba: attention at i % attn_layer_period == attn_layer_offset, Mamba-1 elsewhere
    let j = arch("ai21labs--AI21-Jamba-1.5-Mini");
    let attn: Vec<usize> = (0..32)
        .filter(|i| j.layers[*i].kind == AttentionKind::Full)
        .collect();
    assert_eq!(attn, vec![4, 12, 20, 28]);
    assert!(matches!(
        j.state_layers[0].state,
        StateKind::Mamba1 {
            intermediate: 8192,
            state_size: 16,
            conv_kernel: 4
        }
    ));
    // Qwen3.5-family text_config with layer_types and an fp32 SSM state
    let m = arch("Qwen--Qwen3.6-35B-A3B");
    assert_eq!(count(&m, AttentionKind::Full), 10);
    assert_eq!(m.state_layers.len(), 30);
    assert_eq!(m.state_ssm_dtype, Some(Dtype::F32));
    // Falcon-H1: attention and Mamba-2 side by side in all 44 layers
    let f = arch("tiiuae--Falcon-H1-7B-Instruct");
    assert_eq!(count(&f, AttentionKind::Full), 44);
    assert_eq!(f.state_layers.len(), 44);
    assert!(matches!(
        f.state_layers[43].state,
        StateKind::Mamba2 {
            intermediate: 3072,
            heads: 24,
            head_dim: 128,
            state_size: 256,
            ..
        }
    ));
}

/// vLLM's bytes per sequence of one state layer on one TP rank, from the config's own keys
/// (`MambaStateShapeCalculator`, 0.11.0/0.34.0 `layers/mamba/mamba_utils.py`).
fn expected_state(name: &str, tp: u64, conv_b: u64, ssm_b: u64) -> u64 {
    let c = text(name);
    match c["model_type"].as_str().unwrap() {
        "qwen3_next" | "qwen3_5_moe_text" | "qwen3_5_text" => {
            // gated_delta_net_state_shape
            let (kh, vh) = (
                u(&c, "linear_num_key_heads"),
                u(&c, "linear_num_value_heads"),
            );
            let (kd, vd) = (u(&c, "linear_key_head_dim"), u(&c, "linear_value_head_dim"));
            let conv = (u(&c, "linear_conv_kernel_dim") - 1) * ((2 * kh * kd + vh * vd) / tp);
            conv * conv_b + vh / tp * kd * vd * ssm_b
        }
        "nemotron_h" => {
            // mamba2_state_shape with intermediate = mamba_num_heads × mamba_head_dim
            let (h, d, g, s) = (
                u(&c, "mamba_num_heads"),
                u(&c, "mamba_head_dim"),
                u(&c, "n_groups"),
                u(&c, "ssm_state_size"),
            );
            let g = if g % tp == 0 { g } else { tp };
            let conv = (u(&c, "conv_kernel") - 1) * ((h * d + 2 * g * s) / tp);
            conv * conv_b + h / tp * d * s * ssm_b
        }
        "granitemoehybrid" => {
            let inter = u(&c, "mamba_expand") * u(&c, "hidden_size");
            let (h, d, g, s) = (
                u(&c, "mamba_n_heads"),
                u(&c, "mamba_d_head"),
                u(&c, "mamba_n_groups"),
                u(&c, "mamba_d_state"),
            );
            let g = if g % tp == 0 { g } else { tp };
            (u(&c, "mamba_d_conv") - 1) * ((inter + 2 * g * s) / tp) * conv_b
                + h / tp * d * s * ssm_b
        }
        "falcon_h1" => {
            // mamba2_state_shape with intermediate = mamba_d_ssm (falcon_h1.py)
            let (inter, h, d, g, s) = (
                u(&c, "mamba_d_ssm"),
                u(&c, "mamba_n_heads"),
                u(&c, "mamba_d_head"),
                u(&c, "mamba_n_groups"),
                u(&c, "mamba_d_state"),
            );
            let g = if g % tp == 0 { g } else { tp };
            (u(&c, "mamba_d_conv") - 1) * ((inter + 2 * g * s) / tp) * conv_b
                + h / tp * d * s * ssm_b
        }
        "jamba" => {
            // mamba1_state_shape
            let inter = u(&c, "mamba_expand") * u(&c, "hidden_size") / tp;
            (u(&c, "mamba_d_conv") - 1) * inter * conv_b + inter * u(&c, "mamba_d_state") * ssm_b
        }
        other => panic!("{other}"),
    }
}

fn attention_layers(name: &str) -> u64 {
    let a = arch(name);
    count(&a, AttentionKind::Full) as u64
}

#[test]
fn plan_state_and_kv_bytes_match_the_engine_formula() {
    let cases = [
        ("Qwen--Qwen3-Next-80B-A3B-Instruct", 36, 2, 256),
        ("nvidia--NVIDIA-Nemotron-Nano-9B-v2", 27, 8, 128),
        ("ibm-granite--granite-4.0-h-1b", 36, 4, 128),
        ("ai21labs--AI21-Jamba-1.5-Mini", 28, 8, 128),
        ("Qwen--Qwen3.6-35B-A3B", 30, 2, 256),
        // Falcon-H1: every layer has attention and a Mamba-2 mixer
        ("tiiuae--Falcon-H1-7B-Instruct", 44, 2, 128),
        ("ibm-granite--granite-4.0-h-tiny", 36, 4, 128),
    ];
    for (name, state_layers, kv_heads, head_dim) in cases {
        for (tp, version) in [(1u32, "0.11.0"), (2, "0.11.0"), (1, "0.34.0")] {
            let a = arch(name);
            let mut r = PlanRequest::new(a.clone(), name, h100(2));
            r.tp = tp;
            r.engine_version = Some(version.into());
            r.max_model_len = Some(8192);
            let p = plan(&r);
            let v = EngineVersion::parse(version).unwrap();
            // dtypes: bf16 conv; SSM bf16 unless the release takes the config's fp32 default
            let ssm_b = match (a.model_type.as_str(), v.at_least(0, 20)) {
                ("nemotron_h", true) => 4,
                ("qwen3_5_moe_text", true) => 4,
                _ => 2,
            };
            let per_layer = expected_state(name, u64::from(tp), 2, ssm_b);
            assert_eq!(
                p.state_bytes_per_sequence,
                per_layer * state_layers,
                "{name} tp {tp} vLLM {version}: {:?}",
                p.problems
            );
            // KV per token: the attention layers only, 2 × KV heads/tp × head_dim × 2 bytes
            let kv_rank = (kv_heads as u64).div_ceil(u64::from(tp)).max(1);
            assert_eq!(
                p.kv_bytes_per_token,
                attention_layers(name) * 2 * kv_rank * head_dim * 2,
                "{name} tp {tp}"
            );
            // the state is reported beside the KV and named in the assumptions
            assert!(
                p.assumptions.iter().any(|s| s.starts_with("hybrid state:")),
                "{name}"
            );
        }
    }
}

#[test]
fn vllm_start_ups_of_hybrid_models() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/hub/startups-arch.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).unwrap();
        let id = c["id"].as_str().unwrap();
        let a = arch(c["model"].as_str().unwrap());
        let v = EngineVersion::parse(c["engine_version"].as_str().unwrap()).unwrap();
        let tp = c["tp"].as_u64().unwrap() as u32;
        let kv = match c["kv_cache_dtype"].as_str().unwrap() {
            "fp8" => Dtype::Fp8,
            _ => a.dtype,
        };
        let ssm = c["mamba_ssm_cache_dtype"].as_str().and_then(Dtype::parse);
        let dtypes = hybrid::vllm_state_dtypes(&a, v, None, ssm);
        let n = a.num_layers as usize;
        // prefix caching as the start-up ran it: the logged flag, else the release's default
        let state = hybrid::StateCache {
            dtypes,
            blocks: hybrid::state_blocks(
                &a,
                v,
                &hybrid::HybridRun {
                    prefix_caching: c["enable_prefix_caching"].as_bool(),
                    ..hybrid::HybridRun::default()
                },
            ),
        };
        let layout = hybrid::vllm_layout(&a, 0..n, tp, kv, 16, state, v);
        let logged = &c["logged"];
        eprintln!(
            "{id}: block {} page {} B, {} groups of {}",
            layout.block_size,
            layout.page_bytes,
            layout.num_groups(),
            layout.group_size
        );
        if let Some(b) = logged["block_size"].as_u64() {
            assert_eq!(layout.block_size, b, "{id}: attention block size");
        }
        if let Some(gib) = logged["available_kv_gib"].as_f64() {
            // the engine's own budget in, its printed figures out
            let blocks = (gib * GIB) as u64 / layout.bytes_per_block();
            let max_len = c["max_model_len"].as_u64().unwrap();
            let per_req = layout.blocks_per_request(max_len, layout.block_size, 8192);
            let conc = blocks as f64 / per_req as f64;
            let tokens = if hybrid::prints_concurrency_tokens(v) {
                (conc * max_len as f64) as u64
            } else {
                blocks / u64::from(layout.num_groups()) * layout.block_size
            };
            let want = logged["kv_cache_tokens"].as_f64().unwrap();
            let off = (tokens as f64 - want) / want;
            eprintln!("{id}: {tokens} tokens vs {want} logged ({off:+.4}), concurrency {conc:.3}");
            assert!(
                off.abs() < 0.05,
                "{id}: {tokens} tokens vs {want} ({off:+.3})"
            );
            let want_c = logged["max_concurrency"].as_f64().unwrap();
            assert!(
                (conc - want_c).abs() < 0.01 + 0.05 * want_c,
                "{id}: concurrency {conc:.2} vs {want_c}"
            );
        }
    }
}

#[test]
fn engines_without_a_state_model_refuse_by_name() {
    let a = arch("Qwen--Qwen3-Next-80B-A3B-Instruct");
    let cases = [
        (Engine::Sglang, Some("0.5.9"), "SGLang 0.5.9"),
        (Engine::Tgi, None, "TGI (any release)"),
        (Engine::Vllm, Some("0.10.1"), "vLLM 0.10.1"),
    ];
    for (engine, version, named) in cases {
        let mut r = PlanRequest::new(a.clone(), "q", h100(4));
        r.engine = engine;
        r.engine_version = version.map(str::to_string);
        let p = plan(&r);
        assert!(!p.fits);
        assert_eq!(
            p.kv_cache_tokens, 0,
            "{named}: no numbers computed as attention"
        );
        let want = format!(
            "layer type `linear_attention` of Qwen3NextForCausalLM is not modelled for {named}"
        );
        assert!(p.problems[0].starts_with(&want), "{:?}", p.problems);
        assert_eq!(
            hybrid::unmodelled(&a, engine, version).as_deref(),
            Some(p.problems[0].as_str())
        );
    }
    // a layer type an engine has no formula for (LFM2's short convolutions on SGLang and
    // llama.cpp) is refused there; vLLM plans it (tests/layer_types_2025.rs)
    let l = arch("LiquidAI--LFM2-2.6B");
    assert_eq!(l.state_layers.len(), 22);
    for (engine, named) in [
        (Engine::Sglang, "SGLang 0.5.10"),
        (Engine::LlamaCpp, "llama.cpp"),
    ] {
        let version = (engine == Engine::Sglang).then_some("0.5.10");
        let why = hybrid::unmodelled(&l, engine, version).unwrap();
        assert!(
            why.starts_with(&format!(
                "layer type `conv` of Lfm2ForCausalLM is not modelled for {named}"
            )),
            "{why}"
        );
    }
    assert!(hybrid::unmodelled(&l, Engine::Vllm, None).is_none());
}

#[test]
fn hybrid_weights_count_the_mixers_not_attention() {
    // published totals (model cards): the mixers replace attention projections, Nemotron-H
    // blocks carry one mixer and no MLP, Jamba's experts sit on every other layer
    let cases = [
        ("Qwen--Qwen3-Next-80B-A3B-Instruct", 80e9),
        ("nvidia--NVIDIA-Nemotron-Nano-9B-v2", 9e9),
        ("nvidia--Nemotron-H-8B-Base-8K", 8e9),
        ("ai21labs--AI21-Jamba-1.5-Mini", 52e9),
        ("ibm-granite--granite-4.0-h-1b", 1.5e9),
        ("ibm-granite--granite-4.0-h-tiny", 7e9),
    ];
    for (name, published) in cases {
        let p = inferscope_plan::memory::parameter_count(&arch(name)) as f64;
        let off = (p - published) / published;
        eprintln!(
            "{name}: {:.2}e9 parameters vs {:.2}e9 published ({off:+.3})",
            p / 1e9,
            published / 1e9
        );
        assert!(off.abs() < 0.06, "{name}: {p:.3e} vs {published:.3e}");
    }
}

#[test]
fn llama_cpp_keeps_f32_recurrent_cells_per_slot() {
    // llama.cpp: per state layer and slot, an F32 conv row n_embd_r = (d_conv − 1) ×
    // (d_inner + 2 × n_group × d_state) and an F32 state row n_embd_s = d_state × d_inner
    // (src/llama-hparams.cpp), Qwen3-Next's GGUF keys d_inner = value heads × value dim,
    // d_state = key dim, n_group = key heads (its print_info: ssm_d_inner 4096, ssm_d_state
    // 128, ssm_n_group 16)
    let name = "Qwen--Qwen3-Next-80B-A3B-Instruct";
    let c = text(name);
    let inner = u(&c, "linear_num_value_heads") * u(&c, "linear_value_head_dim");
    let (state, groups) = (u(&c, "linear_key_head_dim"), u(&c, "linear_num_key_heads"));
    assert_eq!((inner, state, groups), (4096, 128, 16));
    let r = (u(&c, "linear_conv_kernel_dim") - 1) * (inner + 2 * groups * state);
    let per_seq = 36 * 4 * (r + state * inner);
    let with_slots = |np: u32| {
        let mut r = PlanRequest::new(arch(name), name, h100(4));
        r.engine = Engine::LlamaCpp;
        r.max_num_seqs = Some(np);
        r.max_model_len = Some(8192 * u64::from(np));
        plan(&r)
    };
    let one = with_slots(1);
    assert_eq!(one.state_bytes_per_sequence, per_seq);
    assert!(
        one.assumptions
            .iter()
            .any(|a| a.starts_with("recurrent state: 36 state layers")),
        "{:?}",
        one.assumptions
    );
    // the cells are one per slot, on the GPU with their layers: what the GPU holds beyond
    // llama_kv_cache's size is np states (Nemotron-Nano-9B-v2 fits one H100 whole)
    let n = "nvidia--NVIDIA-Nemotron-Nano-9B-v2";
    let nem = expected_state_llama(n);
    for np in [1u32, 4] {
        let mut r = PlanRequest::new(arch(n), n, h100(1));
        r.engine = Engine::LlamaCpp;
        r.max_num_seqs = Some(np);
        r.max_model_len = Some(8192 * u64::from(np));
        let p = plan(&r);
        let l = p.llama_cpp.as_ref().unwrap();
        assert_eq!(l.gpu_layers, l.layers, "all layers offloaded");
        assert_eq!(p.state_bytes_per_sequence, nem);
        let rs = p.per_gpu.kv_cache_gib * GIB - l.kv_cache_mib * f64::from(1u32 << 20);
        let want = f64::from(np) * nem as f64;
        assert!((rs - want).abs() < 0.01 * GIB, "np {np}: {rs} vs {want}");
    }
    // KV per token: the 12 attention layers only
    assert_eq!(one.kv_bytes_per_token, 12 * 2 * 2 * 256 * 2);
}

/// llama.cpp's F32 conv + state rows of a Nemotron-H config's Mamba-2 layers, one sequence.
fn expected_state_llama(name: &str) -> u64 {
    let c = text(name);
    let inner = u(&c, "mamba_num_heads") * u(&c, "mamba_head_dim");
    let (g, st) = (u(&c, "n_groups"), u(&c, "ssm_state_size"));
    let r = (u(&c, "conv_kernel") - 1) * (inner + 2 * g * st);
    let layers = c["hybrid_override_pattern"]
        .as_str()
        .unwrap()
        .matches('M')
        .count() as u64;
    layers * 4 * (r + st * inner)
}

#[test]
fn sglang_carves_a_mamba_pool_out_of_the_kv_budget() {
    // SGLang 0.5.10.post1 handle_max_mamba_cache: rest × 0.9 / 1.9 for whole requests' states
    // (conv bf16, SSM float32 by default), the remainder for tokens of the 12 attention layers
    let name = "Qwen--Qwen3-Next-80B-A3B-Instruct";
    let c = text(name);
    let tp = 4u64;
    let (kh, vh) = (
        u(&c, "linear_num_key_heads"),
        u(&c, "linear_num_value_heads"),
    );
    let (kd, vd) = (u(&c, "linear_key_head_dim"), u(&c, "linear_value_head_dim"));
    let conv = (u(&c, "linear_conv_kernel_dim") - 1) * ((2 * kh * kd + vh * vd) / tp) * 2;
    let ssm = vh / tp * kd * vd * 4;
    let per_req = 36 * (conv + ssm);
    let mut r = PlanRequest::new(arch(name), name, h100(4));
    r.engine = Engine::Sglang;
    r.engine_version = Some("0.5.10.post1".into());
    r.tp = 4;
    r.max_model_len = Some(32_768);
    let p = plan(&r);
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert_eq!(p.state_bytes_per_sequence, per_req);
    let rules = p.engine_rules.as_ref().unwrap();
    let pool = rules.rules.iter().find(|r| r.rule == "mamba_pool").unwrap();
    let requests: u64 = pool
        .value
        .split("max_mamba_cache_size = ")
        .nth(1)
        .and_then(|v| v.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    // the pool holds 0.9 / 1.9 of the budget; tokens the rest
    let cell = p.kv_bytes_per_token;
    assert_eq!(
        cell,
        12 * 2 * 2u64.div_ceil(tp) * 256 * 2,
        "one replicated KV head per rank"
    );
    let pool_b = (requests * per_req) as f64;
    let kv_b = (p.kv_cache_tokens * cell) as f64;
    let ratio = pool_b / (pool_b + kv_b);
    assert!((ratio - 0.9 / 1.9).abs() < 0.01, "pool share {ratio}");
    assert!(p.max_concurrency <= requests as f64 + 0.01);
}

#[test]
fn hostile_state_sizes_are_refused_or_planned_without_overflow() {
    // every state key at the largest value accepted: planned on every engine, no panic
    let big = 1u64 << 16;
    let cfg = serde_json::json!({
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "hidden_size": 1u64 << 20, "num_hidden_layers": 8, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 1000, "intermediate_size": 64,
        "linear_num_key_heads": big, "linear_num_value_heads": big, "linear_key_head_dim": big,
        "linear_value_head_dim": big, "linear_conv_kernel_dim": big
    });
    let a = from_hf_config(&cfg.to_string()).unwrap();
    for engine in [Engine::Vllm, Engine::Sglang, Engine::LlamaCpp, Engine::Tgi] {
        let mut r = PlanRequest::new(a.clone(), "big", h100(1));
        r.engine = engine;
        let p = plan(&r);
        match engine {
            // llama.cpp moves what does not fit to the CPU
            Engine::LlamaCpp => assert!(p.state_bytes_per_sequence > 0),
            _ => assert!(!p.fits, "{engine:?}"),
        }
    }
    // one past the limit is refused by name
    let mut over = cfg.clone();
    over["linear_num_key_heads"] = (big + 1).into();
    let e = from_hf_config(&over.to_string()).unwrap_err().to_string();
    assert_eq!(
        e,
        "config.json: linear_num_key_heads: 65537 is larger than the 65536 this planner accepts"
    );
}

/// The engines' own state flags, read from a pasted command: SGLang `--max-mamba-cache-size`
/// fixes the pool in requests and `--mamba-full-memory-ratio` moves its share
/// (`server_args.py`, `handle_max_mamba_cache`); `--mamba-ssm-dtype bfloat16` halves the SSM
/// state; vLLM `--mamba-ssm-cache-dtype` does the same for its pages.
#[test]
fn state_flags_of_a_pasted_command_are_planned() {
    let name = "Qwen--Qwen3-Next-80B-A3B-Instruct";
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let sglang = |flags: &str| {
        let s = inferscope_plan::engine::parse_command(&words(&format!(
            "python3 -m sglang.launch_server --model-path M --tp 4 {flags}"
        )))
        .unwrap();
        let mut r = PlanRequest::new(arch(name), name, h100(4));
        r.apply_engine(&s);
        r.engine_version = Some("0.5.10.post1".into());
        r.max_model_len = Some(32_768);
        plan(&r)
    };
    let pool_requests = |p: &inferscope_plan::plan::Plan| -> u64 {
        let rules = p.engine_rules.as_ref().unwrap();
        let pool = rules.rules.iter().find(|r| r.rule == "mamba_pool").unwrap();
        pool.value
            .split("max_mamba_cache_size = ")
            .nth(1)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let base = sglang("");
    let fixed = sglang("--max-mamba-cache-size 64");
    assert_eq!(pool_requests(&fixed), 64);
    // fewer states than the default share: more of the budget holds tokens
    assert!(pool_requests(&base) > 64, "{}", pool_requests(&base));
    assert!(fixed.kv_cache_tokens > base.kv_cache_tokens);
    let half = sglang("--mamba-full-memory-ratio 0.45");
    assert!(pool_requests(&half) < pool_requests(&base));
    let bf16 = sglang("--mamba-ssm-dtype bfloat16");
    let c = text(name);
    let (vh, kd, vd) = (
        u(&c, "linear_num_value_heads"),
        u(&c, "linear_key_head_dim"),
        u(&c, "linear_value_head_dim"),
    );
    // 36 linear-attention layers, SSM state vh/4 × kd × vd at 4 → 2 bytes
    assert_eq!(
        base.state_bytes_per_sequence - bf16.state_bytes_per_sequence,
        36 * (vh / 4 * kd * vd * 2)
    );
    // vLLM: the SSM cache dtype flag reaches the page
    let vllm = |flags: &str| {
        let s = inferscope_plan::engine::parse_command(&words(&format!(
            "vllm serve M --tensor-parallel-size 4 --max-model-len 32768 {flags}"
        )))
        .unwrap();
        let mut r = PlanRequest::new(arch(name), name, h100(4));
        r.apply_engine(&s);
        r.engine_version = Some("0.28.0".into());
        plan(&r)
    };
    let (v_auto, v_f32) = (vllm(""), vllm("--mamba-ssm-cache-dtype float32"));
    assert!(
        v_f32.state_bytes_per_sequence > v_auto.state_bytes_per_sequence,
        "{} vs {}",
        v_f32.state_bytes_per_sequence,
        v_auto.state_bytes_per_sequence
    );
    // a dtype the engines do not take is the engine's own refusal, before any plan
    assert!(
        inferscope_plan::engine::parse_command(&words("vllm serve M --mamba-ssm-cache-dtype fp7"))
            .is_err()
    );
}
