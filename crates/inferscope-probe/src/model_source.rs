//! Where a model's architecture comes from: a file or folder, the Hugging Face cache, the
//! embedded catalog, or the Hub — one resolution order for `plan`, `plan --find` and
//! `mem startup` (docs/planner.md "Resolving a model"). Capture: it reads files and the network,
//! then hands the text to the pure parsers in inferscope-formats and inferscope-plan.

use crate::hub::{self, files, gguf as hub_gguf};
use anyhow::{Context, bail};
use inferscope_formats::{gguf, safetensors};
use inferscope_plan::ModelArch;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest config or header read from disk.
const MAX_META_BYTES: u64 = 100 << 20;

/// A config-sized text file (at most 100 MiB), with errors naming it.
pub fn read_bounded(path: &Path) -> anyhow::Result<String> {
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
pub fn hf_cache_dirs() -> Vec<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A real two-shard checkpoint (fixtures/hub/SOURCES.md).
    fn sharded() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/hub/inferscope-test--tiny-llama-sharded")
    }

    #[test]
    fn a_folder_gets_exact_bytes_from_every_shard_header() {
        let dir = sharded();
        let m = resolve_model(dir.to_str().unwrap(), None).unwrap();
        assert!(
            m.source
                .contains("exact bytes from 2 safetensors headers; local folder"),
            "{}",
            m.source
        );
        let mut total = 0;
        for s in [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ] {
            total += safetensors_tensors(&dir.join(s)).unwrap().total_bytes;
        }
        assert!(total > 0);
        assert_eq!(m.arch.checkpoint_bytes, Some(total));
        assert!(m.checkpoint.is_some());
    }

    #[test]
    fn a_shard_the_index_names_but_missing_is_an_error_not_a_smaller_model() {
        let src = sharded();
        let t = tempfile::tempdir().unwrap();
        for f in [
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
        ] {
            std::fs::copy(src.join(f), t.path().join(f)).unwrap();
        }
        assert!(resolve_model(t.path().to_str().unwrap(), None).is_err());
    }

    #[test]
    fn a_config_file_alone_estimates_weights() {
        let cfg = sharded().join("config.json");
        let m = resolve_model(cfg.to_str().unwrap(), None).unwrap();
        assert!(
            m.source.ends_with("(config.json: weights estimated)"),
            "{}",
            m.source
        );
        assert!(m.checkpoint.is_none());
    }

    #[test]
    fn an_unknown_name_says_it_is_not_a_file() {
        let e = resolve_model("no-such-model-xyz", None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("no-such-model-xyz is not a file or folder"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_or_huge_file_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("absent.txt");
        let e = read_bounded(&p).err().unwrap().to_string();
        assert!(e.contains("absent.txt"), "{e}");
    }

    #[test]
    fn an_even_checkpoint_sums_exactly() {
        let c = even_checkpoint(10, 3);
        let splits: Vec<u64> = c.layers.iter().map(|l| l.split).collect();
        assert_eq!(splits, vec![4, 3, 3]);
        assert_eq!(even_checkpoint(5, 0).layers.len(), 1);
    }
}
