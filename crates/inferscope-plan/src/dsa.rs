//! DeepSeek sparse attention (DeepSeek-V3.2, `index_topk` set) on vLLM ≥ 0.11: each layer caches
//! the MLA latent and, beside it, the lightning indexer's keys.
//!
//! vLLM 0.11.0: the latent uses the `fp8_ds_mla` format unless `--kv-cache-dtype bfloat16`
//! (`DeepseekV32ForCausalLM.verify_and_update_config` in `model_executor/models/config.py`);
//! from 0.12.0 only an fp8 `--kv-cache-dtype` becomes `fp8_ds_mla` (0.12–0.17 the same function,
//! from 0.20 `layers/attention/mla_attention.py` for the FlashMLA sparse backend) and `auto`
//! keeps the latent in the model dtype (0.34.0 `resolve_kv_cache_dtype_string`: `auto` unless
//! the checkpoint's quantization config names a KV scheme, which DeepSeek-V3.2's does not).
//! `fp8_ds_mla` is 656 bytes per token (`MLAAttentionSpec.page_size_bytes`: 512 fp8 + 4 fp32 scales + 64 bf16
//! RoPE dims); the indexer's `k_cache` holds `index_head_dim` fp8 values plus one fp32 scale per
//! 128 (`DeepseekV32IndexerCache` in `models/deepseek_v2.py`): 132 bytes for 128 dims. All
//! layers share one group of different page sizes (`UniformTypeKVCacheSpecs`), so a block costs
//! `block × layers × (latent + indexer)`; the sparse backend forces 64-token blocks
//! (`platforms/cuda.py` `check_and_update_config`).

use crate::arch::{AttentionKind, ModelArch};
use crate::memory::{EngineVersion, KvGroupKind, KvLayout};

/// Bytes the sparse-attention backend's latent takes per token and layer for a
/// `--kv-cache-dtype` flag (`None` = auto) in vLLM `version` on a GPU of compute capability
/// major `sm_major`. From 0.32 GLM's DSA models take fp8 for `auto` on SM 10.x
/// (`GlmMoeDsaForCausalLM.verify_and_update_config`, not in 0.31), which the sparse FlashMLA
/// backend packs as `fp8_ds_mla`.
pub fn vllm_latent_bytes(
    arch: &ModelArch,
    kv_cache_dtype: Option<&str>,
    version: EngineVersion,
    sm_major: Option<u32>,
) -> Option<u64> {
    let m = arch.mla?;
    arch.nsa_index_head_dim?;
    let dims = u64::from(m.kv_lora_rank + m.qk_rope_head_dim);
    let glm_fp8 = version.at_least(0, 32)
        && sm_major == Some(10)
        && arch.architecture.as_deref() == Some("GlmMoeDsaForCausalLM");
    let auto_is_fp8 = !version.at_least(0, 12) || glm_fp8;
    Some(
        match kv_cache_dtype.map(str::to_ascii_lowercase).as_deref() {
            None | Some("auto") if auto_is_fp8 => 656,
            None | Some("auto") => dims * arch.dtype.bytes(),
            Some(k) if k.starts_with("fp8") => 656,
            Some("float32" | "fp32") => dims * 4,
            Some(_) => dims * 2,
        },
    )
}

/// Indexer key bytes per token and layer: `index_head_dim` fp8 + one fp32 scale per 128.
pub fn indexer_bytes(index_head_dim: u32) -> u64 {
    let d = u64::from(index_head_dim);
    d + d / 128 * 4
}

/// vLLM's layout of `layers` DSA layers on one GPU (the latent is replicated on every TP rank).
pub fn vllm_layout(
    arch: &ModelArch,
    layers: u32,
    kv_cache_dtype: Option<&str>,
    version: EngineVersion,
    sm_major: Option<u32>,
) -> Option<KvLayout> {
    let per_layer = vllm_latent_bytes(arch, kv_cache_dtype, version, sm_major)?
        + indexer_bytes(arch.nsa_index_head_dim?);
    let block = 64;
    Some(KvLayout {
        bytes_per_token: per_layer * u64::from(layers),
        page_bytes: per_layer * block,
        group_size: layers.max(1),
        kinds: vec![KvGroupKind {
            kind: AttentionKind::Full,
            layers,
            groups: 1,
        }],
        block_size: block,
        state_bytes_per_seq: 0,
        state_blocks_per_request: 0,
        state_blocks_follow_length: false,
    })
}
