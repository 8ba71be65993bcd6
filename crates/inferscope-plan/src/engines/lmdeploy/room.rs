//! LMDeploy's [`EngineRoom`]: what the consumers (`plan`, `mem startup`, `run`) ask of the
//! room, answered by the plain functions beside it ([`super::args`], [`super::memory`],
//! [`super::env`]).

use super::memory;
use super::{Backend, QuantPolicy};
use crate::engine::Meaning;
use crate::engines::{
    CommandOptions, EngineRoom, EnvironmentRules, ImageShape, MemoryAccounting, NotModelled,
    OfficialImage, ServeShape,
};
use crate::memory::GIB;
use crate::plan::{OwnSizer, OwnSizing, Plan, PlanRequest, SizingInput, Stage};
use inferscope_host::engine::Engine;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The room.
pub struct Lmdeploy;

fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| crate::engines::flag_list(include_str!("../../../data/flags/lmdeploy.txt")))
}

/// What each `api_server` flag means for the plan (0.18.0 `lmdeploy/cli/utils.py`
/// `ArgumentHelper`). The LMDeploy-only ones are [`Meaning::Lmdeploy`]
/// ([`super::settings::LmdeploySettings`]).
fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "--tp" => Tp,
        "--session-len" => MaxLen,
        "--max-batch-size" => MaxSeqs,
        "--max-prefill-token-num" => BatchedTokens,
        "--cache-block-seq-len" => Block,
        "--dtype" => Dtype,
        "--backend"
        | "--cache-max-entry-count"
        | "--quant-policy"
        | "--num-gpu-blocks"
        | "--model-format" => Lmdeploy,
        "--server-name" | "--server-port" | "--log-level" | "--model-name" | "--revision"
        | "--download-dir" | "--chat-template" | "--api-keys" | "--max-log-len"
        | "--tool-call-parser" | "--reasoning-parser" => Inert,
        "--trust-remote-code"
        | "--enable-prefix-caching"
        | "--disable-metrics"
        | "--enable-metrics"
        | "--disable-fastapi-docs"
        | "--allow-credentials"
        | "--help" => InertSwitch,
        _ => return None,
    })
}

static OPTIONS: CommandOptions = CommandOptions {
    known,
    parser: "lmdeploy's argparse parser refuses unknown arguments",
    // 0.18.0 FlexibleArgumentParser.parse_args: `--a_b` is `--a-b`
    underscores_as_dashes: true,
    // ArgumentParser(allow_abbrev) default True, but FlexibleArgumentParser rewrites names
    // first; prefixes are not modelled
    abbreviations: false,
    negations: false,
    dotted_options: false,
    model_positional: true,
    zero_len_is_model_default: false,
    minus_one_seqs_is_auto: false,
    auto_len: false,
    human_readable_ints: false,
    meaning,
};

struct Memory;

impl MemoryAccounting for Memory {
    fn plan(&self, req: &PlanRequest) -> Plan {
        // a model shape the room does not size is refused by name, before any figure
        let quant = req.lmdeploy.quant_policy();
        let backend = req.lmdeploy.backend().unwrap_or(Backend::Turbomind);
        let block = match backend {
            Backend::Turbomind => memory::turbomind_block(&req.arch, req.tp, 64, quant),
            Backend::Pytorch => memory::pytorch_block(&req.arch, req.tp, 64, quant),
        };
        if let Err(x) = block {
            return crate::plan::refused(req, x.to_string());
        }
        // `--model-format awq|gptq|fp8|mxfp4`: the weights are that quantization
        let with_format;
        let req = match req.lmdeploy.weight_quantization() {
            Some(q) if req.quantization.is_none() => {
                with_format = PlanRequest {
                    quantization: Some(q.to_string()),
                    ..req.clone()
                };
                &with_format
            }
            _ => req,
        };
        crate::plan::pipeline(
            req,
            Some(&OwnSizer {
                size,
                outside_budget: true,
            }),
        )
    }
}

