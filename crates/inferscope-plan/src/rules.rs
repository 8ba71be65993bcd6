//! What a plan says of the engine rules it applied: each rule with its value and source, and
//! whether the accounting is the engine's own for that release. Each engine's rules are in its
//! room (`crate::engines`).

use serde::{Deserialize, Serialize};

/// Whether the planner does the engine's own accounting for this engine and release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accounting {
    /// The engine's own accounting for this release (from its source).
    Modelled,
    /// Another engine's or release's rules stand in: the figures are an approximation.
    Approximate,
}

/// One rule that applies, with its value and the source it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// What the rule decides (`engine`, `profile_batch`, `cuda_graphs`, ...).
    pub rule: String,
    /// What it decides here.
    pub value: String,
    /// Release, file and function it comes from (or "fitted: ..." for a fitted constant).
    pub source: String,
}

/// The rules a plan applied (`plan --json` key `engine_rules`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineRules {
    /// Engine.
    pub engine: String,
    /// Version asked for (`None`: not given).
    pub requested_version: Option<String>,
    /// The release whose rules apply.
    pub rules_of: String,
    /// Why the rules of another release apply (newer/older than modelled, not understood).
    pub note: Option<String>,
    /// Modelled or approximate.
    pub accounting: Accounting,
    /// The rules, in the order the engine applies them.
    pub rules: Vec<Rule>,
}
