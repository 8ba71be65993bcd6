//! `inferscope plan`: will this model and these flags fit, how many users, how fast.
//!
//! The binary's part is capture only: find the model (a local Hugging Face folder, a
//! `config.json`, a GGUF file, or a catalog id), find the GPUs (`--gpu`, `--gpu-memory-gib`, or the
//! machine / `--snapshot` / `--root`), read the pasted serving command, then hand everything to
//! the pure planner and render what it says.

// The Hub client and the untrusting file reads are capture: they live in inferscope-probe.
use inferscope_probe::hub::{self, files, gguf as hub_gguf};

use anyhow::{Context, bail};
use inferscope_formats::{gguf, safetensors};
use inferscope_host::{GpuVendor, Snapshot};
use inferscope_plan::engine::{self, Engine, EngineSettings};
use inferscope_plan::find::{self, Workload};
use inferscope_plan::gguf_quant::GgufFileType;
use inferscope_plan::gpus;
use inferscope_plan::memory::GIB;
use inferscope_plan::speed::engines as speed_engines;
use inferscope_plan::suggest;
use inferscope_plan::{ModelArch, PlanRequest};
use serde::Serialize;
use std::io::{Read, Write};
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
    /// `--engine`: whose expected speed (vllm, sglang, tgi, trtllm, llama.cpp, mlc); default the
    /// pasted command's engine, else vllm.
    pub engine: Option<String>,
    /// `--output-len` (with `--find` and `--input-len`: the context is their sum).
    pub output_len: Option<u64>,
    /// `--top N` (with `--find`): rows shown (default 25 in the table, all in JSON).
    pub top: Option<usize>,
    /// `--prices FILE` (with `--find`): USD per GPU-hour, ranks by cost.
    pub prices: Option<PathBuf>,
    /// Words after `--`.
    pub command: Vec<String>,
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

/// Largest config or header read from disk.
const MAX_META_BYTES: u64 = 100 << 20;

fn read_bounded(path: &Path) -> anyhow::Result<String> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut s = String::new();
    f.take(MAX_META_BYTES + 1)
        .read_to_string(&mut s)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if s.len() as u64 > MAX_META_BYTES {
        bail!("{}: larger than 100 MiB; not a config file", path.display());
    }
    Ok(s)
}

/// Tensors of a safetensors file from its header (tensor data is never read).
fn safetensors_tensors(path: &Path) -> anyhow::Result<safetensors::SafetensorsHeader> {
    let mut f = files::open_regular(path)?;
    let len = f.metadata()?.len();
    let mut first8 = [0u8; 8];
    f.read_exact(&mut first8)
        .with_context(|| format!("{}: shorter than a safetensors header", path.display()))?;
    let header_len =
        safetensors::header_len(&first8).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut buf = first8.to_vec();
    (&mut f)
        .take(header_len)
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?;
    safetensors::parse_header(&buf, len).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A model resolved from a folder, the Hugging Face cache or the catalog.
pub struct ResolvedModel {
    /// Architecture.
    pub arch: ModelArch,
    /// Where it came from, for output.
    pub source: String,
    /// Exact tensor bytes when a local checkpoint has safetensors files.
    pub checkpoint: Option<inferscope_plan::checkpoint::CheckpointWeights>,
}

/// Hugging Face hub cache folders, in the order `huggingface_hub` uses them: `HF_HUB_CACHE`,
/// `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`, `~/.cache/huggingface/hub`.
fn hf_cache_dirs() -> Vec<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = env("HF_HUB_CACHE") {
        return vec![d];
    }
    if let Some(d) = env("HF_HOME") {
        return vec![d.join("hub")];
    }
    if let Some(d) = env("XDG_CACHE_HOME") {
        return vec![d.join("huggingface").join("hub")];
    }
    env("HOME")
        .map(|h| vec![h.join(".cache").join("huggingface").join("hub")])
        .unwrap_or_default()
}

