//! PROC001: Process CPU affinity not local to its GPU. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PROC001",
    title: "Process CPU affinity not local to its GPU",
    severity: Severity::Warn,
    scope: Scope::Process,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "PROC001 is not implemented yet",
    )]
}
