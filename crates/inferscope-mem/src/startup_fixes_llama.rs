//! llama-server start-up fixes from the log alone (issue 28 item 2), with llama.cpp's own
//! arithmetic:
//!
//! * The KV cache is `n_ctx` cells × bytes per cell (`llama-kv-cache.cpp`: one K and one V row
//!   per layer per cell, the cache type's bytes), so it scales exactly with `-c`; llama-server
//!   rounds the context to a multiple of 256 (`n_ctx_pad`).
//! * `-ctk/-ctv q8_0`: 34 bytes per 32 values against f16's 64 (`ggml.c` type traits), ×0.53125.
//! * `-np N` splits `-c` among N slots (`n_ctx_slot = n_ctx / n_parallel`): the cache holds
//!   `n_ctx` cells whatever N is, so lowering it frees nothing.
//! * `-ngl` moves whole layers, weights and their KV rows, off the GPU.
//!
//! On a device the log prints free memory for (newer builds' "using device CUDA0 (…) - N MiB
//! free"), what must fit is weights + KV + compute buffer ≤ free: the fix is `log` and `fits` is
//! that comparison. Without it the fix says what free memory it would need and is never `fits`.

use crate::startup_fixes::{Fix, LOG};

/// What a llama-server log printed about the device that failed, GiB.
#[derive(Debug, Clone, Default)]
pub struct LlamaFigures {
    /// `n_ctx` (cells in the KV cache).
    pub n_ctx: Option<u64>,
    /// The KV cache at `n_ctx`: the failed allocation when the KV cache failed, else its size.
    pub kv_gib: Option<f64>,
    /// Model buffer on the device.
    pub weights_gib: Option<f64>,
    /// Compute buffer (the failed allocation when it failed).
    pub compute_gib: Option<f64>,
    /// `kv_cache`, `compute`, `weights` or `unknown`.
    pub failed: &'static str,
    /// `CUDA0`, `CPU`.
    pub device: String,
    /// Free memory the log printed for the device at start.
    pub free_gib: Option<f64>,
    /// The catalog card's total (`--gpu`), an upper bound on free.
    pub card_gib: Option<f64>,
    /// K cache type in force (`f16` unless `-ctk` says otherwise).
    pub cache_type_k: String,
    /// `-np` in force.
    pub slots: Option<u64>,
    /// Layers on the GPU / in the model.
    pub layers: Option<(u64, u64)>,
    /// llama.cpp's own fit (`common_params_fit_impl`): what it must shed to keep its free-memory
    /// target, and its breakdown's context (KV) and compute, GiB.
    pub fit: Option<OwnFit>,
}

/// llama.cpp's own projection of a start-up that does not fit (b7xxx+ `-fit on`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnFit {
    /// "need to reduce device memory by Z MiB".
    pub shortfall_gib: f64,
    /// Breakdown: context (the KV cache).
    pub context_gib: f64,
    /// Breakdown: compute buffers.
    pub compute_gib: f64,
    /// "projected to use X … vs. Y …": X and Y.
    pub projected_gib: f64,
    /// Y.
    pub total_gib: f64,
    /// "free memory target of T MiB".
    pub target_gib: f64,
}

const Q8_0_OVER_F16: f64 = 34.0 / 64.0;

