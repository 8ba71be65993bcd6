//! `inferscope check` output: failures grouped by severity, one line each with the remedy under
//! it, unknowns grouped with their reason, passes counted, and a summary line. `--json` writes
//! the same findings in a documented, stable layout.

use inferscope_check::{Finding, Severity, Status};
use serde::Serialize;
use std::io::{self, Write};

/// Counts for the summary line and JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Failed findings of severity error.
    pub errors: usize,
    /// Failed findings of severity warn.
    pub warnings: usize,
    /// Failed findings of severity info.
    pub info: usize,
    /// Passed findings.
    pub passed: usize,
    /// Findings that could not be checked.
    pub unknown: usize,
    /// Per-GPU findings about GPUs the server will not see (not failures; `--all-gpus` judges
    /// them).
    pub not_in_scope: usize,
}

/// Count findings.
pub fn summarize(findings: &[Finding]) -> Summary {
    let mut s = Summary::default();
    for f in findings {
        match (f.status, f.severity) {
            (Status::Pass, _) => s.passed += 1,
            (Status::Unknown, _) => s.unknown += 1,
            (Status::NotInScope, _) => s.not_in_scope += 1,
            (Status::Fail, Severity::Error) => s.errors += 1,
            (Status::Fail, Severity::Warn) => s.warnings += 1,
            (Status::Fail, Severity::Info) => s.info += 1,
        }
    }
    s
}

/// JSON form of `inferscope check --json`.
#[derive(Debug, Serialize)]
pub struct CheckReport<'a> {
    /// Layout version of this report.
    pub schema_version: u32,
    /// Where the host facts came from (`/`, a root, a snapshot file).
    pub source: &'a str,
    /// Counts.
    pub summary: Summary,
    /// Severity at or above which the exit code is 1.
    pub fail_on: Severity,
    /// Every finding, in check-code order.
    pub findings: &'a [Finding],
}

/// Write the human report.
pub fn write_text(
    findings: &[Finding],
    source: &str,
    show_passed: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "inferscope check: {source}")?;
    for (severity, heading) in [
        (Severity::Error, "Errors"),
        (Severity::Warn, "Warnings"),
        (Severity::Info, "Info"),
    ] {
        let group: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.status == Status::Fail && f.severity == severity)
            .collect();
        if group.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "{heading}:")?;
        for f in group {
            writeln!(
                out,
                "  {} {}: {} — {}",
                f.code, f.subject, f.title, f.evidence
            )?;
            if let Some(r) = &f.remedy {
                writeln!(out, "      fix: {r}")?;
            }
        }
    }
    let unknown: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.status == Status::Unknown)
        .collect();
    if !unknown.is_empty() {
        writeln!(out)?;
        writeln!(out, "Unknown (could not be checked):")?;
        for f in unknown {
            writeln!(
                out,
                "  {} {}: {} — {}",
                f.code, f.subject, f.title, f.evidence
            )?;
        }
    }
    let hidden: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.status == Status::NotInScope)
        .collect();
    if !hidden.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Not in scope (GPUs the server will not see; --all-gpus judges them):"
        )?;
        for f in hidden {
            writeln!(
                out,
                "  {} {}: {} — {}",
                f.code, f.subject, f.title, f.evidence
            )?;
        }
    }
    if show_passed {
        let passed: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.status == Status::Pass)
            .collect();
        if !passed.is_empty() {
            writeln!(out)?;
            writeln!(out, "Passed:")?;
            for f in passed {
                writeln!(
                    out,
                    "  {} {}: {} — {}",
                    f.code, f.subject, f.title, f.evidence
                )?;
            }
        }
    }
    let s = summarize(findings);
    writeln!(out)?;
    writeln!(
        out,
        "{} errors, {} warnings, {} info, {} passed, {} unknown{}{}",
        s.errors,
        s.warnings,
        s.info,
        s.passed,
        s.unknown,
        if s.not_in_scope > 0 {
            format!(", {} not in scope", s.not_in_scope)
        } else {
            String::new()
        },
        if show_passed || s.passed == 0 {
            ""
        } else {
            " (--verbose lists passed checks)"
        }
    )
}

/// `inferscope check --list`.
pub fn write_list(out: &mut dyn Write) -> io::Result<()> {
    for c in inferscope_check::registry() {
        writeln!(
            out,
            "{:<8} {:<6} {:<12} {}",
            c.code,
            c.severity.to_string(),
            format!("{:?}", c.scope).to_lowercase(),
            c.title
        )?;
    }
    Ok(())
}
