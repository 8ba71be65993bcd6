//! The one bounded read for files a user hands in whole (`check --plan`/`--config`, `compare`'s
//! results, `tune`'s journal): at most [`MAX_INPUT_BYTES`] are read, and a larger input is
//! refused, never truncated (docs/SECURITY.md, "Every read is bounded before parsing").

use std::io::Read;
use std::path::Path;

/// Largest input file read whole: 64 MiB, the snapshot and import cap (a bench result with
/// per-request records for 100,000 requests is about 20 MiB; a tune journal line 10–50 KB).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Read `path` whole, refusing more than [`MAX_INPUT_BYTES`] (also for pipes and `/dev/zero`,
/// whose size is not known beforehand). The error keeps the I/O kind (`NotFound` ...).
pub fn read_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB, the most inferscope reads from one input file",
            MAX_INPUT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// [`read_bytes`] as UTF-8 text; errors name the file and what it should have been.
pub fn read_text(path: &Path, what: &str) -> anyhow::Result<String> {
    let bytes = read_bytes(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a {what}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}
