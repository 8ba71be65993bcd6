//! Engines are rooms (issue 32): everything inferscope knows of one serving engine — how its
//! command reads, how it sizes memory, how fast it runs — lives in that engine's module, behind
//! [`EngineRoom`]. [`room`] is the one place that matches over [`Engine`]; a capability an engine
//! lacks answers [`NotModelled`] by name, never another engine's answer.
//!
//! Shared arithmetic (model shapes `arch`, KV layout `memory`, sharding, GGUF sizing, recurrent
//! state) stays outside the rooms; a room calls it.
//!
//! A new engine: its variant in `inferscope_host::engine::Engine` (with `id`, `name`, `parse`
//! spellings and, if it has a server command, the detector `engine_command`), one module here
//! implementing [`EngineRoom`] for what is modelled (see `sglang/`: `mod.rs` the answers,
//! its parser and flag meanings, `kv.rs` its accounting, `sizing.rs` its hook into the planner's
//! pipeline), and one line in [`room`]. The table test below fails until the new room answers
//! every capability or says which is not modelled.

pub mod llama_cpp;
/// LMDeploy (TurboMind and PyTorch backends).
pub mod lmdeploy;
pub mod mlc;
pub mod multi_node;
pub mod ollama;
pub mod sglang;

pub use sglang::speculative::SpeculativeSettings;
pub mod tgi;
pub mod trtllm;
pub mod vllm;

use crate::arch::ModelArch;
use crate::engine::{EngineSettings, Meaning};
use crate::plan::{Plan, PlanRequest};
use crate::speed::engines::EngineEfficiency;
pub use inferscope_host::engine::Engine;
use std::collections::BTreeSet;

/// A capability an engine's room does not have: "memory not modelled for TensorRT-LLM".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{capability} not modelled for {}", engine.name())]
pub struct NotModelled {
    /// The engine asked.
    pub engine: Engine,
    /// What was asked (`memory`, `speed`, `command options`).
    pub capability: &'static str,
}

impl NotModelled {
    /// `capability` of `engine` is not modelled.
    pub fn new(engine: Engine, capability: &'static str) -> NotModelled {
        NotModelled { engine, capability }
    }
}

/// How an engine's own parser reads its command line, and what each option means for memory.
pub struct CommandOptions {
    /// Every option the parser accepts (union over releases, data/flags/*.txt).
    pub known: fn() -> &'static BTreeSet<&'static str>,
    /// The parser's name and its words for a refused option, for the error.
    pub parser: &'static str,
    /// The parser reads `_` as `-` in `--` names.
    pub underscores_as_dashes: bool,
    /// argparse's `allow_abbrev`: an unambiguous prefix of a long option is that option.
    pub abbreviations: bool,
    /// argparse's `BooleanOptionalAction`: `--no-x` for each boolean `--x`.
    pub negations: bool,
    /// `-O3` / `-O.level=3` and `--json-arg.key value` forms.
    pub dotted_options: bool,
    /// The model is the first positional word (`vllm serve MODEL`).
    pub model_positional: bool,
    /// A context length of `0` is the model's own.
    pub zero_len_is_model_default: bool,
    /// `-1` concurrent sequences is the engine's automatic choice.
    pub minus_one_seqs_is_auto: bool,
    /// A context length of `auto` or `-1` is the largest that fits.
    pub auto_len: bool,
    /// Lengths and token budgets read as `human_readable_int` (`32k` = 32,000, `32K` = 32,768).
    pub human_readable_ints: bool,
    /// What one (normalised) option means for the plan; `None`: not modelled, listed as ignored.
    pub meaning: fn(&str) -> Option<Meaning>,
}

/// How an engine sizes memory: the plan of one request, in the engine's own accounting.
pub trait MemoryAccounting: Sync {
    /// The plan, as this engine would size it.
    fn plan(&self, req: &PlanRequest) -> Plan;
}

