//! `inferscope snapshot`: the Snapshot as pretty JSON on stdout, captured from a root or
//! assembled from imported tool outputs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Capture under `root` (or assemble from imported files) and print JSON.
pub fn run(root: &Path, import: &[PathBuf], out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let snapshot = if import.is_empty() {
        super::capture_root(root)?
    } else {
        let paths: Vec<&Path> = import.iter().map(PathBuf::as_path).collect();
        let opts = super::capture_options();
        inferscope_probe::import::snapshot_from_files(&paths, opts.captured_at, opts.tool)?
    };
    if let Some(note) = super::driver_note(&snapshot) {
        eprintln!("{note}");
    }
    serde_json::to_writer_pretty(&mut *out, &snapshot)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}
