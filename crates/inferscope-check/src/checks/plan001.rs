//! PLAN001: Model does not fit. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PLAN001",
    title: "Model does not fit",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "PLAN001 is not implemented yet",
    )]
}