/// Fixes for a failed llama-server start-up.
pub fn fixes(f: &LlamaFigures) -> Vec<Fix> {
    let mut out = Vec::new();
    let Some(kv) = f.kv_gib.filter(|k| *k > 0.0) else {
        return out;
    };
    let w = f.weights_gib.unwrap_or(0.0);
    // Compute is reserved after the KV cache: when the KV cache failed it was never sized.
    let compute = f.compute_gib;
    let known = |v: Option<f64>, what: &str| match v {
        Some(v) => format!("{v:.2} GiB {what}"),
        None => format!("{what} (not printed)"),
    };
    let judge = |kv_new: f64| -> (bool, String) {
        let need = w + kv_new + compute.unwrap_or(0.0);
        match (f.free_gib, f.card_gib) {
            (Some(free), _) if compute.is_some() || f.failed == "compute" => (
                need <= free,
                format!(
                    "{} + {kv_new:.2} GiB KV + {} = {need:.2} GiB against {free:.2} GiB free on {} (printed)",
                    known(f.weights_gib, "weights"),
                    known(compute, "compute buffer"),
                    f.device
                ),
            ),
            (Some(free), _) => (
                false,
                format!(
                    "{} + {kv_new:.2} GiB KV = {need:.2} GiB against {free:.2} GiB free on {} (printed); \
                     the compute buffer is reserved after the KV cache and was never sized: it \
                     must fit in the remaining {:.2} GiB",
                    known(f.weights_gib, "weights"),
                    f.device,
                    free - need
                ),
            ),
            (None, Some(card)) if need > card => (
                false,
                format!(
                    "{need:.2} GiB is more than the whole card ({card:.2} GiB, catalog): cannot fit"
                ),
            ),
            _ => (
                false,
                format!(
                    "the log does not print {}'s free memory: fits only if at least {need:.2} GiB \
                     ({} + {kv_new:.2} GiB KV{}) is free there",
                    f.device,
                    known(f.weights_gib, "weights"),
                    compute.map_or(" + the compute buffer".to_string(), |c| format!(
                        " + {c:.2} GiB compute"
                    ))
                ),
            ),
        }
    };
    // With llama.cpp's own projection, its shortfall is the figure to close: the context (KV)
    // scales exactly with -c, and the compute buffer, whose n_ubatch × n_ctx_seq attention
    // scores dominate at long contexts, is taken to scale with it too (an estimate).
    if let (Some(fit), Some(n)) = (f.fit, f.n_ctx.filter(|n| *n >= 512)) {
        let scaled = fit.context_gib + fit.compute_gib;
        // A margin for the compute buffer's constant part and llama.cpp's MiB rounding: aiming
        // at the shortfall exactly misses its target by 1 MiB on the real VM (b-0.5.0-dev,
        // fixtures/tools/llama-server/failures/cpu-c67108864-np2-kv-alloc.log).
        let margin = (scaled * 0.01).max(64.0 / 1024.0);
        let keep = 1.0 - (fit.shortfall_gib + margin) / scaled;
        let c = ((n as f64 * keep).max(0.0) as u64) / 256 * 256;
        if c >= 256 && c < n {
            let after = scaled * c as f64 / n as f64;
            out.push(
                Fix::new(
                    format!("-c {c}"),
                    true,
                    crate::startup_fixes::ESTIMATE,
                    format!(
                        "llama.cpp projects {:.2} GiB against {:.2} GiB and must shed {:.2} GiB to keep {:.2} GiB free; context {:.2} GiB (exactly ∝ -c) and compute {:.2} GiB (taken ∝ -c) at {n} cells become {after:.2} GiB at {c}: {:.2} GiB freed ≥ {:.2} GiB + {margin:.2} GiB margin",
                        fit.projected_gib,
                        fit.total_gib,
                        fit.shortfall_gib,
                        fit.target_gib,
                        fit.context_gib,
                        fit.compute_gib,
                        scaled - after,
                        fit.shortfall_gib
                    ),
                )
                .cost(format!(
                    "{c} tokens of context shared by {} slot(s) (was {n})",
                    f.slots.unwrap_or(1)
                ))
                .kv(Some(fit.context_gib * c as f64 / n as f64)),
            );
        }
        let saved = fit.context_gib * (1.0 - Q8_0_OVER_F16);
        if f.cache_type_k == "f16" {
            out.push(
                Fix::new(
                    "-ctk q8_0 -ctv q8_0".to_string(),
                    saved >= fit.shortfall_gib,
                    LOG,
                    format!(
                        "q8_0 stores 34 bytes per 32 values against f16's 64: the {:.2} GiB context shrinks by {saved:.2} GiB, {} the {:.2} GiB llama.cpp must shed",
                        fit.context_gib,
                        if saved >= fit.shortfall_gib {
                            "covering"
                        } else {
                            "short of"
                        },
                        fit.shortfall_gib
                    ),
                )
                .cost("8-bit KV cache (a quantized V cache needs flash attention: -fa on)".to_string())
                .kv(Some(fit.context_gib * Q8_0_OVER_F16)),
            );
        }
        if let Some(np) = f.slots.filter(|np| *np > 1) {
            out.push(np_cannot_help(f, np));
        }
        return out;
    }
    // -c: the largest multiple of 256 whose KV fits what the device has left.
    if let Some(n) = f.n_ctx.filter(|n| *n >= 512) {
        let room = f
            .free_gib
            .map(|free| free - w - compute.unwrap_or(0.0))
            .filter(|r| *r > 0.0);
        let c = match room {
            Some(r) => ((n as f64 * (r / kv).min(1.0)) as u64) / 256 * 256,
            // Nothing to close against: half the context, said to be a guess.
            None => n / 2 / 256 * 256,
        };
        if c >= 256 && c < n {
            let kv_new = kv * c as f64 / n as f64;
            let (fits, why) = judge(kv_new);
            out.push(
                Fix::new(
                    format!("-c {c}"),
                    fits,
                    LOG,
                    format!(
                        "the KV cache is {kv:.2} GiB for {n} cells ({:.1} KiB per cell), so {c} \
                         cells take {kv_new:.2} GiB; {why}",
                        kv * 1024.0 * 1024.0 / n as f64
                    ),
                )
                .cost(format!(
                    "{c} tokens of context shared by {} slot(s) (was {n})",
                    f.slots.unwrap_or(1)
                ))
                .kv(Some(kv_new)),
            );
        }
    }
    // -ctk/-ctv q8_0: ×34/64 of f16.
    if f.cache_type_k == "f16" {
        let kv_new = kv * Q8_0_OVER_F16;
        let (fits, why) = judge(kv_new);
        out.push(
            Fix::new(
                "-ctk q8_0 -ctv q8_0".to_string(),
                fits,
                LOG,
                format!("q8_0 stores 34 bytes per 32 values against f16's 64: KV {kv:.2} → {kv_new:.2} GiB; {why}"),
            )
            .cost("8-bit KV cache (a quantized V cache needs flash attention: -fa on)".to_string())
            .kv(Some(kv_new)),
        );
    }
    // -np: cannot help.
    if let Some(np) = f.slots.filter(|np| *np > 1) {
        out.push(np_cannot_help(f, np));
    }
    // -ngl: whole layers (weights and their KV rows) off the GPU.
    if let (Some((on, total)), Some(free)) = (f.layers, f.free_gib)
        && on > 1
        && f.device.starts_with("CUDA")
        && w > 0.0
    {
        let per_layer = (w + kv) / on as f64;
        let need = w + kv + compute.unwrap_or(0.0);
        let short = need - free;
        if short > 0.0 {
            let drop = (short / per_layer).ceil() as u64 + 1;
            if drop < on {
                let ngl = on - drop;
                out.push(
                    Fix::new(
                        format!("-ngl {ngl}"),
                        compute.is_some(),
                        crate::startup_fixes::ESTIMATE,
                        format!(
                            "{need:.2} GiB needed against {free:.2} GiB free: {short:.2} GiB short; \
                             one of the {on} offloaded layers holds ≈ {per_layer:.2} GiB (weights \
                             and KV over the layers, the output layer counted in): {drop} layers \
                             to the CPU{}",
                            if compute.is_some() {
                                ""
                            } else {
                                "; the compute buffer (not printed) must fit too"
                            }
                        ),
                    )
                    .cost(format!("{ngl}/{total} layers on the GPU: slower generation")),
                );
            }
        }
    }
    out
}

/// `-np` lower: llama-server splits `-c` among the slots, so the cache keeps its cells.
fn np_cannot_help(f: &LlamaFigures, np: u64) -> Fix {
    Fix::new(
        format!("-np {}", np / 2),
        false,
        LOG,
        format!(
            "cannot help: llama-server splits -c among the -np slots (n_ctx_seq = n_ctx / \
             n_seq_max), so the KV cache holds the same {} cells with {} or {np} slots (and each \
             slot's longer context grows the compute buffer)",
            f.n_ctx.map_or("n_ctx".to_string(), |n| n.to_string()),
            np / 2
        ),
    )
    .cost("fewer concurrent requests".to_string())
}
