//! Model metadata from the Hugging Face Hub, fetched the way `huggingface_hub` (and so vLLM)
//! resolves a repo id, into the standard cache so the next run needs no network (issue 29).
//!
//! What is fetched: `config.json`, `generation_config.json` (where present), the safetensors
//! index `model.safetensors.index.json` (else the single `model.safetensors`), and each shard's
//! safetensors header by HTTP Range request — never the weights. URLs are the Hub's own: `{HF_ENDPOINT}/{repo}/resolve/{revision}/{file}`; the commit
//! comes from the `X-Repo-Commit` header (else `/api/models/{repo}/revision/{rev}`). Redirects to
//! another host (the Hub's file storage) are followed without the token.
//!
//! Stored: `models--ORG--NAME/refs/REV` (the commit) and `snapshots/COMMIT/{config.json,
//! generation_config.json, model.safetensors.index.json}` as `huggingface_hub` lays them out; the shard headers go to
//! `snapshots/COMMIT/.inferscope/` (`hub.json` + one `SHARD.header` each) because a truncated
//! `*.safetensors` there would look like a corrupt download to vLLM.
//!
//! Bounded: connect and read timeouts, metadata files and headers capped like local files, at
//! most shards + 3 requests (config, then the commit look-up when its header lacks the commit or
//! else generation_config.json, index, one
//! Range request per shard whose header fits in [`FIRST_RANGE`]; each may take up to
//! [`MAX_REDIRECTS`] redirect hops).

pub mod files;
pub mod gguf;
mod session;
mod sidecar;

use anyhow::{Context, bail};
use inferscope_formats::safetensors;
pub use session::Reached;
use session::{Session, commit_of, fail, reason, session};
use sidecar::write_atomic;
pub use sidecar::{SIDECAR, ShardHeader, Sidecar, SidecarWeights, plain_file_name, read_sidecar};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes asked for first from each shard: the 8-byte length and, for nearly every checkpoint,
/// the whole header (a 1,000-tensor shard's header is about 100 KiB).
pub const FIRST_RANGE: u64 = 256 << 10;
/// Largest metadata file accepted (the same cap as a local config or index).
pub const MAX_META_BYTES: u64 = 100 << 20;
/// Time to establish a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for any read on a connection.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed per file (the Hub uses one: to its file storage, or a renamed repo).
pub const MAX_REDIRECTS: usize = 5;

