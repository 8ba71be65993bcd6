//! ENV003: CUDA_VISIBLE_DEVICES indices depend on CUDA_DEVICE_ORDER. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV003",
    title: "CUDA_VISIBLE_DEVICES indices depend on CUDA_DEVICE_ORDER",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV003 is not implemented yet",
    )]
}
