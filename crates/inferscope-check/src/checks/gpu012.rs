//! GPU012: Row remapping or page retirement pending or failed. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU012",
    title: "Row remapping or page retirement pending or failed",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU012 is not implemented yet",
    )]
}
