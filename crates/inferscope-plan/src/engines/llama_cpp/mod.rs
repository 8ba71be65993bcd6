//! llama.cpp's room: its command line (`llama-server`), its own memory accounting (`plan`:
//! exactly the cells it allocates, not a share of the GPU) and its fitted speed.

mod flags;
pub mod plan;

use super::{
    CommandOptions, EngineRoom, EnvironmentRules, ImageShape, MemoryAccounting, NotModelled,
    OfficialImage,
};
use crate::arch::ModelArch;
use crate::plan::{Plan, PlanRequest};
use crate::speed::engines::{EngineEfficiency, row};
use inferscope_host::engine::Engine;

/// The room.
pub struct LlamaCpp;

static OPTIONS: CommandOptions = CommandOptions {
    known: flags::known,
    parser: "llama-server refuses unknown options (\"error: invalid argument\")",
    underscores_as_dashes: true,
    abbreviations: false,
    negations: false,
    dotted_options: false,
    model_positional: false,
    // `-c 0`: the model's own context; `-np -1`: auto
    zero_len_is_model_default: true,
    minus_one_seqs_is_auto: true,
    auto_len: false,
    human_readable_ints: false,
    meaning: flags::meaning,
};

struct Memory;

impl MemoryAccounting for Memory {
    fn plan(&self, req: &PlanRequest) -> Plan {
        plan::plan(req)
    }
}

impl EngineRoom for LlamaCpp {
    fn engine(&self) -> Engine {
        Engine::LlamaCpp
    }

    fn server_name(&self) -> &'static str {
        "llama-server"
    }

    fn help_command(&self) -> Option<&'static str> {
        Some("llama-server")
    }

    fn server_commands(&self) -> &'static [&'static str] {
        &["llama-server"]
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
            Engine::LlamaCpp,
            (
                0.58,
                0.26,
                0.00e+00,
                0.00e+00,
                "calibration half: 2 llama.cpp case(s)",
            ),
        ))
    }

    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        // `run`'s rules, read from the engine's source (docs/run.md "Engine compatibility")
        Ok(EnvironmentRules {
            accepts_uuids: true,
            uuid_source: "ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_init enumerates devices with cudaGetDeviceCount: the CUDA runtime parses the variable (indices, GPU- and MIG- UUIDs)",
            sets_omp_threads: None,
            expandable_conflict: None,
        })
    }

    fn splits_layers(&self) -> bool {
        // `--split-mode layer` (its default) across GPUs, not tensor parallelism
        true
    }

    /// The image and its entrypoint, as its own Dockerfile says:
    /// `ghcr.io/ggml-org/llama.cpp:server*`: `ENTRYPOINT [ "/app/llama-server" ]`
    /// (.devops/*.Dockerfile, stage `server`): the arguments after `llama-server`. The plain
    /// `server` tag is the CPU build; `server-cuda` / `server-rocm` carry the GPU backends
    /// (docs/docker.md), so a plan with GPUs gets the matching one.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        let variant = if s.nvidia {
            "server-cuda"
        } else if s.amd {
            "server-rocm"
        } else {
            "server"
        };
        let t = match &s.version {
            Some(v) if v.starts_with('b') => format!("{variant}-{v}"),
            Some(v) => format!("{variant}-b{v}"),
            None => variant.to_string(),
        };
        Ok(OfficialImage {
            image: format!("ghcr.io/ggml-org/llama.cpp:{t}"),
            entrypoint: None,
            args: s.rest.clone(),
            how: "the arguments after llama-server: the image's ENTRYPOINT is /app/llama-server (the plain `server` tag is the CPU build; GPUs need server-cuda or server-rocm)",
        })
    }

    fn state_layers(
        &self,
        arch: &ModelArch,
        _version: Option<&str>,
    ) -> Result<(), (String, &'static str)> {
        // llama.cpp keeps recurrent cells per slot (`plan`), sized for Mamba and Gated
        // DeltaNet rows only
        match arch
            .state_layers
            .iter()
            .find(|s| crate::state::llama_cpp_state_elements(&s.state).is_none())
        {
            Some(s) => Err((
                s.layer_type.clone(),
                " (its recurrent cells are sized for Mamba and Gated DeltaNet layers only)",
            )),
            None => Ok(()),
        }
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["LLAMA_"]
    }
}
