//! Loading a snapshot file a user hands in: bounded read, JSON errors with line and column,
//! then the model's invariants.

use anyhow::{Context, bail};
use inferscope_host::Snapshot;
use inferscope_host::quote::clip;
use std::io::Read;
use std::path::Path;

/// Largest snapshot file accepted (a 16-GPU host with 300 PCI functions is ~300 KiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 64 << 20;

/// Read, parse and validate a snapshot file.
pub fn snapshot_file(path: &Path) -> anyhow::Result<Snapshot> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open snapshot {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SNAPSHOT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read snapshot {}", path.display()))?;
    if bytes.starts_with(&GZIP_MAGIC) {
        bail!("{}: {GZIP_HINT}", path.display());
    }
    if bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
        bail!(
            "{}: larger than {} MiB; not a snapshot written by inferscope",
            path.display(),
            MAX_SNAPSHOT_BYTES >> 20
        );
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "cannot read snapshot {} as UTF-8 text: invalid byte at offset {}",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    parse_snapshot(&text, &path.display().to_string())
}

/// The first bytes of a gzip stream.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// What to say about a gzip-compressed snapshot (rather than "not UTF-8").
pub const GZIP_HINT: &str =
    "gzip-compressed, not a snapshot: gunzip it first (`gunzip -c FILE > node.json`)";

/// Parse and validate snapshot JSON; `name` is used in error messages.
pub fn parse_snapshot(text: &str, name: &str) -> anyhow::Result<Snapshot> {
    // Look at the version first: a newer layout may not parse as this one at all.
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: Option<u32>,
    }
    if let Ok(Version {
        schema_version: Some(v),
    }) = serde_json::from_str::<Version>(text)
        && v != inferscope_host::SCHEMA_VERSION
    {
        anyhow::bail!(
            "{name}: schema_version {v} is not supported by this build (it reads version {})",
            inferscope_host::SCHEMA_VERSION
        );
    }
    // Another tool's output: say which, rather than a JSON error at line 1.
    use inferscope_formats::detect::{Format, detect};
    const IMPORT: &str = " (`inferscope snapshot --import FILE` turns it into one)";
    let other = match detect(text) {
        Some(Format::NvidiaSmiTopo) => Some(("`nvidia-smi topo -m` text", "")),
        Some(Format::NvidiaSmiText) => Some(("`nvidia-smi -q` text", IMPORT)),
        Some(Format::NvidiaSmiXml) => Some(("`nvidia-smi -q -x` XML", IMPORT)),
        Some(Format::HwlocXml) => Some(("hwloc XML", IMPORT)),
        Some(Format::Snapshot) | None => None,
    };
    if let Some((what, hint)) = other {
        anyhow::bail!(
            "{name}: this looks like {what}, not a snapshot written by `inferscope snapshot`{hint}"
        );
    }
    let snapshot: Snapshot = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{name}: not a valid inferscope snapshot: {}",
            clip(&e.to_string())
        )
    })?;
    snapshot
        .validate()
        .map_err(|e| anyhow::anyhow!("{name}: {}", clip(&e.to_string())))?;
    Ok(snapshot)
}
