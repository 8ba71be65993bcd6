//! GPU002: Tensor-parallel GPUs span sockets without NVLink. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU002",
    title: "Tensor-parallel GPUs span sockets without NVLink",
    severity: Severity::Warn,
    scope: Scope::GpuGroup,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU002 is not implemented yet",
    )]
}
