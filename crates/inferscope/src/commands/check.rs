//! `inferscope check`: run the preflight over this machine, a root or a snapshot, optionally
//! with a serving plan and a running process, and exit 1 when a failure at or above
//! `--fail-on` is found.

use crate::render;
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
    crate::input::read_text(path, what)
}

/// Keys every `inferscope plan --json` output has: a file without one is not a plan (issue 32:
/// `{"hello":1}` was read as a plan that does not fit with 0.00 GiB).
const PLAN_KEYS: [&str; 3] = ["fits", "kv_cache_tokens", "max_concurrency"];

/// Load a plan file: the planner's `--json` output (extra keys are ignored).
pub fn load_plan(path: &Path) -> anyhow::Result<PlanFacts> {
    let text = read_small(path, "plan")?;
    let not_a_plan = |why: String| {
        anyhow::anyhow!(
            "{}: not a plan (expected `inferscope plan --json` output): {why}",
            path.display()
        )
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_a_plan(e.to_string()))?;
    let Some(object) = value.as_object() else {
        return Err(not_a_plan("expected a JSON object".into()));
    };
    for key in PLAN_KEYS {
        let Some(v) = object.get(key) else {
            return Err(not_a_plan(format!("missing `{key}`")));
        };
        let (ok, expected) = match key {
            "fits" => (v.is_boolean(), "true or false"),
            "kv_cache_tokens" => (v.is_u64(), "a whole number of tokens"),
            _ => (v.is_number(), "a number"),
        };
        if !ok {
            return Err(not_a_plan(format!("`{key}`: expected {expected}, got {v}")));
        }
    }
    serde_json::from_value(value).map_err(|e| not_a_plan(e.to_string()))
}

/// Run the command.
pub fn run(args: &CheckArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let config = match args.config {
        Some(p) => Config::from_toml(&read_small(p, "config")?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
        None => Config::default(),
    };
    // A bad plan file is refused before the machine is read.
    let plan = args.plan.map(load_plan).transpose()?;
    let (snapshot, source): (Snapshot, String) = match (args.snapshot, args.root) {
        (Some(f), _) => (crate::load::snapshot_file(f)?, f.display().to_string()),
        (None, Some(r)) => (super::capture_root(r)?, format!("--root {}", r.display())),
        (None, None) => (
            super::capture_root(Path::new("/"))?,
            "this machine".to_string(),
        ),
    };
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
