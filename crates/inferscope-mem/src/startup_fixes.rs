//! Fixes for a failed start-up computed from the figures the log printed, with each engine's own
//! budget formula (issue 28): the shortfall first, then every knob with the value that closes it,
//! each marked with how it was checked (`log`, `planner`, `estimate`) and why.
//!
//! A fix is judged on the measured start-up. The planner's re-plans are kept only where the
//! planner agrees with the log; where it disagrees by more than the fix's effect, the fix is
//! re-judged on the log's figures (its effect applied to what was measured) and says so.
//!
//! Formulas and their sources (docs/mem.md has the table):
//! * vLLM V1 `gpu_worker.py` `determine_available_memory`: KV = total × utilisation − (weights +
//!   activation peak + non-torch [+ CUDA graphs once graph memory is profiled]);
//!   `kv_cache_utils.py` `check_enough_kv_cache_memory`: KV must hold one `max_model_len` request
//!   (`max_memory_usage_bytes`). V0 `worker.py` `determine_num_available_blocks` is the same sum.
//! * an engine that sizes from the free memory it reads at start: its room's formula
//!   (`EngineRoom::free_memory_fix`, cited there).
//! * TGI `flash_causal_lm.py` `warmup`: a prefill of `max_batch_prefill_tokens` must run in what
//!   the weights leave.

use serde::Serialize;

/// How a fix was checked.
pub const LOG: &str = "log";
/// Re-planned with the model.
pub const PLANNER: &str = "planner";
/// A proportional estimate from the log's figures (not the engine's exact formula).
pub const ESTIMATE: &str = "estimate";

/// The budget of a failed start-up as the log measured it, per GPU, GiB.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Budget {
    /// KV memory the engine found (negative: the rest of the budget already overran it).
    pub kv_available_gib: Option<f64>,
    /// KV one `max_model_len` request needs (the engine's figure, or the model's layout).
    pub one_request_gib: Option<f64>,
    /// Where that figure comes from.
    pub one_request_source: Option<String>,
    /// What is missing: one request − available (or −available when one request is unknown,
    /// then a lower bound).
    pub shortfall_gib: Option<f64>,
    /// The shortfall is a lower bound (one request's KV unknown).
    pub shortfall_is_lower_bound: bool,
    /// Total memory the utilisation fraction multiplies (the log's, else the catalog GPU's).
    pub total_gib: Option<f64>,
    /// `log` or `catalog`.
    pub total_source: Option<&'static str>,
    /// The utilisation fraction in force (printed, passed, or the engine default).
    pub utilization: Option<f64>,
}

/// Inputs of the log-only fixes, gathered by `startup::analyse`.
#[derive(Debug, Clone, Default)]
pub struct LogFigures {
    /// The engine's `cli_id` (`vllm`, `tgi`, `llama.cpp`, ...).
    pub engine: &'static str,
    /// vLLM release counts CUDA-graph memory in the KV budget (graph profiling on).
    pub graphs_in_budget: bool,
    /// Measured KV (may be negative).
    pub kv_gib: Option<f64>,
    /// KV one request needs.
    pub one_request_gib: Option<(f64, String)>,
    /// max_model_len in force.
    pub max_model_len: Option<u64>,
    /// The engine's own estimate of the longest request that fits.
    pub estimated_max_model_len: Option<u64>,
    /// Total memory and its source.
    pub total_gib: Option<(f64, &'static str)>,
    /// Free memory at start-up (vLLM V1's check).
    pub free_at_start_gib: Option<f64>,
    /// Utilisation in force.
    pub utilization: f64,
    /// Where it comes from (`the log`, or the release's default and its source).
    pub utilization_source: String,
    /// Weights per GPU.
    pub weights_gib: Option<f64>,
    /// Activation peak.
    pub activation_gib: Option<f64>,
    /// CUDA graphs.
    pub cuda_graph_gib: Option<f64>,
    /// `--max-num-batched-tokens` in force.
    pub batched_tokens: Option<u64>,
    /// KV dtype is already 8-bit.
    pub kv_fp8: bool,
    /// Tensor parallel size.
    pub tp: u32,
    /// Engines that size from free memory: free before and after weights.
    pub free_before_after: Option<(f64, f64)>,
    /// TGI: the prefill that did not fit.
    pub tgi_prefill_tokens: Option<u64>,
    /// llama-server: the failed device's figures.
    pub llama: Option<crate::startup_fixes_llama::LlamaFigures>,
    /// vLLM `--num-gpu-blocks-override`: (blocks profiled, blocks allocated).
    pub block_override: Option<(u64, u64)>,
}

/// One fix: the JSON contract `fixes[{change, fits}]` plus `checked_by` and `why`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    /// The flag change (`--max-model-len 65536`).
    pub change: String,
    /// It closes the measured shortfall (never true for a fix that cannot help).
    pub fits: bool,
    /// KV per GPU with the change (null when not computed).
    pub kv_cache_gib: Option<f64>,
    /// KV tokens with the change.
    pub kv_cache_tokens: Option<u64>,
    /// What it costs.
    pub cost: String,
    /// `log`, `planner` or `estimate`.
    pub checked_by: &'static str,
    /// The arithmetic behind `fits`.
    pub why: String,
    /// Kept for scripts written against issue 17: `engine` for `log`/`estimate`, else `planner`.
    pub verified_by: &'static str,
}

