//! MEM005: automatic NUMA balancing on.

use super::support::HOST;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM005",
    title: "Automatic NUMA balancing on",
    severity: Severity::Info,
    scope: Scope::Host,
    why: "Automatic NUMA balancing unmaps pages periodically to sample which node touches them and migrates them; for a server already bound to its GPUs' node (inferscope run, numactl) this fights the binding and adds page-fault and migration stalls to the serving threads.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let mode = match need(
        &s.settings.kernel_numa_balancing,
        HOST,
        "kernel.numa_balancing",
    ) {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    let read = format!("kernel.numa_balancing is {mode} (/proc/sys/kernel/numa_balancing)");
    if mode == 0 {
        return vec![Outcome::pass(HOST, format!("{read}: off"))];
    }
    if mode & 1 == 0 {
        return vec![Outcome::pass(
            HOST,
            format!(
                "{read}: memory-tiering mode only (2): pages are promoted from slower CPU-less memory tiers, not moved between CPU nodes"
            ),
        )];
    }
    let nodes = s.numa_nodes.len();
    if nodes == 1 {
        return vec![Outcome::pass(
            HOST,
            format!("{read}, but the host has one NUMA node: nothing to migrate between"),
        )];
    }
    vec![Outcome::fail(
        HOST,
        format!(
            "{read}: the kernel samples and migrates pages between the {nodes} NUMA nodes; a server bound with `inferscope run` or numactl has its pages scanned and may have them moved against the binding"
        ),
        "`sysctl -w kernel.numa_balancing=0` and add `kernel.numa_balancing = 0` to /etc/sysctl.d/90-inference.conf (or boot with `numa_balancing=disable`); then bind the server to its GPUs' node with `inferscope run`.",
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{Reading, UnknownReason};

    #[test]
    fn off_passes() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.ends_with("off"), "{}", out[0].evidence);
    }

    #[test]
    fn on_fails_on_a_two_node_host() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("kernel.numa_balancing is 1")
                && out[0].evidence.contains("2 NUMA nodes"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("kernel.numa_balancing=0"))
        );
    }

    #[test]
    fn memory_tiering_mode_passes_with_evidence() {
        let mut s = fixture("h100");
        s.settings.kernel_numa_balancing = Reading::value(2);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("memory-tiering"),
            "{}",
            out[0].evidence
        );
        // Both bits: normal balancing is on too.
        s.settings.kernel_numa_balancing = Reading::value(3);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Fail]);
    }

    #[test]
    fn on_passes_on_a_single_node_host() {
        let mut s = fixture("rtx5090");
        s.settings.kernel_numa_balancing = Reading::value(1);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("one NUMA node"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_unreadable() {
        let mut s = fixture("h100");
        s.settings.kernel_numa_balancing = Reading::unknown(
            UnknownReason::NotPresent,
            "/proc/sys/kernel/numa_balancing: not present",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
