//! GPU006: GPU slot slower than the GPU (slot-limited PCIe). (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU006",
    title: "GPU slot slower than the GPU (slot-limited PCIe)",
    severity: Severity::Info,
    scope: Scope::Gpu,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU006 is not implemented yet",
    )]
}
