//! SGLang-only flags that change the plan: speculative decoding and the prefill CUDA graph.
//! Checked as SGLang's parser checks them (0.5.23 `ServerArgs.add_cli_args`: the algorithm
//! is one of its `choices`, the counts are integers).

use serde::{Deserialize, Serialize};

/// `--speculative-algorithm` choices (0.5.5–0.5.23; `NEXTN` is renamed `EAGLE` after the memory
/// settings are computed, `ServerArgs._handle_speculative_decoding`).
pub const SPECULATIVE_ALGORITHMS: [&str; 5] = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"];

/// SGLang's own settings, as keys of `engine_settings` in JSON (absent when not given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SglangSettings {
    /// `--speculative-algorithm` (`EAGLE`, `EAGLE3`, `NEXTN`, `STANDALONE`, `NGRAM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_algorithm: Option<String>,
    /// `--speculative-draft-model-path` (alias `--speculative-draft-model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_draft_model_path: Option<String>,
    /// `--speculative-num-steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_num_steps: Option<u64>,
    /// `--speculative-eagle-topk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_eagle_topk: Option<u64>,
    /// `--speculative-num-draft-tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_num_draft_tokens: Option<u64>,
    /// `--disable-piecewise-cuda-graph` (0.5.10–0.5.13): no prefill CUDA graph, no reserve.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_piecewise_cuda_graph: bool,
}

impl SglangSettings {
    /// Take one of the flags above; `Err`: the error SGLang's parser would give, in words.
    pub fn set(&mut self, flag: &str, v: &str) -> Result<(), String> {
        let count = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag} {v:?}: expected an integer"))
        };
        match flag {
            "--speculative-algorithm" => {
                if !SPECULATIVE_ALGORITHMS.contains(&v) {
                    return Err(format!(
                        "{flag} {v:?}: expected one of {}",
                        SPECULATIVE_ALGORITHMS.join(", ")
                    ));
                }
                self.speculative_algorithm = Some(v.to_string());
            }
            "--speculative-draft-model-path" | "--speculative-draft-model" => {
                self.speculative_draft_model_path = Some(v.to_string())
            }
            "--speculative-num-steps" => self.speculative_num_steps = Some(count(v)?),
            "--speculative-eagle-topk" => self.speculative_eagle_topk = Some(count(v)?),
            "--speculative-num-draft-tokens" => self.speculative_num_draft_tokens = Some(count(v)?),
            _ => return Err(format!("{flag}: not an SGLang setting")),
        }
        Ok(())
    }

    /// Take one of the switches above.
    pub fn switch(&mut self, flag: &str) {
        if flag == "--disable-piecewise-cuda-graph" {
            self.disable_piecewise_cuda_graph = true;
        }
    }
}
