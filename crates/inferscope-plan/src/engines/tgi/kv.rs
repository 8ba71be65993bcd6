//! Hugging Face TGI's own KV accounting, per release (read from the repository at the tags
//! v1.0.0, v2.0.4 and v3.3.7: `server/text_generation_server/models/flash_causal_lm.py`
//! `FlashCausalLM.warmup`, `utils/import_utils.py` `get_cuda_free_memory`, `models/globals.py`).
//!
//! TGI warms up with one prefill of `--max-batch-prefill-tokens` (its KV blocks allocated), then
//! measures free memory with the allocator still holding the warm-up's peak:
//!
//! ```text
//! 1.0: blocks = (free − (1 − F) × total) // block_bytes + warm-up blocks
//! 2.0: blocks = 0.95 × (free − (1 − F) × total) // block_bytes + warm-up blocks
//! 3.x: blocks = (free − (1 − F × 0.90) × total) // block_bytes + warm-up blocks
//! ```
//!
//! with `F = --cuda-memory-fraction` (default 1.0) and 0.90 = `TGI_WIGGLE_ROOM`. The warm-up
//! blocks were part of `free`, so they cancel: KV = share × total − context − weights − warm-up
//! activation peak (3.x), or that free figure × 0.95 plus the warm-up's own KV (2.0). Pure.

use crate::arch::ModelArch;
use crate::memory::{EngineVersion, GIB, ProfileShape, activation_bytes};
use crate::rules::{Accounting, EngineRules, Rule};

/// Inputs of TGI's KV sizing on one shard.
#[derive(Debug, Clone)]
pub struct TgiInputs<'a> {
    /// TGI version, when known.
    pub version: Option<&'a str>,
    /// `torch.cuda.get_device_properties().total_memory`, bytes.
    pub total: u64,
    /// Weights on this shard, bytes.
    pub weights: u64,
    /// CUDA context, NCCL and other non-torch memory, bytes.
    pub non_torch: u64,
    /// Activation peak of the warm-up prefill, bytes.
    pub warmup_activation: u64,
    /// KV bytes per token on this shard (all layers).
    pub bytes_per_token: u64,
    /// `--max-batch-prefill-tokens` in effect.
    pub prefill_tokens: u64,
    /// `--cuda-memory-fraction` when given.
    pub cuda_memory_fraction: Option<f64>,
    /// Attention backend is flashinfer (3.x default: block size 1).
    pub block_size: Option<u32>,
}

/// TGI's sizing of one start-up.
#[derive(Debug, Clone)]
pub struct TgiKv {
    /// Bytes of KV on one shard (may be ≤ 0: TGI cannot start).
    pub kv: i64,
    /// KV-cache blocks.
    pub blocks: u64,
    /// Tokens per block.
    pub block_size: u32,
    /// Tokens the KV cache holds (`blocks × block_size`).
    pub tokens: u64,
    /// The rules applied.
    pub info: EngineRules,
}

fn rule(rule: &str, value: String, source: &str) -> Rule {
    Rule {
        rule: rule.into(),
        value,
        source: source.into(),
    }
}