/// Where and how to reach the Hub, from the environment `huggingface_hub` reads.
#[derive(Debug, Clone, Default)]
pub struct HubEnv {
    /// `HF_ENDPOINT`, default `https://huggingface.co`.
    pub endpoint: String,
    /// `HF_TOKEN`, else the token file (`HF_TOKEN_PATH`, `$HF_HOME/token`,
    /// `~/.cache/huggingface/token`).
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE` set to 1/ON/YES/TRUE: never touch the network.
    pub offline: bool,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

impl HubEnv {
    /// Read the environment.
    pub fn from_env() -> HubEnv {
        let endpoint = var("HF_ENDPOINT")
            .unwrap_or_else(|| "https://huggingface.co".into())
            .trim_end_matches('/')
            .to_string();
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_uppercase().as_str(),
                "1" | "ON" | "YES" | "TRUE"
            )
        });
        let token = var("HF_TOKEN").map(|t| t.trim().to_string()).or_else(|| {
            let file = var("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
                var("HF_HOME")
                    .map(|h| PathBuf::from(h).join("token"))
                    .or_else(|| {
                        var("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/token"))
                    })
            })?;
            // The file `hf auth login` writes: one line. A missing or odd file is no token.
            let text = files::read_regular(&file, 4096, "a token file").ok()?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        });
        HubEnv {
            endpoint,
            token,
            offline,
        }
    }
}

/// True for what the Hub accepts as `ORG/NAME`: two parts of letters, digits, `-`, `_`, `.`,
/// neither starting with `.` nor holding `..`.
pub fn is_repo_id(spec: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && !p.starts_with('.')
            && !p.contains("..")
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    matches!(spec.split_once('/'), Some((o, n)) if ok(o) && ok(n))
}

/// Fetch `repo` at `revision` into the hub cache `cache`; returns the snapshot folder and a note
/// for the output. Every failure is one line naming the repo, the file and the URL.
pub fn fetch(
    repo: &str,
    revision: &str,
    cache: &Path,
    env: &HubEnv,
) -> anyhow::Result<(PathBuf, String)> {
    let mut s = session(env, repo)?;
    let r = fetch_in(&mut s, revision, cache);
    if std::env::var_os("INFERSCOPE_HUB_REQUESTS").is_some() {
        // Tests count the requests: the bound is part of the contract.
        // A closed stderr is not a panic (std's eprintln! would be).
        let _ = writeln!(
            std::io::stderr(),
            "inferscope: hub requests: {}",
            s.requests
        );
    }
    // Once config.json came back the repo exists: what fails after is about its files.
    r.map_err(|e| {
        if s.reached {
            Reached(e.to_string()).into()
        } else {
            e
        }
    })
}

/// A small file, or `None` on 404 (entry not found). Also returns `X-Repo-Commit`.
fn small(
    s: &mut Session,
    revision: &str,
    file: &str,
    optional: bool,
) -> anyhow::Result<Option<(Vec<u8>, Option<String>)>> {
    let url = s.url(revision, file);
    let resp = match s.get(&url, None) {
        Err(e) => bail!("{}: {file}: cannot fetch {url}: {e}", s.repo),
        Ok(Err(a))
            if optional && a.status == 404 && a.error_code.as_deref() != Some("RepoNotFound") =>
        {
            return Ok(None);
        }
        Ok(Err(a)) => return Err(fail(s, file, &url, &a)),
        Ok(Ok(r)) => r,
    };
    let commit = resp
        .headers()
        .get("x-repo-commit")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = s
        .body(resp, MAX_META_BYTES, true)
        .map_err(|e| anyhow::anyhow!("{}: {file}: {url}: {e}", s.repo))?;
    Ok(Some((body, commit)))
}

/// The first `8 + header length` bytes of `file` and the file's length, by Range requests.
/// Errors say whether the file was not found (`true`): a repo without `model.safetensors`.
fn shard_header(
    s: &mut Session,
    revision: &str,
    file: &str,
) -> Result<(Vec<u8>, u64), (bool, String)> {
    shard_header_in(s, revision, file).map_err(|e| (e.ends_with(" answered 404"), e))
}

fn shard_header_in(s: &mut Session, revision: &str, file: &str) -> Result<(Vec<u8>, u64), String> {
    let url = s.url(revision, file);
    let mut want = FIRST_RANGE;
    let mut buf: Vec<u8> = Vec::new();
    let mut size = None;
    loop {
        let start = buf.len() as u64;
        let resp = match s.get(&url, Some((start, want - 1))) {
            Err(e) => return Err(format!("{url}: {e}")),
            Ok(Err(a)) => return Err(format!("{url}: answered {}", a.status)),
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let total = resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once('/'))
            .and_then(|(_, t)| t.trim().parse::<u64>().ok());
        if status == 200 {
            // The server ignored the Range: read only what is wanted, then drop the connection.
            size = resp.content_length();
            buf = s
                .body(resp, want, false)
                .map_err(|e| format!("{url}: {e}"))?;
        } else {
            size = size.or(total);
            let part = s
                .body(resp, want - start, false)
                .map_err(|e| format!("{url}: {e}"))?;
            buf.extend_from_slice(&part);
        }
        if buf.len() < 8 {
            return Err(format!("{url}: shorter than a safetensors header"));
        }
        let n = safetensors::header_len(&buf).map_err(|e| format!("{url}: {e}"))?;
        let end = 8 + n;
        if buf.len() as u64 >= end {
            buf.truncate(end as usize);
            let size = size.ok_or_else(|| format!("{url}: no Content-Range length"))?;
            return Ok((buf, size));
        }
        if want >= end || status == 200 {
            return Err(format!("{url}: the answer ended inside the header"));
        }
        want = end;
    }
}

fn fetch_in(s: &mut Session, revision: &str, cache: &Path) -> anyhow::Result<(PathBuf, String)> {
    let repo = s.repo;
    let (config, header_commit) = small(s, revision, "config.json", false)?.unwrap_or_default();
    s.reached = true;
    // Checked before anything is stored: a cache must not keep what the next run cannot read.
    if let Err(e) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&config) {
        bail!(
            "{repo}: config.json: {}: not a JSON object ({e})",
            s.url(revision, "config.json")
        );
    }
    let commit_header = header_commit.is_some();
    let commit = commit_of(s, revision, header_commit)?;
    // generation_config.json sets the sampling defaults vLLM starts with (no limit the planner
    // reads); fetched for the cache only when the commit came with config.json, so the request
    // that the commit look-up would have cost pays for it and the bound holds.
    let generation = if commit_header {
        small(s, revision, "generation_config.json", true)
            .ok()
            .flatten()
            .map(|(b, _)| b)
            .filter(|b| serde_json::from_slice::<serde_json::Value>(b).is_ok())
    } else {
        None
    };
    let index = small(s, revision, files::INDEX, true)?.map(|(b, _)| b);
    let (shards, total) = match &index {
        Some(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            let idx = safetensors::parse_index(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{repo}: {}: {}: {e}",
                    files::INDEX,
                    s.url(revision, files::INDEX)
                )
            })?;
            let names: Vec<String> = idx.shards().iter().map(|n| n.to_string()).collect();
            if let Some(bad) = names.iter().find(|n| !plain_file_name(n)) {
                bail!(
                    "{repo}: {}: weight_map names {bad:?}, not a file name",
                    files::INDEX
                );
            }
            // 0 is what some writers put when they did not count: unknown, never zero bytes
            (names, idx.total_size.filter(|t| *t > 0))
        }
        None => (vec!["model.safetensors".to_string()], None),
    };
    let mut headers = Vec::new();
    let mut fallback = None;
    let mut no_weights = false;
    for f in &shards {
        match shard_header(s, revision, f) {
            Ok((bytes, size)) => match safetensors::parse_header(&bytes, size) {
                Ok(_) => headers.push((f.clone(), bytes, size)),
                Err(e) => {
                    fallback = Some(format!("the header of {f} is not valid ({e})"));
                    break;
                }
            },
            Err((not_found, e)) => {
                no_weights = not_found && index.is_none();
                fallback = Some(format!("cannot read the header of {f}: {e}"));
                break;
            }
        }
    }
    let fallback = match (fallback, total) {
        (None, _) => None,
        // No index and no model.safetensors: no safetensors weights; estimate from the config.
        (Some(_), _) if no_weights => None,
        (Some(why), Some(_)) => Some(why),
        (Some(why), None) => {
            bail!(
                "{repo}: {why}, and {} has no metadata.total_size (or 0) to fall back on",
                files::INDEX
            )
        }
    };
    // Write the snapshot: huggingface_hub's layout for the metadata files, the sidecar for headers.
    let dir = cache.join(format!("models--{}", repo.replace('/', "--")));
    let snap = dir.join("snapshots").join(&commit);
    let side = snap.join(SIDECAR);
    std::fs::create_dir_all(&side).with_context(|| format!("cannot create {}", side.display()))?;
    write_atomic(&snap.join("config.json"), &config)?;
    if let Some(g) = &generation {
        write_atomic(&snap.join("generation_config.json"), g)?;
    }
    if let Some(b) = &index {
        write_atomic(&snap.join(files::INDEX), b)?;
    }
    for (f, bytes, _) in &headers {
        write_atomic(&side.join(format!("{f}.header")), bytes)?;
    }
    let sidecar = Sidecar {
        endpoint: s.env.endpoint.clone(),
        revision: revision.to_string(),
        commit: commit.clone(),
        shards: headers
            .iter()
            .map(|(f, _, size)| ShardHeader {
                file: f.clone(),
                size: *size,
            })
            .collect(),
        fallback: fallback.clone(),
    };
    write_atomic(
        &side.join("hub.json"),
        &serde_json::to_vec_pretty(&sidecar)?,
    )?;
    if revision != commit {
        std::fs::create_dir_all(dir.join("refs"))?;
        write_atomic(&dir.join("refs").join(revision), commit.as_bytes())?;
    }
    // the fallback, if any, is told by the weights part of the source line
    let note = format!("Hub {}, commit {commit}", s.env.endpoint);
    Ok((snap, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_two_plain_parts() {
        for ok in ["Qwen/Qwen3-Next-80B-A3B-Instruct", "a.b/c_d-1.5"] {
            assert!(is_repo_id(ok), "{ok}");
        }
        for bad in ["x", "a/b/c", "../x", "a/..", "a/.b", "a b/c", "/x", "x/"] {
            assert!(!is_repo_id(bad), "{bad}");
        }
    }
}