/// The command this plan request stands for: the settings a pasted command gave, else
/// LMDeploy's defaults (`plan --engine lmdeploy --model X`).
pub(crate) fn args_of(req: &PlanRequest) -> super::args::LmdeployArgs {
    let s = &req.lmdeploy;
    let mut a = super::args::LmdeployArgs::new(req.model_name.clone());
    a.backend = s.backend();
    a.tp = req.tp.max(1);
    a.session_len = req.max_model_len;
    a.max_batch_size = req.max_num_seqs;
    if let Some(f) = s.cache_max_entry_count.or(req.gpu_memory_utilization) {
        a.cache_max_entry_count = f;
        a.cache_flags_given.0 = true;
    }
    if let Some(b) = req.block_size.filter(|b| *b > 0) {
        a.cache_block_seq_len = b;
        a.cache_flags_given.1 = true;
    }
    a.num_gpu_blocks = s.num_gpu_blocks.unwrap_or(0);
    a.quant_policy = s.quant_policy();
    // the weights' quantization (a 4-bit one adds TurboMind's conversion temporaries)
    a.model_format = req.quantization.clone().or(s.model_format.clone());
    if let Some(p) = req.max_num_batched_tokens {
        a.max_prefill_token_num = p;
    }
    a
}

/// LMDeploy's KV sizing inside the planner's pipeline: the fraction rule of the release and
/// backend ([`memory::plan`]) on the memory free after the weights and the CUDA context.
fn size(input: &SizingInput<'_>, first: &mut Stage, assumptions: &mut Vec<String>) -> OwnSizing {
    let SizingInput {
        req, arch, total, ..
    } = *input;
    let a = args_of(req);
    let version = req.engine_version.as_deref();
    // what is resident besides the weights when the cache is sized: the CUDA context, the
    // shared non-torch figure (memory::non_torch_bytes); activations and CUDA graphs are
    // LMDeploy's own buffers, not modelled apart (docs/engines/lmdeploy.md, accuracy)
    let context = first.non_torch;
    first.activation = 0;
    first.cuda_graph = 0;
    let backend = a.backend.unwrap_or(Backend::Turbomind);
    let planned = memory::plan(
        arch,
        &a,
        version,
        &req.gpu.name,
        total,
        first.weights,
        context,
    );
    let kv = match planned {
        Ok(kv) => kv,
        Err(x) => {
            // checked before the pipeline (Memory::plan); kept total: no KV, said
            assumptions.push(x.to_string());
            return OwnSizing {
                tokens: 0,
                cell: 0,
                kv: 0,
                budget: 0.0,
                outside: total as f64,
                block: a.cache_block_seq_len,
                rules: super::engine_rules(version, backend),
                max_requests: None,
                state_per_seq: None,
                starts_short: false,
                state_pool: None,
            };
        }
    };
    let cell = kv.kv_bytes.checked_div(kv.tokens).unwrap_or(0);
    let max_len = a.session_len.unwrap_or(arch.max_position_embeddings);
    let session = memory::effective_session_len(max_len, &kv, backend);
    if session < max_len {
        assumptions.push(format!(
            "LMDeploy TurboMind cuts session_len {max_len} to {session} tokens, the tokens the KV cache holds [v0.9.0 src/turbomind/models/llama/LlamaBatch.cc LlamaBatch::LlamaBatch; v0.14.0 src/turbomind/engine/engine.cc CreateSequenceManager]"
        ));
    }
    if a.quant_policy != QuantPolicy::None {
        // the plan's `kv_cache_dtype` is the model dtype of the shared layout; the blocks above
        // are sized in the --quant-policy storage
        assumptions.push(format!(
            "LMDeploy --quant-policy {}: KV blocks sized in that storage (scales included), not in the dtype shown",
            a.quant_policy.value()
        ));
    }
    if backend == Backend::Pytorch && a.num_gpu_blocks == 0 {
        assumptions.push(format!(
            "LMDeploy PyTorch runtime reserve {:.2} GiB (max_prefill_token_num {})",
            kv.runtime_reserve as f64 / GIB,
            kv.max_prefill_token_num
        ));
    }
    let used = first
        .weights
        .saturating_add(context)
        .saturating_add(kv.kv_bytes);
    let rules = kv.info;
    OwnSizing {
        tokens: kv.tokens,
        cell,
        kv: kv.kv_bytes.min(i64::MAX as u64) as i64,
        budget: used as f64,
        outside: total.saturating_sub(used) as f64,
        block: kv.block_len,
        rules,
        max_requests: None,
        state_per_seq: None,
        // TurboMind cuts session_len and starts; PyTorch starts with any count ≥ 16 blocks
        starts_short: true,
        state_pool: None,
    }
}

