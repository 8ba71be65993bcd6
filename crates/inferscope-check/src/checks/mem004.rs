//! MEM004: vm.zone_reclaim_mode is not 0. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM004",
    title: "vm.zone_reclaim_mode is not 0",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM004 is not implemented yet",
    )]
}
