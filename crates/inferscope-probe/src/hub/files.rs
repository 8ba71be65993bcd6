//! Reading a model folder and the Hugging Face cache without trusting them (issue 33): a FIFO
//! named `config.json`, a shard or `refs/main` must not block `plan` forever, a `refs/main`
//! holding `../../..` must not lead it outside the cache, and a shard the index names but the
//! folder lacks (a partial download) must not shrink the model.

use anyhow::{Context, bail};
use inferscope_host::quote::clip;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Open `path` for reading only if it is a regular file (after symlinks: the cache links
/// snapshot files to blobs). `O_NONBLOCK` makes opening a FIFO return at once instead of
/// waiting for a writer; the type check then refuses it.
pub fn open_regular(path: &Path) -> anyhow::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file (a FIFO, socket or device); refusing to read it",
            path.display()
        );
    }
    Ok(f)
}

/// The text of regular file `path`, refused when larger than `max` bytes.
pub fn read_regular(path: &Path, max: u64, what: &str) -> anyhow::Result<String> {
    let mut s = String::new();
    open_regular(path)?
        .take(max + 1)
        .read_to_string(&mut s)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if s.len() as u64 > max {
        bail!("{}: larger than {max} bytes; not {what}", path.display());
    }
    Ok(s)
}

/// True for what a cache ref (`refs/main`) or `--revision` may name as a snapshot folder: a
/// commit hash or a plain ref name — ASCII letters, digits, `.`, `_`, `-`, not starting with
/// `.`, at most 255 bytes; never a path separator or `..`.
pub fn revision_ok(rev: &str) -> bool {
    !rev.is_empty()
        && rev.len() <= 255
        && !rev.starts_with('.')
        && rev
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The commit a cache ref file names, checked by [`revision_ok`].
pub fn read_ref(path: &Path) -> anyhow::Result<String> {
    // A ref holds a 40-hex commit hash and a newline; 1 KiB leaves room, not a megabyte.
    let text = read_regular(path, 1024, "a Hugging Face cache ref")?;
    let commit = text.trim();
    if !revision_ok(commit) {
        bail!(
            "{}: {:?} is not a commit hash or a ref name (letters, digits, . _ -); refusing to follow it",
            path.display(),
            clip(commit)
        );
    }
    Ok(commit.to_string())
}

/// Index file of a sharded safetensors checkpoint.
pub const INDEX: &str = "model.safetensors.index.json";

/// The shard files `dir/model.safetensors.index.json` names, each checked to be present; `None`
/// without an index. A shard name with a path in it, or missing shards, is an error.
pub fn indexed_shards(dir: &Path, max: u64) -> anyhow::Result<Option<Vec<PathBuf>>> {
    let index = dir.join(INDEX);
    if std::fs::symlink_metadata(&index).is_err() {
        return Ok(None);
    }
    let text = read_regular(&index, max, "a safetensors index")?;
    let idx = inferscope_formats::safetensors::parse_index(&text)
        .map_err(|e| anyhow::anyhow!("{}: {}", index.display(), clip(&e.to_string())))?;
    let names = idx.shards();
    let mut shards = Vec::with_capacity(names.len());
    let mut missing = Vec::new();
    for name in &names {
        if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
            bail!(
                "{}: weight_map names {:?}, not a file name in this folder",
                index.display(),
                clip(name)
            );
        }
        let path = dir.join(name);
        if path.exists() {
            shards.push(path);
        } else {
            missing.push(*name);
        }
    }
    if !missing.is_empty() {
        let list = missing
            .iter()
            .take(4)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = if missing.len() > 4 { ", …" } else { "" };
        bail!(
            "{}: names {} weight files and {} are missing ({}{more}): a partial download; finish it, or pass {} to estimate the weights from the config alone",
            index.display(),
            names.len(),
            missing.len(),
            clip(&list),
            dir.join("config.json").display()
        );
    }
    Ok(Some(shards))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_hashes_or_plain_names() {
        assert!(revision_ok("0e9e39f249a16976918f6564b8830bc894c89659"));
        assert!(revision_ok("main"));
        assert!(revision_ok("v1.0-rc_2"));
        for bad in [
            "",
            "../../../../tmp/x/cfg",
            "a/b",
            ".",
            "..",
            ".hidden",
            "a\\b",
            "a b",
        ] {
            assert!(!revision_ok(bad), "{bad}");
        }
        assert!(!revision_ok(&"a".repeat(256)));
    }
}
