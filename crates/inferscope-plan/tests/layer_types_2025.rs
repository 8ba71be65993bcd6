//! Layer types of 2025 models beyond Mamba and Gated DeltaNet (issue 29 item 2), from real
//! configs (`fixtures/hub/*/config.json`, sources in `fixtures/hub/SOURCES.md` and
//! `SOURCES-arch.md`): LFM2's short convolutions and MiniMax-M1's lightning attention planned
//! for vLLM with the engine's formulas, computed here independently from the config; the
//! architectures vLLM dropped refused in its words; and a config that marks recurrent layers in
//! a way the planner does not read refused by name on every engine, never planned as plain
//! attention.

use inferscope_plan::arch::{AttentionKind, ModelArch, from_hf_config};
use inferscope_plan::engine::Engine;
use inferscope_plan::engines;
use inferscope_plan::memory::GIB;
use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
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

fn h200(count: u32) -> GpuSpec {
    GpuSpec {
        name: "NVIDIA H200".into(),
        total_bytes: (139.8 * GIB) as u64,
        count,
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k}"))
}

fn vllm(a: &ModelArch, tp: u32, version: Option<&str>) -> inferscope_plan::plan::Plan {
    let mut r = PlanRequest::new(a.clone(), "m", h200(tp));
    r.tp = tp;
    r.max_model_len = Some(4096);
    r.engine_version = version.map(str::to_string);
    plan(&r)
}

/// Each engine's refusal of `a`, panicking where one would plan it (`what` says which input).
fn refused_everywhere(a: &ModelArch, what: &str) -> Vec<(Engine, String)> {
    [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::Lmdeploy,
    ]
    .into_iter()
    .map(|e| {
        let why = engines::refusal(a, e, None)
            .unwrap_or_else(|| panic!("{what} on {e:?} was planned as attention"));
        (e, why)
    })
    .collect()
}