/// `ORG/NAME` in the hub cache: `models--ORG--NAME/snapshots/<refs/REVISION>`, or a snapshot
/// named by a commit given as `--revision`. Returns the folder and where it looked.
/// A ref file that exists but holds no safe commit (`../../x`, a FIFO) is an error.
type Found = (Option<PathBuf>, Vec<String>);
fn hf_snapshot(spec: &str, revision: Option<&str>) -> anyhow::Result<Found> {
    let mut looked = Vec::new();
    let Some((org, name)) = spec.split_once('/') else {
        return Ok((None, looked));
    };
    if org.is_empty() || name.is_empty() || name.contains('/') || org.starts_with('.') {
        return Ok((None, looked));
    }
    let rev = revision.unwrap_or("main");
    if !files::revision_ok(rev) {
        bail!(
            "--revision {:?}: not a commit hash or a ref name (letters, digits, . _ -)",
            inferscope_host::quote::clip(rev)
        );
    }
    for cache in hf_cache_dirs() {
        let repo = cache.join(format!("models--{org}--{name}"));
        let ref_file = repo.join("refs").join(rev);
        let commit = if std::fs::symlink_metadata(&ref_file).is_ok() {
            files::read_ref(&ref_file)?
        } else {
            rev.to_string()
        };
        let snap = repo.join("snapshots").join(commit);
        looked.push(snap.display().to_string());
        if snap.join("config.json").is_file() {
            return Ok((Some(snap), looked));
        }
    }
    Ok((None, looked))
}

/// A model from a path, the Hugging Face cache, the catalog or the Hub — one order for `plan`,
/// `plan --find` and `mem startup` (docs/planner.md "Resolving a model"):
/// 1. a file or folder that exists; 2. the Hugging Face cache (`refs/REV` → `snapshots/COMMIT`);
/// 3. the embedded catalog, unless `--revision` asks for a Hub revision; 4. the Hub (`HF_ENDPOINT`),
///    unless `HF_HUB_OFFLINE` is set — what it fetched is stored in the cache, so step 2 finds
///    it next time.
pub fn resolve_model(spec: &str, revision: Option<&str>) -> anyhow::Result<ResolvedModel> {
    resolve_model_with(spec, revision, true)
}

