//! MEM001: Transparent huge pages set to always. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM001",
    title: "Transparent huge pages set to always",
    severity: Severity::Info,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM001 is not implemented yet",
    )]
}
