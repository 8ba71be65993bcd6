//! vLLM's room: its command line (`vllm serve MODEL`, `python -m vllm.entrypoints...`), its
//! memory accounting (the planner's profiled pipeline with the release rules of
//! `crate::rules`), and its fitted speed.

mod flags;
mod multi_node;
pub mod removed;
pub mod rules;

use super::{
    CommandOptions, EngineRoom, EnvironmentRules, ImageShape, MemoryAccounting, NotModelled,
    OfficialImage, ServeShape,
};
use crate::arch::ModelArch;
use crate::engine::EngineSettings;
use crate::memory::EngineVersion;
use crate::plan::{Plan, PlanRequest};
use crate::speed::engines::{EngineEfficiency, row};
use inferscope_host::engine::Engine;

/// The room.
pub struct Vllm;

static OPTIONS: CommandOptions = CommandOptions {
    known: flags::known,
    parser: "vLLM's argparse parser refuses unknown options (\"unrecognized arguments\")",
    underscores_as_dashes: true,
    abbreviations: true,
    negations: true,
    dotted_options: true,
    model_positional: true,
    // vLLM 0.14+ `human_readable_int_or_auto`: `-1` or `auto` is the largest that fits
    zero_len_is_model_default: false,
    minus_one_seqs_is_auto: false,
    auto_len: true,
    // `--max-model-len`, `--max-num-batched-tokens` are `human_readable_int`
    // (vllm/engine/arg_utils.py `_compute_kwargs`, 0.10.1.1 and later)
    human_readable_ints: true,
    meaning: flags::meaning,
};

struct Memory;

impl MemoryAccounting for Memory {
    fn plan(&self, req: &PlanRequest) -> Plan {
        crate::plan::pipeline(req, None)
    }
}

impl EngineRoom for Vllm {
    fn engine(&self) -> Engine {
        Engine::Vllm
    }

    fn flag(&self, knob: super::Knob) -> Option<&'static str> {
        match knob {
            super::Knob::MemoryFraction => Some("--gpu-memory-utilization"),
            _ => None,
        }
    }

    fn help_command(&self) -> Option<&'static str> {
        Some("vllm serve")
    }

    fn server_commands(&self) -> &'static [&'static str] {
        &["vllm serve", "python -m vllm.entrypoints.openai.api_server"]
    }

    fn options(&self) -> Result<&'static CommandOptions, NotModelled> {
        Ok(&OPTIONS)
    }

    fn memory(&self) -> Result<&'static dyn MemoryAccounting, NotModelled> {
        Ok(&Memory)
    }

    fn speed(&self) -> Result<EngineEfficiency, NotModelled> {
        // fitted by tests/speed_accuracy.rs on the calibration half of fixtures/speed/cases.jsonl
        Ok(row(
            Engine::Vllm,
            (
                0.98,
                0.53,
                1.40e-05,
                0.00e+00,
                "calibration half: 4 vllm case(s)",
            ),
        ))
    }

    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        // `run`'s rules, read from the engine's source (docs/run.md "Engine compatibility")
        Ok(EnvironmentRules {
            accepts_uuids: false,
            uuid_source: "vllm/platforms/interface.py Platform.device_id_to_physical_device_id (0.10.2) returns int() of each comma-separated entry",
            sets_omp_threads: Some(
                "vllm/executor/multiproc_worker_utils.py set_multiprocessing_worker_envs (0.10.2) sets OMP_NUM_THREADS=1 when it is unset",
            ),
            expandable_conflict: Some((
                "--enable-sleep-mode",
                "vllm/device_allocator/cumem.py CuMemAllocator.__init__ (0.10.2) asserts expandable_segments:True is not in PYTORCH_CUDA_ALLOC_CONF",
            )),
        })
    }

    fn serve_command(&self, s: &ServeShape<'_>) -> Option<String> {
        Some(s.command(
            format!("vllm serve {} --max-model-len {}", s.model, s.max_len),
            "--tensor-parallel-size",
            "--quantization fp8",
            "--kv-cache-dtype fp8",
        ))
    }

    /// The image and its entrypoint, as its own Dockerfile says:
    /// `vllm/vllm-openai`: `ENTRYPOINT ["vllm", "serve"]` in current images
    /// (vllm-project/vllm docker/Dockerfile, target `vllm-openai`), but
    /// `["python3", "-m", "vllm.entrypoints.openai.api_server"]` up to at least 0.10.2
    /// (vllm-project/vllm PR #25309, 2025-09-20, describes "the Dockerfile's entrypoint
    /// (`python -m vllm.entrypoints.openai.api_server`)"), which takes `--model M`, not a
    /// positional model. The emitted command therefore names the entrypoint itself,
    /// `--entrypoint vllm` + `serve M ...`, which both kinds of image run the same way.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        let image = format!("vllm/vllm-openai:{}", s.tag("v"));
        Ok(if s.python {
            OfficialImage {
                image,
                entrypoint: Some("python3".into()),
                args: s.rest.clone(),
                how: "--entrypoint python3 with the module and its arguments",
            }
        } else {
            OfficialImage {
                image,
                entrypoint: Some("vllm".into()),
                args: s.rest.clone(),
                how: "--entrypoint vllm and `serve ...`: the image's ENTRYPOINT is `vllm serve` today but `python3 -m vllm.entrypoints.openai.api_server` in releases up to at least 0.10.2, and both have the vllm CLI",
            }
        })
    }

    fn multi_node(
        &self,
        req: &super::multi_node::NodeRequest<'_>,
    ) -> Result<super::multi_node::NodeCommand, super::multi_node::MultiNodeError> {
        multi_node::node_command(req)
    }

    fn release_label(&self, version: Option<&str>) -> String {
        // the release whose rules apply
        version
            .and_then(EngineVersion::parse)
            .unwrap_or(EngineVersion::LATEST)
            .to_string()
    }

    fn state_layers_since(&self) -> Option<&'static str> {
        Some("0.11")
    }

    fn state_layers(
        &self,
        arch: &ModelArch,
        version: Option<&str>,
    ) -> Result<(), (String, &'static str)> {
        let v = version
            .and_then(EngineVersion::parse)
            .unwrap_or(EngineVersion::LATEST);
        match arch.state_layers.first() {
            Some(s) if v < crate::hybrid::VLLM_FIRST => Err((
                s.layer_type.clone(),
                " (hybrid state is modelled for vLLM ≥ 0.11.0's hybrid KV-cache manager)",
            )),
            // Kimi-Linear arrived in 0.12.0 (`models/kimi_linear.py`)
            _ if !v.at_least(0, 12)
                && arch
                    .state_layers
                    .iter()
                    .any(|s| matches!(s.state, crate::state::StateKind::Kda { .. })) =>
            {
                Err(("kda".into(), " (vLLM serves Kimi-Linear from 0.12.0)"))
            }
            _ => Ok(()),
        }
    }

    fn architecture_refused(&self, architecture: &str, version: Option<&str>) -> Option<String> {
        removed::refusal(architecture, version.and_then(EngineVersion::parse))
    }

    fn refused_by_release(&self, s: &EngineSettings, version: &str) -> Option<String> {
        flags::refused_by_release(s, version)
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["VLLM_"]
    }
}