/// What an engine accepts in its environment and does to it (`run`'s rules), with sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvironmentRules {
    /// Whether `CUDA_VISIBLE_DEVICES` may hold `GPU-...` UUIDs.
    pub accepts_uuids: bool,
    /// Why (source file and function, release).
    pub uuid_source: &'static str,
    /// Set when the engine sets `OMP_NUM_THREADS` itself when it is unset: the source.
    pub sets_omp_threads: Option<&'static str>,
    /// Set when `expandable_segments:True` conflicts with this engine flag: (flag, source).
    pub expandable_conflict: Option<(&'static str, &'static str)>,
}

/// What `run --emit` knows when it picks an engine's official container image.
pub struct ImageShape {
    /// The release asked for (`0.10.2`, `b4500`), checked by the caller; `None`: the newest.
    pub version: Option<String>,
    /// The command starts with a Python interpreter (`python3 -m ...`).
    pub python: bool,
    /// NVIDIA GPUs in the plan.
    pub nvidia: bool,
    /// AMD GPUs in the plan.
    pub amd: bool,
    /// The command's words after its program.
    pub rest: Vec<String>,
}

impl ImageShape {
    /// The image tag: `PREFIX` + the release, else `latest`.
    pub fn tag(&self, prefix: &str) -> String {
        match &self.version {
            Some(v) => format!("{prefix}{v}"),
            None => "latest".to_string(),
        }
    }
}

/// An engine's official image and how the command maps onto it.
pub struct OfficialImage {
    /// Image reference.
    pub image: String,
    /// `--entrypoint` to set, if the image's own does not start the server.
    pub entrypoint: Option<String>,
    /// The container's arguments.
    pub args: Vec<String>,
    /// How the command becomes them, for the output's reason.
    pub how: &'static str,
}

/// One `plan --find` row to serve: what its command must say.
pub struct ServeShape<'a> {
    /// The model as the command names it.
    pub model: &'a str,
    /// GPUs (tensor parallel).
    pub gpus: u32,
    /// FP8 weights by on-the-fly quantization.
    pub fp8_weights: bool,
    /// FP8 KV cache.
    pub kv_fp8: bool,
    /// Context length.
    pub max_len: u64,
}

/// A flag an engine has for a knob that `mem` names in its fixes and OOM remedies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// The share of GPU memory the engine budgets (vLLM `--gpu-memory-utilization`).
    MemoryFraction,
    /// The tokens of one prefill chunk (vLLM `--max-num-batched-tokens`).
    PrefillChunk,
    /// No CUDA graphs (vLLM `--enforce-eager`).
    NoCudaGraphs,
    /// The largest batch a CUDA graph is captured for.
    GraphBatchCap,
    /// Tensor-parallel size (vLLM `--tensor-parallel-size`).
    TensorParallel,
    /// Pipeline-parallel size (vLLM `--pipeline-parallel-size`).
    PipelineParallel,
    /// Context length (vLLM `--max-model-len`).
    ContextLength,
    /// Most sequences running at once (vLLM `--max-num-seqs`).
    MaxSequences,
}

/// The memory-fraction fix of an engine that sizes its KV pool from the free memory it reads
/// before and after loading the weights ([`EngineRoom::free_memory_fix`]), in GiB per GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct FreeMemoryFix {
    /// The flag change (`--flag 0.93`).
    pub change: String,
    /// The arithmetic behind it.
    pub why: String,
    /// What it costs.
    pub cost: String,
    /// KV per GPU with the change.
    pub kv_gib: f64,
}

/// The Prometheus metrics an engine's server exposes on `/metrics` that `bench` records, by
/// exact name (`inferscope_bench::server_metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerMetricNames {
    /// Gauges and counters recorded when present.
    pub recorded: &'static [&'static str],
    /// Histograms whose `_sum` and `_count` are recorded (engine-side TTFT/ITL).
    pub histograms: &'static [&'static str],
    /// KV-cache usage as a fraction of 1.
    pub kv_usage: &'static [&'static str],
    /// Requests queued in the engine.
    pub waiting: &'static [&'static str],
    /// Requests running in the engine.
    pub running: &'static [&'static str],
    /// A gauge of the prefix-cache hit rate (its last value is the run's).
    pub prefix_hit_rate: Option<&'static str>,
}

