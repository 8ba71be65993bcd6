//! A plan's speed: decode, prefill and model-load bounds for the GPU, engine and concurrency
//! asked for. Pure: the binary passes the flags' values and renders the result.

use crate::gguf_quant::GgufFileType;
use crate::speed::engines::{self, Engine};
use crate::speed::estimate::{Scenario, Split, Weights, model_numbers};
use crate::speed::report::{DecodeSpeed, PrefillSpeed};
use crate::{ModelArch, Plan, PlanRequest};

/// What the user asked the speed figures for (`plan`'s flags), each optional.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// `--concurrency`: running sequences (capped by what the KV cache holds; default 1).
    pub concurrency: Option<u32>,
    /// `--input-len`: prompt tokens for the prefill figure (default min(context, 1024)).
    pub input_len: Option<u64>,
    /// `--disk-gbps`: disk read speed for the load bound (default 2 GB/s).
    pub disk_gbps: Option<f64>,
}

/// Speed of a plan: decode at full context and prefill of one prompt, each as a roofline and an
/// engine's expected figure (crate::speed::report), plus the model-load bound.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpeedBounds {
    /// Decode for the running sequences.
    pub decode: Option<DecodeSpeed>,
    /// Time to first token for `prompt_tokens`.
    pub prefill: Option<PrefillSpeed>,
    /// Model load time and host RAM for loading.
    pub load: Option<LoadSpeed>,
    /// Sequences the decode figures assume (the requested concurrency, capped by the KV cache).
    pub sequences: u32,
    /// Disk read speed assumed for the load bound, GB/s.
    pub disk_gbps: f64,
    /// Engine of the expected figures.
    #[serde(serialize_with = "inferscope_host::engine::cli_id")]
    pub engine: Engine,
    /// Why decode/prefill are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Model load: the older keys (`load_time_s`, ...) at the default link efficiency, plus the
/// roofline (disk and host link at 100 %) and expected figures named as such.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadSpeed {
    #[serde(flatten)]
    pub bound: crate::speed::LoadBound,
    /// Disk and host link at 100 %: no load is faster.
    pub roofline_load_time_s: f64,
    /// Host link at the default efficiency (0.8, a judgement; no published load times to fit).
    pub expected_load_time_s: f64,
}

/// What the speed figures are computed for.
pub struct SpeedSetup<'a> {
    pub gpu: &'a crate::gpus::GpuSpec,
    /// GPUs the model is spread over.
    pub gpus: u32,
    pub engine: Engine,
    /// The GGUF file type, when `--quantization` named one.
    pub gguf: Option<GgufFileType>,
    /// `--kv-cache-dtype fp8`.
    pub kv_fp8: bool,
    pub eager: bool,
    /// Pipeline-parallel stages (`--pipeline-parallel-size`).
    pub pipeline_stages: u32,
    pub sequences: u32,
    pub prompt_tokens: u64,
    pub disk_gbps: f64,
}

/// Compute the speed figures (each `None` when the catalog lacks the GPU's figures).
pub fn speed_bounds(arch: &ModelArch, p: &Plan, s: &SpeedSetup<'_>) -> SpeedBounds {
    use crate::speed;
    let context = p.max_model_len.unwrap_or(arch.max_position_embeddings);
    let weights = match s.gguf {
        Some(ft) => Weights::Gguf(ft),
        None => Weights::Checkpoint(arch.quantization.as_ref()),
    };
    let kv = if s.kv_fp8 {
        crate::arch::Dtype::Fp8
    } else {
        arch.dtype
    };
    let numbers = model_numbers(arch, &weights, kv);
    let scenario = Scenario {
        model: &numbers,
        gpu: s.gpu,
        gpus: s.gpus.max(1),
        split: if engines::splits_layers(s.engine) {
            Split::Layers
        } else {
            Split::Tensor
        },
        batch: u64::from(s.sequences.max(1)),
        decode_context: context,
        prompt_tokens: s.prompt_tokens,
        eager: s.eager,
        pipeline_stages: s.pipeline_stages,
    };
    let (decode, prefill, unavailable) = match speed::report::speed(&scenario, s.engine) {
        Ok((d, f)) => (Some(d), Some(f), None),
        Err(e) => (None, None, Some(e.to_string())),
    };
    let weights_per_gpu = p.per_gpu.weights_gib * crate::memory::GIB;
    SpeedBounds {
        decode,
        prefill,
        load: p.weights_bytes_total.and_then(|total| {
            let at = |efficiency| {
                speed::load_bound(&speed::LoadInputs {
                    gpu: s.gpu,
                    checkpoint_bytes: total as f64,
                    weights_bytes_per_gpu: weights_per_gpu,
                    largest_file_bytes: None,
                    disk_gbps: s.disk_gbps,
                    host_ram_free_bytes: None,
                    numa_free_bytes: Vec::new(),
                    efficiency,
                })
                .ok()
            };
            let roof = at(speed::Efficiency::ROOFLINE)?;
            let bound = at(speed::Efficiency::default())?;
            Some(LoadSpeed {
                roofline_load_time_s: roof.load_time_s,
                expected_load_time_s: bound.load_time_s,
                bound,
            })
        }),
        sequences: s.sequences,
        disk_gbps: s.disk_gbps,
        engine: s.engine,
        unavailable,
    }
}

