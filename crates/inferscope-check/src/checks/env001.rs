//! ENV001: PYTORCH_CUDA_ALLOC_CONF without expandable_segments. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV001",
    title: "PYTORCH_CUDA_ALLOC_CONF without expandable_segments",
    severity: Severity::Info,
    scope: Scope::Environment,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "ENV001 is not implemented yet",
    )]
}
