//! `--model ORG/NAME/FILE.gguf`: the header of one GGUF file of a Hub repo (issue 29 item 1).
//!
//! One Range request from byte 0, read only as far as the GGUF parser needs (metadata, tokenizer
//! arrays and tensor infos, at most [`MAX_GGUF_HEADER`]); the connection is then dropped, so the
//! weights are never transferred. The bytes read are stored as
//! `snapshots/COMMIT/.inferscope/FILE.header` with the file's length in `hub.json`, beside the
//! safetensors sidecar of [`crate::hub`], so the next run is offline.

use crate::hub::{self, HubEnv, ShardHeader, Sidecar};
use anyhow::{Context, bail};
use inferscope_formats::gguf;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Largest GGUF header read (a 256k-token vocabulary with merges is about 20 MiB).
pub const MAX_GGUF_HEADER: u64 = 64 << 20;

/// `ORG/NAME/FILE.gguf` split into the repo id and the file name.
pub fn spec(spec: &str) -> Option<(&str, &str)> {
    let (repo, file) = spec.rsplit_once('/')?;
    (hub::is_repo_id(repo) && file.ends_with(".gguf") && hub::plain_file_name(file))
        .then_some((repo, file))
}

/// A parsed GGUF header and where it came from.
pub struct Found {
    /// The header.
    pub header: gguf::GgufHeader,
    /// The snapshot folder it belongs to.
    pub snapshot: PathBuf,
}

/// The header of `file` in the cached snapshot `snap`: the whole file when downloaded, else
/// the stored header.
pub fn from_snapshot(snap: &Path, file: &str) -> anyhow::Result<Option<Found>> {
    let whole = snap.join(file);
    if whole.is_file() {
        let len = std::fs::metadata(&whole)?.len();
        let mut r = std::io::BufReader::new(hub::files::open_regular(&whole)?);
        let header = gguf::parse_header(&mut r, len)
            .map_err(|e| anyhow::anyhow!("{}: {e}", whole.display()))?;
        return Ok(Some(Found {
            header,
            snapshot: snap.to_path_buf(),
        }));
    }
    let meta = snap.join(hub::SIDECAR).join("hub.json");
    if std::fs::symlink_metadata(&meta).is_err() {
        return Ok(None);
    }
    let text = hub::files::read_regular(&meta, 1 << 20, "an inferscope sidecar")?;
    let side: Sidecar = serde_json::from_str(&text)
        .with_context(|| format!("{}: not an inferscope sidecar", meta.display()))?;
    let Some(entry) = side.shards.iter().find(|s| s.file == file) else {
        return Ok(None);
    };
    let path = snap.join(hub::SIDECAR).join(format!("{file}.header"));
    let mut bytes = Vec::new();
    hub::files::open_regular(&path)?
        .take(MAX_GGUF_HEADER)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let header = gguf::parse_header(&mut bytes.as_slice(), entry.size)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(Some(Found {
        header,
        snapshot: snap.to_path_buf(),
    }))
}

/// Reads a response body on demand, keeping what was read.
struct BodyRead<'a> {
    rt: &'a tokio::runtime::Runtime,
    resp: reqwest::Response,
    pending: bytes::Bytes,
    kept: Vec<u8>,
}

impl Read for BodyRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pending.is_empty() {
            let next = self.rt.block_on(async { self.resp.chunk().await });
            match next {
                Ok(Some(c)) => self.pending = c,
                Ok(None) => return Ok(0),
                Err(e) => return Err(std::io::Error::other(hub::reason(&e))),
            }
        }
        if self.kept.len() as u64 >= MAX_GGUF_HEADER {
            return Err(std::io::Error::other(format!(
                "header larger than {} MiB",
                MAX_GGUF_HEADER >> 20
            )));
        }
        let n = buf.len().min(self.pending.len());
        let part = self.pending.split_to(n);
        for (dst, src) in buf.iter_mut().zip(part.iter()) {
            *dst = *src;
        }
        self.kept.extend_from_slice(&part);
        Ok(n)
    }
}

