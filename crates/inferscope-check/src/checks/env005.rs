//! ENV005: NCCL_SHM_DISABLE set. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV005",
    title: "NCCL_SHM_DISABLE set",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV005 is not implemented yet",
    )]
}
