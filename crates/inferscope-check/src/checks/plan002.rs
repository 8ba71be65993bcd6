//! PLAN002: KV cache below the requested concurrency. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PLAN002",
    title: "KV cache below the requested concurrency",
    severity: Severity::Warn,
    scope: Scope::Plan,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "PLAN002 is not implemented yet",
    )]
}
