//! GPU007: IOMMU in translated mode on the kernel command line. (Placeholder until implemented.)

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU007",
    title: "IOMMU in translated mode on the kernel command line",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "not yet written",
    run,
};

fn run(_input: &CheckInput) -> Vec<Outcome> {
    vec![Outcome::unknown(
        super::support::HOST,
        "GPU007 is not implemented yet",
    )]
}