impl Fix {
    /// A fix checked by `checked_by`.
    pub fn new(change: String, fits: bool, checked_by: &'static str, why: String) -> Fix {
        Fix {
            change,
            fits,
            kv_cache_gib: None,
            kv_cache_tokens: None,
            cost: String::new(),
            checked_by,
            why,
            verified_by: if checked_by == PLANNER {
                "planner"
            } else {
                "engine"
            },
        }
    }

    pub(crate) fn cost(mut self, cost: String) -> Fix {
        self.cost = cost;
        self
    }

    pub(crate) fn kv(mut self, gib: Option<f64>) -> Fix {
        self.kv_cache_gib = gib.map(r2);
        self
    }
}

fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Two decimals, or six below a tenth of a GiB, where two would print a real shortfall as 0.
fn fine(v: f64) -> f64 {
    if v.abs() >= 0.1 {
        r2(v)
    } else {
        (v * 1e6).round() / 1e6
    }
}

/// "1.50 GiB", or MiB below a tenth of a GiB (a tiny model's pool would read "0.00 GiB").
fn gib_text(g: f64) -> String {
    if g != 0.0 && g.abs() < 0.1 {
        format!("{:.2} MiB", g * 1024.0)
    } else {
        format!("{g:.2} GiB")
    }
}

/// The budget the fixes close.
pub fn budget(f: &LogFigures) -> Budget {
    let one = f.one_request_gib.as_ref().map(|(g, _)| *g);
    // llama-server: what the device needed beyond the free memory it printed.
    if let Some(l) = &f.llama {
        let need =
            l.weights_gib.unwrap_or(0.0) + l.kv_gib.unwrap_or(0.0) + l.compute_gib.unwrap_or(0.0);
        return Budget {
            kv_available_gib: None,
            one_request_gib: None,
            one_request_source: None,
            shortfall_gib: match l.fit {
                Some(fit) => Some(r2(fit.shortfall_gib)),
                None => l.free_gib.map(|free| r2(need - free)),
            },
            shortfall_is_lower_bound: l.fit.is_none() && l.compute_gib.is_none(),
            total_gib: l.fit.map(|fit| fit.total_gib).or(l.free_gib).or(l.card_gib),
            total_source: match (l.fit, l.free_gib, l.card_gib) {
                (Some(_), _, _) | (None, Some(_), _) => Some("log"),
                (None, None, Some(_)) => Some("catalog"),
                _ => None,
            },
            utilization: None,
        };
    }
    let (shortfall, lower) = match (f.kv_gib, one) {
        (Some(kv), Some(one)) => (Some(one - kv), false),
        (Some(kv), None) if kv <= 0.0 => (Some(-kv), true),
        _ => (None, false),
    };
    Budget {
        kv_available_gib: f.kv_gib.map(fine),
        one_request_gib: one.map(fine),
        one_request_source: f.one_request_gib.as_ref().map(|(_, s)| s.clone()),
        shortfall_gib: shortfall.map(fine),
        shortfall_is_lower_bound: lower,
        total_gib: f.total_gib.map(|t| t.0),
        total_source: f.total_gib.map(|t| t.1),
        utilization: (f.engine == "vllm").then_some(f.utilization),
    }
}