/// [`resolve_model`], asking the Hub (step 4) only when `hub` is true: `mem startup` does not
/// ask it for a repo id it merely guessed from a path.
pub fn resolve_model_with(
    spec: &str,
    revision: Option<&str>,
    hub: bool,
) -> anyhow::Result<ResolvedModel> {
    let path = Path::new(spec);
    if !path.exists()
        && let Some((repo, file)) = hub_gguf::spec(spec)
    {
        return resolve_hub_gguf(repo, file, revision, hub);
    }
    let (mut snapshot, looked) = if path.exists() {
        (None, Vec::new())
    } else {
        hf_snapshot(spec, revision)?
    };
    let mut hub_note = None;
    let mut offline = false;
    if hub && snapshot.is_none() && !path.exists() && hub::is_repo_id(spec) {
        // The catalog's entries are checked against real start-ups and need no network; a
        // revision is a Hub notion the catalog cannot answer.
        let catalog_hit = revision.is_none() && inferscope_plan::catalog::lookup(spec).is_ok();
        let env = hub::HubEnv::from_env();
        offline = env.offline;
        if !catalog_hit && !env.offline {
            let cache = hf_cache_dirs().into_iter().next().ok_or_else(|| {
                anyhow::anyhow!("{spec}: no Hugging Face cache folder: set HF_HUB_CACHE or HF_HOME")
            })?;
            let (snap, note) = fetch_from_hub(spec, revision, &cache, &env, &looked)?;
            snapshot = Some(snap);
            hub_note = Some(note);
        }
    }
    let from_cache = snapshot.is_some();
    let path = snapshot.as_deref().unwrap_or(path);
    if path.is_dir() {
        return resolve_folder(path, hub_note.as_deref(), from_cache);
    }
    if path.is_file() {
        let mut f = std::fs::File::open(path)?;
        let mut magic = [0u8; 4];
        let is_gguf = f.read_exact(&mut magic).is_ok() && &magic == b"GGUF";
        if is_gguf {
            let len = std::fs::metadata(path)?.len();
            let mut r = std::io::BufReader::new(std::fs::File::open(path)?);
            let h = gguf::parse_header(&mut r, len)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let arch = inferscope_plan::gguf_arch::from_gguf(&h)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let checkpoint = Some(inferscope_plan::gguf_arch::checkpoint(&h, arch.num_layers));
            return Ok(ResolvedModel {
                arch,
                source: format!("{} (GGUF: exact tensor bytes)", path.display()),
                checkpoint,
            });
        }
        let text = read_bounded(path)?;
        let arch = inferscope_plan::from_hf_config(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        return Ok(ResolvedModel {
            arch,
            source: format!("{} (config.json: weights estimated)", path.display()),
            checkpoint: None,
        });
    }
    match inferscope_plan::catalog::lookup(spec) {
        Ok(arch) => Ok(ResolvedModel {
            arch,
            source: format!(
                "{spec} (embedded catalog{})",
                if looked.is_empty() {
                    String::new()
                } else {
                    "; not in the Hugging Face cache".to_string()
                }
            ),
            checkpoint: None,
        }),
        Err(e) => {
            let mut msg = format!("{e}");
            if offline {
                msg.push_str("; HF_HUB_OFFLINE is set, so the Hub was not asked");
            }
            if looked.is_empty() {
                msg.push_str(&format!("; {spec} is not a file or folder"));
            } else {
                msg.push_str(&format!(
                    "; looked in the Hugging Face cache at {} (revision {}; set HF_HUB_CACHE or HF_HOME, or pass a folder)",
                    looked.join(", "),
                    revision.unwrap_or("main")
                ));
            }
            bail!(msg)
        }
    }
}

/// Step 4: fetch `spec` from the Hub into `cache`. Errors before the repo answered say the
/// model is unknown and where it was looked for; a gated repo is the one line.
fn fetch_from_hub(
    spec: &str,
    revision: Option<&str>,
    cache: &Path,
    env: &hub::HubEnv,
    looked: &[String],
) -> anyhow::Result<(PathBuf, String)> {
    let rev = revision.unwrap_or("main");
    hub::fetch(spec, rev, cache, env).map_err(|e| {
        let reached = e.downcast_ref::<hub::Reached>().is_some();
        // an HF_ENDPOINT with user:password in it is shown redacted
        let e = inferscope_host::redact::scrub(&e.to_string()).into_owned();
        if reached || e.contains(" is gated") {
            // the one line the issue spells out, nothing appended
            anyhow::anyhow!(e)
        } else {
            anyhow::anyhow!(
                "unknown model {spec}: not in the embedded catalog, nor in the Hugging Face cache at {} (revision {rev}); the Hub: {e}",
                looked.join(", ")
            )
        }
    })
}

/// A model folder (or cache snapshot): config.json, and exact weights from the safetensors
/// headers of the shards — or of the Hub client's sidecar, or the index's total_size.
fn resolve_folder(
    path: &Path,
    hub_note: Option<&str>,
    from_cache: bool,
) -> anyhow::Result<ResolvedModel> {
    let cfg = path.join("config.json");
    let text = files::read_regular(&cfg, MAX_META_BYTES, "a config file")?;
    let mut arch = inferscope_plan::from_hf_config(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", cfg.display()))?;
    // The index, when there is one, says which files make the checkpoint: a shard it names
    // that is missing is a partial download, never a smaller model — unless the Hub client
    // stored the shards' headers beside it (`.inferscope/`).
    let side = hub::read_sidecar(path)?;
    let mut shards: Vec<PathBuf> = match (files::indexed_shards(path, MAX_META_BYTES), &side) {
        (Ok(Some(listed)), _) => listed,
        (Ok(None), _) => std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect(),
        (Err(_), Some(_)) => Vec::new(),
        (Err(e), None) => return Err(e),
    };
    shards.sort();
    let mut headers = Vec::new();
    for s in &shards {
        headers.push(safetensors_tensors(s)?);
    }
    let mut weights_note = None;
    if shards.is_empty()
        && let Some(sw) = side
    {
        match sw.fallback {
            Some((total, why)) => weights_note = Some((total, why)),
            None => headers = sw.headers,
        }
    }
    let mut checkpoint = None;
    if !headers.is_empty() {
        let mut total = 0u64;
        let mut tensors = Vec::new();
        for h in &headers {
            total = total.saturating_add(h.total_bytes);
            tensors.extend(
                h.tensors
                    .iter()
                    .map(|t| inferscope_plan::checkpoint::TensorInfo {
                        name: t.name.clone(),
                        bytes: t.bytes,
                    }),
            );
        }
        arch.checkpoint_bytes = Some(total);
        checkpoint = Some(inferscope_plan::checkpoint::summarize(
            &tensors,
            arch.num_layers,
        ));
    } else if let Some((total, _)) = &weights_note {
        // No header: the index's total, spread over the layers so TP and PP split it.
        arch.checkpoint_bytes = Some(*total);
        checkpoint = Some(even_checkpoint(*total, arch.num_layers));
    }
    let weights = match (&weights_note, headers.len()) {
        (Some((total, why)), _) => {
            format!("{why}: weights from the index's total_size, {total} bytes, split evenly")
        }
        (None, 0) => "no safetensors files: weights estimated from the config".to_string(),
        (None, n) => format!("weights: exact bytes from {n} safetensors headers"),
    };
    let source = format!(
        "{} ({weights}; {})",
        cfg.display(),
        match (hub_note, from_cache) {
            (Some(n), _) => n,
            (None, true) => "Hugging Face cache",
            (None, false) => "local folder",
        }
    );
    Ok(ResolvedModel {
        arch,
        source,
        checkpoint,
    })
}

/// `ORG/NAME/FILE.gguf`: the file (or the header stored by an earlier fetch) in the Hugging Face
/// cache, else its header from the Hub.
fn resolve_hub_gguf(
    repo: &str,
    file: &str,
    revision: Option<&str>,
    hub: bool,
) -> anyhow::Result<ResolvedModel> {
    let rev = revision.unwrap_or("main");
    if !files::revision_ok(rev) {
        bail!(
            "--revision {:?}: not a commit hash or a ref name",
            inferscope_host::quote::clip(rev)
        );
    }
    let mut looked = Vec::new();
    let mut found = None;
    for cache in hf_cache_dirs() {
        let dir = cache.join(format!("models--{}", repo.replace('/', "--")));
        let ref_file = dir.join("refs").join(rev);
        let commit = if std::fs::symlink_metadata(&ref_file).is_ok() {
            files::read_ref(&ref_file)?
        } else {
            rev.to_string()
        };
        let snap = dir.join("snapshots").join(commit);
        looked.push(snap.join(file).display().to_string());
        if let Some(f) = hub_gguf::from_snapshot(&snap, file)? {
            found = Some((f, "Hugging Face cache".to_string()));
            break;
        }
    }
    let env = hub::HubEnv::from_env();
    let (f, note) = match found {
        Some(x) => x,
        None if hub && !env.offline => {
            let cache = hf_cache_dirs().into_iter().next().ok_or_else(|| {
                anyhow::anyhow!("{repo}: no Hugging Face cache folder: set HF_HUB_CACHE or HF_HOME")
            })?;
            hub_gguf::fetch(repo, file, rev, &cache, &env).map_err(|e| {
                anyhow::anyhow!(inferscope_host::redact::scrub(&e.to_string()).into_owned())
            })?
        }
        None => bail!(
            "unknown model {repo}/{file}: not in the Hugging Face cache at {}{}",
            looked.join(", "),
            if env.offline {
                "; HF_HUB_OFFLINE is set, so the Hub was not asked"
            } else {
                ""
            }
        ),
    };
    let at = f.snapshot.join(file);
    let arch = inferscope_plan::gguf_arch::from_gguf(&f.header)
        .map_err(|e| anyhow::anyhow!("{}: {e}", at.display()))?;
    let checkpoint = Some(inferscope_plan::gguf_arch::checkpoint(
        &f.header,
        arch.num_layers,
    ));
    Ok(ResolvedModel {
        arch,
        source: format!("{} (GGUF: exact tensor bytes; {note})", at.display()),
        checkpoint,
    })
}

/// A checkpoint of `total` bytes known only by its size: even per layer, all split by TP.
fn even_checkpoint(total: u64, layers: u32) -> inferscope_plan::checkpoint::CheckpointWeights {
    let n = u64::from(layers.max(1));
    let mut c = inferscope_plan::checkpoint::CheckpointWeights {
        layers: vec![Default::default(); n as usize],
        tensors: 1,
        ..Default::default()
    };
    for (i, l) in c.layers.iter_mut().enumerate() {
        // the remainder goes to the first layers so the sum is exact
        l.split = total / n + u64::from((i as u64) < total % n);
    }
    c
}

/// GPUs from the machine or a snapshot: the most common NVIDIA model, its count, and the
/// torch-visible total (NVML's total minus its reservation when known, else the catalog's).
fn gpus_from_snapshot(
    s: &Snapshot,
) -> anyhow::Result<(
    inferscope_plan::plan::GpuSpec,
    Vec<inferscope_host::PciBusId>,
    String,
)> {
    let all_nvidia = s
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .count();
    // The most common model (by driver name, else PCI device id); ties go to the first seen.
    let model_of = |g: &&inferscope_host::Gpu| {
        g.details
            .known()
            .and_then(|d| d.name.known().cloned())
            .unwrap_or_else(|| g.device_id.to_string())
    };
    let mut groups: Vec<(String, Vec<&inferscope_host::Gpu>)> = Vec::new();
    for g in s.gpus.iter().filter(|g| g.vendor == GpuVendor::Nvidia) {
        let m = model_of(&g);
        match groups.iter_mut().find(|(k, _)| *k == m) {
            Some((_, v)) => v.push(g),
            None => groups.push((m, vec![g])),
        }
    }
    let nvidia = groups.into_iter().fold(
        Vec::new(),
        |best, (_, v)| if v.len() > best.len() { v } else { best },
    );
    let Some(first) = nvidia.first() else {
        bail!(
            "no NVIDIA GPU in {}: pass --gpu NAME (e.g. h100-sxm, l40s, rtx-4090) or --gpu-memory-gib N",
            s.source.root
        );
    };
    let by_id = first
        .device_id
        .known()
        .and_then(|id| gpus::by_pci_device_id(id.0));
    let by_name = first
        .details
        .known()
        .and_then(|d| d.name.known())
        .and_then(|n| gpus::lookup(n).ok());
    let spec = by_name.or(by_id);
    // Only when the reservation is known: NVML's total alone overstates what torch sees.
    let nvml_total = first
        .details
        .known()
        .and_then(|d| d.memory.known())
        .and_then(|m| {
            m.reserved_bytes
                .known()
                .map(|r| m.total_bytes.saturating_sub(*r))
        });
    let (name, total, how) = match (spec, nvml_total) {
        (Some(g), Some(t)) => (g.name.clone(), t, "NVML total minus driver reservation"),
        (Some(g), None) => (
            g.name.clone(),
            (g.torch_total_gib * GIB) as u64,
            "catalog torch-visible total (NVML's memory or reservation unknown)",
        ),
        (None, Some(t)) => (
            format!("GPU {}", first.pci_bus_id),
            t,
            "NVML total minus driver reservation",
        ),
        (None, None) => bail!(
            "GPU {} (device id {}) is not in the GPU catalog and its memory is unknown without NVML: pass --gpu NAME or --gpu-memory-gib N",
            first.pci_bus_id,
            first.device_id
        ),
    };
    let ids = nvidia.iter().map(|g| g.pci_bus_id).collect();
    Ok((
        inferscope_plan::plan::GpuSpec {
            name: name.clone(),
            total_bytes: total,
            count: nvidia.len() as u32,
        },
        ids,
        format!(
            "{name} ×{} from {} ({how}){}",
            nvidia.len(),
            s.source.root,
            if all_nvidia > nvidia.len() {
                format!(
                    "; {} other NVIDIA GPUs of other models not used",
                    all_nvidia - nvidia.len()
                )
            } else {
                String::new()
            }
        ),
    ))
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
    speed: crate::render::plan::SpeedBounds,
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
        inferscope_plan::hybrid::unmodelled(&req.arch, req.engine, req.engine_version.as_deref())
    {
        bail!("{model_source}: {why}");
    }
    let mut p = inferscope_plan::plan(&req);
    p.gpus = pci_ids
        .into_iter()
        .take((req.tp * req.pp) as usize)
        .collect();
    let suggestions = suggestions_for(&req, &gpu);
    let speed = speed_of(args, &arch, &req, &p, &gpu, speed_engine, gguf);
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
        (Some(e), _) => speed_engines::parse(e).ok_or_else(|| {
            anyhow::anyhow!(
                "--engine {e}: unknown engine (one of {})",
                speed_engines::engine_names().join(", ")
            )
        })?,
        (None, Some(s)) => s.engine,
        (None, None) => Engine::Vllm,
    })
}

