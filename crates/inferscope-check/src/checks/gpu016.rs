//! GPU016: Driver supports an older CUDA than the runtime needs. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU016",
    title: "Driver supports an older CUDA than the runtime needs",
    severity: Severity::Error,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU016 is not implemented yet",
    )]
}