/// Fixes from the log's figures alone, for the engines whose log gives the budget.
pub fn log_fixes(f: &LogFigures, b: &Budget) -> Vec<Fix> {
    match f.engine {
        "vllm" => vllm(f, b),
        "tgi" => tgi(f),
        "llama.cpp" => f
            .llama
            .as_ref()
            .map(crate::startup_fixes_llama::fixes)
            .unwrap_or_default(),
        _ => from_free_memory(f),
    }
}

fn vllm(f: &LogFigures, b: &Budget) -> Vec<Fix> {
    let mut out = Vec::new();
    // Figures below a hundredth of a GiB round to 0 in the budget but are still a shortfall.
    let unrounded = match (f.one_request_gib.as_ref(), f.kv_gib) {
        (Some((one, _)), Some(kv)) if one > &kv => Some(one - kv),
        _ => None,
    };
    let Some(short) = b.shortfall_gib.filter(|s| *s > 0.0).or(unrounded) else {
        return out;
    };
    // --num-gpu-blocks-override caps the pool below what was profiled: the override itself is
    // the knob. One request's blocks scale with its length (vLLM's own estimate of the longest
    // that fits gives the ratio), so this many blocks hold one max_model_len request.
    if let (Some((profiled, blocks)), Some(len), Some(est)) =
        (f.block_override, f.max_model_len, f.estimated_max_model_len)
        && est > 0
        && est < len
    {
        let need = (blocks as f64 * len as f64 / est as f64).ceil() as u64;
        out.push(
            Fix::new(
                format!("--num-gpu-blocks-override {need}"),
                need <= profiled,
                LOG,
                format!(
                    "the pool is the override's {blocks} blocks (vLLM profiled {profiled}); they \
                     hold {est} of the {len} tokens one request needs, so {len}/{est} × {blocks} \
                     → {need} blocks{}",
                    if need <= profiled {
                        String::new()
                    } else {
                        format!(", more than the {profiled} the memory holds")
                    }
                ),
            )
            .cost(if need <= profiled {
                "more memory for the KV cache, within what vLLM profiled".to_string()
            } else {
                "none possible: raise the memory first".to_string()
            }),
        );
    }
    let kv = f.kv_gib.unwrap_or(0.0);
    let bound = if b.shortfall_is_lower_bound {
        " (at least: one request's KV is not known without the model)"
    } else {
        ""
    };
    // --max-model-len: only when some KV is left; the engine's own estimate when printed.
    if let (Some(len), Some(one)) = (f.max_model_len, b.one_request_gib)
        && kv > 0.0
        && one > 0.0
    {
        let l = f
            .estimated_max_model_len
            .unwrap_or_else(|| ((len as f64 * kv / one) as u64) / 16 * 16);
        if l > 0 && l < len {
            out.push(
                Fix::new(
                    format!("--max-model-len {l}"),
                    true,
                    LOG,
                    format!(
                        "{} of KV holds {l} of the {len} tokens one request needs \
                         ({} for {len}); KV per request grows with its length",
                        gib_text(kv),
                        gib_text(one)
                    ),
                )
                .cost(format!(
                    "requests longer than {l} tokens are refused (was {len})"
                ))
                .kv(Some(kv)),
            );
        }
    }
    // --gpu-memory-utilization: the budget is total × u, so u grows by shortfall / total.
    if let Some((total, src)) = f.total_gib.filter(|t| t.0 > 0.0) {
        let u = f.utilization;
        let new = ((u + short / total) * 100.0).ceil() / 100.0;
        if new > u && new <= 1.0 {
            let free_ok = f.free_at_start_gib.is_none_or(|free| new * total <= free);
            let fits =
                new <= 0.99 && free_ok && !b.shortfall_is_lower_bound && f.block_override.is_none();
            let mut why = format!(
                "budget {u:.2} × {total:.2} GiB ({src}) is short by {short:.2} GiB{bound}: \
                 {u:.2} + {short:.2}/{total:.2} = {new:.2}"
            );
            if f.utilization_source != "the log" {
                why.push_str(&format!(
                    "; the log does not print the fraction: {} assumed",
                    f.utilization_source
                ));
            }
            if f.block_override.is_some() {
                why.push_str(
                    "; cannot help while --num-gpu-blocks-override fixes the number of blocks",
                );
            }
            if !free_ok {
                why.push_str(&format!(
                    "; only {:.2} GiB was free at start-up, so vLLM refuses it",
                    f.free_at_start_gib.unwrap_or(0.0)
                ));
            } else if new > 0.99 {
                why.push_str("; above 0.99 nothing is left for the CUDA context and other users");
            }
            out.push(
                Fix::new(
                    format!("--gpu-memory-utilization {new:.2}"),
                    fits,
                    if src == "log" { LOG } else { ESTIMATE },
                    why,
                )
                .cost(format!(
                    "{:.2} GiB less headroom for other processes and fragmentation",
                    (new - u) * total
                ))
                .kv(Some(kv + (new - u) * total)),
            );
        }
    }
    // --enforce-eager: frees the graph memory only where it is counted in the budget.
    if f.graphs_in_budget
        && let Some(g) = f.cuda_graph_gib.filter(|g| *g > 0.0)
    {
        let fits = g >= short && !b.shortfall_is_lower_bound;
        out.push(
            Fix::new(
                "--enforce-eager".to_string(),
                fits,
                LOG,
                format!(
                    "this release counts {g:.2} GiB of CUDA-graph memory in the budget; dropping \
                     it {} the {short:.2} GiB shortfall",
                    if fits { "covers" } else { "does not cover" }
                ),
            )
            .cost("no CUDA graphs: slower decode at small batch sizes".to_string())
            .kv(Some(kv + g)),
        );
    }
    // --max-num-batched-tokens: the profile run's activation grows with the batched tokens.
    if let (Some(act), Some(bt)) = (f.activation_gib.filter(|a| *a > 0.0), f.batched_tokens)
        && short < act
    {
        let new = ((bt as f64 * (1.0 - short / act)).floor() as u64) / 256 * 256;
        if new >= 256 && new < bt {
            out.push(
                Fix::new(
                    format!("--max-num-batched-tokens {new}"),
                    !b.shortfall_is_lower_bound,
                    ESTIMATE,
                    format!(
                        "activation peak {act:.2} GiB at {bt} batched tokens, taken as \
                         proportional: {new} tokens free ≈ {:.2} GiB ≥ {short:.2} GiB",
                        act * (1.0 - new as f64 / bt as f64)
                    ),
                )
                .cost("smaller prefill chunks: longer time to first token under load".to_string())
                .kv(Some(kv + act * (1.0 - new as f64 / bt as f64))),
            );
        }
    }
    // --kv-cache-dtype fp8 halves one request's KV; it cannot make a negative budget positive.
    if !f.kv_fp8
        && let Some(one) = b.one_request_gib
    {
        // With --num-gpu-blocks-override the pool is a number of blocks, and a block holds the
        // same tokens whatever their bytes: fp8 frees memory but no block.
        let fits = kv > 0.0 && one / 2.0 <= kv && f.block_override.is_none();
        out.push(
            Fix::new(
                "--kv-cache-dtype fp8".to_string(),
                fits,
                LOG,
                if let Some((_, blocks)) = f.block_override {
                    format!(
                        "cannot help: --num-gpu-blocks-override fixes the pool at {blocks} blocks \
                         of the same tokens whatever their bytes"
                    )
                } else if kv <= 0.0 {
                    format!(
                        "cannot help: {kv:.2} GiB is left for KV, and halving the bytes per \
                         token does not make it positive"
                    )
                } else {
                    format!(
                        "one request needs {:.2} GiB in fp8 against {kv:.2} GiB available",
                        one / 2.0
                    )
                },
            )
            .cost(
                "half the KV bytes per token; check accuracy (fast on Hopper/Ada and newer)"
                    .to_string(),
            )
            .kv(Some(kv)),
        );
    }
    // --tensor-parallel-size ×2 halves each GPU's weights.
    if let Some(w) = f.weights_gib.filter(|w| *w > 0.0)
        && f.tp * 2 <= 8
    {
        let tp = f.tp * 2;
        let fits = w / 2.0 >= short && !b.shortfall_is_lower_bound;
        out.push(
            Fix::new(
                format!("--tensor-parallel-size {tp}"),
                fits,
                ESTIMATE,
                format!(
                    "weights {w:.2} GiB per GPU halve: ≈ {:.2} GiB freed against {short:.2} GiB \
                     short (less the second GPU's NCCL buffers)",
                    w / 2.0
                ),
            )
            .cost(format!("{tp} GPUs instead of {}", f.tp))
            .kv(Some(kv + w / 2.0)),
        );
    }
    out
}

