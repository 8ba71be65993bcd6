//! `inferscope plan`: will this model and these flags fit, how many users, how fast.
//!
//! The binary's part is capture only: find the model (a local Hugging Face folder, a
//! `config.json`, a GGUF file, or a catalog id), find the GPUs (`--gpu`, `--gpu-memory-gib`, or the
//! machine / `--snapshot` / `--root`), read the pasted serving command, then hand everything to
//! the pure planner and render what it says.

// Model resolution (files, the cache, the Hub) is capture: it lives in inferscope-probe.
use inferscope_probe::model_source::{ResolvedModel, read_bounded, resolve_model};

use anyhow::bail;
use inferscope_plan::engine::{self, Engine, EngineSettings};
use inferscope_plan::find::{self, Workload};
use inferscope_plan::gguf_quant::GgufFileType;
use inferscope_plan::gpus;
use inferscope_plan::speed::engines as speed_engines;
use inferscope_plan::suggest;
use inferscope_plan::target;
use inferscope_plan::{ModelArch, PlanRequest};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `inferscope plan`.
#[derive(Debug, Default)]
pub struct PlanArgs {
    /// `--model`: local folder, config.json or GGUF file, Hugging Face cache, catalog or Hub id.
    pub model: Option<String>,
    /// `--gpu NAME`.
    pub gpu: Option<String>,
    /// `--gpu-memory-gib N`.
    pub gpu_memory_gib: Option<f64>,
    /// `--gpus N`: GPUs available (default: as many as the machine has, or the TP size).
    pub gpus: Option<u32>,
    /// `--snapshot FILE`.
    pub snapshot: Option<PathBuf>,
    /// `--root DIR`.
    pub root: Option<PathBuf>,
    /// Engine settings given as inferscope flags (override the pasted command).
    pub flags: EngineFlags,
    /// `--engine-version`.
    pub engine_version: Option<String>,
    /// `--revision`: the Hugging Face cache snapshot or Hub revision (branch, tag or commit;
    /// default `main`).
    pub revision: Option<String>,
    /// `--concurrency N`.
    pub concurrency: Option<u32>,
    /// `--find`.
    pub find: bool,
    /// `--min-tokens-per-s` (with `--find`).
    pub min_tokens_per_s: Option<f64>,
    /// `--json`.
    pub json: bool,
    /// `--input-len`: prompt tokens for the TTFT bound (default min(1024, max_model_len)).
    pub input_len: Option<u64>,
    /// `--disk-gbps`: disk read speed for the load-time bound (default 2 GB/s).
    pub disk_gbps: Option<f64>,
    /// `--engine`: whose expected speed (an engine with a fit,
    /// `inferscope_plan::speed::engines::engine_names`); default the pasted command's engine,
    /// else vllm.
    pub engine: Option<String>,
    /// `--output-len` (with `--find` and `--input-len`: the context is their sum).
    pub output_len: Option<u64>,
    /// `--top N` (with `--find`): rows shown (default 25 in the table, all in JSON).
    pub top: Option<usize>,
    /// `--prices FILE` (with `--find`): USD per GPU-hour, ranks by cost.
    pub prices: Option<PathBuf>,
    /// `--nodes`, `--gpus-per-node`, `--network`, `--slo`, `--rate` (with `--find`).
    pub cluster: ClusterFlags,
    /// Words after `--`.
    pub command: Vec<String>,
}

/// `plan --find --nodes …`: the multi-node search's flags.
#[derive(Debug, Default)]
pub struct ClusterFlags {
    /// `--nodes 1,2,4` (empty: the single-node `--find`).
    pub nodes: Vec<u32>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<u32>,
    /// `--network`.
    pub network: Option<inferscope_plan::cluster::Network>,
    /// `--slo ttft=…,tpot=…`.
    pub slo: Option<inferscope_bench::stats::Slo>,
    /// `--rate` requests/s.
    pub rate: Option<f64>,
}

