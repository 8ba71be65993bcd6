//! GPU004: NVLink links down. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU004",
    title: "NVLink links down",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU004 is not implemented yet",
    )]
}
