//! MEM009: the cgroup memory limit is below what loading the model needs.

use super::support::{HOST, bytes};
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::LimitValue;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM009",
    title: "cgroup memory limit below what loading needs",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "Checkpoint files are read through the page cache and staged in host memory on their way to the GPUs, and both count against the container's memory limit; below the checkpoint size the kernel OOM-kills the server while it loads (exit 137) or it thrashes re-reading weights.",
    run,
};

/// Host memory a load needs: checkpoint bytes × the load factor, rounded up.
pub(crate) fn load_need(weights: u64, factor: f64) -> u64 {
    // `as` saturates (NaN and negatives become 0), so a silly factor cannot panic.
    (weights as f64 * factor).ceil() as u64
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(plan) = input.plan else {
        return vec![Outcome::unknown(HOST, "no plan given (pass --plan FILE)")];
    };
    let Some(weights) = plan.weights_bytes_total else {
        return vec![Outcome::unknown(
            HOST,
            "the plan has no weights_bytes_total, so the host memory loading needs is unknown (`inferscope plan --json` writes it; add it to a hand-written plan)",
        )];
    };
    let cgroup = match need(&input.snapshot.settings.cgroup, HOST, "cgroup") {
        Ok(v) => v,
        Err(o) => return vec![o],
    };
    let limit = match need(&cgroup.memory_max, HOST, "cgroup memory limit") {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    let factor = input.thresholds.host_ram_load_factor;
    let needed = load_need(weights, factor);
    let what = format!(
        "loading needs {} (weights_bytes_total {} × host_ram_load_factor {factor})",
        bytes(needed),
        bytes(weights)
    );
    let file = if cgroup.version == 1 {
        "memory.limit_in_bytes"
    } else {
        "memory.max"
    };
    let place = format!("cgroup v{} {}", cgroup.version, cgroup.path);
    match limit {
        LimitValue::Unlimited => vec![Outcome::pass(
            HOST,
            format!("{place}: no memory limit ({file} and its ancestors); {what}"),
        )],
        LimitValue::Bytes(max) if max >= needed => vec![Outcome::pass(
            HOST,
            format!(
                "{place}: memory limit {} ({file}, tightest of the cgroup and its ancestors); {what}",
                bytes(max)
            ),
        )],
        LimitValue::Bytes(max) => {
            let gib = needed.div_ceil(1 << 30);
            vec![Outcome::fail(
                HOST,
                format!(
                    "{place}: memory limit {} ({file}, tightest of the cgroup and its ancestors) is below what {what}",
                    bytes(max)
                ),
                format!(
                    "Raise the limit to at least {gib} GiB: Docker `docker run --memory={gib}g ...`; Kubernetes `resources.limits.memory: {gib}Gi`; systemd `MemoryMax={gib}G` in the service's [Service] section. Or plan a smaller (quantised) checkpoint."
                ),
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{PlanFacts, Reading, UnknownReason};

    fn plan(weights: Option<u64>) -> PlanFacts {
        PlanFacts {
            weights_bytes_total: weights,
            ..PlanFacts::default()
        }
    }

    fn t() -> Thresholds {
        Thresholds::default()
    }

    #[test]
    fn no_plan_is_unknown() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert_eq!(out[0].evidence, "no plan given (pass --plan FILE)");
    }

    #[test]
    fn plan_without_weights_is_unknown_with_that_reason() {
        let p = plan(None);
        let out = run_with(&CHECK, &fixture("plx"), Some(&p), None, &t());
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("no weights_bytes_total"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unlimited_cgroup_passes() {
        let p = plan(Some(140 << 30));
        let out = run_with(&CHECK, &fixture("h100"), Some(&p), None, &t());
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("no memory limit"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn limit_above_need_passes_on_the_plx_box() {
        // 256 GiB limit; 140 GiB × 1.2 = 168 GiB.
        let p = plan(Some(140 << 30));
        let out = run_with(&CHECK, &fixture("plx"), Some(&p), None, &t());
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0].evidence.contains("memory limit 256.0 GiB")
                && out[0].evidence.contains("loading needs 168.0 GiB"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn limit_below_need_fails_on_the_plx_box() {
        // 240 GiB × 1.2 = 288 GiB > 256 GiB.
        let p = plan(Some(240 << 30));
        let out = run_with(&CHECK, &fixture("plx"), Some(&p), None, &t());
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("memory limit 256.0 GiB (memory.max, tightest of the cgroup and its ancestors) is below what loading needs 288.0 GiB (weights_bytes_total 240.0 GiB × host_ram_load_factor 1.2)"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("--memory=288g") && r.contains("288Gi"))
        );
    }

    #[test]
    fn unknown_when_the_cgroup_is_unknown() {
        let mut s = fixture("plx");
        s.settings.cgroup = Reading::unknown(UnknownReason::PermissionDenied, "/proc/self/cgroup");
        let p = plan(Some(240 << 30));
        assert_eq!(
            statuses(&run_with(&CHECK, &s, Some(&p), None, &t())),
            [Status::Unknown]
        );
    }

    #[test]
    fn load_need_never_panics() {
        assert_eq!(load_need(u64::MAX, 2.0), u64::MAX);
        assert_eq!(load_need(10, f64::NAN), 0);
        assert_eq!(load_need(10, -1.0), 0);
        assert_eq!(load_need(10, 1.2), 12);
    }
}
