//! GPU005: PCIe link running below its maximum width or generation. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU005",
    title: "PCIe link running below its maximum width or generation",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU005 is not implemented yet",
    )]
}
