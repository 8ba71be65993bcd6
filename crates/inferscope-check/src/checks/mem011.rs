//! MEM011: static huge pages hold a large share of RAM.

use super::support::{HOST, bytes};
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM011",
    title: "Static huge pages hold a large share of RAM",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "Pages reserved for hugetlbfs are taken out of general use at boot or sysctl time; PyTorch, CUDA pinned allocations and the page cache that loads checkpoints do not use them, so a large reservation is RAM the server cannot have.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = &input.snapshot.settings;
    let total = match need(&s.memory_total_bytes, HOST, "MemTotal") {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    let mut reserved: u64 = 0;
    let mut in_use: u64 = 0;
    let mut pools = Vec::new();
    let mut zero_cmds = Vec::new();
    for p in &s.hugepages {
        let size = bytes(p.page_size_kib.saturating_mul(1024));
        let n = match need(&p.total, HOST, &format!("{size} huge page count")) {
            Ok(v) => *v,
            Err(o) => return vec![o],
        };
        if n == 0 {
            continue;
        }
        reserved = reserved.saturating_add(n.saturating_mul(p.page_size_kib).saturating_mul(1024));
        let free = match p.free.known() {
            Some(f) => {
                let used = n.saturating_sub(*f);
                in_use = in_use.saturating_add(used);
                format!("{f} free")
            }
            None => "free unknown".to_string(),
        };
        pools.push(format!("{n} × {size} ({free})"));
        zero_cmds.push(format!(
            "`echo 0 > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages`",
            p.page_size_kib
        ));
    }
    if pools.is_empty() {
        return vec![Outcome::pass(
            HOST,
            "no static huge pages reserved (nr_hugepages is 0 in every /sys/kernel/mm/hugepages/hugepages-*kB pool)",
        )];
    }
    let max = input.thresholds.max_hugepages_percent_of_ram;
    // Tenths of a percent, for display; the comparison is exact in u128.
    let tenths = if total == 0 {
        0
    } else {
        (reserved as u128 * 1000 / total as u128) as u64
    };
    let evidence = format!(
        "static huge pages reserve {} = {}.{}% of MemTotal {} ({}; /sys/kernel/mm/hugepages/hugepages-*kB/nr_hugepages); threshold {max}%",
        bytes(reserved),
        tenths / 10,
        tenths % 10,
        bytes(total),
        pools.join(", ")
    );
    let over = (reserved as u128) * 100 > (total as u128) * (max as u128);
    if !over {
        return vec![Outcome::pass(HOST, evidence)];
    }
    let in_use_note = if in_use > 0 {
        format!(
            " {in_use} page(s) are in use: only free pages are released, so stop what maps them (DPDK, a database, VMs) first."
        )
    } else {
        String::new()
    };
    vec![Outcome::fail(
        HOST,
        format!("{evidence}.{in_use_note}"),
        format!(
            "Release them (as root): {}; to keep that after reboot remove `hugepages=`, `hugepagesz=` and `default_hugepagesz=` from the kernel command line and `vm.nr_hugepages` from /etc/sysctl.conf and /etc/sysctl.d/. Keep only what a hugetlbfs user on this host needs.",
            zero_cmds.join("; ")
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{Reading, UnknownReason};

    #[test]
    fn no_reservation_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.starts_with("no static huge pages"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn the_plx_box_reserves_8_5_percent_in_1_gib_pages_and_passes_at_10() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert_eq!(
            out[0].evidence,
            "static huge pages reserve 32.0 GiB = 8.5% of MemTotal 376.3 GiB (32 × 1.0 GiB (28 free); /sys/kernel/mm/hugepages/hugepages-*kB/nr_hugepages); threshold 10%"
        );
    }

    #[test]
    fn the_plx_box_fails_at_a_lower_threshold() {
        let t = Thresholds {
            max_hugepages_percent_of_ram: 8,
            ..Thresholds::default()
        };
        let out = run_with(&CHECK, &fixture("plx"), None, None, &t);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("4 page(s) are in use"),
            "{}",
            out[0].evidence
        );
        assert!(out[0].remedy.as_deref().is_some_and(|r| {
            r.contains("`echo 0 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages`")
        }));
    }

    #[test]
    fn a_bigger_reservation_fails_at_the_default() {
        let mut s = fixture("plx");
        for p in &mut s.settings.hugepages {
            if p.page_size_kib == 1_048_576 {
                p.total = Reading::value(64);
                p.free = Reading::value(64);
            }
        }
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("64.0 GiB = 17.0%") && !out[0].evidence.contains("in use"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn small_2_mib_pool_passes() {
        // The asymmetric box: 2048 × 2 MiB = 4 GiB of 125.5 GiB.
        let out = check(&CHECK, &fixture("asymmetric"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("4.0 GiB = 3.1%"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_a_pool_or_memtotal_is_unreadable() {
        let mut s = fixture("plx");
        s.settings.hugepages[1].total = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
        let mut s = fixture("plx");
        s.settings.memory_total_bytes = Reading::unknown(UnknownReason::Malformed, "/proc/meminfo");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