/// The context `--find` plans every request for, and why: `--max-model-len`, the pasted
/// command's, `--input-len` + `--output-len`, else the model's full context (what the engines
/// reserve when no length is given; said first in the output, with the answer at 8k beside it).
fn find_context(
    args: &PlanArgs,
    settings: Option<&EngineSettings>,
    arch: &ModelArch,
) -> anyhow::Result<(u64, String, bool)> {
    if let Some(l) = args.flags.max_model_len {
        return Ok((l, "--max-model-len".into(), false));
    }
    if let Some(l) = settings.and_then(|s| s.max_model_len) {
        return Ok((l, "the serving command's context flag".into(), false));
    }
    match (args.input_len, args.output_len) {
        (Some(i), Some(o)) => Ok((
            i.saturating_add(o),
            format!("--input-len {i} + --output-len {o}"),
            false,
        )),
        (Some(_), None) | (None, Some(_)) => bail!(
            "--find needs both --input-len and --output-len to size the context (or --max-model-len)"
        ),
        (None, None) => Ok((
            arch.max_position_embeddings,
            format!(
                "the model's full context ({} tokens, max_position_embeddings) — what vLLM reserves when --max-model-len is not given; pass --max-model-len N or --input-len/--output-len for your requests",
                arch.max_position_embeddings
            ),
            true,
        )),
    }
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
    let (max_model_len, context_basis, defaulted) = find_context(args, settings, arch)?;
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
            let (mut g, ids, how) = gpus_from_snapshot(&snap)?;
            if let Some(n) = args.gpus {
                g.count = n;
            }
            (g, ids, how)
        }
    })
}

