//! MEM011: Static huge pages hold a large share of RAM. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM011",
    title: "Static huge pages hold a large share of RAM",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM011 is not implemented yet",
    )]
}
