//! SGLang settings with no vLLM counterpart, read from a pasted `sglang.launch_server` command.

use serde::{Deserialize, Serialize};

/// SGLang-only switches that change the plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SglangSettings {
    /// `--disable-radix-cache`: no prefix (radix) cache; with `--max-running-requests N` and no
    /// `--max-mamba-cache-size`, a hybrid model's Mamba pool is N states
    /// (0.5.10.post1 `model_runner_kv_cache_mixin.py` `handle_max_mamba_cache`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_radix_cache: bool,
}
