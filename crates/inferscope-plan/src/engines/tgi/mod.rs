//! TGI's room: its command line (`text-generation-launcher`), its memory accounting (`kv`:
//! warm-up then free memory, per release; `sizing`: inside the planner's pipeline) and its
//! fitted speed.

mod flags;
pub mod kv;
pub mod sizing;

use super::{
    CommandOptions, EngineRoom, EnvironmentRules, ImageShape, MemoryAccounting, NotModelled,
    OfficialImage, ServeShape,
};
use crate::arch::ModelArch;
use crate::plan::{Plan, PlanRequest};
use crate::speed::engines::{EngineEfficiency, row};
use inferscope_host::engine::Engine;

/// The room.
pub struct Tgi;

static OPTIONS: CommandOptions = CommandOptions {
    known: flags::known,
    parser: "text-generation-launcher's clap parser refuses unknown arguments",
    underscores_as_dashes: false,
    abbreviations: false,
    negations: false,
    dotted_options: false,
    model_positional: false,
    zero_len_is_model_default: false,
    minus_one_seqs_is_auto: false,
    auto_len: false,
    human_readable_ints: false,
    meaning: flags::meaning,
};

struct Memory;

impl MemoryAccounting for Memory {
    fn plan(&self, req: &PlanRequest) -> Plan {
        crate::plan::pipeline(
            req,
            Some(&crate::plan::OwnSizer {
                size: sizing::size,
                outside_budget: false,
            }),
        )
    }
}

impl EngineRoom for Tgi {
    fn engine(&self) -> Engine {
        Engine::Tgi
    }

    fn server_name(&self) -> &'static str {
        "text-generation-launcher (TGI)"
    }

    fn flag(&self, knob: super::Knob) -> Option<&'static str> {
        match knob {
            super::Knob::MemoryFraction => Some("--cuda-memory-fraction"),
            super::Knob::ContextLength => Some("--max-total-tokens"),
            super::Knob::PrefillChunk => Some("--max-batch-prefill-tokens"),
            _ => None,
        }
    }

    fn help_command(&self) -> Option<&'static str> {
        Some("text-generation-launcher")
    }

    /// `router/src/` (`metrics::gauge!`): `tgi_queue_size`, `tgi_batch_current_size`.
    fn server_metrics(&self) -> Option<&'static super::ServerMetricNames> {
        Some(&super::ServerMetricNames {
            recorded: &["tgi_queue_size", "tgi_batch_current_size"],
            histograms: &[],
            kv_usage: &[],
            waiting: &["tgi_queue_size"],
            running: &["tgi_batch_current_size"],
            prefix_hit_rate: None,
        })
    }

    fn server_commands(&self) -> &'static [&'static str] {
        &["text-generation-launcher"]
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
            Engine::Tgi,
            (
                0.74,
                0.25,
                1.50e-05,
                0.00e+00,
                "calibration half: 1 tgi case(s)",
            ),
        ))
    }

    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        // `run`'s rules, read from the engine's source (docs/run.md "Engine compatibility")
        Ok(EnvironmentRules {
            accepts_uuids: true,
            uuid_source: "launcher/src/main.rs num_cuda_devices (text-generation-inference db931fc) only counts the comma-separated entries",
            sets_omp_threads: None,
            expandable_conflict: None,
        })
    }

    fn serve_command(&self, s: &ServeShape<'_>) -> Option<String> {
        Some(s.command(
            format!(
                "text-generation-launcher --model-id {} --max-total-tokens {}",
                s.model, s.max_len
            ),
            "--num-shard",
            "--quantize fp8",
            "--kv-cache-dtype fp8_e5m2",
        ))
    }

    /// The image and its entrypoint, as its own Dockerfile says:
    /// `ghcr.io/huggingface/text-generation-inference`: `ENTRYPOINT ["/tgi-entrypoint.sh"]`
    /// (Dockerfile, final stage), which execs `text-generation-launcher "$@"`; older images had
    /// `ENTRYPOINT ["text-generation-launcher"]`. Either way: the arguments after the launcher.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        Ok(OfficialImage {
            image: format!(
                "ghcr.io/huggingface/text-generation-inference:{}",
                s.tag("")
            ),
            entrypoint: None,
            args: s.rest.clone(),
            how: "the arguments after text-generation-launcher: the image's ENTRYPOINT (/tgi-entrypoint.sh) execs the launcher with them",
        })
    }

    fn state_layers(
        &self,
        arch: &ModelArch,
        _version: Option<&str>,
    ) -> Result<(), (String, &'static str)> {
        match arch.state_layers.first() {
            Some(s) => Err((s.layer_type.clone(), super::state_pool_hint())),
            None => Ok(()),
        }
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["TGI_"]
    }
}
