//! What to change when a plan does not fit, or fits fewer users than asked for.
//!
//! Each suggestion is one change to the request, re-planned with [`plan`], so the concurrency it
//! promises is the planner's own answer, not a rule of thumb.

use crate::arch::Quantization;
use crate::engine::Engine;
use crate::engines::llama_cpp::plan::{GpuLayers, GpuLayersWord};
use crate::plan::{GpuSpec, Plan, PlanRequest, plan};
use serde::{Deserialize, Serialize};

/// Kinds of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Shorter `--max-model-len`.
    MaxModelLen,
    /// `--kv-cache-dtype fp8`.
    KvFp8,
    /// Twice the tensor-parallel size.
    MoreTensorParallel,
    /// A quantized checkpoint of the same model.
    Quantize,
    /// Higher `--gpu-memory-utilization`.
    GpuMemoryUtilization,
    /// Another GPU type.
    OtherGpu,
    /// llama.cpp: fewer layers on the GPU (`-ngl N`), the rest on the CPU.
    FewerGpuLayers,
}

/// One change and what it gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    /// Kind of change.
    pub kind: ChangeKind,
    /// The change, as flags or words (`--kv-cache-dtype fp8`).
    pub change: String,
    /// The changed plan fits.
    pub fits: bool,
    /// Its maximum concurrency at its max_model_len.
    pub max_concurrency: f64,
    /// Its KV capacity in tokens.
    pub kv_cache_tokens: u64,
    /// Its KV cache per GPU, GiB.
    pub kv_cache_gib: f64,
    /// GPUs it needs.
    pub gpus_used: u32,
    /// It reaches the requested concurrency (or simply fits when none was asked for).
    pub meets_target: bool,
}

fn summarise(kind: ChangeKind, change: String, p: &Plan, target: Option<u32>) -> Suggestion {
    Suggestion {
        kind,
        change,
        fits: p.fits,
        max_concurrency: p.max_concurrency,
        kv_cache_tokens: p.kv_cache_tokens,
        kv_cache_gib: p.per_gpu.kv_cache_gib,
        gpus_used: p.gpus_used,
        meets_target: p.fits && target.is_none_or(|c| p.max_concurrency >= f64::from(c)),
    }
}

/// Whether `current` needs suggestions: it does not fit, or serves fewer than asked.
pub fn needs_suggestions(current: &Plan) -> bool {
    !current.fits || current.meets_concurrency == Some(false)
}

