//! CPU002: Too few local cores per GPU worker. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "CPU002",
    title: "Too few local cores per GPU worker",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "CPU002 is not implemented yet",
    )]
}
