//! MEM003: swap on with a high `vm.swappiness`.

use super::support::{HOST, bytes};
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM003",
    title: "Swap on with high swappiness",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "With swap on and a high vm.swappiness the kernel swaps out idle anonymous memory (a server's Python heap, tokenizer tables, pinned-buffer pools in waiting) to keep the page cache of checkpoint files; the next request then waits on swap-in.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = &input.snapshot.settings;
    let swap = match need(&s.swap_total_bytes, HOST, "SwapTotal") {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    if swap == 0 {
        return vec![Outcome::pass(
            HOST,
            "swap is off (SwapTotal 0 in /proc/meminfo)",
        )];
    }
    let swappiness = match need(&s.vm_swappiness, HOST, "vm.swappiness") {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    let used = match s.swap_used_bytes.known() {
        Some(u) => format!("{} in use", bytes(*u)),
        None => "use unknown".to_string(),
    };
    let max = input.thresholds.max_swappiness;
    let evidence = format!(
        "swap is on ({} in /proc/meminfo, {used}); vm.swappiness is {swappiness} (/proc/sys/vm/swappiness); threshold {max}",
        bytes(swap)
    );
    if swappiness > max {
        vec![Outcome::fail(
            HOST,
            evidence,
            "`sysctl -w vm.swappiness=1` and add `vm.swappiness = 1` to /etc/sysctl.d/90-inference.conf to keep it; or turn swap off: `swapoff -a` and comment out the swap lines of /etc/fstab.",
        )]
    } else {
        vec![Outcome::pass(HOST, evidence)]
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{Reading, UnknownReason};

    #[test]
    fn swap_off_passes() {
        // The h100 box has no swap, though swappiness is the default 60.
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("swap is off"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn swap_on_with_low_swappiness_passes_with_evidence() {
        // The asymmetric box: 2 GiB swap, swappiness 10 (= the default threshold).
        let out = check(&CHECK, &fixture("asymmetric"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("vm.swappiness is 10"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn swap_on_with_default_swappiness_fails() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("8.0 GiB") && out[0].evidence.contains("257.0 MiB in use"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("vm.swappiness=1") && r.contains("swapoff -a"))
        );
    }

    #[test]
    fn threshold_is_configurable() {
        let t = Thresholds {
            max_swappiness: 60,
            ..Thresholds::default()
        };
        let out = run_with(&CHECK, &fixture("plx"), None, None, &t);
        assert_eq!(statuses(&out), [Status::Pass]);
    }

    #[test]
    fn unknown_when_meminfo_or_swappiness_unreadable() {
        let mut s = fixture("plx");
        s.settings.vm_swappiness =
            Reading::unknown(UnknownReason::PermissionDenied, "/proc/sys/vm/swappiness");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
        s.settings.swap_total_bytes = Reading::unknown(UnknownReason::Malformed, "/proc/meminfo");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
