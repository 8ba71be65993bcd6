//! CPU001: CPU frequency governor not `performance`.

use super::support::HOST;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "CPU001",
    title: "CPU frequency governor not performance",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "An inference server's CPU work comes in short bursts (scheduling a step, launching kernels, detokenizing) between GPU waits; powersave, ondemand and schedutil clock idle-looking cores down, so each step starts on a slow core and time per output token grows and varies.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let groups = match need(
        &input.snapshot.settings.cpu_governors,
        HOST,
        "CPU frequency governor",
    ) {
        Ok(v) => v,
        Err(o) => return vec![o],
    };
    if groups.is_empty() {
        return vec![Outcome::unknown(
            HOST,
            "CPU frequency governor unknown: no online CPU reports a scaling_governor",
        )];
    }
    let describe =
        |g: &inferscope_host::GovernorGroup| format!("{} on CPUs {}", g.governor, g.cpus);
    let all: Vec<String> = groups.iter().map(describe).collect();
    let evidence = format!(
        "{} (/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
        all.join("; ")
    );
    let slow: Vec<String> = groups
        .iter()
        .filter(|g| g.governor != "performance")
        .map(describe)
        .collect();
    if slow.is_empty() {
        return vec![Outcome::pass(HOST, evidence)];
    }
    vec![Outcome::fail(
        HOST,
        format!("{evidence}; not performance: {}", slow.join("; ")),
        "`cpupower frequency-set -g performance` (as root; or `echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor`); to keep it, `tuned-adm profile throughput-performance` (or `latency-performance`), or set the BIOS power profile to maximum performance.",
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{GovernorGroup, Reading};

    #[test]
    fn performance_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.starts_with("performance on CPUs 0-11"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn powersave_fails_on_the_plx_box() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .ends_with("not performance: powersave on CPUs 0-27"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("cpupower frequency-set -g performance"))
        );
    }

    #[test]
    fn schedutil_fails_on_the_workstation() {
        assert_eq!(
            statuses(&check(&CHECK, &fixture("rtx5090"))),
            [Status::Fail]
        );
    }

    #[test]
    fn a_mixed_host_lists_only_the_slow_cpus() {
        let mut s = fixture("h100");
        s.settings.cpu_governors = Reading::value(vec![
            GovernorGroup {
                governor: "performance".into(),
                cpus: "0-5".parse().unwrap(),
            },
            GovernorGroup {
                governor: "ondemand".into(),
                cpus: "6-11".parse().unwrap(),
            },
        ]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .ends_with("not performance: ondemand on CPUs 6-11"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn vms_without_cpufreq_are_unknown_with_the_reason() {
        for name in ["cloud-vm", "dev-vm"] {
            let out = check(&CHECK, &fixture(name));
            assert_eq!(statuses(&out), [Status::Unknown], "{name}");
            assert!(
                out[0].evidence.contains("no cpufreq driver"),
                "{}",
                out[0].evidence
            );
        }
        let mut s = fixture("h100");
        s.settings.cpu_governors = Reading::value(Vec::new());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