impl EngineRoom for Lmdeploy {
    fn engine(&self) -> Engine {
        Engine::Lmdeploy
    }

    fn server_commands(&self) -> &'static [&'static str] {
        &["lmdeploy serve api_server"]
    }

    fn help_command(&self) -> Option<&'static str> {
        Some("lmdeploy serve api_server")
    }

    /// `lmdeploy/metrics/loggers.py` `PrometheusStatLogger` (0.10.0–0.18.0; [`super::env::METRICS`]).
    fn server_metrics(&self) -> Option<&'static crate::engines::ServerMetricNames> {
        Some(&crate::engines::ServerMetricNames {
            recorded: &[
                "lmdeploy:gpu_cache_usage_perc",
                "lmdeploy:num_requests_running",
                "lmdeploy:num_requests_waiting",
                "lmdeploy:prefix_cache_hit_rate",
            ],
            histograms: &[
                "lmdeploy:time_to_first_token_seconds",
                "lmdeploy:time_per_output_token_seconds",
            ],
            kv_usage: &["lmdeploy:gpu_cache_usage_perc"],
            waiting: &["lmdeploy:num_requests_waiting"],
            running: &["lmdeploy:num_requests_running"],
            prefix_hit_rate: Some("lmdeploy:prefix_cache_hit_rate"),
        })
    }

    fn server_name(&self) -> &'static str {
        "lmdeploy serve api_server (LMDeploy)"
    }

    fn options(&self) -> Result<&'static CommandOptions, NotModelled> {
        Ok(&OPTIONS)
    }

    fn memory(&self) -> Result<&'static dyn MemoryAccounting, NotModelled> {
        Ok(&Memory)
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["LMDEPLOY_", "TM_"]
    }

    /// The rules of the default start-up (TurboMind, or one PyTorch GPU); the Ray rules of
    /// `--backend pytorch` with tp×dp > 1 are [`super::env::rules`] per command.
    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        let a = super::args::LmdeployArgs::new(String::new());
        let r = super::env::rules(&a);
        Ok(EnvironmentRules {
            accepts_uuids: r.accepts_uuids,
            uuid_source: r.uuid_source,
            sets_omp_threads: r.sets_omp_threads,
            expandable_conflict: r.expandable_conflict,
        })
    }

    fn release_label(&self, version: Option<&str>) -> String {
        super::resolve_version(version).0.to_string()
    }

    /// `openmmlab/lmdeploy`, the image LMDeploy's installation docs pull
    /// (`docker run --gpus all ... openmmlab/lmdeploy:latest lmdeploy serve api_server ...`):
    /// it has no server entrypoint, so the whole command is its arguments.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        let mut full = vec![if s.python { "python3" } else { "lmdeploy" }.to_string()];
        full.extend(s.rest.iter().cloned());
        Ok(OfficialImage {
            image: "openmmlab/lmdeploy:latest".to_string(),
            entrypoint: None,
            args: full,
            how: "the whole command: the image has no server entrypoint; its release tags carry the CUDA build, so pin one with --image",
        })
    }

    fn serve_command(&self, s: &ServeShape<'_>) -> Option<String> {
        // on-the-fly FP8 weights: not an api_server flag inferscope writes
        if s.fp8_weights {
            return None;
        }
        let mut c = format!(
            "lmdeploy serve api_server {} --session-len {}",
            s.model, s.max_len
        );
        if s.gpus > 1 {
            c.push_str(&format!(" --tp {}", s.gpus));
        }
        // TurboMind has no FP8 KV (--quant-policy 8 is int8); FP8 KV needs the PyTorch engine
        if s.kv_fp8 {
            c.push_str(&format!(
                " --backend pytorch --quant-policy {}",
                QuantPolicy::Fp8.value()
            ));
        }
        Some(c)
    }
}
