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
pub mod run;
pub mod serve;
pub mod snapshot;
pub mod topo;
pub mod tune;
pub mod watch;

use inferscope_model::Snapshot;
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
        inferscope_model::Reading::Unknown(u) => Some(format!(
            "inferscope: note: {}; GPU driver facts are unknown",
            u.detail
        )),
        inferscope_model::Reading::Value(_) => None,
    }
}