#[test]
fn lfm2_short_conv_state_on_vllm() {
    let name = "LiquidAI--LFM2-2.6B";
    let a = arch(name);
    let c: Value = serde_json::from_str(&hub(name)).unwrap();
    let types: Vec<&str> = c["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let conv_layers = types.iter().filter(|t| **t == "conv").count() as u64;
    let attn_layers = types.len() as u64 - conv_layers;
    for tp in [1u32, 2] {
        let p = vllm(&a, tp, Some("0.11.0"));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        // vLLM lfm2.py get_mamba_state_shape_from_config → short_conv_state_shape:
        // (conv_L_cache − 1) × conv_dim / tp in the model dtype (bf16), one state a layer
        let per_seq = conv_layers * (u(&c, "conv_L_cache") - 1) * u(&c, "conv_dim") / tp as u64 * 2;
        assert_eq!(p.state_bytes_per_sequence, per_seq, "tp {tp}");
        // attention layers only: K and V of the KV heads on this rank, bf16
        let head_dim = u(&c, "hidden_size") / u(&c, "num_attention_heads");
        let kv = attn_layers * (u(&c, "num_key_value_heads") / tp as u64) * head_dim * 2 * 2;
        assert_eq!(p.kv_bytes_per_token, kv, "tp {tp}");
    }
}

#[test]
fn minimax_m1_lightning_attention_on_vllm_0_23_and_refused_after() {
    let name = "renegade-studio--beta-O1";
    let a = arch(name);
    let c: Value = serde_json::from_str(&hub(name)).unwrap();
    let list: Vec<u64> = c["attn_type_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let linear = list.iter().filter(|t| **t == 0).count() as u64;
    let softmax = list.len() as u64 - linear;
    assert_eq!((linear, softmax), (70, 10));
    assert_eq!(
        a.layers
            .iter()
            .filter(|l| l.kind == AttentionKind::NoKv)
            .count() as u64,
        linear
    );
    let tp = 8u32;
    let p = vllm(&a, tp, Some("0.23.0"));
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    // vLLM 0.23.0 minimax_text_01.py: linear_attention_state_shape (heads / tp, head_dim,
    // head_dim) in linear_attention_state_dtype = the model dtype (bf16) per lightning layer
    let (heads, hd) = (u(&c, "num_attention_heads"), u(&c, "head_dim"));
    assert_eq!(
        p.state_bytes_per_sequence,
        linear * heads / tp as u64 * hd * hd * 2
    );
    assert_eq!(
        p.kv_bytes_per_token,
        softmax * u(&c, "num_key_value_heads").div_ceil(tp as u64) * hd * 2 * 2
    );
    // the lightning mixers replace attention in the weights: the config-only estimate is
    // within 1.5 % of the index's real total_size (the rest is vLLM's RoPE cache, which the
    // Hub test accounts for separately)
    let idx: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../fixtures/hub/{name}/model.safetensors.index.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let total = idx["metadata"]["total_size"].as_f64().unwrap();
    let ours = p.weights_bytes_per_gpu as f64 * f64::from(tp);
    assert!(
        (ours / total - 1.0).abs() < 0.015,
        "{ours} vs index total {total}"
    );
    // vLLM 0.24.0 and later refuse the architecture (registry.py _PREVIOUSLY_SUPPORTED_MODELS)
    for v in [Some("0.24.0"), None] {
        let p = vllm(&a, tp, v);
        assert!(!p.fits);
        assert!(
            p.problems[0].contains("MiniMaxM1ForCausalLM was supported in vLLM until v0.23.0"),
            "{:?}",
            p.problems
        );
    }
    // SGLang has no lightning-attention pool here: refused by name
    let why = engines::refusal(&a, Engine::Sglang, Some("0.5.10")).unwrap();
    assert!(
        why.starts_with("layer type `linear_attention` of MiniMaxM1ForCausalLM is not modelled for SGLang 0.5.10"),
        "{why}"
    );
}

#[test]
fn dropped_architectures_are_vllms_own_refusal() {
    // Bamba ran on vLLM until 0.23.0 (registry.py), planned there, refused after
    let a = arch("ibm-granite--granite-4.0-h-tiny");
    let mut bamba = a.clone();
    bamba.architecture = Some("BambaForCausalLM".into());
    assert!(engines::refusal(&bamba, Engine::Vllm, Some("0.23.0")).is_none());
    let why = engines::refusal(&bamba, Engine::Vllm, Some("0.28.0")).unwrap();
    assert!(why.contains("until v0.23.0"), "{why}");
    // other engines are not vLLM's registry
    assert!(engines::refusal(&bamba, Engine::Sglang, Some("0.5.10")).is_none());
    // Granite-4.0-H itself still runs
    assert!(engines::refusal(&a, Engine::Vllm, None).is_none());
}

#[test]
fn recurrent_keys_without_a_layer_layout_are_refused_on_every_engine() {
    // constructed: a Llama-shaped config carrying RecurrentGemma's `block_types` key, and one
    // carrying Mamba sizes with no layout (`mamba_d_state`); neither may be planned as 4
    // attention layers
    let base = r#"{"architectures":["XForCausalLM"],"model_type":"x","hidden_size":1024,
        "num_hidden_layers":4,"num_attention_heads":8,"num_key_value_heads":8,
        "vocab_size":32000,"intermediate_size":2048,"torch_dtype":"bfloat16","#;
    for (extra, key) in [
        (
            r#""block_types":["recurrent","recurrent","attention"]}"#,
            "block_types",
        ),
        (r#""mamba_d_state":128}"#, "mamba_d_state"),
    ] {
        let a = from_hf_config(&format!("{base}{extra}")).unwrap();
        for (_, why) in refused_everywhere(&a, key) {
            assert!(
                why.contains(&format!("config.json key {key}")) && why.contains("XForCausalLM"),
                "{why}"
            );
        }
    }
    // a plain config is not caught by the guard
    let plain = from_hf_config(&format!("{base}\"rope_theta\":10000}}")).unwrap();
    assert!(engines::refusal(&plain, Engine::Vllm, None).is_none());
}

#[test]
fn hybrid_decode_reads_and_writes_each_sequences_state() {
    use inferscope_plan::arch::Dtype;
    use inferscope_plan::speed::engines::{Engine as SpeedEngine, efficiency};
    use inferscope_plan::speed::estimate::{
        Scenario, Split, Weights, estimate_figures, model_numbers,
    };
    // Qwen3.5-9B: 24 Gated DeltaNet layers; conv state (k − 1) × (2·kh·kd + vh·vd) in bf16 and
    // the recurrent state vh × kd × vd in the config's float32, per sequence on one GPU
    let name = "Qwen--Qwen3.5-9B";
    let a = arch(name);
    let c: Value = serde_json::from_str(&hub(name)).unwrap();
    let t = c.get("text_config").unwrap_or(&c);
    let (kh, vh, kd, vd, k) = (
        u(t, "linear_num_key_heads"),
        u(t, "linear_num_value_heads"),
        u(t, "linear_key_head_dim"),
        u(t, "linear_value_head_dim"),
        u(t, "linear_conv_kernel_dim"),
    );
    let per_layer = (k - 1) * (2 * kh * kd + vh * vd) * 2 + vh * kd * vd * 4;
    let m = model_numbers(&a, &Weights::Checkpoint(None), Dtype::Bf16);
    assert_eq!(m.state_bytes_per_sequence, (24 * per_layer) as f64);
    // no context: the only per-sequence bytes a decode step moves are the states, read and
    // written, so at 64 sequences the step moves 2 × 64 states beside the weights
    let gpu = inferscope_plan::gpus::lookup("H100 SXM").unwrap();
    let s = Scenario {
        model: &m,
        gpu,
        gpus: 1,
        split: Split::Tensor,
        batch: 64,
        decode_context: 0,
        prompt_tokens: 1,
        eager: false,
        pipeline_stages: 1,
    };
    let (roof, _) = estimate_figures(&s, &efficiency(SpeedEngine::Vllm).unwrap()).unwrap();
    assert_eq!(
        roof.kv_bytes_read_per_step,
        2.0 * 64.0 * m.state_bytes_per_sequence
    );
    // ~6.6 GB of state traffic beside ~19 GB of weights: the roofline step is that much longer
    let bw = gpu.memory_bandwidth_gbps.unwrap() * 1e9;
    let want = (roof.weight_bytes_read_per_step + roof.kv_bytes_read_per_step) / bw;
    assert!(
        (roof.memory_time_s - want).abs() / want < 1e-9,
        "{} vs {want}",
        roof.memory_time_s
    );
}

#[test]
fn vllm_mtp_speculative_decoding_loads_the_mtp_layers_as_a_draft() {
    use inferscope_plan::engine::parse_command;
    let words = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
    let base = "vllm serve deepseek-ai/DeepSeek-R1 -tp 8 --max-model-len 32768";
    let plan_of = |extra: &str| {
        let s = parse_command(&words(&format!("{base} {extra}"))).unwrap();
        let arch = inferscope_plan::catalog::lookup("deepseek-ai/DeepSeek-R1").unwrap();
        let mut r = PlanRequest::new(arch, "deepseek-ai/DeepSeek-R1", h200(8));
        r.apply_engine(&s);
        (s, plan(&r))
    };
    let (_, plain) = plan_of("");
    let (s, mtp) =
        plan_of(r#"--speculative-config {"method":"deepseek_mtp","num_speculative_tokens":1}"#);
    assert_eq!(
        s.speculative_mtp.as_ref().map(|m| m.method.as_str()),
        Some("deepseek_mtp")
    );
    assert!(s.ignored.is_empty(), "{:?}", s.ignored);
    // DeepSeek-R1's config: num_nextn_predict_layers 1, an MLA layer (kv_lora_rank 512 +
    // qk_rope_head_dim 64, bf16, the same on every TP rank) and a MoE layer of 256 routed + 1
    // shared experts of 3 × 7168 × 2048, fp8 with one fp32 scale per 128 × 128 block
    assert_eq!(
        mtp.kv_bytes_per_token - plain.kv_bytes_per_token,
        (512 + 64) * 2
    );
    let experts = (256 + 1) as f64 * 3.0 * 7168.0 * 2048.0;
    let fp8_with_scales = experts * (1.0 + 4.0 / (128.0 * 128.0));
    let per_gpu = fp8_with_scales / 8.0;
    let grew = (mtp.weights_bytes_per_gpu - plain.weights_bytes_per_gpu) as f64;
    // the experts dominate; attention, router and norms add a few per cent
    assert!(
        grew > per_gpu && grew < per_gpu * 1.1,
        "{grew} vs experts alone {per_gpu}"
    );
    assert!(mtp.kv_cache_tokens < plain.kv_cache_tokens);
    assert!(
        mtp.assumptions
            .iter()
            .any(|a| a.contains("1 MTP layer(s) load as the draft")),
        "{:?}",
        mtp.assumptions
    );
    // a model without MTP layers: vLLM has nothing to draft with
    let s = parse_command(&words(
        r#"vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {"method":"mtp"}"#,
    ))
    .unwrap();
    let mut r = PlanRequest::new(
        inferscope_plan::catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap(),
        "m",
        h200(1),
    );
    r.apply_engine(&s);
    let p = plan(&r);
    assert!(!p.fits);
    assert!(
        p.problems.iter().any(|x| x.contains("declares none")),
        "{:?}",
        p.problems
    );
    // n-gram drafts hold nothing; a separate draft model is not modelled and listed so
    let s = parse_command(&words(
        r#"vllm serve m --speculative-config {"method":"ngram","num_speculative_tokens":3}"#,
    ))
    .unwrap();
    assert!(s.speculative_mtp.is_none() && s.ignored.is_empty());
    let s = parse_command(&words(
        r#"vllm serve m --speculative-config {"method":"eagle3","model":"x/y"}"#,
    ))
    .unwrap();
    assert_eq!(s.ignored.len(), 1);
    // not JSON: listed as not modelled
    let s = parse_command(&words("vllm serve m --speculative-config {method")).unwrap();
    assert_eq!(s.ignored, ["--speculative-config {method"]);
}

#[test]
fn kimi_linear_kda_state_and_mla_kv_on_vllm() {
    let name = "moonshotai--Kimi-Linear-48B-A3B-Instruct";
    let a = arch(name);
    let c: Value = serde_json::from_str(&hub(name)).unwrap();
    let lin = &c["linear_attn_config"];
    let kda_layers = lin["kda_layers"].as_array().unwrap().len() as u64;
    let mla_layers = u(&c, "num_hidden_layers") - kda_layers;
    assert_eq!((kda_layers, mla_layers), (20, 7));
    // `kda_layers` is 1-based (vLLM KimiLinearConfig.is_kda_layer: layer_idx + 1): layer 4
    // (index 3) is MLA, index 0 is KDA
    assert_eq!(a.layers[3].kind, AttentionKind::Full);
    assert_eq!(a.layers[0].kind, AttentionKind::NoKv);
    let (heads, hd, k) = (
        u(lin, "num_heads"),
        u(lin, "head_dim"),
        u(lin, "short_conv_kernel_size"),
    );
    for tp in [1u32, 2] {
        let t = u64::from(tp);
        let p = vllm(&a, tp, Some("0.34.0"));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        // MambaStateShapeCalculator.kda_state_shape: conv (K − 1) × (3 × heads × head_dim) / tp
        // in the model dtype (bf16); recurrent heads / tp × head_dim² in float32
        // (kda_state_dtype), per KDA layer
        let per_layer = (k - 1) * 3 * heads * hd / t * 2 + heads / t * hd * hd * 4;
        assert_eq!(
            p.state_bytes_per_sequence,
            kda_layers * per_layer,
            "tp {tp}"
        );
        // MLA layers: the latent and RoPE key, bf16, on every rank; KDA layers keep none
        let latent = u(&c, "kv_lora_rank") + u(&c, "qk_rope_head_dim");
        assert_eq!(p.kv_bytes_per_token, mla_layers * latent * 2, "tp {tp}");
    }
    // the weights: a public reviewed parameter inventory of this checkpoint
    // (Kimi-Linear-48B-A3B-Instruct's modeling_kimi.py, 49,122,681,728 parameters, bf16) —
    // KDA layers carry their mixer, not MLA projections
    let p = vllm(&a, 1, Some("0.34.0"));
    let inventory = 98_245_363_456f64;
    let ours = p.weights_bytes_total.unwrap() as f64;
    assert!(
        (ours / inventory - 1.0).abs() < 0.001,
        "{ours} vs inventory {inventory}"
    );
    // the SSM flag does not change KDA's float32 state (get_state_dtype does not pass it)
    let mut r = PlanRequest::new(a.clone(), "m", h200(1));
    r.max_model_len = Some(4096);
    r.engine_version = Some("0.34.0".into());
    r.hybrid.mamba_ssm_cache_dtype = Some("bfloat16".into());
    assert_eq!(
        plan(&r).state_bytes_per_sequence,
        p.state_bytes_per_sequence
    );
    // vLLM serves it from 0.12.0; the other engines have no KDA formula here
    let why = engines::refusal(&a, Engine::Vllm, Some("0.11.0")).unwrap();
    assert!(
        why.contains("layer type `kda`") && why.contains("0.12.0"),
        "{why}"
    );
    for e in [
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::Lmdeploy,
    ] {
        let why = engines::refusal(&a, e, None).unwrap_or_else(|| panic!("{e:?} planned KDA"));
        assert!(
            why.contains("layer type `kda` of KimiLinearForCausalLM"),
            "{why}"
        );
    }
    // another architecture with KDA layers (Kimi K3 adds caches of its own in vLLM 0.34,
    // `vllm/models/kimi_k3`): refused by name, never planned
    let k3 = hub(name).replace("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration");
    let k3 = from_hf_config(&k3).unwrap();
    let why = engines::refusal(&k3, Engine::Vllm, None).unwrap();
    assert!(
        why.contains("of KimiK3ForConditionalGeneration") && why.contains("vllm/models/kimi_k3"),
        "{why}"
    );
}

#[test]
fn the_2026_attention_layouts_without_a_formula_are_refused_by_name() {
    // constructed from the keys vLLM 0.34.0 reads for its 2026 architectures
    // (`vllm/models/*`; fixtures would be their config.json files, which could not be fetched)
    let base = r#""model_type":"x","hidden_size":1024,"num_hidden_layers":4,
        "num_attention_heads":8,"num_key_value_heads":8,"vocab_size":32000,
        "intermediate_size":2048,"torch_dtype":"bfloat16""#;
    let cases = [
        // DeepSeek-V4 by name, whatever its keys
        (
            r#""architectures":["DeepseekV4ForCausalLM"]"#,
            "compressed and sliding-window MLA",
        ),
        // a compression key on an unknown architecture
        (
            r#""architectures":["XForCausalLM"],"compress_ratios":[0,4,4,128]"#,
            "config.json key compress_ratios",
        ),
        // an indexer on an architecture that is not DeepSeek sparse attention's
        (
            r#""architectures":["XForCausalLM"],"index_topk":2048,"index_head_dim":128"#,
            "not a DeepSeek sparse-attention architecture",
        ),
        // a layer kind with no formula: never planned as full attention
        (
            r#""architectures":["XForCausalLM"],"layer_types":["full_attention",
               "compressed_sparse_attention","full_attention","sliding_attention"],
               "sliding_window":128"#,
            "layer type `compressed_sparse_attention`",
        ),
    ];
    for (extra, want) in cases {
        let a = from_hf_config(&format!("{{{base},{extra}}}")).unwrap();
        for (e, why) in refused_everywhere(&a, extra) {
            assert!(why.contains(want), "{e:?}: {why}");
        }
        let p = vllm(&a, 1, Some("0.34.0"));
        assert!(!p.fits && p.kv_cache_tokens == 0, "{extra}");
    }
    // GLM-5.2 style: sparse attention whose layers share indexers (`indexer_types`), where the
    // planner would put one on every layer
    let v32: Value = serde_json::from_str(&hub("deepseek-ai--DeepSeek-V3.2-Exp")).unwrap();
    let mut glm = v32.clone();
    glm["architectures"] = serde_json::json!(["GlmMoeDsaForCausalLM"]);
    let n = u(&v32, "num_hidden_layers") as usize;
    glm["indexer_types"] = (0..n)
        .map(|i| if i % 4 == 0 { "full" } else { "shared" })
        .collect();
    let a = from_hf_config(&glm.to_string()).unwrap();
    let why = engines::refusal(&a, Engine::Vllm, None).unwrap();
    assert!(why.contains("share indexers"), "{why}");
    // every config the planner models is untouched by the guard: the catalog and the Hub
    // fixtures (DeepSeek-V3.2's indexer included)
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut dirs: Vec<std::path::PathBuf> =
        std::fs::read_dir(format!("{root}/crates/inferscope-plan/data/models"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    for e in std::fs::read_dir(format!("{root}/fixtures/hub")).unwrap() {
        let p = e.unwrap().path().join("config.json");
        if p.exists() && !p.to_string_lossy().contains("inferscope-test--") {
            dirs.push(p);
        }
    }
    let mut checked = 0;
    for p in dirs
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
    {
        let Ok(a) = from_hf_config(&std::fs::read_to_string(p).unwrap()) else {
            continue;
        };
        checked += 1;
        assert!(
            !a.state_layers
                .iter()
                .any(|s| s.layer_type.starts_with("attention") || s.layer == u32::MAX),
            "{}: {:?}",
            p.display(),
            a.state_layers.first()
        );
    }
    assert!(checked > 100, "{checked} configs");
}
