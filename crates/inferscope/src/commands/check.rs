//! `inferscope check`: run the preflight over this machine, a root or a snapshot, optionally
//! with a serving plan and a running process, and exit 1 when a failure at or above
//! `--fail-on` is found.

use crate::render;
use anyhow::Context;
use inferscope_check::{CheckInput, Config, Selection, Severity};
use inferscope_host::{PlanFacts, Snapshot};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Parsed `check` arguments.
#[derive(Debug)]
pub struct CheckArgs<'a> {
    /// `--snapshot FILE`.
    pub snapshot: Option<&'a Path>,
    /// `--root DIR`.
    pub root: Option<&'a Path>,
    /// `--pid PID[,PID...]` (one or several running processes).
    pub pids: Vec<u32>,
    /// `--plan FILE` (JSON written by `inferscope plan --json`).
    pub plan: Option<&'a Path>,
    /// `--only CODES`.
    pub only: Vec<String>,
    /// `--fail-on`.
    pub fail_on: Severity,
    /// `--config FILE`.
    pub config: Option<&'a Path>,
    /// `--json`.
    pub json: bool,
    /// `--verbose`: list passed checks too.
    pub verbose: bool,
    /// `--all-gpus`: judge GPUs the captured `CUDA_VISIBLE_DEVICES` hides too.
    pub all_gpus: bool,
}

fn read_small(path: &Path, what: &str) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    if meta.len() > 16 << 20 {
        anyhow::bail!("{}: larger than 16 MiB; not a {what}", path.display());
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {what} {}", path.display()))
}

/// Load a plan file: the planner's `--json` output (extra keys are ignored).
pub fn load_plan(path: &Path) -> anyhow::Result<PlanFacts> {
    let text = read_small(path, "plan")?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a plan (expected `inferscope plan --json` output): {e}",
            path.display()
        )
    })
}

/// Run the command.
pub fn run(args: &CheckArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let config = match args.config {
        Some(p) => Config::from_toml(&read_small(p, "config")?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
        None => Config::default(),
    };
    let (snapshot, source): (Snapshot, String) = match (args.snapshot, args.root) {
        (Some(f), _) => (crate::load::snapshot_file(f)?, f.display().to_string()),
        (None, Some(r)) => (super::capture_root(r)?, format!("--root {}", r.display())),
        (None, None) => (
            super::capture_root(Path::new("/"))?,
            "this machine".to_string(),
        ),
    };
    let plan = args.plan.map(load_plan).transpose()?;
    if let Some(pid) = args.pids.first()
        && args.snapshot.is_some()
    {
        anyhow::bail!(
            "--pid reads /proc/{pid} of a machine; it cannot be combined with --snapshot"
        );
    }
    let root = args.root.unwrap_or(Path::new("/"));
    let fs = inferscope_probe::FsRoot::new(root);
    let mut processes = Vec::new();
    for pid in &args.pids {
        if !root.join(format!("proc/{pid}")).is_dir() {
            anyhow::bail!("--pid {pid}: no such process under {}", root.display());
        }
        processes.push(inferscope_probe::process::capture_process(
            &fs, *pid, &snapshot,
        ));
    }
    let input = |process| CheckInput {
        snapshot: &snapshot,
        plan: plan.as_ref(),
        process,
        thresholds: &config.thresholds,
    };
    let selection = Selection {
        only: args.only.clone(),
        all_gpus: args.all_gpus,
    };
    let mut findings = inferscope_check::run(&input(processes.first()), &config, &selection)?;
    // Further processes: only the process checks again, so host findings appear once.
    let process_only = Selection {
        only: inferscope_check::registry()
            .iter()
            .filter(|d| d.scope == inferscope_check::Scope::Process)
            .filter(|d| {
                selection.only.is_empty()
                    || selection
                        .only
                        .iter()
                        .any(|c| c.eq_ignore_ascii_case(d.code))
            })
            .map(|d| d.code.to_string())
            .collect(),
        all_gpus: args.all_gpus,
    };
    if !process_only.only.is_empty() {
        for p in processes.iter().skip(1) {
            findings.extend(inferscope_check::run(
                &input(Some(p)),
                &config,
                &process_only,
            )?);
        }
    }
    if args.json {
        let report = render::check::CheckReport {
            schema_version: 1,
            source: &source,
            summary: render::check::summarize(&findings),
            fail_on: args.fail_on,
            findings: &findings,
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        render::check::write_text(&findings, &source, args.verbose, out)?;
    }
    Ok(if inferscope_check::fails_at(&findings, args.fail_on) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `inferscope explain CODE`.
pub fn explain(code: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let def = inferscope_check::find(code).ok_or_else(|| {
        anyhow::anyhow!("unknown check code {code:?} (see `inferscope check --list`)")
    })?;
    writeln!(
        out,
        "{} ({} · {}): {}\n\n{}\n",
        def.code,
        def.severity,
        format!("{:?}", def.scope).to_lowercase(),
        def.title,
        def.why
    )?;
    if let Some(doc) = inferscope_check::checks::doc(def.code) {
        write!(out, "{doc}")?;
    }
    Ok(ExitCode::SUCCESS)
}
