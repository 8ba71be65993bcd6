//! `mem startup`: what a parsed start-up log measured, what the planner predicts for the same
//! inputs (term by term), and for a failed start-up the diagnosis and fixes, each re-planned.
//!
//! Pure: takes a [`StartupLog`] and optional hints (model, GPU the log does not name), returns a
//! [`StartupReport`]. The JSON keys `engine`, `engine_version`, `failed`,
//! `measured.kv_cache_gib`, `measured.kv_cache_tokens` and `fixes` (`[{change, fits}]`) are a
//! contract (issue 17); `measured` has the record shape of `fixtures/tools/vllm-logs/cases.jsonl`.

use inferscope_formats::startup_log::{Split, StartupLog};
use inferscope_plan::engine::Engine;
use inferscope_plan::engines::{Knob, room};
use inferscope_plan::memory::GIB;
use inferscope_plan::{GpuSpec, Plan, PlanRequest, catalog, gpus, plan};
use serde::Serialize;

/// What the user tells us that the log may not (`--model`, `--gpu`, `--gpus`).
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Model id (HF repo id as in the catalog).
    pub model: Option<String>,
    /// GPU name (catalog) when the log does not print one.
    pub gpu: Option<String>,
    /// GPUs in use.
    pub gpu_count: Option<u32>,
    /// The model already read (a local folder the binary resolved like `plan` does): its name
    /// and architecture. Used instead of a catalog lookup.
    pub model_arch: Option<(String, inferscope_plan::ModelArch)>,
    /// Why the binary could not resolve the model (a gated Hub repo, ...), said instead of
    /// "not in the catalog".
    pub model_error: Option<String>,
}

/// An earlier start-up in the same input, in brief.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EarlierStartup {
    /// Its engine.
    pub engine: &'static str,
    /// Its version.
    pub engine_version: Option<String>,
    /// First line.
    pub first_line: u64,
    /// Last line.
    pub last_line: u64,
    /// It failed.
    pub failed: bool,
    /// Why.
    pub failure: Option<String>,
    /// Its KV cache per GPU.
    pub kv_cache_gib: Option<f64>,
    /// `restart` or `other_engine` (why the next one is a separate record).
    pub followed_by: &'static str,
}

/// The figures the engine printed, normalised to GiB per GPU (record shape of the start-up
/// fixtures). `null` = not printed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measured {
    /// `Loading model weights took X GB` / `Model loading took X GiB` / a dialect's `weights`
    /// figure.
    pub weights_gib: Option<f64>,
    /// The weights figure as printed.
    pub weights_load_line_value: Option<f64>,
    /// Its unit as printed.
    pub weights_load_line_unit: Option<&'static str>,
    /// Torch-visible total of the card.
    pub total_gpu_memory_gib: Option<f64>,
    /// total × utilisation.
    pub usable_memory_gib: Option<f64>,
    /// Non-torch memory (NCCL, CUDA context).
    pub non_torch_gib: Option<f64>,
    /// Activation peak while profiling (llama.cpp: compute buffer).
    pub activation_peak_gib: Option<f64>,
    /// CUDA graph memory.
    pub cuda_graph_gib: Option<f64>,
    /// KV cache, per GPU.
    pub kv_cache_gib: Option<f64>,
    /// The engine's token capacity (vLLM "GPU KV cache size", TGI "max batch total tokens";
    /// llama.cpp: `n_ctx`; the dialects' `kv_cache_tokens`).
    pub kv_cache_tokens: Option<u64>,
    /// A separate recurrent-state pool (SGLang's Mamba pool: conv + SSM state), per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_pool_gib: Option<f64>,
    /// Requests whose state that pool holds (SGLang `max_mamba_cache_size`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_pool_requests: Option<u64>,
    /// KV blocks (vLLM `# GPU blocks` / `num_gpu_blocks`, TGI `KV-cache blocks`).
    pub gpu_blocks: Option<u64>,
    /// vLLM `# CPU blocks`.
    pub cpu_blocks: Option<u64>,
    /// `Maximum concurrency for N tokens per request: Xx`.
    pub max_concurrency: Option<f64>,
    /// Its N.
    pub max_concurrency_request_tokens: Option<u64>,
    /// vLLM's "… stored in KV cache (N)".
    pub kv_capacity_tokens_in_error: Option<u64>,
    /// Context length the engine used (vLLM error or `Using max model len`, TGI max total
    /// tokens, llama.cpp per-slot context, the dialects' `max_model_len`).
    pub max_model_len: Option<u64>,
    /// Engines that size from free memory: free memory before weights load.
    pub avail_before_weights_gib: Option<f64>,
    /// Engines that size from free memory: free memory after weights load.
    pub avail_after_weights_gib: Option<f64>,
}

/// One figure as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Printed {
    /// Our key.
    pub key: &'static str,
    /// As printed.
    pub value: f64,
    /// Unit as printed.
    pub unit: &'static str,
    /// Normalised (memory only).
    pub gib: Option<f64>,
    /// Line number.
    pub line: u64,
    /// Rank, when the line names one.
    pub rank: Option<u32>,
}

/// One term of the per-GPU breakdown, measured beside predicted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Term {
    /// `weights`, `non_torch`, `activation_peak`, `cuda_graph`, `kv_cache`, and `state_pool`
    /// where the engine keeps a separate recurrent-state pool.
    pub term: &'static str,
    /// From the log (null: not printed).
    pub measured_gib: Option<f64>,
    /// From the planner.
    pub predicted_gib: f64,
    /// predicted − measured.
    pub difference_gib: Option<f64>,
}