/// Fetch the header of `repo`'s `file` at `revision` into `cache`.
pub fn fetch(
    repo: &str,
    file: &str,
    revision: &str,
    cache: &Path,
    env: &HubEnv,
) -> anyhow::Result<(Found, String)> {
    let mut s = hub::session(env, repo)?;
    let url = s.url(revision, file);
    let resp = match s.get(&url, Some((0, MAX_GGUF_HEADER - 1))) {
        Err(e) => bail!("{repo}: {file}: cannot fetch {url}: {e}"),
        Ok(Err(a)) => return Err(hub::fail(&s, file, &url, &a)),
        Ok(Ok(r)) => r,
    };
    if std::env::var_os("INFERSCOPE_HUB_REQUESTS").is_some() {
        // A closed stderr is not a panic (std's eprintln! would be).
        let _ = writeln!(
            std::io::stderr(),
            "inferscope: hub requests: {}",
            s.requests
        );
    }
    let size = match resp.status().as_u16() {
        206 => resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once('/'))
            .and_then(|(_, t)| t.trim().parse::<u64>().ok()),
        _ => resp.content_length(),
    }
    .ok_or_else(|| anyhow::anyhow!("{repo}: {file}: {url}: no file length in the answer"))?;
    let header_commit = s.commit.clone();
    let mut body = BodyRead {
        rt: &s.rt,
        resp,
        pending: bytes::Bytes::new(),
        kept: Vec::new(),
    };
    let header = gguf::parse_header(&mut body, size)
        .map_err(|e| anyhow::anyhow!("{repo}: {file}: {url}: {e}"))?;
    let kept = std::mem::take(&mut body.kept);
    drop(body);
    let commit = hub::commit_of(&mut s, revision, header_commit)?;
    let dir = cache.join(format!("models--{}", repo.replace('/', "--")));
    let snap = dir.join("snapshots").join(&commit);
    let side = snap.join(hub::SIDECAR);
    std::fs::create_dir_all(&side).with_context(|| format!("cannot create {}", side.display()))?;
    hub::write_atomic(&side.join(format!("{file}.header")), &kept)?;
    // Keep what an earlier fetch of another file of this snapshot recorded.
    let meta = side.join("hub.json");
    let mut sidecar = std::fs::read_to_string(&meta)
        .ok()
        .and_then(|t| serde_json::from_str::<Sidecar>(&t).ok())
        .unwrap_or(Sidecar {
            endpoint: env.endpoint.clone(),
            revision: revision.to_string(),
            commit: commit.clone(),
            shards: Vec::new(),
            fallback: None,
        });
    sidecar.shards.retain(|e| e.file != file);
    sidecar.shards.push(ShardHeader {
        file: file.to_string(),
        size,
    });
    hub::write_atomic(&meta, &serde_json::to_vec_pretty(&sidecar)?)?;
    if revision != commit {
        std::fs::create_dir_all(dir.join("refs"))?;
        hub::write_atomic(&dir.join("refs").join(revision), commit.as_bytes())?;
    }
    let note = format!(
        "Hub {}, commit {commit}; {} header bytes read of {size}",
        env.endpoint,
        kept.len()
    );
    Ok((
        Found {
            header,
            snapshot: snap,
        },
        note,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gguf_spec_is_a_repo_and_a_plain_gguf_file() {
        assert_eq!(
            super::spec("Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf"),
            Some(("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf"))
        );
        for bad in [
            "Qwen/Qwen3-0.6B",
            "Qwen3-0.6B-Q8_0.gguf",
            "a/b/c/d.gguf",
            "a/b/.x.gguf",
            "a/b/model.safetensors",
        ] {
            assert_eq!(super::spec(bad), None, "{bad}");
        }
    }
}
