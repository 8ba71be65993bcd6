//! `inferscope snapshot`: the Snapshot as pretty JSON on stdout.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Capture under `root` and print JSON.
pub fn run(root: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let snapshot = super::capture_root(root)?;
    if let Some(note) = super::driver_note(&snapshot) {
        eprintln!("{note}");
    }
    serde_json::to_writer_pretty(&mut *out, &snapshot)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}
