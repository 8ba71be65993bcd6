//! ENV006: NCCL_IB_DISABLE set although RDMA NICs are present. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV006",
    title: "NCCL_IB_DISABLE set although RDMA NICs are present",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV006 is not implemented yet",
    )]
}