/// The speed bounds, at the concurrency the KV cache can actually hold.
#[allow(clippy::too_many_arguments)]
pub fn speed_of(
    asked: &Asked,
    arch: &ModelArch,
    req: &PlanRequest,
    p: &crate::Plan,
    gpu: &crate::plan::GpuSpec,
    speed_engine: Engine,
    gguf: Option<GgufFileType>,
) -> SpeedBounds {
    let running = asked
        .concurrency
        .unwrap_or(1)
        .min(p.max_concurrency.floor().max(1.0) as u32)
        .max(1);
    let prompt = asked
        .input_len
        .unwrap_or_else(|| p.max_model_len.unwrap_or(1024).min(1024));
    let disk = asked.disk_gbps.unwrap_or(2.0);
    // the weights' effective quantization (a --quantization flag over the checkpoint's own)
    let speed_arch = match req
        .quantization
        .as_deref()
        .and_then(crate::arch::Quantization::from_method)
    {
        Some(q) if arch.quantization.is_none() => ModelArch {
            quantization: Some(q),
            ..arch.clone()
        },
        _ => arch.clone(),
    };
    match crate::gpus::lookup(&gpu.name) {
        Ok(spec) => speed_bounds(
            &speed_arch,
            p,
            &SpeedSetup {
                gpu: spec,
                gpus: if engines::splits_layers(speed_engine) {
                    gpu.count.max(1)
                } else {
                    req.tp.saturating_mul(req.pp).max(1)
                },
                engine: speed_engine,
                gguf,
                kv_fp8: req
                    .kv_cache_dtype
                    .as_deref()
                    .is_some_and(|k| k.starts_with("fp8")),
                eager: req.enforce_eager,
                pipeline_stages: req.pp.max(1),
                sequences: running,
                prompt_tokens: prompt,
                disk_gbps: disk,
            },
        ),
        Err(e) => SpeedBounds {
            decode: None,
            prefill: None,
            load: None,
            sequences: running,
            disk_gbps: disk,
            engine: speed_engine,
            unavailable: Some(e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GpuSpec, catalog, gpus, plan};

    fn setup(gpu: &str, n: u32) -> (ModelArch, PlanRequest, Plan, GpuSpec) {
        let arch = catalog::lookup("meta-llama/Llama-3.1-8B-Instruct").unwrap();
        let g = GpuSpec::from_catalog(gpus::lookup(gpu).unwrap(), n);
        let mut req = PlanRequest::new(arch.clone(), "llama-8b", g.clone());
        req.max_model_len = Some(8192);
        let p = plan(&req);
        (arch, req, p, g)
    }

    #[test]
    fn running_sequences_are_capped_by_what_the_kv_cache_holds() {
        let (arch, req, p, g) = setup("h100-sxm", 1);
        let asked = Asked {
            concurrency: Some(1_000_000),
            ..Asked::default()
        };
        let s = speed_of(&asked, &arch, &req, &p, &g, Engine::Vllm, None);
        assert_eq!(s.sequences, p.max_concurrency.floor() as u32);
        assert!(s.decode.is_some() && s.prefill.is_some() && s.unavailable.is_none());
        assert_eq!(s.disk_gbps, 2.0, "the default disk speed");
    }

    #[test]
    fn a_gpu_outside_the_catalog_says_why_speed_is_unknown() {
        let (arch, req, p, _) = setup("h100-sxm", 1);
        let custom = GpuSpec::from_catalog(&gpus::custom(80.0).unwrap(), 1);
        let s = speed_of(
            &Asked::default(),
            &arch,
            &req,
            &p,
            &custom,
            Engine::Vllm,
            None,
        );
        assert!(s.decode.is_none() && s.unavailable.is_some());
        assert_eq!(s.sequences, 1);
    }
}