/// Engine settings as inferscope flags.
#[derive(Debug, Default, Clone)]
pub struct EngineFlags {
    /// `--tp`.
    pub tp: Option<u32>,
    /// `--pp`.
    pub pp: Option<u32>,
    /// `--max-model-len`.
    pub max_model_len: Option<u64>,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// `--kv-cache-dtype`.
    pub kv_cache_dtype: Option<String>,
    /// `--quantization`.
    pub quantization: Option<String>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u32>,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `--enforce-eager`.
    pub enforce_eager: bool,
}

/// JSON of `inferscope plan --json`: the plan's own keys at the top level, plus context.
#[derive(Debug, Serialize)]
struct PlanReport<'a> {
    #[serde(flatten)]
    plan: &'a inferscope_plan::Plan,
    model_source: String,
    gpu_source: String,
    engine_settings: Option<&'a EngineSettings>,
    suggestions: Vec<suggest::Suggestion>,
    speed: inferscope_plan::plan_speed::SpeedBounds,
}

fn apply_flags(req: &mut PlanRequest, f: &EngineFlags) {
    if let Some(v) = f.tp {
        req.tp = v;
    }
    if let Some(v) = f.pp {
        req.pp = v;
    }
    if f.max_model_len.is_some() {
        req.max_model_len = f.max_model_len;
    }
    if f.gpu_memory_utilization.is_some() {
        req.gpu_memory_utilization = f.gpu_memory_utilization;
    }
    if f.kv_cache_dtype.is_some() {
        req.kv_cache_dtype = f.kv_cache_dtype.clone();
    }
    if f.quantization.is_some() {
        req.quantization = f.quantization.clone();
    }
    if f.max_num_seqs.is_some() {
        req.max_num_seqs = f.max_num_seqs;
    }
    if f.max_num_batched_tokens.is_some() {
        req.max_num_batched_tokens = f.max_num_batched_tokens;
    }
    if f.enforce_eager {
        req.enforce_eager = true;
    }
}