/// Size TGI's KV cache on one shard.
pub fn kv(i: &TgiInputs) -> TgiKv {
    let newest = EngineVersion {
        major: 3,
        minor: 3,
        patch: 7,
    };
    let parsed = i.version.and_then(EngineVersion::parse);
    let (ver, note, accounting) = match (i.version, parsed) {
        (None, _) => (
            newest,
            Some(format!(
                "TGI version not given: rules of the newest modelled release, {newest}"
            )),
            Accounting::Modelled,
        ),
        (Some(t), None) => (
            newest,
            Some(format!(
                "TGI version {t:?} not understood: rules of {newest}"
            )),
            Accounting::Approximate,
        ),
        (Some(_), Some(v)) if v > newest => (
            newest,
            Some(format!("TGI {v} is newer than modelled: rules of {newest}")),
            Accounting::Approximate,
        ),
        (Some(_), Some(v)) => (v, None, Accounting::Modelled),
    };
    let f = i
        .cuda_memory_fraction
        .filter(|f| f.is_finite())
        .unwrap_or(1.0)
        .clamp(0.0, 1.0);
    let block = i
        .block_size
        .unwrap_or(if ver.major >= 3 { 1 } else { 16 })
        .max(1);
    let total = i.total as f64;
    // free after the warm-up, with the warm-up's own KV counted back in (it cancels)
    let free_now = total - i.non_torch as f64 - i.weights as f64 - i.warmup_activation as f64;
    let (kv, src, formula) = if ver.major >= 3 {
        (
            free_now - (1.0 - f * 0.90) * total,
            "v3.3.7 server/text_generation_server/models/flash_causal_lm.py FlashCausalLM.warmup; models/globals.py TGI_WIGGLE_ROOM 0.90",
            format!("free after warm-up − (1 − {f} × 0.90) × total"),
        )
    } else if ver.major >= 2 {
        let warm_kv = (i.prefill_tokens * i.bytes_per_token) as f64;
        (
            0.95 * (free_now - warm_kv - (1.0 - f) * total) + warm_kv,
            "v2.0.4 server/text_generation_server/models/flash_causal_lm.py FlashCausalLM.warmup (free × 0.95)",
            format!("0.95 × (free after warm-up − (1 − {f}) × total) + warm-up KV"),
        )
    } else {
        (
            free_now - (1.0 - f) * total,
            "v1.0.0 server/text_generation_server/models/flash_causal_lm.py FlashCausalLM.warmup (no wiggle room)",
            format!("free after warm-up − (1 − {f}) × total"),
        )
    };
    let block_bytes = i.bytes_per_token.saturating_mul(u64::from(block)).max(1);
    let blocks = if kv > 0.0 {
        (kv / block_bytes as f64).floor() as u64
    } else {
        0
    };
    let rules = vec![
        rule(
            "warmup",
            format!(
                "one prefill of {} tokens; its activation peak stays reserved when free memory is read",
                i.prefill_tokens
            ),
            "server/text_generation_server/models/flash_causal_lm.py FlashCausalLM.warmup (generate_token before get_free_memory)",
        ),
        rule("kv_cache", format!("{formula} = {:.2} GiB", kv / GIB), src),
        rule(
            "block_size",
            format!("{block}"),
            "server/text_generation_server/models/globals.py BLOCK_SIZE: 1 with flashinfer (3.x default), 16 paged, 256 flashdecoding",
        ),
        rule(
            "max_concurrent_requests",
            "a queue limit, not a batch size: it does not change memory".into(),
            "launcher/src/main.rs --max-concurrent-requests",
        ),
    ];
    TgiKv {
        kv: kv as i64,
        blocks,
        block_size: block,
        tokens: blocks * u64::from(block),
        info: EngineRules {
            engine: "tgi".into(),
            requested_version: i.version.map(str::to_string),
            rules_of: ver.to_string(),
            note,
            accounting,
            rules,
        },
    }
}

/// Activation peak of TGI's warm-up prefill of `tokens` on one shard: the forward pass's
/// derived terms (as for vLLM, [`activation_bytes`] with no sampler rows) plus the prefill
/// logits of this shard's slice of the vocabulary (the router's warm-up asks for
/// `prefill_logprobs`, `backends/v3/src/client/grpc_client.rs` `warmup`), in the model dtype.
pub fn warmup_activation(arch: &ModelArch, tokens: u64, tp: u32) -> u64 {
    let base = activation_bytes(
        arch,
        ProfileShape {
            tokens,
            seqs: 0,
            v1: true,
            tp,
            sampler: crate::memory::SamplerPath::Fused,
        },
    );
    let logits = tokens
        .saturating_mul(arch.vocab_size.div_ceil(u64::from(tp.max(1))))
        .saturating_mul(arch.dtype.bytes());
    base.saturating_add(logits)
}

/// TGI's default `--max-batch-prefill-tokens` when not given, and where it comes from.
/// `model_type` is the text model's `model_type` (`multimodal`: the checkpoint has a vision
/// tower, so the top-level type the launcher reads is `gemma3` for `gemma3_text`); `max_pos`
/// its `max_position_embeddings`. 3.x first tries a compute-optimal size for cards in the
/// launcher's FLOPS table (`compute_optimal`), which this does not model (said in the source).
pub fn default_prefill_tokens(
    version: Option<&str>,
    model_type: &str,
    multimodal: bool,
    max_pos: u64,
) -> (u64, String) {
    let major = version
        .and_then(EngineVersion::parse)
        .map_or(3, |v| v.major);
    match major {
        0 | 1 => (
            4096,
            "v1.0.0 launcher/src/main.rs: --max-batch-prefill-tokens default 4096".into(),
        ),
        2 => (
            max_pos.clamp(1, 4096) - 1 + 50,
            "v2.0.4 launcher/src/main.rs: max_input_tokens (min(max_position_embeddings, 4096) − 1) + 50".into(),
        ),
        _ => {
            let d = match (model_type, multimodal) {
                ("qwen2_vl" | "qwen2_5_vl", _) => 10_000,
                ("gemma3", _) | ("gemma3_text", true) => 8000,
                _ => 4096,
            };
            (
                d.min(max_pos.max(1)),
                format!("v3.3.7 launcher/src/main.rs: {d} for model_type {model_type:?}, at most max_position_embeddings (the compute-optimal size for known cards is not modelled)"),
            )
        }
    }
}
