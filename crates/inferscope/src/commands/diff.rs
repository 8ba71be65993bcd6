//! `inferscope diff A.json B.json [C.json ...]`: what differs between nodes, odd one out first.
//! Exit 0 when every compared fact is equal, 1 when some differ (like diff(1)), 2 on errors.

use crate::fleet::diff;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `inferscope diff` arguments.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Snapshot files written by `inferscope snapshot`, one per node (at least two).
    #[arg(value_name = "SNAPSHOT", num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Column names: file stems, or whole paths when two stems collide.
fn names(files: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .map(|n| n.to_string_lossy())
                .map(|n| n.strip_suffix(".json").unwrap_or(&n).to_string())
                .unwrap_or_else(|| f.display().to_string())
        })
        .collect();
    let unique = stems
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == stems.len();
    if unique {
        stems
    } else {
        files.iter().map(|f| f.display().to_string()).collect()
    }
}

/// Compare and print.
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let snaps = args
        .files
        .iter()
        .map(|f| crate::load::snapshot_file(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let named: Vec<(String, &inferscope_model::Snapshot)> =
        names(&args.files).into_iter().zip(snaps.iter()).collect();
    let d = diff::diff(&named);
    if args.json {
        let v = serde_json::json!({
            "schema_version": 1,
            "identical": d.identical(),
            "nodes": d.nodes,
            "compared_fields": d.compared_fields,
            "differences": d.differences,
        });
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
    } else {
        out.write_all(diff::render_text(&d).as_bytes())?;
    }
    Ok(if d.identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
