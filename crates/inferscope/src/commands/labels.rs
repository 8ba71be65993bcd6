//! `inferscope labels`: Node Feature Discovery labels for this node (or a snapshot / tree).

use inferscope_fleet::labels;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `inferscope labels` arguments.
#[derive(Debug, clap::Args)]
pub struct LabelsArgs {
    /// Label the node described by a snapshot written by `inferscope snapshot`.
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    pub snapshot: Option<PathBuf>,
    /// Read sysfs/procfs under DIR instead of / (a fixture tree or an unpacked gather
    /// archive; absent: this machine).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// `nfd`: an NFD local feature file (comment header, then `key=value` lines) for
    /// /etc/kubernetes/node-feature-discovery/features.d/; `kv`: the `key=value` lines alone
    /// (for `kubectl label node NODE $(inferscope labels --format kv)`); `json`: as --json.
    #[arg(long, value_name = "FORMAT", default_value = "nfd", value_parser = ["nfd", "kv", "json"])]
    pub format: String,
    /// Print JSON instead of the text (`--format json` says the same).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

/// `labels --json`: the labels in order, and where they came from.
#[derive(serde::Serialize)]
struct LabelsReport<'a> {
    schema_version: u32,
    /// `this machine`, `--root DIR` or the snapshot file.
    source: &'a str,
    labels: &'a [labels::Label],
}

/// Print the labels.
pub fn run(args: &LabelsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (snapshot, source) = match (&args.snapshot, &args.root) {
        (Some(f), _) => (crate::load::snapshot_file(f)?, f.display().to_string()),
        (None, Some(r)) => (super::capture_root(r)?, format!("--root {}", r.display())),
        (None, None) => (super::capture_root(Path::new("/"))?, "this machine".into()),
    };
    if let Some(note) = super::driver_note(&snapshot) {
        eprintln!("{note}");
    }
    let findings = inferscope_check::run_defaults(&snapshot);
    let l = labels::labels(&snapshot, &findings);
    let header = format!(
        "Node Feature Discovery local features written by {} from {source}\n\
         (docs/fleet.md; checks with the default thresholds)",
        crate::tool_name()
    );
    if args.json || args.format == "json" {
        let report = LabelsReport {
            schema_version: 1,
            source: &source,
            labels: &l,
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let text =
        crate::render::fleet::labels_text(&l, (args.format == "nfd").then_some(header.as_str()));
    out.write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