/// An engine that sizes from free memory: its room's fix from the free memory before and after
/// the weights ([`inferscope_plan::engines::EngineRoom::free_memory_fix`]).
fn from_free_memory(f: &LogFigures) -> Vec<Fix> {
    let Some(room) =
        inferscope_plan::engines::Engine::parse(f.engine).map(inferscope_plan::engines::room)
    else {
        return Vec::new();
    };
    let Some((total, after)) = f.free_before_after else {
        return Vec::new();
    };
    room.free_memory_fix(total, after)
        .map(|x| {
            vec![
                Fix::new(x.change, true, LOG, x.why)
                    .cost(x.cost)
                    .kv(Some(x.kv_gib)),
            ]
        })
        .unwrap_or_default()
}

/// TGI's warm-up prefill did not fit: halve it (TGI's own advice; the memory it needs is not
/// printed, so the halving is an estimate).
fn tgi(f: &LogFigures) -> Vec<Fix> {
    let Some(n) = f.tgi_prefill_tokens.filter(|n| *n >= 2) else {
        return Vec::new();
    };
    vec![
        Fix::new(
            format!("--max-batch-prefill-tokens {}", n / 2),
            true,
            ESTIMATE,
            format!(
                "the warm-up could not run a {n}-token prefill; its activation memory grows \
                 with the tokens, so half of them needs about half"
            ),
        )
        .cost("smaller prefill batches: longer time to first token under load".to_string()),
    ]
}

