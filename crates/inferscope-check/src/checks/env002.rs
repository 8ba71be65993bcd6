//! ENV002: Allocator config conflicts or is malformed. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV002",
    title: "Allocator config conflicts or is malformed",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV002 is not implemented yet",
    )]
}