impl ServeShape<'_> {
    /// `head` (the program, model and context length) and the engine's spelling of each choice
    /// the row makes: tensor parallelism over `gpus` when there is more than one, FP8 weights,
    /// FP8 KV.
    pub fn command(&self, head: String, tp: &str, fp8_weights: &str, kv_fp8: &str) -> String {
        let mut c = head;
        if self.gpus > 1 {
            c.push_str(&format!(" {tp} {}", self.gpus));
        }
        if self.fp8_weights {
            c.push_str(&format!(" {fp8_weights}"));
        }
        if self.kv_fp8 {
            c.push_str(&format!(" {kv_fp8}"));
        }
        c
    }
}

/// What the commands ask of one engine. Each method answers or says [`NotModelled`].
pub trait EngineRoom: Sync {
    /// Which engine this room is.
    fn engine(&self) -> Engine;
    /// The server as plan output names it (`vLLM`, `text-generation-launcher (TGI)`).
    fn server_name(&self) -> &'static str {
        self.engine().name()
    }
    /// The commands that start its server as error messages list them (`vllm serve`,
    /// `python -m MODULE`); empty where the planner reads none.
    fn server_commands(&self) -> &'static [&'static str] {
        &[]
    }
    /// Its server command as `plan`'s help names it in short (`vllm serve`); `None`: not named.
    fn help_command(&self) -> Option<&'static str> {
        None
    }
    /// How its command line reads.
    fn options(&self) -> Result<&'static CommandOptions, NotModelled> {
        Err(NotModelled::new(self.engine(), "command options"))
    }
    /// A flag of `settings` that release `version` does not have: that release's own error.
    fn refused_by_release(&self, _settings: &EngineSettings, _version: &str) -> Option<String> {
        None
    }
    /// Its memory accounting.
    fn memory(&self) -> Result<&'static dyn MemoryAccounting, NotModelled> {
        Err(NotModelled::new(self.engine(), "memory"))
    }
    /// Prefixes of the environment variables it reads (kept by the probe's environment capture).
    fn env_prefixes(&self) -> &'static [&'static str] {
        &[]
    }
    /// What it accepts in its environment (`run`).
    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        Err(NotModelled::new(self.engine(), "environment"))
    }
    /// The release as its messages name it (`(any release)` when not given).
    fn release_label(&self, version: Option<&str>) -> String {
        version.unwrap_or("(any release)").to_string()
    }
    /// Whether its memory accounting covers the model's recurrent-state (Mamba, linear
    /// attention) layers: `Err((layer type, why))` when not.
    fn state_layers(
        &self,
        arch: &ModelArch,
        _version: Option<&str>,
    ) -> Result<(), (String, &'static str)> {
        match arch.state_layers.first() {
            Some(s) => Err((
                s.layer_type.clone(),
                ": no memory accounting for this engine",
            )),
            None => Ok(()),
        }
    }
    /// Why the release does not run this architecture at all (vLLM's dropped architectures);
    /// `None`: it may.
    fn architecture_refused(&self, _architecture: &str, _version: Option<&str>) -> Option<String> {
        None
    }
    /// The first release whose recurrent-state accounting is modelled (`0.11`), for the hint
    /// to engines that model none; `None`: not modelled.
    fn state_layers_since(&self) -> Option<&'static str> {
        None
    }
    /// Its official container image (`run --emit docker|k8s`).
    fn official_image(&self, _shape: &ImageShape) -> Result<OfficialImage, NotModelled> {
        Err(NotModelled::new(self.engine(), "official image"))
    }
    /// The serving command for a `plan --find` row; `None` where inferscope writes none.
    fn serve_command(&self, _shape: &ServeShape<'_>) -> Option<String> {
        None
    }
    /// Its flag for `knob`; `None`: none inferscope names.
    fn flag(&self, _knob: Knob) -> Option<&'static str> {
        None
    }
    /// `mem`'s OOM remedies name its flags ([`EngineRoom::flag`]) beside vLLM's (checks name
    /// any room's tensor- and pipeline-parallel flags).
    fn named_in_oom_remedies(&self) -> bool {
        false
    }
    /// What its own failure line (`line`) means, given the weights and the free memory after
    /// them (GiB per GPU), when the line is one of its phrases; `mem startup`'s diagnosis.
    fn failure_diagnosis(
        &self,
        _line: &str,
        _weights_gib: Option<f64>,
        _avail_after_weights_gib: Option<f64>,
    ) -> Option<String> {
        None
    }
    /// It sizes its KV pool from the free memory it reads when it starts (not from the card's
    /// total), so `mem startup` plans with the log's free memory before the weights.
    fn sizes_from_free_memory(&self) -> bool {
        false
    }
    /// The start-up log lines `mem startup` needs for a budget, when an excerpt has neither a
    /// KV figure nor a failure: given whether it has the free memory before and after the
    /// weights. `None`: no lines known (the log parser reads none of this engine's).
    fn missing_budget_lines(
        &self,
        _has_before: bool,
        _has_after: bool,
    ) -> Option<Vec<&'static str>> {
        None
    }
    /// The fix that closes a failed start-up from the free memory before and after the weights
    /// (GiB), for an engine that [`sizes_from_free_memory`](EngineRoom::sizes_from_free_memory).
    fn free_memory_fix(&self, _before: f64, _after: f64) -> Option<FreeMemoryFix> {
        None
    }
    /// The metrics its server exposes that `bench` records, where registered here (engines
    /// whose names `bench` keeps itself answer `None`).
    fn server_metrics(&self) -> Option<&'static ServerMetricNames> {
        None
    }
    /// Splits layers across GPUs instead of tensor parallelism (the speed model's split).
    fn splits_layers(&self) -> bool {
        false
    }
    /// Its fitted speed efficiency (docs/speed.md).
    fn speed(&self) -> Result<EngineEfficiency, NotModelled> {
        Err(NotModelled::new(self.engine(), "speed"))
    }
    /// What one node of a server spread over several machines runs (`run --emit nodes|lws`).
    fn multi_node(
        &self,
        _req: &multi_node::NodeRequest<'_>,
    ) -> Result<multi_node::NodeCommand, multi_node::MultiNodeError> {
        Err(multi_node::MultiNodeError(
            NotModelled::new(self.engine(), "multi-node launch").to_string(),
        ))
    }
}

