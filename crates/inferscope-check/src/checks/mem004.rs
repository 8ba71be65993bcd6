//! MEM004: `vm.zone_reclaim_mode` is not 0.

use super::support::{SettingFails, host_setting};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM004",
    title: "vm.zone_reclaim_mode is not 0",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "With zone reclaim on, an allocation that finds its NUMA node full reclaims page cache (the checkpoint files just read) on that node before taking free memory from another; model loading and pinned-buffer allocation stall on reclaim and re-read weights from disk.",
    run,
};

/// What the bits of `vm.zone_reclaim_mode` turn on (Documentation/admin-guide/sysctl/vm.rst).
fn bits(mode: u32) -> String {
    let mut on = Vec::new();
    if mode & 1 != 0 {
        on.push("1 = reclaim before going off node");
    }
    if mode & 2 != 0 {
        on.push("2 = write out dirty pages");
    }
    if mode & 4 != 0 {
        on.push("4 = swap pages");
    }
    if on.is_empty() {
        String::new()
    } else {
        format!(" ({})", on.join(", "))
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    host_setting(
        &input.snapshot.settings.vm_zone_reclaim_mode,
        "vm.zone_reclaim_mode",
        |mode| {
            format!(
                "vm.zone_reclaim_mode is {mode}{} (/proc/sys/vm/zone_reclaim_mode)",
                bits(*mode)
            )
        },
        |mode| {
            (*mode != 0).then_some(SettingFails {
                consequence: None,
                remedy: "`sysctl -w vm.zone_reclaim_mode=0` and add `vm.zone_reclaim_mode = 0` to /etc/sysctl.d/90-inference.conf to keep it. Bind the server to its GPUs' node with `inferscope run` instead of relying on zone reclaim for locality.",
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{Reading, UnknownReason};

    #[test]
    fn zero_passes() {
        assert_eq!(statuses(&check(&CHECK, &fixture("h100"))), [Status::Pass]);
    }

    #[test]
    fn one_fails_on_the_plx_box() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .starts_with("vm.zone_reclaim_mode is 1 (1 = reclaim before going off node)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn any_bit_fails_and_is_named() {
        let mut s = fixture("h100");
        s.settings.vm_zone_reclaim_mode = Reading::value(6);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("write out dirty pages, 4 = swap pages"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_unreadable() {
        let mut s = fixture("h100");
        s.settings.vm_zone_reclaim_mode = Reading::unknown(
            UnknownReason::NotPresent,
            "/proc/sys/vm/zone_reclaim_mode: not present (kernel without NUMA)",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
