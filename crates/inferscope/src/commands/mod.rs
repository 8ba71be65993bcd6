//! One module per command; each takes validated arguments and a writer.

pub mod bench;
pub mod capacity;
pub mod check;
pub mod compare;
pub mod completions;
pub mod diff;
pub mod gather;
pub mod labels;
pub mod mem;
pub mod plan;
pub mod plan_cluster;
pub mod run;
pub mod serve;
pub mod snapshot;
pub mod topo;
pub mod tune;
pub mod watch;

use inferscope_host::Snapshot;
use inferscope_probe::{CaptureOptions, FsRoot};
use std::path::Path;

/// Capture options for a capture made now by this build.
pub fn capture_options() -> CaptureOptions {
    CaptureOptions {
        captured_at: crate::clock::now_rfc3339(),
        tool: crate::tool_name(),
    }
}

/// Capture the machine under `root`, refusing a root that is not a directory.
pub fn capture_root(root: &Path) -> anyhow::Result<Snapshot> {
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a directory", root.display());
    }
    Ok(inferscope_probe::capture(
        &FsRoot::new(root),
        &capture_options(),
    ))
}

/// One line on stderr when the live machine's driver facts are unknown (no NVML, no permission),
/// so users know why NV# links and GPU details are missing. Returns the line for tests.
pub fn driver_note(snapshot: &Snapshot) -> Option<String> {
    if !snapshot.is_live {
        return None;
    }
    match &snapshot.driver {
        inferscope_host::Reading::Unknown(u) => Some(format!(
            "inferscope: note: {}; GPU driver facts are unknown",
            u.detail
        )),
        inferscope_host::Reading::Value(_) => None,
    }
}

/// The value parser of every duration flag (`bench --duration`, `watch --interval`, ...): one
/// grammar for all commands, `inferscope_host::units::parse_duration` (docs/cli.md).
pub fn duration_arg(s: &str) -> Result<std::time::Duration, inferscope_host::units::DurationError> {
    inferscope_host::units::parse_duration(s)
}

/// A duration flag that must be above zero and at most a year (sampling intervals and run
/// lengths: zero would spin, a larger one overflows the clock arithmetic).
pub fn positive_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    let d = duration_arg(s).map_err(|e| e.to_string())?;
    if d.is_zero() || d > std::time::Duration::from_secs(366 * 86400) {
        return Err(format!(
            "`{}` is out of range (above 0, at most a year)",
            s.trim()
        ));
    }
    Ok(d)
}

/// A duration between `lo` and `hi` seconds (integers still read as seconds, as before).
fn duration_between(s: &str, lo: u64, hi: u64) -> Result<std::time::Duration, String> {
    let d = duration_arg(s).map_err(|e| e.to_string())?;
    if d < std::time::Duration::from_secs(lo) || d > std::time::Duration::from_secs(hi) {
        return Err(format!("{} is not in {lo}..={hi} seconds", s.trim()));
    }
    Ok(d)
}

/// `diff --timeout`: 1 s to an hour.
pub fn fetch_timeout_arg(s: &str) -> Result<std::time::Duration, String> {
    duration_between(s, 1, 3600)
}

/// `serve --nfd-interval`: 10 s to a day.
pub fn nfd_interval_arg(s: &str) -> Result<std::time::Duration, String> {
    duration_between(s, 10, 86400)
}