/// Changes that would make `req` fit (or reach its concurrency), each re-planned. `gpus` are
/// other GPU types the caller can offer (from its catalog); only ones with more memory than the
/// current GPU are tried. Returns nothing when the plan already meets its target.
///
/// One piece (~180 lines): one candidate change after another, each re-planned; splitting it
/// would scatter the order in which suggestions are offered.
pub fn suggest(req: &PlanRequest, gpus: &[GpuSpec]) -> Vec<Suggestion> {
    let current = plan(req);
    if !needs_suggestions(&current) {
        return Vec::new();
    }
    let target = req.concurrency;
    let mut out = Vec::new();
    // llama-server has no tensor parallelism or memory fraction; its flags are its own.
    let llama = req.engine == Engine::LlamaCpp;
    // llama.cpp's `-c` is the context of all slots together, not one request's.
    let max_len = match &current.llama_cpp {
        Some(l) => l.n_ctx,
        None => current
            .max_model_len
            .unwrap_or(req.arch.max_position_embeddings),
    };

    // 1. the longest shorter context that meets the target (binary search; the planner's
    //    concurrency only grows as the context shrinks)
    let meets = |len: u64| {
        let mut r = req.clone();
        r.max_model_len = Some(len);
        let p = plan(&r);
        let s = summarise(
            ChangeKind::MaxModelLen,
            if llama {
                format!("-c {len}")
            } else {
                format!("--max-model-len {len}")
            },
            &p,
            target,
        );
        (s.meets_target, s)
    };
    let (mut lo, mut hi) = (0u64, max_len);
    let mut found = None;
    while hi - lo > 1 && hi > 256 {
        let mid = lo + (hi - lo) / 2;
        let (ok, s) = meets(mid.max(1));
        if ok {
            lo = mid;
            found = Some(s);
        } else {
            hi = mid;
        }
    }
    // report a round figure: the found length down to a multiple of 256
    if let Some(s) = found {
        let round = lo / 256 * 256;
        let best = if round >= 256 && round < lo {
            meets(round).1
        } else {
            s
        };
        if best.meets_target {
            out.push(best);
        }
    }

    // 2. fp8 KV cache (llama.cpp: q8_0 K and V, which need flash attention)
    if llama && current.kv_cache_dtype.bytes() > 1 {
        let mut r = req.clone();
        r.kv_cache_dtype = Some("q8_0".into());
        r.llama_cpp.cache_type_v = Some("q8_0".into());
        r.llama_cpp.flash_attn = Some("on".into());
        let p = plan(&r);
        out.push(summarise(
            ChangeKind::KvFp8,
            "-ctk q8_0 -ctv q8_0 -fa on".into(),
            &p,
            target,
        ));
    }
    // llama.cpp: the layers that fit, when a fixed -ngl does not
    if llama
        && !current.fits
        && req.llama_cpp.gpu_layers != Some(GpuLayers::Word(GpuLayersWord::Auto))
        && req.llama_cpp.gpu_layers.is_some()
    {
        let mut r = req.clone();
        r.llama_cpp.gpu_layers = Some(GpuLayers::Word(GpuLayersWord::Auto));
        let p = plan(&r);
        if let Some(l) = &p.llama_cpp {
            out.push(summarise(
                ChangeKind::FewerGpuLayers,
                format!("-ngl {} (the rest on the CPU)", l.gpu_layers),
                &p,
                target,
            ));
        }
    }
    if !llama && current.kv_cache_dtype.bytes() > 1 {
        let mut r = req.clone();
        r.kv_cache_dtype = Some("fp8".into());
        let p = plan(&r);
        out.push(summarise(
            ChangeKind::KvFp8,
            "--kv-cache-dtype fp8".into(),
            &p,
            target,
        ));
    }

    // 3. more tensor parallelism: the smallest doubling (×2, ×4, ×8) that meets the target
    let mut best = None;
    let mut tp = req.tp.clamp(1, 64);
    // (not for llama-server: it has no tensor parallelism)
    let doublings = if llama { 0 } else { 3 };
    for _ in 0..doublings {
        tp *= 2;
        if tp > 64 || !req.arch.num_attention_heads.is_multiple_of(tp) {
            break;
        }
        let mut r = req.clone();
        r.tp = tp;
        let gpus = tp.saturating_mul(req.pp.max(1));
        r.gpu.count = r.gpu.count.max(gpus);
        let p = plan(&r);
        let s = summarise(
            ChangeKind::MoreTensorParallel,
            format!("--tensor-parallel-size {tp} ({gpus} GPUs)"),
            &p,
            target,
        );
        let done = s.meets_target;
        best = Some(s);
        if done {
            break;
        }
    }
    out.extend(best);

    // 4. a quantized checkpoint (fp8, then 4-bit AWQ) when the model is not quantized yet
    if !llama && req.arch.quantization.is_none() && req.quantization.is_none() {
        for (method, label) in [
            ("fp8", "an FP8 checkpoint (or --quantization fp8)"),
            ("awq", "a 4-bit AWQ/GPTQ checkpoint"),
        ] {
            let mut r = req.clone();
            r.arch.quantization = Quantization::from_method(method);
            let p = plan(&r);
            out.push(summarise(ChangeKind::Quantize, label.into(), &p, target));
        }
    }

    // 5. the engine's share of the GPU, only above the share the plan used (a release's default
    //    may already be higher than 0.95: 0.34's extensible KV cache takes 1.0)
    let used = current.per_gpu.total_gib / current.per_gpu.gpu_total_gib.max(f64::MIN_POSITIVE);
    if !llama && used < 0.95 - 1e-6 {
        let mut r = req.clone();
        r.gpu_memory_utilization = Some(0.95);
        let p = plan(&r);
        out.push(summarise(
            ChangeKind::GpuMemoryUtilization,
            "--gpu-memory-utilization 0.95".into(),
            &p,
            target,
        ));
    }

    // 6. bigger GPUs
    for g in gpus.iter().filter(|g| g.total_bytes > req.gpu.total_bytes) {
        let mut r = req.clone();
        r.gpu = GpuSpec {
            name: g.name.clone(),
            total_bytes: g.total_bytes,
            count: g.count.max(req.tp.max(1).saturating_mul(req.pp.max(1))),
        };
        r.use_catalog_gpu(crate::gpus::lookup(&g.name).ok());
        let p = plan(&r);
        if p.fits {
            out.push(summarise(
                ChangeKind::OtherGpu,
                format!("{} ×{}", g.name, p.gpus_used),
                &p,
                target,
            ));
        }
    }
    // Every suggestion was re-planned: show only those that move the plan the way they claim.
    out.retain(|s| helps(s, &current));
    out
}

/// The re-planned change fits where the current plan did not, or fits and serves more
/// full-length requests at once (never fewer, never a fit lost).
pub fn helps(s: &Suggestion, current: &Plan) -> bool {
    if s.fits && !current.fits {
        return true;
    }
    if current.fits && !s.fits {
        return false;
    }
    // both fit, or neither does (then more concurrency is progress toward fitting)
    s.max_concurrency > current.max_concurrency * (1.0 + 1e-9)
        || (s.max_concurrency >= current.max_concurrency
            && s.kv_cache_tokens > current.kv_cache_tokens)
}
