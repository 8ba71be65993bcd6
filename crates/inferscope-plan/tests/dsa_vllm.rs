//! DeepSeek-V3.2 sparse attention on vLLM (issue 29 item 2): the latent in `fp8_ds_mla` plus
//! the indexer keys per token and layer, computed here from the config with vLLM 0.11.0's
//! formulas (`MLAAttentionSpec.page_size_bytes`, `DeepseekV32IndexerCache`), against `plan`.

use inferscope_plan::from_hf_config;
use inferscope_plan::memory::GIB;
use inferscope_plan::plan::{GpuSpec, PlanRequest, plan};
use serde_json::Value;

const CONFIG: &str =
    include_str!("../../../fixtures/hub/deepseek-ai--DeepSeek-V3.2-Exp/config.json");

fn request(kv: Option<&str>, version: &str) -> PlanRequest {
    let mut r = PlanRequest::new(
        from_hf_config(CONFIG).unwrap(),
        "deepseek-ai/DeepSeek-V3.2-Exp",
        GpuSpec {
            name: "H200".into(),
            total_bytes: (139.8 * GIB) as u64,
            count: 8,
        },
    );
    r.tp = 8;
    r.max_model_len = Some(32_768);
    r.kv_cache_dtype = kv.map(str::to_string);
    r.engine_version = Some(version.into());
    r
}

#[test]
fn vllm_caches_the_fp8_latent_and_the_indexer_keys() {
    let c: Value = serde_json::from_str(CONFIG).unwrap();
    let layers = c["num_hidden_layers"].as_u64().unwrap();
    let d = c["index_head_dim"].as_u64().unwrap();
    let rope = c["qk_rope_head_dim"].as_u64().unwrap();
    let lora = c["kv_lora_rank"].as_u64().unwrap();
    // fp8_ds_mla: kv_lora_rank fp8 bytes + one fp32 scale per 128 + RoPE dims in bf16
    let latent_fp8 = lora + lora / 128 * 4 + rope * 2;
    assert_eq!(latent_fp8, 656);
    let indexer = d + d / 128 * 4;
    for kv in [None, Some("fp8")] {
        let p = plan(&request(kv, "0.11.0"));
        assert_eq!(
            p.kv_bytes_per_token,
            layers * (latent_fp8 + indexer),
            "{kv:?}"
        );
        assert_eq!(p.block_size, 64);
        assert!(
            p.assumptions
                .iter()
                .any(|a| a.starts_with("DeepSeek sparse attention"))
        );
        // tokens are whole 64-token blocks of the per-GPU pool
        assert_eq!(p.kv_cache_tokens, p.blocks * 64);
    }
    let p = plan(&request(Some("bfloat16"), "0.11.0"));
    assert_eq!(p.kv_bytes_per_token, layers * ((lora + rope) * 2 + indexer));
    // from 0.12 `auto` keeps the latent in the model dtype (bf16); only an fp8 flag packs it
    // (0.12.0–0.17.0 DeepseekV32ForCausalLM.verify_and_update_config; 0.20.0+
    // mla_attention.py for the FlashMLA sparse backend; 0.34.0 resolve_kv_cache_dtype_string)
    for v in ["0.12.0", "0.20.0", "0.34.0"] {
        let auto = plan(&request(None, v));
        assert_eq!(
            auto.kv_bytes_per_token,
            layers * ((lora + rope) * 2 + indexer),
            "{v}"
        );
        let fp8 = plan(&request(Some("fp8"), v));
        assert_eq!(
            fp8.kv_bytes_per_token,
            layers * (latent_fp8 + indexer),
            "{v}"
        );
    }
    // before 0.11 the planner keeps its plain MLA accounting (no DSA rule read for it)
    let p = plan(&request(None, "0.10.1"));
    assert_eq!(p.kv_bytes_per_token, layers * (lora + rope) * 2);
}
