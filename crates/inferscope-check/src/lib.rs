//! # inferscope-check
//!
//! The preflight: a registry of checks, each with a stable code (`NUMA001`), a severity, what it
//! applies to, and a pure evaluation over a [`Snapshot`] (plus, optionally, a serving plan and a
//! running process) that returns pass / warn / fail / unknown with the evidence it read and the
//! exact remedy.
//!
//! Decisions:
//! * **A check is one file.** `checks/<code>.rs` holds one [`CheckDef`] and its tests (a passing and
//!   a failing input beside each); `checks/mod.rs` lists them. Nothing else changes to add one.
//! * **Unknown is a result.** A check that cannot see what it needs (no NVML, a VM without cpufreq,
//!   no plan) returns [`Status::Unknown`] with the reason, never a pass.
//! * **Thresholds are data.** Every number a check compares against lives in [`Thresholds`], with a
//!   default and a reason, and a `--config` TOML file can override it or a check's severity, or
//!   turn a check off — DCGM's layered parameters, in one file.
//! * **No I/O.** Capture is the probe's job; this crate only reads the structures it is given.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
pub mod checks;
pub mod config;
mod outcome;
pub mod scope;

pub use config::{CheckOverride, Config, ConfigError, Thresholds};
pub use outcome::Outcome;

use inferscope_host::{PlanFacts, ProcessFacts, Snapshot};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad a failed check is. Ordered: `Info < Warn < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; rarely breaks serving.
    Info,
    /// Costs performance or reliability.
    Warn,
    /// Breaks serving, or will under load.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        })
    }
}

/// A severity name that is not `info`, `warn` or `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown severity {0:?} (expected info, warn or error)")]
pub struct UnknownSeverity(pub String);

impl std::str::FromStr for Severity {
    type Err = UnknownSeverity;
    fn from_str(s: &str) -> Result<Self, UnknownSeverity> {
        match s {
            "info" => Ok(Severity::Info),
            "warn" => Ok(Severity::Warn),
            "error" => Ok(Severity::Error),
            other => Err(UnknownSeverity(other.to_string())),
        }
    }
}

/// The result of one check on one subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Checked and fine.
    Pass,
    /// Checked and found a problem of the check's severity.
    Fail,
    /// Could not be checked; `evidence` says why.
    Unknown,
    /// About a GPU the server will not see (hidden by `CUDA_VISIBLE_DEVICES` in the captured
    /// environment); never a failure. `evidence` says what the check alone found.
    NotInScope,
}

/// What a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The host (kernel, memory, CPUs).
    Host,
    /// Each GPU.
    Gpu,
    /// The GPUs that will work together (tensor-parallel group).
    GpuGroup,
    /// The environment variables of the capture.
    Environment,
    /// A running process (`--pid`).
    Process,
    /// A serving plan (`--plan`).
    Plan,
}

/// Everything a check may read.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    /// The host.
    pub snapshot: &'a Snapshot,
    /// A serving plan, when given.
    pub plan: Option<&'a PlanFacts>,
    /// A process, when given.
    pub process: Option<&'a ProcessFacts>,
    /// Thresholds in force.
    pub thresholds: &'a Thresholds,
}

/// One check in the registry.
#[derive(Debug, Clone, Copy)]
pub struct CheckDef {
    /// Stable code (`MEM006`). Never reused or renamed.
    pub code: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// Default severity of a failure.
    pub severity: Severity,
    /// What it applies to.
    pub scope: Scope,
    /// Why it matters for serving, in one or two sentences.
    pub why: &'static str,
    /// The evaluation: one outcome per subject (or one for the host).
    pub run: fn(&CheckInput) -> Vec<Outcome>,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Check code.
    pub code: String,
    /// Check title.
    pub title: String,
    /// Severity in force (default or from the config).
    pub severity: Severity,
    /// Result.
    pub status: Status,
    /// What it is about (`host`, `GPU0 (0000:18:00.0)`).
    pub subject: String,
    /// What the check read, with values and sources.
    pub evidence: String,
    /// Exact fix: a command, a flag, a sysctl line. Present on failures.
    pub remedy: Option<String>,
}

/// Which checks to run.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these codes (empty = all).
    pub only: Vec<String>,
    /// `--all-gpus`: judge every GPU, including those the captured `CUDA_VISIBLE_DEVICES`
    /// hides from the server (by default their per-GPU findings are "not in scope").
    pub all_gpus: bool,
}

/// Error selecting checks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown check code {0:?} (see `inferscope check --list`)")]
pub struct UnknownCode(pub String);

/// All checks, in code order.
pub fn registry() -> &'static [CheckDef] {
    checks::ALL
}

/// Look a check up by code (case-insensitive).
pub fn find(code: &str) -> Option<&'static CheckDef> {
    registry()
        .iter()
        .find(|c| c.code.eq_ignore_ascii_case(code))
}

/// Run the selected checks; findings come in registry order.
pub fn run(
    input: &CheckInput,
    config: &Config,
    selection: &Selection,
) -> Result<Vec<Finding>, UnknownCode> {
    for code in &selection.only {
        if find(code).is_none() {
            return Err(UnknownCode(code.clone()));
        }
    }
    let selected = registry().iter().filter(|def| {
        selection.only.is_empty()
            || selection
                .only
                .iter()
                .any(|c| c.eq_ignore_ascii_case(def.code))
    });
    let scope = if selection.all_gpus {
        None
    } else {
        scope::gpu_scope(input.snapshot)
    };
    Ok(run_checks(input, config, selected, scope.as_ref()))
}

/// Run these checks (the selection is already valid, so this cannot fail); per-GPU findings
/// about GPUs outside `scope` are marked not in scope.
fn run_checks<'a>(
    input: &CheckInput,
    config: &Config,
    checks: impl Iterator<Item = &'a CheckDef>,
    scope: Option<&scope::GpuScope>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for def in checks {
        let over = config.checks.get(def.code);
        if over.is_some_and(|o| o.enabled == Some(false)) {
            continue;
        }
        let severity = over.and_then(|o| o.severity).unwrap_or(def.severity);
        let mut outcomes = (def.run)(input);
        if outcomes.is_empty() {
            // A per-GPU check on a host without GPUs has nothing to say; say that, not "pass".
            outcomes.push(Outcome::unknown(
                "host",
                match def.scope {
                    Scope::Gpu | Scope::GpuGroup => {
                        "no GPU in this snapshot (no NVIDIA or AMD display controller on the PCI bus)"
                    }
                    _ => "nothing to check in this snapshot",
                },
            ));
        }
        for mut o in outcomes {
            if let Some(sc) = scope
                && def.scope == Scope::Gpu
            {
                sc.apply(&mut o);
            }
            findings.push(Finding {
                code: def.code.to_string(),
                title: def.title.to_string(),
                severity,
                status: o.status,
                subject: o.subject,
                evidence: o.evidence,
                remedy: o.remedy,
            });
        }
    }
    findings
}

/// Every check with default thresholds over a snapshot alone (no plan, no process), as the
/// metrics exporter and node labels use it: about the node, so every GPU is in scope.
pub fn run_defaults(snapshot: &Snapshot) -> Vec<Finding> {
    let thresholds = Thresholds::default();
    let input = CheckInput {
        snapshot,
        plan: None,
        process: None,
        thresholds: &thresholds,
    };
    run_checks(&input, &Config::default(), registry().iter(), None)
}

/// True when a failed finding is at or above `level`.
pub fn fails_at(findings: &[Finding], level: Severity) -> bool {
    findings
        .iter()
        .any(|f| f.status == Status::Fail && f.severity >= level)
}
