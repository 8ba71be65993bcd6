//! ENV004: NCCL_P2P_DISABLE set although P2P works. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV004",
    title: "NCCL_P2P_DISABLE set although P2P works",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV004 is not implemented yet",
    )]
}