/// The room of an engine: the registration, and the only match over engines.
pub fn room(engine: Engine) -> &'static dyn EngineRoom {
    match engine {
        Engine::Vllm => &vllm::Vllm,
        Engine::Sglang => &sglang::Sglang,
        Engine::Tgi => &tgi::Tgi,
        Engine::LlamaCpp => &llama_cpp::LlamaCpp,
        Engine::Ollama => &ollama::Ollama,
        Engine::Trtllm => &trtllm::Trtllm,
        Engine::Mlc => &mlc::Mlc,
        Engine::Lmdeploy => &lmdeploy::Lmdeploy,
    }
}

/// Why `engine` at `version` cannot be planned for `arch`: the release does not run the
/// architecture ([`EngineRoom::architecture_refused`]), or a layer type is not modelled
/// ([`crate::hybrid::unmodelled`]); `None` when it can.
pub fn refusal(arch: &ModelArch, engine: Engine, version: Option<&str>) -> Option<String> {
    arch.architecture
        .as_deref()
        .and_then(|a| room(engine).architecture_refused(a, version))
        .or_else(|| crate::hybrid::unmodelled(arch, engine, version))
}

/// " (its recurrent-state pool is not modelled: plan it for vLLM ≥ 0.11 or ...)": the rooms
/// that model recurrent state, from [`EngineRoom::state_layers_since`].
pub(crate) fn state_pool_hint() -> &'static str {
    static HINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HINT.get_or_init(|| {
        let engines: Vec<String> = Engine::ALL
            .into_iter()
            .filter_map(|e| {
                let since = room(e).state_layers_since()?;
                Some(format!("{} ≥ {since}", e.name()))
            })
            .collect();
        format!(
            " (its recurrent-state pool is not modelled: plan it for {})",
            engines.join(" or ")
        )
    })
}

