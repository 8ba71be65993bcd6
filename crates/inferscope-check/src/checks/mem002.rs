//! MEM002: THP defrag `always` stalls allocations in direct compaction.

use super::support::{SettingFails, host_setting};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM002",
    title: "THP defrag causes direct-compaction stalls",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "With THP defrag `always`, a thread whose huge-page fault cannot be met at once stops to reclaim and compact memory itself; on a host whose page cache is full of checkpoint files that stall lands in the request path of the server's CPU threads.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    host_setting(
        &input.snapshot.settings.thp_defrag,
        "THP defrag mode",
        |mode| format!("/sys/kernel/mm/transparent_hugepage/defrag is [{mode}]"),
        |mode| {
            (mode == "always").then_some(SettingFails {
                consequence: Some(
                    "every huge-page fault that finds no free 2 MiB block does direct reclaim and compaction before returning".into(),
                ),
                remedy: "`echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag` (as root; `madvise` also passes); to keep it after reboot add `w /sys/kernel/mm/transparent_hugepage/defrag - - - - defer+madvise` to /etc/tmpfiles.d/thp.conf.",
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
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("[madvise]"), "{}", out[0].evidence);
    }

    #[test]
    fn defer_modes_and_never_pass() {
        for mode in ["defer", "defer+madvise", "never"] {
            let mut s = fixture("h100");
            s.settings.thp_defrag = Reading::value(mode.to_string());
            assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass], "{mode}");
        }
    }

    #[test]
    fn always_fails() {
        let mut s = fixture("h100");
        s.settings.thp_defrag = Reading::value("always".to_string());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("[always]"), "{}", out[0].evidence);
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("defer+madvise"))
        );
    }

    #[test]
    fn unknown_without_the_sysfs_file() {
        let mut s = fixture("h100");
        s.settings.thp_defrag = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/sys/kernel/mm/transparent_hugepage/defrag: permission denied",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
