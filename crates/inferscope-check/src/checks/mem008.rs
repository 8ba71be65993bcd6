//! MEM008: cgroup cpuset excludes the GPU's local CPUs. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM008",
    title: "cgroup cpuset excludes the GPU's local CPUs",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "MEM008 is not implemented yet",
    )]
}