/// Reads a flag list (data/flags/*.txt): one option a line, `#` comments.
pub(crate) fn flag_list(text: &'static str) -> BTreeSet<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every engine's room answers every capability, or says which is not modelled, by name.
    #[test]
    fn every_room_answers_or_says_not_modelled() {
        let table: [(Engine, bool, bool, bool, bool); 8] = [
            // (engine, command options, memory, speed, environment)
            (Engine::Vllm, true, true, true, true),
            (Engine::Sglang, true, true, true, true),
            (Engine::Tgi, true, true, true, true),
            (Engine::LlamaCpp, true, true, true, true),
            (Engine::Ollama, false, false, false, true),
            (Engine::Trtllm, false, false, true, false),
            (Engine::Mlc, false, false, true, false),
            (Engine::Lmdeploy, true, true, false, true),
        ];
        assert_eq!(table.len(), Engine::ALL.len());
        for (e, options, memory, speed, environment) in table {
            let r = room(e);
            assert_eq!(r.engine(), e);
            let said = |x: NotModelled, what: &str| {
                assert_eq!(x.engine, e);
                assert_eq!(
                    x.to_string(),
                    format!("{what} not modelled for {}", e.name())
                );
            };
            match r.options() {
                Ok(o) => {
                    assert!(options, "{e:?} options");
                    assert!(!(o.known)().is_empty());
                }
                Err(x) => {
                    assert!(!options, "{e:?} options");
                    said(x, "command options");
                }
            }
            match r.memory() {
                Ok(_) => assert!(memory, "{e:?} memory"),
                Err(x) => {
                    assert!(!memory, "{e:?} memory");
                    said(x, "memory");
                }
            }
            match r.environment() {
                Ok(env) => {
                    assert!(environment, "{e:?} environment");
                    assert!(!env.uuid_source.is_empty());
                }
                Err(x) => {
                    assert!(!environment, "{e:?} environment");
                    said(x, "environment");
                }
            }
            let shape = ImageShape {
                version: None,
                python: false,
                nvidia: true,
                amd: false,
                rest: Vec::new(),
            };
            match r.official_image(&shape) {
                // the engines with a room for `run`'s environment are those with an image
                Ok(i) => assert!(environment && !i.image.is_empty(), "{e:?} image"),
                Err(x) => {
                    assert!(!environment, "{e:?} image");
                    said(x, "official image");
                }
            }
            match r.speed() {
                Ok(eff) => {
                    assert!(speed, "{e:?} speed");
                    assert_eq!(eff.engine, e);
                }
                Err(x) => {
                    assert!(!speed, "{e:?} speed");
                    said(x, "speed");
                }
            }
        }
        assert_eq!(
            crate::speed::engines::engine_names(),
            ["vllm", "sglang", "tgi", "trtllm", "llama.cpp", "mlc"]
        );
        assert_eq!(
            state_pool_hint(),
            " (its recurrent-state pool is not modelled: plan it for vLLM ≥ 0.11 or SGLang ≥ 0.5.10)"
        );
        assert_eq!(
            room(Engine::Trtllm).memory().err().map(|x| x.to_string()),
            Some("memory not modelled for TensorRT-LLM".into())
        );
    }
}