/// What to change: the planner's suggestions, with other GPU types cut to the three best.
fn suggestions_for(
    req: &PlanRequest,
    gpu: &inferscope_plan::plan::GpuSpec,
) -> Vec<suggest::Suggestion> {
    let others: Vec<inferscope_plan::plan::GpuSpec> = gpus::all()
        .map(|all| {
            all.iter()
                .filter(|g| g.torch_total_gib * GIB > gpu.total_bytes as f64)
                .map(|g| inferscope_plan::plan::GpuSpec::from_catalog(g, gpu.count))
                .collect()
        })
        .unwrap_or_default();
    // Other GPU types: keep the three best (those that meet the target first), not the catalog.
    let mut suggestions = suggest::suggest(req, &others);
    let (mut other_gpus, mut rest): (Vec<_>, Vec<_>) = suggestions
        .drain(..)
        .partition(|s| s.kind == suggest::ChangeKind::OtherGpu);
    other_gpus.sort_by(|a, b| {
        b.meets_target.cmp(&a.meets_target).then(if a.meets_target {
            std::cmp::Ordering::Equal
        } else {
            b.max_concurrency.total_cmp(&a.max_concurrency)
        })
    });
    rest.extend(other_gpus.into_iter().take(3));
    rest
}

/// The speed bounds, at the concurrency the KV cache can actually hold.
fn speed_of(
    args: &PlanArgs,
    arch: &ModelArch,
    req: &PlanRequest,
    p: &inferscope_plan::Plan,
    gpu: &inferscope_plan::plan::GpuSpec,
    speed_engine: Engine,
    gguf: Option<GgufFileType>,
) -> crate::render::plan::SpeedBounds {
    let running = args
        .concurrency
        .unwrap_or(1)
        .min(p.max_concurrency.floor().max(1.0) as u32)
        .max(1);
    let prompt = args
        .input_len
        .unwrap_or_else(|| p.max_model_len.unwrap_or(1024).min(1024));
    let disk = args.disk_gbps.unwrap_or(2.0);
    // the weights' effective quantization (a --quantization flag over the checkpoint's own)
    let speed_arch = match req
        .quantization
        .as_deref()
        .and_then(inferscope_plan::arch::Quantization::from_method)
    {
        Some(q) if arch.quantization.is_none() => ModelArch {
            quantization: Some(q),
            ..arch.clone()
        },
        _ => arch.clone(),
    };
    match gpus::lookup(&gpu.name) {
        Ok(spec) => crate::render::plan::speed_bounds(
            &speed_arch,
            p,
            &crate::render::plan::SpeedSetup {
                gpu: spec,
                gpus: if speed_engines::splits_layers(speed_engine) {
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
        Err(e) => crate::render::plan::SpeedBounds {
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