/// Run the command.
pub fn run(args: &PlanArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let settings = if args.command.is_empty() {
        None
    } else {
        Some(
            engine::parse_command(&args.command)
                .map_err(|e| anyhow::anyhow!("serving command: {e}"))?,
        )
    };
    // What the engine may read differently from the plan comes first, not amid the figures.
    if !args.json {
        for w in settings.iter().flat_map(|s| &s.warnings) {
            writeln!(out, "warning: {w}")?;
        }
    }
    let model_spec = args
        .model
        .clone()
        .or_else(|| settings.as_ref().and_then(|s| s.model.clone()))
        .ok_or_else(|| {
            anyhow::anyhow!("no model: pass --model ID|PATH or a serving command after `--`")
        })?;
    let speed_engine = speed_engine_of(args, settings.as_ref())?;
    let ResolvedModel {
        arch,
        source: model_source,
        checkpoint,
    } = resolve_model(&model_spec, args.revision.as_deref())?;
    // A GGUF file type (`--quantization Q4_K_M`) sizes the weights tensor by tensor, for the
    // memory planner and the speed figures alike.
    let quant_name = args
        .flags
        .quantization
        .clone()
        .or_else(|| settings.as_ref().and_then(|s| s.quantization.clone()));
    let gguf = quant_name.as_deref().and_then(GgufFileType::parse);
    let mut flags = args.flags.clone();
    let arch = match gguf {
        Some(ft) => {
            flags.quantization = None;
            inferscope_plan::gguf_quant::apply(&arch, ft).0
        }
        None => arch,
    };

    if args.find && !args.cluster.nodes.is_empty() {
        return super::plan_cluster::run(args, &arch, &model_spec, speed_engine, out);
    }
    if args.find {
        return run_find(
            args,
            settings.as_ref(),
            &arch,
            &model_spec,
            speed_engine,
            out,
        );
    }

    let (gpu, pci_ids, gpu_source) = target_gpu(args)?;

    let mut req = PlanRequest::new(arch.clone(), model_spec.clone(), gpu.clone());
    req.checkpoint = checkpoint;
    if let Some(s) = &settings {
        req.apply_engine(s);
    }
    apply_flags(&mut req, &flags);
    if settings.is_none() {
        // --engine without a pasted command: the memory accounting is that engine's, or none
        req.engine = speed_engine;
    }
    if let Err(x) = inferscope_plan::engines::room(req.engine).memory() {
        bail!("{x}: no plan is made for it (--find ranks on its speed)");
    }
    if gguf.is_some() {
        // the file type already sized the weights (gguf_quant::apply)
        req.quantization = None;
    }
    req.engine_version = args.engine_version.clone();
    // A flag the asked-for release does not have is that release's error, not a plan.
    if let Some(why) = settings
        .as_ref()
        .and_then(|s| engine::refused_by_release(s, req.engine_version.as_deref()))
    {
        bail!("serving command: {why}");
    }
    req.concurrency = args.concurrency;
    req.use_catalog_gpu(gpus::lookup(&gpu.name).ok());
    if req.tp.saturating_mul(req.pp) > gpu.count {
        bail!(
            "tensor-parallel {} × pipeline-parallel {} needs {} GPUs; {} has {}",
            req.tp,
            req.pp,
            req.tp.saturating_mul(req.pp),
            gpu_source,
            gpu.count
        );
    }
    // a layer type the engine's accounting does not cover is an input error, not a plan
    if let Some(why) =
        inferscope_plan::engines::refusal(&req.arch, req.engine, req.engine_version.as_deref())
    {
        bail!("{model_source}: {why}");
    }
    let mut p = inferscope_plan::plan(&req);
    p.gpus = pci_ids
        .into_iter()
        .take((req.tp * req.pp) as usize)
        .collect();
    let suggestions = target::suggestions_for(&req, &gpu);
    let asked = inferscope_plan::plan_speed::Asked {
        concurrency: args.concurrency,
        input_len: args.input_len,
        disk_gbps: args.disk_gbps,
    };
    let speed =
        inferscope_plan::plan_speed::speed_of(&asked, &arch, &req, &p, &gpu, speed_engine, gguf);
    if args.json {
        let report = PlanReport {
            plan: &p,
            model_source,
            gpu_source,
            engine_settings: settings.as_ref(),
            suggestions,
            speed,
        };
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&report))?;
        writeln!(out)?;
    } else {
        crate::render::plan::write_plan(
            &p,
            &model_source,
            &gpu_source,
            settings.as_ref(),
            &suggestions,
            &speed,
            out,
        )?;
    }
    Ok(if p.fits && p.meets_concurrency != Some(false) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The engine the speed figures model: --engine, else the pasted command's, else vLLM.
fn speed_engine_of(args: &PlanArgs, settings: Option<&EngineSettings>) -> anyhow::Result<Engine> {
    Ok(match (&args.engine, settings) {
        // an engine with a speed model, or one whose room sizes memory (LMDeploy)
        (Some(e), _) => speed_engines::parse(e)
            .or_else(|| {
                Engine::parse(e).filter(|e| inferscope_plan::engines::room(*e).memory().is_ok())
            })
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--engine {e}: unknown engine (one of {})",
                    speed_engines::engine_names().join(", ")
                )
            })?,
        (None, Some(s)) => s.engine,
        (None, None) => Engine::Vllm,
    })
}

/// The catalog `--find` searches: `--gpu NAME` or `--gpu-memory-gib N` narrows it to one GPU.
fn find_catalog(args: &PlanArgs) -> anyhow::Result<Vec<gpus::GpuSpec>> {
    Ok(match (&args.gpu, args.gpu_memory_gib) {
        (Some(name), _) => vec![gpus::lookup(name).map_err(anyhow::Error::msg)?.clone()],
        (None, Some(gib)) => vec![gpus::custom(gib).map_err(anyhow::Error::msg)?],
        (None, None) => gpus::all().map_err(anyhow::Error::msg)?.to_vec(),
    })
}

