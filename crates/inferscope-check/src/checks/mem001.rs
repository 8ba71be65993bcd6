//! MEM001: transparent huge pages set to `always`.

use super::support::{SettingFails, host_setting};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM001",
    title: "Transparent huge pages set to always",
    severity: Severity::Info,
    scope: Scope::Host,
    why: "With THP `always`, khugepaged scans and collapses every process's memory and page faults may compact memory to build 2 MiB pages; the tokenizer, scheduler and API threads of a server see that as latency spikes. `madvise` keeps huge pages for the allocators that ask for them.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    host_setting(
        &input.snapshot.settings.thp_enabled,
        "THP mode",
        |mode| format!("/sys/kernel/mm/transparent_hugepage/enabled is [{mode}]"),
        |mode| {
            (mode == "always").then_some(SettingFails {
                consequence: Some(
                    "every anonymous mapping gets huge pages, with khugepaged and fault-time compaction behind them".into(),
                ),
                remedy: "`echo madvise > /sys/kernel/mm/transparent_hugepage/enabled` (as root); to keep it after reboot add `transparent_hugepage=madvise` to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub` or `grub2-mkconfig -o /boot/grub2/grub.cfg`).",
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
    fn madvise_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("[madvise]"), "{}", out[0].evidence);
    }

    #[test]
    fn never_passes() {
        // The asymmetric box has THP off.
        assert_eq!(
            statuses(&check(&CHECK, &fixture("asymmetric"))),
            [Status::Pass]
        );
    }

    #[test]
    fn always_fails_on_the_plx_box() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("[always]"), "{}", out[0].evidence);
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("transparent_hugepage=madvise"))
        );
    }

    #[test]
    fn always_fails_when_set_on_a_healthy_host() {
        let mut s = fixture("h100");
        s.settings.thp_enabled = Reading::value("always".to_string());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Fail]);
    }

    #[test]
    fn unknown_without_the_sysfs_file() {
        let mut s = fixture("h100");
        s.settings.thp_enabled = Reading::unknown(
            UnknownReason::NotPresent,
            "/sys/kernel/mm/transparent_hugepage/enabled: not present (kernel built without THP)",
        );
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("not present"),
            "{}",
            out[0].evidence
        );
    }
}