/// Re-judge a planner fix on the measured start-up: `base_kv`/`fix_kv` are the planner's KV
/// before and with the change, `fix_one` one request's KV with the change. When the planner's
/// base KV differs from the measured KV by more than the fix's effect, the planner cannot tell
/// whether the fix helps: apply its effect to the measured KV instead and mark it `log`.
pub fn judge_planner_fix(
    mut fix: Fix,
    measured_kv: Option<f64>,
    base_kv: f64,
    fix_kv: f64,
    fix_one: Option<f64>,
    log_failed: bool,
    plan_fits: bool,
) -> Fix {
    let effect = fix_kv - base_kv;
    match measured_kv {
        Some(m) if (base_kv - m).abs() > effect.abs() || (log_failed && plan_fits) => {
            let after = m + effect;
            let fits = fix_one.is_some_and(|one| after > 0.0 && after >= one);
            fix.fits = fits;
            fix.checked_by = LOG;
            fix.verified_by = "engine";
            fix.why = format!(
                "the planner's KV ({base_kv:.2} GiB) differs from the log's ({m:.2} GiB) by more \
                 than this change's effect ({effect:+.2} GiB): judged on the log, {m:.2} {effect:+.2} \
                 = {after:.2} GiB{}",
                match fix_one {
                    Some(one) => format!(" against {one:.2} GiB for one request"),
                    None => " (one request's KV unknown)".to_string(),
                }
            );
            fix.kv_cache_gib = Some(r2(after));
        }
        None if log_failed && plan_fits => {
            fix.fits = false;
            fix.why = "the planner predicts the failed configuration fits, so its re-plan cannot \
                       show this change helps"
                .to_string();
        }
        _ => {
            fix.why = format!(
                "re-planned: KV {base_kv:.2} → {fix_kv:.2} GiB per GPU{}",
                if fix.fits {
                    ", fits"
                } else {
                    ", still does not fit"
                }
            );
        }
    }
    fix
}
