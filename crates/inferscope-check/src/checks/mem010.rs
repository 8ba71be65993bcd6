//! MEM010: Host RAM too small to load the model. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM010",
    title: "Host RAM too small to load the model",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM010 is not implemented yet",
    )]
}
