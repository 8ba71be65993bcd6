//! The tune report (pure): its JSON shape (a contract: `winner`, `candidates[].settings/status/
//! reason/result`, `verdict`), one entry per candidate in rank order, and winner.sh's text.

use super::State;
use super::ranking::Ranking;
use super::secrets;
use super::session::{Cand, Objective};
use crate::capacity::Capacity;
use crate::compare;
use crate::result::BenchResult;
use inferscope_launch::emit::shell_command_line;
use serde::Serialize;

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The top-ranked measured candidate.
    pub winner: Option<Winner>,
    /// Every candidate, in rank order.
    pub candidates: Vec<CandReport>,
    /// The verdict sentence.
    pub verdict: String,
    /// The winner is significantly better than the baseline.
    pub significant: bool,
    /// What was maximised.
    pub objective: Objective,
    /// Its unit.
    pub unit: &'static str,
    /// The baseline's label.
    pub baseline: String,
    /// `compare`'s table, winner against baseline.
    pub comparison: Option<compare::Comparison>,
    /// What was left out, and why.
    pub not_tried: Vec<String>,
    /// Said before starting (a --budget too small to run every candidate once).
    pub warnings: Vec<String>,
    /// Another measured candidate beats the top-ranked one by more than the noise: no winner.
    pub inconclusive: bool,
    /// A stop signal ended the run.
    pub interrupted: bool,
    /// Wall time of the whole run.
    pub elapsed_s: f64,
    /// Files written.
    pub files: Vec<String>,
}

/// The winner, ready to paste.
#[derive(Debug, Serialize)]
pub struct Winner {
    /// Its settings (redacted).
    pub settings: super::Settings,
    /// Its command line with `{port}` the serving port (redacted).
    pub command: String,
    /// Its label.
    pub label: String,
    /// The same through `inferscope run` when binding was asked.
    pub run_command: Option<String>,
    /// `inferscope run --emit numactl`'s output for it.
    pub run_emit: Option<String>,
}

/// One candidate's entry.
#[derive(Debug, Serialize)]
pub struct CandReport {
    /// 1-based rank.
    pub rank: usize,
    /// Its label.
    pub label: String,
    /// Its settings (redacted).
    pub settings: super::Settings,
    /// `measured`, `failed` or `skipped`.
    pub status: &'static str,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// Its ranked runs merged.
    pub result: Option<BenchResult>,
    /// Mean objective over its ranked runs.
    pub objective: Option<f64>,
    /// The objective of every run.
    pub objective_runs: Vec<Option<f64>>,
    /// How many of `objective_runs` (the first ones) `rank` and `objective` are on.
    pub ranked_runs: usize,
    /// Capacity's answer.
    pub capacity: Option<Capacity>,
    /// The command last run (redacted).
    pub command: String,
    /// The planner's answer.
    pub plan: Option<serde_json::Value>,
    /// The server log's tail after a failure.
    pub log_tail: Option<String>,
    /// Keeper pids.
    pub server_pids: Vec<u32>,
    /// GPU memory after each stop.
    pub gpu_memory_after_stop: Vec<String>,
    /// Its folder.
    pub dir: String,
    /// On the throughput-vs-p90 TTFT front.
    pub pareto_ttft: bool,
    /// On the throughput-vs-p90 TPOT front.
    pub pareto_tpot: bool,
}

/// One report entry per candidate, in rank order.
pub fn cand_reports(cands: &[Cand], r: &Ranking) -> Vec<CandReport> {
    let mut reports = Vec::new();
    for (rank, &i) in r.order.iter().enumerate() {
        let (Some(c), Some(m)) = (cands.get(i), r.merged.get(i)) else {
            continue;
        };
        let runs = match &c.state {
            State::Measured(r) => r.clone(),
            _ => Vec::new(),
        };
        let ranked_runs = r.counted.get(i).copied().unwrap_or(0);
        reports.push(CandReport {
            rank: rank + 1,
            label: c.label.clone(),
            settings: c.shown.clone(),
            status: match c.state {
                State::Measured(_) => "measured",
                State::Failed => "failed",
                State::Skipped | State::Pending => "skipped",
            },
            reason: c.reason.clone(),
            result: m.as_ref().map(|o| o.result.clone()),
            objective: super::mean_objective(runs.get(..ranked_runs).unwrap_or_default()),
            objective_runs: runs,
            ranked_runs,
            capacity: c.capacity(),
            command: shell_command_line(&secrets::shown_words(&c.command)),
            plan: c.plan.clone(),
            log_tail: c.log_tail.clone(),
            server_pids: c.pids.clone(),
            gpu_memory_after_stop: c.gpu_memory.clone(),
            dir: c.dir.display().to_string(),
            pareto_ttft: r.fronts.0.get(i).copied().unwrap_or(false),
            pareto_tpot: r.fronts.1.get(i).copied().unwrap_or(false),
        });
    }
    reports
}

/// winner.sh: every value is quoted in the exec line; the comment gets the label with its
/// control characters escaped, so a newline in a --set value cannot start a command line.
pub fn winner_script(w: &Winner, inconclusive: bool) -> String {
    format!(
        "#!/bin/sh\n# inferscope tune {}: {}\nexec {}\n",
        if inconclusive {
            "top-ranked (inconclusive)"
        } else {
            "winner"
        },
        comment_safe(&w.label),
        w.run_command.as_deref().unwrap_or(&w.command)
    )
}

/// Text for a `#` comment line of a script: control characters (a newline above all, which
/// would end the comment and start a command) written as escapes.
fn comment_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
