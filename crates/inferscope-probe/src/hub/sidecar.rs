//! `.inferscope/hub.json` and the shard headers stored beside it: what a fetch wrote, read
//! back so an offline run plans the same.

use super::{MAX_META_BYTES, files};
use anyhow::{Context, bail};
use inferscope_formats::safetensors;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The inferscope-owned folder inside a snapshot.
pub const SIDECAR: &str = ".inferscope";

/// What `.inferscope/hub.json` records about one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardHeader {
    /// The shard's file name.
    pub file: String,
    /// Its length in bytes (from `Content-Range`).
    pub size: u64,
}

/// `.inferscope/hub.json`: what was fetched, so an offline run reads the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sidecar {
    /// The endpoint asked (never the token).
    pub endpoint: String,
    /// The revision asked.
    pub revision: String,
    /// The commit it resolved to.
    pub commit: String,
    /// Shard headers stored beside this file as `FILE.header`.
    pub shards: Vec<ShardHeader>,
    /// Why the headers were not all read (then the index's `total_size` sizes the weights).
    pub fallback: Option<String>,
}

/// Weights read from a sidecar.
pub struct SidecarWeights {
    /// Tensors of every shard (empty when falling back to `total_size`).
    pub headers: Vec<safetensors::SafetensorsHeader>,
    /// `Some(total_size, why)` when the headers were not all readable.
    pub fallback: Option<(u64, String)>,
}

/// The sidecar of snapshot `dir`, when the Hub client wrote one.
pub fn read_sidecar(dir: &Path) -> anyhow::Result<Option<SidecarWeights>> {
    let side = dir.join(SIDECAR);
    let meta = side.join("hub.json");
    if std::fs::symlink_metadata(&meta).is_err() {
        return Ok(None);
    }
    let text = files::read_regular(&meta, 1 << 20, "an inferscope sidecar")?;
    let s: Sidecar = serde_json::from_str(&text)
        .with_context(|| format!("{}: not an inferscope sidecar", meta.display()))?;
    if let Some(why) = s.fallback {
        let total = index_total(dir)?.with_context(|| {
            format!(
                "{}: no metadata.total_size to fall back on",
                dir.join(files::INDEX).display()
            )
        })?;
        return Ok(Some(SidecarWeights {
            headers: Vec::new(),
            fallback: Some((total, why)),
        }));
    }
    let mut headers = Vec::new();
    for sh in &s.shards {
        if !plain_file_name(&sh.file) {
            bail!("{}: names {:?}, not a file name", meta.display(), sh.file);
        }
        let path = side.join(format!("{}.header", sh.file));
        let bytes = read_capped(&path)?;
        headers.push(
            safetensors::parse_header(&bytes, sh.size)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        );
    }
    Ok(Some(SidecarWeights {
        headers,
        fallback: None,
    }))
}

fn read_capped(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    files::open_regular(path)?
        .take(safetensors::MAX_HEADER_LEN + 8)
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(buf)
}

fn index_total(dir: &Path) -> anyhow::Result<Option<u64>> {
    let path = dir.join(files::INDEX);
    let text = files::read_regular(&path, MAX_META_BYTES, "a safetensors index")?;
    let idx =
        safetensors::parse_index(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(idx.total_size.filter(|t| *t > 0))
}

/// A file name with no path in it and not hidden: what a shard or GGUF file may be called.
pub fn plain_file_name(n: &str) -> bool {
    !n.is_empty() && !n.contains('/') && !n.contains('\\') && !n.starts_with('.')
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("inferscope-tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real shard header: 8-byte length, then one bf16 tensor of 2×3.
    fn header_bytes() -> Vec<u8> {
        let json = br#"{"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}}"#;
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json);
        b
    }

    fn snapshot(sidecar: &Sidecar) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let side = dir.path().join(SIDECAR);
        std::fs::create_dir_all(&side).unwrap();
        write_atomic(
            &side.join("hub.json"),
            &serde_json::to_vec_pretty(sidecar).unwrap(),
        )
        .unwrap();
        dir
    }

    fn sidecar(shards: Vec<ShardHeader>, fallback: Option<String>) -> Sidecar {
        Sidecar {
            endpoint: "https://huggingface.co".into(),
            revision: "main".into(),
            commit: "0e9e39f249a16976918f6564b8830bc894c89659".into(),
            shards,
            fallback,
        }
    }

    #[test]
    fn stored_headers_read_back_as_tensors() {
        let size = header_bytes().len() as u64 + 12;
        let dir = snapshot(&sidecar(
            vec![ShardHeader {
                file: "model.safetensors".into(),
                size,
            }],
            None,
        ));
        let side = dir.path().join(SIDECAR);
        std::fs::write(side.join("model.safetensors.header"), header_bytes()).unwrap();
        let w = read_sidecar(dir.path()).unwrap().unwrap();
        assert!(w.fallback.is_none());
        assert_eq!(w.headers.len(), 1);
        assert_eq!(w.headers[0].tensors.len(), 1);
        // No sidecar at all: not a Hub snapshot, not an error.
        assert!(read_sidecar(&dir.path().join("x")).unwrap().is_none());
    }

    #[test]
    fn a_fallback_sizes_from_the_index_and_needs_its_total() {
        let dir = snapshot(&sidecar(vec![], Some("cannot read the header".into())));
        let index = dir.path().join(files::INDEX);
        std::fs::write(
            &index,
            r#"{"metadata":{"total_size":1000},"weight_map":{"w":"a.safetensors"}}"#,
        )
        .unwrap();
        let w = read_sidecar(dir.path()).unwrap().unwrap();
        assert_eq!(w.fallback, Some((1000, "cannot read the header".into())));
        // total_size 0 is unknown, never zero bytes of weights.
        std::fs::write(
            &index,
            r#"{"metadata":{"total_size":0},"weight_map":{"w":"a.safetensors"}}"#,
        )
        .unwrap();
        let e = read_sidecar(dir.path()).err().unwrap().to_string();
        assert!(e.ends_with("no metadata.total_size to fall back on"), "{e}");
    }

    #[test]
    fn a_shard_name_with_a_path_is_refused() {
        let dir = snapshot(&sidecar(
            vec![ShardHeader {
                file: "../../etc/passwd".into(),
                size: 1,
            }],
            None,
        ));
        let e = read_sidecar(dir.path()).err().unwrap().to_string();
        assert!(e.contains("not a file name"), "{e}");
        assert!(!plain_file_name(".hidden") && !plain_file_name("a\\b"));
    }
}
