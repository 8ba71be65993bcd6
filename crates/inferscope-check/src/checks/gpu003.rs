//! GPU003: Peer-to-peer access unsupported between tensor-parallel GPUs. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU003",
    title: "Peer-to-peer access unsupported between tensor-parallel GPUs",
    severity: Severity::Warn,
    scope: Scope::GpuGroup,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU003 is not implemented yet",
    )]
}
