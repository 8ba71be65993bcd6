//! SGLang speculative decoding's memory, per release (the 0.5.10.post1 wheel, and 0.5.11 to
//! 0.5.23 for where it changed).
//!
//! The target's token pool and the draft's KV pool hold the same tokens (they share one
//! allocator, `speculative/eagle_worker.py` `EAGLEWorker.__init__`); the draft's pool has the
//! draft's layers: `num_nextn_predict_layers` when the draft is the model's own MTP/NextN
//! layers, else the draft model's layer count (`model_runner.py`). Where that memory comes from
//! changed in 0.5.14:
//!
//! - 0.5.10–0.5.13: the draft's weights, KV pool and graphs come out of the
//!   1 − `mem_fraction_static` share, which the default fraction widens by 4 GiB (EAGLE, EAGLE3,
//!   NEXTN) or 6 GiB (STANDALONE) (`ServerArgs._handle_gpu_memory_settings`, [`super::kv`]);
//!   the target's token count is its plain profile.
//! - from 0.5.14: no reserve; the draft's weights are loaded before the pools are sized and
//!   count inside the fraction, and the target's cell grows by the draft's layers,
//!   `cell + ⌊cell × draft_layers / layers⌋`, when a draft path is set (0.5.14
//!   `model_executor/pool_configurator.py`, 0.5.23 `DefaultPoolConfigurator._compute_cell_size`).
//!
//! The draft path defaults to the model itself for DeepSeek V3/V3.2, GLM-4.5 MoE, Bailing and
//! Mistral Large 3 (`_handle_speculative_decoding`); NGRAM drafts from a CPU trie, no weights or
//! KV. Speculative decoding sets `--max-running-requests` to 48 when not given.

use crate::memory::EngineVersion;
use crate::plan::SizingInput;
use crate::rules::Rule;
use serde::{Deserialize, Serialize};

/// `--speculative-algorithm` choices (0.5.5–0.5.23; `NEXTN` is renamed `EAGLE` after the memory
/// settings are computed, `ServerArgs._handle_speculative_decoding`).
pub const SPECULATIVE_ALGORITHMS: [&str; 5] = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"];

/// SGLang's speculative-decoding and prefill-graph flags, as keys of `engine_settings` in JSON
/// (absent when not given). Checked as SGLang's parser checks them (0.5.23
/// `ServerArgs.add_cli_args`: the algorithm is one of its `choices`, the counts are integers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeculativeSettings {
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