/// The planner's prediction for the log's inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Model id the planner used.
    pub model: String,
    /// GPU and torch-visible total used.
    pub gpu: String,
    /// Total GiB per GPU used (the log's when printed).
    pub gpu_total_gib: f64,
    /// Per-GPU terms.
    pub terms: Vec<Term>,
    /// Predicted KV tokens.
    pub kv_cache_tokens: u64,
    /// Predicted max concurrency.
    pub max_concurrency: f64,
    /// Whether the planner says it fits.
    pub fits: bool,
    /// The planner's problems.
    pub problems: Vec<String>,
}

use crate::startup_fixes::{self as fx, LogFigures};
pub use crate::startup_fixes::{Budget, Fix};

/// `mem startup --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupReport {
    /// The engine's [`Engine::cli_id`] (`vllm`, `tgi`, `llama.cpp`, ...).
    pub engine: &'static str,
    /// As printed, or null.
    pub engine_version: Option<String>,
    /// The start-up failed.
    pub failed: bool,
    /// The line that says so.
    pub failure: Option<String>,
    /// Its line number.
    pub failure_line: Option<u64>,
    /// Model as the log (or `--model`) names it.
    pub model_id: Option<String>,
    /// GPU as the log (or `--gpu`) names it.
    pub gpu_model: Option<String>,
    /// GPUs (hint, TP × PP, or ranks seen).
    pub gpu_count: Option<u32>,
    /// Tensor parallel size from the arguments.
    pub tp_size: Option<u32>,
    /// Pipeline parallel size.
    pub pp_size: Option<u32>,
    /// Arguments recognised (`non-default args`, a dialect's dump, `Args`, command line).
    pub args: Vec<(String, String)>,
    /// The measured breakdown.
    pub measured: Measured,
    /// Every figure as printed.
    pub printed: Vec<Printed>,
    /// Planner's prediction.
    pub prediction: Option<Prediction>,
    /// Why there is none.
    pub prediction_unavailable: Option<String>,
    /// For a failed start-up: why.
    pub diagnosis: Option<String>,
    /// For a failed start-up: the measured budget the fixes close.
    pub budget: Option<Budget>,
    /// For a failed start-up: fixes, log-derived first, each with `checked_by` and `why`.
    pub fixes: Vec<Fix>,
    /// The device when it is not a GPU (`cpu`: vLLM's CPU backend).
    pub device: Option<String>,
    /// This report is on the last start-up in the input; the ones before it.
    pub earlier_startups: Vec<EarlierStartup>,
    /// First line of the start-up reported.
    pub first_line: u64,
    /// The excerpt has no line that sizes the KV budget and none that says the start-up failed:
    /// which of the engine's lines is missing (`no budget line: …`), so no fix can be derived.
    pub missing_budget_line: Option<String>,
    /// Oddities.
    pub notes: Vec<String>,
    /// Lines read.
    pub lines_read: u64,
}

fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn arg_u<S: AsRef<str>>(log: &StartupLog, names: &[S]) -> Option<u64> {
    names.iter().find_map(|n| {
        log.arg(n.as_ref())
            .and_then(|v| v.trim().parse::<u64>().ok())
    })
}

fn arg_f<S: AsRef<str>>(log: &StartupLog, names: &[S]) -> Option<f64> {
    names.iter().find_map(|n| {
        log.arg(n.as_ref())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
    })
}

fn arg_s(log: &StartupLog, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        log.arg(n)
            .filter(|v| !v.is_empty() && *v != "None" && *v != "null" && *v != "auto")
            .map(str::to_string)
    })
}

fn gib(log: &StartupLog, key: &str) -> Option<f64> {
    log.figure(key).and_then(|f| f.gib)
}

fn count(log: &StartupLog, key: &str) -> Option<u64> {
    log.figure(key)
        .map(|f| f.value)
        .filter(|v| *v >= 0.0 && v.fract() == 0.0)
        .map(|v| v as u64)
}

fn measured(log: &StartupLog) -> Measured {
    let w = log.figure("weights");
    let kv = gib(log, "kv_cache").or(match (gib(log, "k_size"), gib(log, "v_size")) {
        (Some(k), Some(v)) => Some(r2(k + v)),
        _ => None,
    });
    let kv_tokens = count(log, "kv_cache_tokens").or(if log.engine == Some(Engine::LlamaCpp) {
        count(log, "n_ctx")
    } else {
        None
    });
    Measured {
        weights_gib: w.and_then(|f| f.gib).map(r2),
        weights_load_line_value: w.map(|f| f.value),
        weights_load_line_unit: w.map(|f| f.unit),
        total_gpu_memory_gib: gib(log, "total_gpu_memory"),
        usable_memory_gib: gib(log, "usable_memory"),
        non_torch_gib: gib(log, "non_torch"),
        activation_peak_gib: gib(log, "activation_peak").map(r2),
        cuda_graph_gib: gib(log, "cuda_graph"),
        kv_cache_gib: kv.map(r2),
        kv_cache_tokens: kv_tokens,
        state_pool_gib: match (gib(log, "state_conv"), gib(log, "state_ssm")) {
            (Some(c), Some(s)) => Some(r2(c + s)),
            _ => None,
        },
        state_pool_requests: count(log, "state_pool_requests"),
        gpu_blocks: count(log, "gpu_blocks"),
        cpu_blocks: count(log, "cpu_blocks"),
        max_concurrency: log.figure("max_concurrency").map(|f| f.value),
        max_concurrency_request_tokens: count(log, "max_concurrency_request_tokens"),
        kv_capacity_tokens_in_error: count(log, "kv_capacity_tokens_in_error"),
        max_model_len: count(log, "max_model_len"),
        avail_before_weights_gib: gib(log, "avail_before_weights"),
        avail_after_weights_gib: gib(log, "avail_after_weights"),
    }
}

