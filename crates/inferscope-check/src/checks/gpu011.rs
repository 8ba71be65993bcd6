//! GPU011: Uncorrectable ECC errors. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU011",
    title: "Uncorrectable ECC errors",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU011 is not implemented yet",
    )]
}