impl SpeculativeSettings {
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

/// Architectures whose draft path defaults to the model's own NextN layers (0.5.10.post1
/// `server_args.py` `_handle_speculative_decoding`).
const DRAFT_IS_THE_MODEL: [&str; 10] = [
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
];

/// The first release whose speculative rules were read (0.5.10.post1).
const FIRST: EngineVersion = EngineVersion {
    major: 0,
    minor: 5,
    patch: 10,
};

/// The draft's weights and KV count inside `mem_fraction_static` from 0.5.14.
const IN_BUDGET_SINCE: EngineVersion = EngineVersion {
    major: 0,
    minor: 5,
    patch: 14,
};

/// The draft's memory on one GPU.
pub(crate) struct Draft {
    /// Inside the fraction (from 0.5.14) or out of the rest (0.5.10–0.5.13).
    pub(crate) in_budget: bool,
    /// The draft's weights on this GPU (its own layers; embedding and LM head are shared).
    pub(crate) weights: u64,
    /// KV bytes per token of the draft's layers.
    pub(crate) cell_extra: u64,
    /// The rules applied, with sources.
    pub(crate) rules: Vec<Rule>,
    /// What was assumed.
    pub(crate) assumptions: Vec<String>,
}

/// Why SGLang speculative decoding is not planned for this request, if it is not.
pub(crate) fn refusal(
    input_arch: &crate::arch::ModelArch,
    req: &crate::plan::PlanRequest,
) -> Option<String> {
    let algo = req.speculative.speculative_algorithm.as_deref()?;
    if super::kv::rules_release(req.engine_version.as_deref()).0 < FIRST {
        return Some(format!(
            "SGLang speculative decoding ({algo}) is modelled from 0.5.10's rules: the draft's memory before it is not read"
        ));
    }
    if !input_arch.state_layers.is_empty() && algo != "NGRAM" {
        return Some(format!(
            "SGLang speculative decoding ({algo}) with a hybrid model is not modelled: its Mamba pool keeps intermediate states per draft token, solved jointly with the pool size (0.5.13–0.5.23 kv_cache_configurator.py _handle_max_mamba_cache)"
        ));
    }
    if algo == "STANDALONE" && !draft_is_model(input_arch, req) {
        return Some(
            "SGLang STANDALONE speculative decoding with a separate draft model is not modelled: the draft model's size is not read".into(),
        );
    }
    None
}

fn draft_is_model(arch: &crate::arch::ModelArch, req: &crate::plan::PlanRequest) -> bool {
    match req.speculative.speculative_draft_model_path.as_deref() {
        None => arch
            .architecture
            .as_deref()
            .is_some_and(|a| DRAFT_IS_THE_MODEL.contains(&a)),
        Some(p) => p == req.model_name,
    }
}

/// The draft of `input`'s request on one GPU (`None` without speculative decoding). `cell` is
/// the target's KV bytes per token as SGLang counts it.
pub(crate) fn draft(input: &SizingInput<'_>, cell: u64) -> Option<Draft> {
    let req = input.req;
    let arch = input.arch;
    let algo = req.speculative.speculative_algorithm.as_deref()?;
    let in_budget = super::kv::rules_release(req.engine_version.as_deref()).0 >= IN_BUDGET_SINCE;
    let mut rules = vec![Rule {
        rule: "speculative_max_running_requests".into(),
        value: match req.max_num_seqs {
            Some(m) => format!("{m} (given)"),
            None => "48: speculative decoding's default".into(),
        },
        source: "0.5.10.post1 sglang/srt/server_args.py ServerArgs._handle_speculative_decoding"
            .into(),
    }];
    let mut assumptions = Vec::new();
    if algo == "NGRAM" {
        rules.push(Rule {
            rule: "speculative_draft".into(),
            value: "NGRAM drafts from a CPU trie: no draft weights or KV".into(),
            source: "0.5.10.post1 sglang/srt/speculative/ngram_worker.py".into(),
        });
        return Some(Draft {
            in_budget,
            weights: 0,
            cell_extra: 0,
            rules,
            assumptions,
        });
    }
    let shard = crate::memory::Shard {
        tp: input.tp,
        pp: input.pp,
        stage: 0,
        expert_parallel: req.expert_parallel,
    };
    let layers = crate::memory::stage_layers(arch.num_layers, input.pp, 0).len() as u64;
    let own_layers = draft_is_model(arch, req);
    let (draft_layers, weights, what) = if own_layers {
        let with = arch.with_mtp_layers();
        let weights = with.as_ref().map_or(0, |w| {
            crate::memory::weights_per_gpu(w, input.quant, shard)
                .total()
                .saturating_sub(crate::memory::weights_per_gpu(arch, input.quant, shard).total())
        });
        if with.is_none() {
            assumptions.push(format!(
                "SGLang {algo}: the draft is the model's own NextN layers, but its config declares none (num_nextn_predict_layers): no draft counted"
            ));
        }
        (
            u64::from(arch.mtp_layers),
            weights,
            "the model's own NextN/MTP layers (num_nextn_predict_layers), shaped like its last layer",
        )
    } else {
        assumptions.push(format!(
            "SGLang {algo}: the draft model's config is not read: one draft layer of the model's shape assumed (EAGLE heads are one decoder layer) and its weights not counted (unknown, not zero)"
        ));
        (1, 0, "a separate draft model (assumed one layer)")
    };
    let cell_extra = (cell * draft_layers).checked_div(layers).unwrap_or(0);
    let weights_said = if own_layers {
        format!("{weights} B")
    } else {
        "unknown (not read)".to_string()
    };
    rules.push(Rule {
        rule: "speculative_draft".into(),
        value: if in_budget {
            format!(
                "{what}: {weights_said} of weights inside mem_fraction_static; cell {cell} + ⌊{cell} × {draft_layers} / {layers}⌋ = {} B per token",
                cell + cell_extra
            )
        } else {
            format!(
                "{what}: {weights_said} of weights and a KV pool of {cell_extra} B per token (the target's token count) out of the 1 − mem_fraction_static share"
            )
        },
        source: if in_budget {
            "0.5.14 sglang/srt/model_executor/pool_configurator.py (cell × (1 + draft layers / layers)); managers/scheduler.py init_model_worker (draft weights before the pools); 0.5.23 DefaultPoolConfigurator._compute_cell_size"
        } else {
            "0.5.10.post1 sglang/srt/speculative/eagle_worker.py EAGLEWorker.__init__ (shared allocator, same tokens); model_executor/model_runner.py (draft layers); server_args.py _handle_gpu_memory_settings (+4/+6 GiB)"
        }
        .into(),
    });
    Some(Draft {
        in_budget,
        weights,
        cell_extra,
        rules,
        assumptions,
    })
}