/// The names to try for a model as launched, in order: as given, `ORG/NAME` from its last two
/// path parts (`/home/x/Qwen/QwQ-32B` → `Qwen/QwQ-32B`), then its last part. The binary resolves
/// them as `plan` does (folder, cache, catalog, Hub); without it, the catalog alone.
pub fn model_candidates(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.trim_end_matches('/').rsplit('/').collect();
    let mut tries = vec![name.to_string()];
    if let [last, org, ..] = parts.as_slice() {
        tries.push(format!("{org}/{last}"));
    }
    if let Some(last) = parts.first() {
        tries.push((*last).to_string());
    }
    tries.dedup();
    tries
}

/// The catalog id for a model as launched.
fn catalog_model(name: &str) -> Option<(String, inferscope_plan::ModelArch)> {
    model_candidates(name)
        .into_iter()
        .find_map(|t| catalog::lookup(&t).ok().map(|a| (t, a)))
}

/// Analyse a parsed log.
pub fn analyse(log: &StartupLog, hints: &Hints) -> StartupReport {
    let engine = log.engine.map_or("unknown", Engine::cli_id);
    let m = measured(log);
    let mut notes = Vec::new();
    let tp = arg_u(log, &["tensor_parallel_size", "tp_size", "tp", "num_shard"])
        .or(count(log, "num_shard"))
        .map(|v| v.min(1024) as u32);
    let pp = arg_u(log, &["pipeline_parallel_size", "pp_size", "pp"]).map(|v| v.min(1024) as u32);
    let ranks = log.rank_count();
    // vLLM's CPU backend uses no GPU: its `rank=0` lines and TP size count CPU workers.
    let from_log = (log.device.as_deref() != Some("cpu"))
        .then(|| {
            tp.map(|t| t.saturating_mul(pp.unwrap_or(1)))
                .or((ranks > 0).then_some(ranks))
        })
        .flatten();
    let gpu_count = hints.gpu_count.or(from_log);
    if ranks > 1 {
        notes.push(format!(
            "{ranks} ranks' lines are interleaved; figures are rank 0's (or the lowest rank's)"
        ));
    }
    if log.ends_mid_line {
        notes.push(
            "the log ends mid-line (cut): a number running to the cut is not used".to_string(),
        );
    }
    if log.long_lines > 0 {
        notes.push(format!("{} over-long lines were cut", log.long_lines));
    }
    let model_id = hints
        .model
        .clone()
        .or_else(|| arg_s(log, &["model", "model_path", "model_id", "model_tag"]));
    // The log's device name mapped to the catalog (`NVIDIA H100 80GB HBM3` → H100 SXM); `--gpu`
    // overrides.
    let gpu_model = hints.gpu.clone().or_else(|| {
        log.gpu_model.as_deref().map(|g| match gpus::lookup(g) {
            Ok(spec) => {
                notes.push(format!(
                    "GPU from the log: {g:?} is the catalog's {} (pass --gpu to override)",
                    spec.name
                ));
                spec.name.clone()
            }
            Err(_) => g.to_string(),
        })
    });
    let earlier: Vec<EarlierStartup> = log
        .earlier
        .iter()
        .map(|e| EarlierStartup {
            engine: e.engine.map_or("unknown", Engine::cli_id),
            engine_version: e.engine_version.clone(),
            first_line: e.lines.0,
            last_line: e.lines.1,
            failed: e.failed,
            failure: e.failure.as_ref().map(|(_, t)| t.clone()),
            kv_cache_gib: e.kv_cache_gib.map(r2),
            followed_by: match e.split {
                Split::Restart => "restart",
                Split::OtherEngine => "other_engine",
            },
        })
        .collect();
    if !earlier.is_empty() {
        let mixed = earlier.iter().any(|e| e.followed_by == "other_engine");
        notes.push(format!(
            "the input holds {} start-ups{}; this report is the last one (from line {}); \
             earlier: {}",
            earlier.len() as u64 + log.earlier_dropped + 1,
            if mixed {
                " of different engines (split, not merged)"
            } else {
                ""
            },
            log.first_line,
            earlier
                .iter()
                .map(|e| format!(
                    "{} lines {}–{} {}",
                    e.engine,
                    e.first_line,
                    e.last_line,
                    if e.failed { "failed" } else { "did not fail" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let printed = log
        .figures
        .iter()
        .map(|f| Printed {
            key: f.key,
            value: f.value,
            unit: f.unit,
            gib: f.gib.map(|g| (g * 10000.0).round() / 10000.0),
            line: f.line,
            rank: f.rank,
        })
        .collect();

    let mut report = StartupReport {
        engine,
        engine_version: log.engine_version.clone(),
        failed: log.failed,
        failure: log.failure.as_ref().map(|(_, t)| t.clone()),
        failure_line: log.failure.as_ref().map(|(n, _)| *n),
        model_id: model_id.clone(),
        gpu_model: gpu_model.clone(),
        gpu_count,
        tp_size: tp,
        pp_size: pp,
        args: log.args.clone(),
        measured: m.clone(),
        printed,
        prediction: None,
        prediction_unavailable: None,
        diagnosis: None,
        budget: None,
        fixes: Vec::new(),
        device: log.device.clone(),
        earlier_startups: earlier,
        first_line: log.first_line,
        missing_budget_line: missing_budget_line(log, &m),
        notes,
        lines_read: log.lines,
    };
    if let Some(why) = &report.missing_budget_line {
        report.notes.push(why.clone());
    }

    // The planner request, from the log's own inputs.
    let req = request(log, &report, &m, hints, false);
    let base = match req {
        Ok(req) => {
            let p = plan(&req);
            report.prediction = Some(prediction(&req, &p, &m));
            Some((req, p))
        }
        Err(why) => {
            report.prediction_unavailable = Some(why);
            None
        }
    };
    if log.failed {
        report.diagnosis = Some(diagnose(log, &m));
        // Without a GPU the model still gives one request's KV (a shape-only request).
        let shape = match &base {
            Some((r, _)) => Some(r.clone()),
            None => request(log, &report, &m, hints, true).ok(),
        };
        let figs = log_figures(log, &report, &m, shape.as_ref());
        if let Some(d) = report.diagnosis.as_mut()
            && d.contains("does not say")
            && let (Some(kv), Some((one, _)), Some(len)) = (
                figs.kv_gib,
                figs.one_request_gib.as_ref(),
                figs.max_model_len,
            )
            && *one > kv
        {
            *d = format!(
                "one request of max_model_len {len} tokens needs {one:.2} GiB of KV cache; only \
                 {kv:.2} GiB was left after weights, activations and non-torch memory"
            );
        }
        let budget = fx::budget(&figs);
        let mut fixes = fx::log_fixes(&figs, &budget);
        if let Some((req, p)) = &base {
            if p.fits {
                report.notes.push(
                    "the planner predicts this configuration fits, so it does not reproduce the \
                     failure: its fixes are judged on the log's figures instead"
                        .to_string(),
                );
            }
            if !p.fits
                && let Some(d) = report.diagnosis.as_mut()
                && d.contains("does not say")
            {
                d.push_str(&format!(
                    "; the planner's reason: {}",
                    p.problems.join("; ")
                ));
            }
            for f in planner_fixes(req, p, figs.kv_gib) {
                // The log's own figure for a flag wins over the planner's.
                let flag = f.change.split_whitespace().next().unwrap_or("");
                if !fixes
                    .iter()
                    .any(|x| x.change.split_whitespace().next() == Some(flag))
                {
                    fixes.push(f);
                }
            }
        }
        report.budget = Some(budget);
        report.fixes = fixes;
    }
    report
}

/// The engine's budget lines the excerpt lacks, when it has neither a KV figure nor a failure:
/// without them no fix can be derived (the case of a paste that stops before the error).
fn missing_budget_line(log: &StartupLog, m: &Measured) -> Option<String> {
    if log.failed || m.kv_cache_gib.is_some() || m.kv_cache_tokens.is_some() {
        return None;
    }
    let mut missing: Vec<&str> = Vec::new();
    match log.engine {
        Some(Engine::Vllm) => {
            missing.push(
                "vLLM's `Available KV cache memory: X GiB` (gpu_worker.py \
                 determine_available_memory) or `# GPU blocks: N`",
            );
            missing.push(
                "its error (`X GiB KV cache is needed …`, `No available memory for the cache \
                 blocks`, `CUDA out of memory`)",
            );
        }
        Some(Engine::Tgi) => missing.push(
            "TGI's `Setting max batch total tokens to N` or the warm-up error (`Not enough \
             memory to handle N prefill tokens`)",
        ),
        Some(Engine::LlamaCpp) => missing.push(
            "llama.cpp's `KV self size` / `llama_kv_cache` size line or its allocation error \
             (`failed to allocate … buffer`)",
        ),
        // the other rooms name their own lines; `None`: the log parser reads none of theirs
        Some(e) => match inferscope_plan::engines::room(e).missing_budget_lines(
            m.avail_before_weights_gib.is_some(),
            m.avail_after_weights_gib.is_some(),
        ) {
            Some(lines) => missing.extend(lines),
            None => return None,
        },
        None => return None,
    }
    Some(format!(
        "no budget line: {} {} not in the excerpt, and no line says the start-up failed; no fix \
         can be derived from it (paste the lines up to the error)",
        missing.join("; "),
        if missing.len() > 1 { "are" } else { "is" }
    ))
}

fn request(
    log: &StartupLog,
    r: &StartupReport,
    m: &Measured,
    hints: &Hints,
    shape_only: bool,
) -> Result<PlanRequest, String> {
    if log.engine == Some(Engine::LlamaCpp) {
        return Err(
            "llama.cpp plans need the GGUF file: run `inferscope plan -- llama-server -m FILE …` \
             with the log's command"
                .to_string(),
        );
    }
    let resolved = match (&hints.model_arch, r.model_id.as_deref()) {
        (Some(read), _) => Some(read.clone()),
        (None, Some(model)) => catalog_model(model),
        (None, None) => {
            return Err("the log does not name the model: pass --model ID".to_string());
        }
    };
    let Some((model_name, arch)) = resolved else {
        if let Some(e) = &hints.model_error {
            return Err(e.clone());
        }
        return Err(format!(
            "model {:?} is not in the planner's catalog and is not a local folder here: pass \
             --model with a catalog id or the model's folder",
            r.model_id.as_deref().unwrap_or("")
        ));
    };
    // The torch-visible total: the log's when printed, else the catalog GPU's.
    let catalog_gpu = r.gpu_model.as_deref().and_then(|g| gpus::lookup(g).ok());
    let total_gib = m
        .total_gpu_memory_gib
        .or(catalog_gpu.map(|g| g.torch_total_bytes() as f64 / GIB));
    // One request's KV does not depend on the card: a shape-only request may stand in for it.
    let total_gib = total_gib.or(shape_only.then_some(80.0));
    let Some(total_gib) = total_gib else {
        if log.device.as_deref() == Some("cpu") {
            return Err(
                "vLLM's CPU backend: the planner models GPUs (pass --gpu NAME to see what one \
                 would hold)"
                    .to_string(),
            );
        }
        return Err(match &r.gpu_model {
            Some(g) => format!("GPU {g:?} is not in the catalog: pass --gpu NAME"),
            None => match &log.gpu_unidentified {
                // A backend or platform line is not a card: say so rather than guess one.
                Some((n, line)) => format!(
                    "the log does not name the GPU (line {n}, {:?}, names an attention \
                     backend, the platform or several kinds of GPU, not one card): pass --gpu \
                     NAME",
                    line.chars().take(160).collect::<String>()
                ),
                None => "the log does not name the GPU: pass --gpu NAME".to_string(),
            },
        });
    };
    let tp = r.tp_size.unwrap_or(1).max(1);
    let pp = r.pp_size.unwrap_or(1).max(1);
    let mut req = PlanRequest::new(
        arch,
        model_name,
        GpuSpec {
            name: r
                .gpu_model
                .clone()
                .unwrap_or_else(|| format!("{total_gib:.2} GiB GPU")),
            total_bytes: (total_gib * GIB) as u64,
            count: r.gpu_count.unwrap_or(tp * pp).max(tp * pp),
        },
    );
    req.use_catalog_gpu(catalog_gpu);
    // the log's own engine (llama.cpp was answered above); a log that names none is read with
    // vLLM's accounting, the engine whose phrases the parser falls back to
    req.engine = log.engine.unwrap_or(Engine::Vllm);
    req.tp = tp;
    req.pp = pp;
    req.engine_version = log.engine_version.clone();
    req.v1 = log.vllm_v1;
    req.flashinfer_sampler = log.vllm_flashinfer_sampler;
    // each setting under vLLM's argument name, then the rooms' flags for it as their arguments
    // dumps spell them (`--context-length` → `context_length`)
    req.max_model_len =
        arg_u(log, &arg_names("max_model_len", Knob::ContextLength)).or(m.max_model_len);
    req.gpu_memory_utilization = arg_f(
        log,
        &arg_names("gpu_memory_utilization", Knob::MemoryFraction),
    )
    .or(log.figure("gpu_memory_utilization").map(|f| f.value));
    req.kv_cache_dtype = arg_s(log, &["kv_cache_dtype"]);
    req.dtype = arg_s(log, &["dtype"]);
    req.quantization = arg_s(log, &["quantization", "quantize"]);
    req.max_num_seqs = arg_u(log, &arg_names("max_num_seqs", Knob::MaxSequences)).map(|v| v as u32);
    req.max_num_batched_tokens = arg_u(
        log,
        &arg_names("max_num_batched_tokens", Knob::PrefillChunk),
    );
    // An engine that sizes its pool from the free memory it reads when it starts: a property of
    // this GPU at that moment the planner cannot know, so the log's own figure stands in for its
    // default (total − CUDA context).
    if inferscope_plan::engines::room(req.engine).sizes_from_free_memory()
        && let Some(avail) = m.avail_before_weights_gib
    {
        req.free_bytes_at_start = Some((avail * GIB) as u64);
    }
    req.enforce_eager = arg_names("enforce_eager", Knob::NoCudaGraphs)
        .iter()
        .any(|n| log.arg(n).is_some_and(|v| v.eq_ignore_ascii_case("true")));
    inferscope_plan::engines::lmdeploy::log::apply(&mut req, log);
    Ok(req)
}

/// `vllm_name`, then each room's flag for `knob` as an arguments dump spells it (`--x-y` →
/// `x_y`), in [`Engine::ALL`]'s order, without repeats.
fn arg_names(vllm_name: &str, knob: Knob) -> Vec<String> {
    let mut names = vec![vllm_name.to_string()];
    for e in Engine::ALL {
        if let Some(flag) = room(e).flag(knob) {
            let name = flag.trim_start_matches('-').replace('-', "_");
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

fn prediction(req: &PlanRequest, p: &Plan, m: &Measured) -> Prediction {
    let g = &p.per_gpu;
    let term = |term, measured: Option<f64>, predicted: f64| Term {
        term,
        measured_gib: measured,
        predicted_gib: predicted,
        difference_gib: measured.map(|x| r2(predicted - x)),
    };
    Prediction {
        model: req.model_name.clone(),
        gpu: req.gpu.name.clone(),
        gpu_total_gib: r2(req.gpu.total_bytes as f64 / GIB),
        terms: vec![
            term("weights", m.weights_gib, g.weights_gib),
            term("non_torch", m.non_torch_gib, g.non_torch_gib),
            term("activation_peak", m.activation_peak_gib, g.activation_gib),
            term("cuda_graph", m.cuda_graph_gib, g.cuda_graph_gib),
            term("kv_cache", m.kv_cache_gib, g.kv_cache_gib),
        ]
        .into_iter()
        // a separate state pool, where the engine keeps one (SGLang's Mamba pool)
        .chain(
            p.state_pool_bytes
                .map(|b| term("state_pool", m.state_pool_gib, r2(b as f64 / GIB))),
        )
        .collect(),
        kv_cache_tokens: p.kv_cache_tokens,
        max_concurrency: p.max_concurrency,
        fits: p.fits,
        problems: p.problems.clone(),
    }
}

fn diagnose(log: &StartupLog, m: &Measured) -> String {
    let t = log.failure.as_ref().map_or("", |(_, t)| t.as_str());
    if let (Some(len), Some(cap)) = (m.max_model_len, m.kv_capacity_tokens_in_error) {
        return format!(
            "one request of max_model_len {len} tokens needs more KV cache than the {cap} tokens \
             that fit after weights and activations"
        );
    }
    if let (Some(len), Some(avail)) = (m.max_model_len, m.kv_cache_gib)
        && let Some(need) = gib(log, "kv_cache_needed")
    {
        // vLLM's GiB are rounded to a tenth: when they cannot show the gap, its lengths do.
        if need <= avail
            && let Some(est) = count(log, "estimated_max_model_len").filter(|e| *e < len)
        {
            let pool = match (
                count(log, "gpu_blocks_override"),
                count(log, "gpu_blocks_profiled"),
            ) {
                (Some(o), Some(p)) => format!(
                    " (the pool is --num-gpu-blocks-override's {o} blocks, not the {p} vLLM \
                     profiled)"
                ),
                _ => String::new(),
            };
            return format!(
                "one request of max_model_len {len} tokens needs more KV cache than the pool \
                 holds: vLLM estimates {est} tokens fit{pool}"
            );
        }
        return format!(
            "one request of max_model_len {len} tokens needs {need:.2} GiB of KV cache; only \
             {avail:.2} GiB was left after weights, activations and graphs"
        );
    }
    if let (Some(free), Some(total)) = (gib(log, "free_at_start"), m.total_gpu_memory_gib)
        && t.contains("less than desired")
    {
        return format!(
            "only {free:.2} of {total:.2} GiB was free at start-up: other processes hold {:.2} \
             GiB, more than the utilisation budget leaves",
            total - free
        );
    }
    // the rooms' own failure phrases (checked whatever engine the log is, as before)
    if let Some(d) = Engine::ALL
        .into_iter()
        .find_map(|e| room(e).failure_diagnosis(t, m.weights_gib, m.avail_after_weights_gib))
    {
        return d;
    }
    if t.contains("No available memory for the cache blocks") {
        return "weights, activations and non-torch memory use the whole utilisation budget: no \
                memory is left for KV-cache blocks"
            .to_string();
    }
    if let Some(n) = count(log, "prefill_tokens_in_error") {
        return format!(
            "TGI's warm-up could not run a {n}-token prefill in the memory left after weights"
        );
    }
    if let Some((what, dev)) = &log.failed_buffer {
        let size = gib(log, "failed_alloc").map_or(String::new(), |g| format!(" of {g:.2} GiB"));
        let what = match *what {
            "kv_cache" => "the KV cache",
            "compute" => "the compute buffer",
            "weights" => "the model weights",
            _ => "a buffer",
        };
        return format!(
            "llama.cpp could not allocate {what}{size} on {dev}{}",
            count(log, "n_ctx").map_or(String::new(), |n| format!(" (n_ctx {n})"))
        );
    }
    if t.contains("out of memory") || t.contains("OutOfMemoryError") {
        return "out of memory during start-up: pass the message to `inferscope mem oom` for the \
                allocator's figures"
            .to_string();
    }
    match m.kv_cache_gib {
        Some(kv) => format!(
            "the start-up failed with {kv:.2} GiB of KV cache per GPU (the excerpt does not say \
             more)"
        ),
        None => "the start-up failed; the excerpt does not say why".to_string(),
    }
}

/// vLLM's default `--gpu-memory-utilization` for the log's release, as the planner uses it
/// (`engines::vllm::rules::default_gpu_memory_utilization`), and where it comes from.
fn vllm_default_utilization(version: Option<&str>) -> (f64, String) {
    let (release, note, _) = inferscope_plan::engines::vllm::rules::resolve_release(version);
    let d = inferscope_plan::engines::vllm::rules::default_gpu_memory_utilization(release);
    let mut src = format!("vLLM {release}'s default ({})", d.source);
    if let Some(n) = note {
        src.push_str(&format!("; {n}"));
    }
    (d.value, src)
}

/// The figures the log-only fixes need, normalised per GPU.
fn log_figures(
    log: &StartupLog,
    r: &StartupReport,
    m: &Measured,
    req: Option<&PlanRequest>,
) -> LogFigures {
    let engine = r.engine;
    let version = log
        .engine_version
        .as_deref()
        .and_then(inferscope_plan::EngineVersion::parse);
    let given = log
        .figure("gpu_memory_utilization")
        .map(|f| f.value)
        .or(arg_f(log, &["gpu_memory_utilization"]))
        .filter(|u| *u > 0.0 && *u <= 1.0);
    let (util, util_source) = match given {
        Some(u) => (u, "the log".to_string()),
        None => vllm_default_utilization(log.engine_version.as_deref()),
    };
    let planned = req.map(|r| (r, plan(r)));
    let max_len = arg_u(log, &["max_model_len"])
        .or(m.max_model_len)
        .or(planned.as_ref().and_then(|(_, p)| p.max_model_len));
    // `--num-gpu-blocks-override`: the pool vLLM allocated is that share of the memory printed.
    let block_override = count(log, "gpu_blocks_override")
        .zip(count(log, "gpu_blocks_profiled"))
        .filter(|(o, p)| *p > 0 && o < p)
        .map(|(o, p)| (p, o));
    let kv_gib = match block_override {
        Some((profiled, blocks)) => {
            gib(log, "kv_cache").map(|g| g * blocks as f64 / profiled as f64)
        }
        None => m.kv_cache_gib,
    };
    let engine_estimate = count(log, "estimated_max_model_len").filter(|e| *e > 0);
    // One request's KV: the engine's own figure, else the model's layout (the planner's KV over
    // its concurrency, which is vLLM's `max_memory_usage_bytes` for this length). vLLM prints
    // GiB to one decimal: when its figure is not above the pool although it refused, the
    // lengths it printed say the ratio (one request = pool × max_model_len / the longest that
    // fits).
    let rounded = |need: f64| kv_gib.is_some_and(|kv| need <= kv);
    let one = gib(log, "kv_cache_needed")
        .filter(|need| !rounded(*need))
        .map(|g| (g, "the engine's error message".to_string()))
        .or_else(|| {
            let len = count(log, "max_model_len")?;
            let est = engine_estimate.filter(|e| *e < len)?;
            Some((
                kv_gib? * len as f64 / est as f64,
                format!(
                    "the engine's estimate that {est} of the {len} tokens fit (its GiB figures \
                     are rounded to a tenth)"
                ),
            ))
        })
        .or_else(|| {
            let (req, p) = planned.as_ref()?;
            one_request_gib(req, p).map(|g| {
                (
                    g,
                    format!(
                        "{}'s KV layout for {} tokens",
                        req.model_name,
                        p.max_model_len.unwrap_or(0)
                    ),
                )
            })
        });
    let catalog_total = r
        .gpu_model
        .as_deref()
        .and_then(|g| gpus::lookup(g).ok())
        .map(|g| g.torch_total_bytes() as f64 / GIB);
    let total = m
        .total_gpu_memory_gib
        .map(|t| (t, "log"))
        .or(catalog_total.map(|t| (t, "catalog")));
    let from_free = Engine::parse(engine)
        .is_some_and(|e| inferscope_plan::engines::room(e).sizes_from_free_memory());
    let free_before_after = match (m.avail_after_weights_gib, m.weights_gib) {
        (Some(after), Some(w)) if from_free => {
            Some((m.avail_before_weights_gib.unwrap_or(after + w), after))
        }
        _ => None,
    };
    LogFigures {
        engine,
        // CUDA-graph memory is profiled into the KV budget by default from 0.21 (gpu_worker.py
        // determine_available_memory, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
        graphs_in_budget: version.is_some_and(|v| v.at_least(0, 21)),
        kv_gib,
        one_request_gib: one,
        max_model_len: max_len,
        estimated_max_model_len: count(log, "estimated_max_model_len")
            .or(m.kv_capacity_tokens_in_error)
            .filter(|e| *e > 0)
            .or_else(|| {
                let (req, _) = planned.as_ref()?;
                longest_len_that_fits(req, m.kv_cache_gib?, max_len?)
            }),
        total_gib: total,
        free_at_start_gib: gib(log, "free_at_start"),
        utilization: util,
        utilization_source: util_source,
        weights_gib: m.weights_gib,
        activation_gib: m.activation_peak_gib,
        cuda_graph_gib: m.cuda_graph_gib,
        batched_tokens: arg_u(log, &["max_num_batched_tokens"])
            .or(count(log, "chunked_prefill_tokens")),
        kv_fp8: arg_s(log, &["kv_cache_dtype"]).is_some_and(|d| d.starts_with("fp8")),
        tp: r.tp_size.unwrap_or(1).max(1),
        free_before_after,
        tgi_prefill_tokens: count(log, "prefill_tokens_in_error"),
        llama: (engine == "llama.cpp").then(|| llama_figures(log, m, catalog_total)),
        block_override,
    }
}

/// The failed device's figures of a llama-server log (`startup_fixes_llama`).
fn llama_figures(
    log: &StartupLog,
    m: &Measured,
    card: Option<f64>,
) -> crate::startup_fixes_llama::LlamaFigures {
    let (failed, device) = log
        .failed_buffer
        .clone()
        .unwrap_or(("unknown", "?".to_string()));
    let failed_gib = gib(log, "failed_alloc");
    let on_gpu = device.starts_with("CUDA") || device.starts_with("ROCm");
    crate::startup_fixes_llama::LlamaFigures {
        n_ctx: count(log, "n_ctx"),
        kv_gib: if failed == "kv_cache" {
            failed_gib
        } else {
            m.kv_cache_gib
        },
        weights_gib: gib(log, "device_weights").or(if on_gpu { None } else { m.weights_gib }),
        compute_gib: if failed == "compute" {
            failed_gib
        } else {
            gib(log, "device_compute")
        },
        failed,
        free_gib: if on_gpu {
            gib(log, "free_at_start")
        } else {
            None
        },
        card_gib: if on_gpu { card } else { None },
        device,
        cache_type_k: arg_s(log, &["cache_type_k", "ctk"]).unwrap_or_else(|| "f16".to_string()),
        slots: count(log, "n_slots")
            .or(count(log, "n_seq_max"))
            .or(arg_u(log, &["parallel", "np"])),
        layers: count(log, "layers_offloaded").zip(count(log, "layers_total")),
        fit: match (
            gib(log, "fit_shortfall"),
            gib(log, "fit_context"),
            gib(log, "fit_compute"),
        ) {
            (Some(shortfall_gib), Some(context_gib), Some(compute_gib)) => {
                Some(crate::startup_fixes_llama::OwnFit {
                    shortfall_gib,
                    context_gib,
                    compute_gib,
                    projected_gib: gib(log, "fit_projected").unwrap_or(0.0),
                    total_gib: gib(log, "fit_total").unwrap_or(0.0),
                    target_gib: gib(log, "fit_target").unwrap_or(0.0),
                })
            }
            _ => None,
        },
    }
}

/// The longest `max_model_len` (a multiple of 256) whose one request fits in `kv` GiB, by the
/// model's KV layout (sliding-window layers make it non-linear in the length).
fn longest_len_that_fits(req: &PlanRequest, kv: f64, len: u64) -> Option<u64> {
    let one_at = |l: u64| {
        let mut r = req.clone();
        r.max_model_len = Some(l);
        let p = plan(&r);
        one_request_gib(&r, &p)
    };
    if kv <= 0.0 || len < 512 {
        return None;
    }
    let (mut lo, mut hi) = (0u64, len / 256);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if one_at(mid * 256).is_some_and(|g| g <= kv) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo > 0).then_some(lo * 256)
}

/// One request's KV for a plan, GiB per GPU: the planner's KV over its max concurrency (the
/// number of `max_model_len` requests vLLM says fit). With no KV left the same request is
/// re-planned on a card four times larger, which changes the KV, not one request's size.
fn one_request_gib(req: &PlanRequest, p: &Plan) -> Option<f64> {
    if p.per_gpu.kv_cache_gib > 0.0 && p.max_concurrency > 0.0 {
        return Some(p.per_gpu.kv_cache_gib / p.max_concurrency);
    }
    let mut big = req.clone();
    big.gpu.total_bytes = big.gpu.total_bytes.saturating_mul(4);
    big.free_bytes_at_start = None;
    let q = plan(&big);
    (q.per_gpu.kv_cache_gib > 0.0 && q.max_concurrency > 0.0)
        .then(|| q.per_gpu.kv_cache_gib / q.max_concurrency)
}

fn replan(ctx: &PlannerCtx, change: String, cost: String, f: impl FnOnce(&mut PlanRequest)) -> Fix {
    let mut r = ctx.req.clone();
    f(&mut r);
    let p = plan(&r);
    let mut fix = Fix::new(change, p.fits, fx::PLANNER, String::new());
    fix.kv_cache_gib = Some(p.per_gpu.kv_cache_gib);
    fix.kv_cache_tokens = Some(p.kv_cache_tokens);
    fix.cost = cost;
    fx::judge_planner_fix(
        fix,
        ctx.measured_kv,
        ctx.base.per_gpu.kv_cache_gib,
        p.per_gpu.kv_cache_gib,
        one_request_gib(&r, &p),
        true,
        ctx.base.fits,
    )
}

struct PlannerCtx<'a> {
    req: &'a PlanRequest,
    base: &'a Plan,
    measured_kv: Option<f64>,
}

fn planner_fixes(req: &PlanRequest, base: &Plan, measured_kv: Option<f64>) -> Vec<Fix> {
    let ctx = PlannerCtx {
        req,
        base,
        measured_kv,
    };
    let mut out = Vec::new();
    let util_flag = inferscope_plan::engines::room(req.engine)
        .flag(inferscope_plan::engines::Knob::MemoryFraction)
        .unwrap_or("--gpu-memory-utilization");
    // Largest max-model-len (multiple of 1024) that fits.
    if let Some(len) = base.max_model_len.filter(|l| *l > 1024) {
        let fits = |l: u64| {
            let mut r = req.clone();
            r.max_model_len = Some(l);
            plan(&r).fits
        };
        let (mut lo, mut hi) = (0u64, len / 1024);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid * 1024) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if lo > 0 && lo * 1024 < len {
            let l = lo * 1024;
            out.push(replan(
                &ctx,
                format!("--max-model-len {l}"),
                format!("requests longer than {l} tokens are refused (was {len})"),
                |r| r.max_model_len = Some(l),
            ));
        }
    }
    // The smallest utilisation (up to 0.98) that fits.
    let u0 = req.gpu_memory_utilization.unwrap_or(match req.engine {
        Engine::Vllm => vllm_default_utilization(req.engine_version.as_deref()).0,
        _ => 0.9,
    });
    let mut u = ((u0 * 100.0).round() as u32 + 1).max(50);
    while u <= 98 {
        let mut r = req.clone();
        r.gpu_memory_utilization = Some(f64::from(u) / 100.0);
        if plan(&r).fits {
            let v = f64::from(u) / 100.0;
            out.push(replan(
                &ctx,
                format!("{util_flag} {v:.2}"),
                format!(
                    "{:.2} GiB less headroom per GPU for other processes",
                    (v - u0) * req.gpu.total_bytes as f64 / GIB
                ),
                |r| r.gpu_memory_utilization = Some(v),
            ));
            break;
        }
        u += 1;
    }
    if !req
        .kv_cache_dtype
        .as_deref()
        .is_some_and(|d| d.starts_with("fp8"))
    {
        out.push(replan(
            &ctx,
            "--kv-cache-dtype fp8".to_string(),
            "half the KV bytes per token; check accuracy (fast on Hopper/Ada and newer)"
                .to_string(),
            |r| r.kv_cache_dtype = Some("fp8".to_string()),
        ));
    }
    for tp in [req.tp * 2, req.tp * 4] {
        if tp <= 8 {
            out.push(replan(
                &ctx,
                format!("--tensor-parallel-size {tp}"),
                format!("{tp} GPUs instead of {}", req.tp),
                |r| {
                    r.tp = tp;
                    r.gpu.count = r.gpu.count.max(tp * r.pp);
                },
            ));
        }
    }
    if let Some(s) = req.max_num_seqs.filter(|s| *s > 1) {
        out.push(replan(
            &ctx,
            format!("--max-num-seqs {}", s / 2),
            "half the concurrent sequences".to_string(),
            |r| r.max_num_seqs = Some(s / 2),
        ));
    }
    if let Some(b) = req.max_num_batched_tokens.filter(|b| *b > 512) {
        out.push(replan(
            &ctx,
            format!("--max-num-batched-tokens {}", b / 2),
            "smaller prefill chunks: longer time to first token under load".to_string(),
            |r| r.max_num_batched_tokens = Some(b / 2),
        ));
    }
    out
}

/// The engines whose start-up logs `mem startup` reads, for its help: the shared parser's
/// (`inferscope_formats::startup_log::engines_read`), then LMDeploy's, read by its room.
pub fn engines_read() -> String {
    let shared = inferscope_formats::startup_log::engines_read();
    match shared.rsplit_once(" or ") {
        Some((first, last)) => format!("{first}, {last} or LMDeploy"),
        None => format!("{shared} or LMDeploy"),
    }
}
