//! MEM003: Swap on with high swappiness. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM003",
    title: "Swap on with high swappiness",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM003 is not implemented yet",
    )]
}
