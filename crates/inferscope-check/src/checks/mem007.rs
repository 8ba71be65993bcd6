//! MEM007: RLIMIT_MEMLOCK too low for pinned memory. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM007",
    title: "RLIMIT_MEMLOCK too low for pinned memory",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM007 is not implemented yet",
    )]
}
