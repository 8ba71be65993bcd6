//! MEM009: cgroup memory limit below what loading needs. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM009",
    title: "cgroup memory limit below what loading needs",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM009 is not implemented yet",
    )]
}