/// `--prices FILE`, read and checked (a bad line is exit 2 naming the file and line).
fn load_prices(path: &Path) -> anyhow::Result<inferscope_plan::prices::Prices> {
    let text = read_bounded(path)?;
    inferscope_plan::prices::parse(&text).map_err(|e| {
        if e.line == 0 {
            anyhow::anyhow!("{}: {}", path.display(), e.message)
        } else {
            anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.message)
        }
    })
}

/// `plan --find`: the catalog GPUs that serve the workload; exit 1 when none does.
fn run_find(
    args: &PlanArgs,
    settings: Option<&EngineSettings>,
    arch: &ModelArch,
    model_spec: &str,
    speed_engine: Engine,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let (max_model_len, context_basis, defaulted) = inferscope_plan::find_context::find_context(
        args.flags.max_model_len,
        settings,
        args.input_len,
        args.output_len,
        arch,
    )
    .map_err(anyhow::Error::msg)?;
    if args.top == Some(0) {
        bail!("--top 0: expected at least 1 row");
    }
    if args.gpus == Some(0) {
        bail!("--gpus 0: expected at least 1 GPU");
    }
    let prices = args.prices.as_deref().map(load_prices).transpose()?;
    let w = Workload {
        max_model_len,
        concurrency: args.concurrency.unwrap_or(1),
        min_tokens_per_s_per_sequence: args.min_tokens_per_s,
        engine: speed_engine,
        max_gpus: args.gpus,
        context_basis,
    };
    let catalog = find_catalog(args)?;
    let mut r = find::find(arch, model_spec, &w, &catalog, prices.as_ref());
    // With the full context by default, what the common 8k workload would need, beside it.
    const SHORT: u64 = 8192;
    let at_8k = (defaulted && max_model_len > SHORT).then(|| {
        let w8 = Workload {
            max_model_len: SHORT,
            context_basis: String::new(),
            ..w.clone()
        };
        find::find(arch, model_spec, &w8, &catalog, prices.as_ref())
            .candidates
            .into_iter()
            .next()
    });
    let shown = args.top.unwrap_or(if args.json { usize::MAX } else { 25 });
    r.candidates.truncate(shown);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&r))?;
        writeln!(out)?;
    } else {
        crate::render::plan::write_find(model_spec, &w, &r, at_8k.as_ref(), out)?;
    }
    Ok(if r.candidates_total == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The GPU to plan for (--gpu, --gpu-memory-gib, else the snapshot or this machine), its PCI
/// ids when captured, and where it came from.
fn target_gpu(
    args: &PlanArgs,
) -> anyhow::Result<(
    inferscope_plan::plan::GpuSpec,
    Vec<inferscope_host::PciBusId>,
    String,
)> {
    Ok(match (&args.gpu, args.gpu_memory_gib) {
        (Some(name), _) => {
            let g = gpus::lookup(name).map_err(anyhow::Error::msg)?;
            (
                inferscope_plan::plan::GpuSpec::from_catalog(g, args.gpus.unwrap_or(8)),
                Vec::new(),
                format!(
                    "{} (catalog; torch-visible {:.2} GiB, {})",
                    g.name, g.torch_total_gib, g.torch_total_basis
                ),
            )
        }
        (None, Some(gib)) => {
            let g = gpus::custom(gib).map_err(anyhow::Error::msg)?;
            (
                inferscope_plan::plan::GpuSpec::from_catalog(&g, args.gpus.unwrap_or(8)),
                Vec::new(),
                format!("--gpu-memory-gib {gib} (bandwidth and TFLOPS unknown)"),
            )
        }
        (None, None) => {
            let snap = match (&args.snapshot, &args.root) {
                (Some(f), _) => crate::load::snapshot_file(f)?,
                (None, Some(r)) => super::capture_root(r)?,
                (None, None) => super::capture_root(Path::new("/"))?,
            };
            let t = target::from_snapshot(&snap).map_err(anyhow::Error::msg)?;
            let (mut g, ids, how) = (t.spec, t.pci_ids, t.source);
            if let Some(n) = args.gpus {
                g.count = n;
            }
            (g, ids, how)
        }
    })
}
