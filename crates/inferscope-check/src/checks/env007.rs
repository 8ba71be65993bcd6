//! ENV007: OMP_NUM_THREADS unset or oversubscribed. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV007",
    title: "OMP_NUM_THREADS unset or oversubscribed",
    severity: Severity::Info,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV007 is not implemented yet",
    )]
}
