//! PROC002: Process memory on a remote NUMA node. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PROC002",
    title: "Process memory on a remote NUMA node",
    severity: Severity::Warn,
    scope: Scope::Process,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "PROC002 is not implemented yet",
    )]
}
