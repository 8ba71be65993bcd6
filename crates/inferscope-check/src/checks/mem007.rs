//! MEM007: `RLIMIT_MEMLOCK` too low for pinned host memory and RDMA.

use super::support::{HOST, bytes};
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::LimitValue;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM007",
    title: "RLIMIT_MEMLOCK too low for pinned memory",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "RDMA memory registration (NCCL over InfiniBand/RoCE, GPUDirect RDMA, UCX, disaggregated KV transfer) counts against RLIMIT_MEMLOCK; with Docker's or systemd's 8 MiB default `ibv_reg_mr` fails with ENOMEM and NCCL falls back to TCP sockets or aborts.",
    run,
};

fn show(v: &LimitValue) -> String {
    match v {
        LimitValue::Unlimited => "unlimited".to_string(),
        LimitValue::Bytes(b) => bytes(*b),
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let limit = match need(
        &input.snapshot.settings.memlock_limit,
        HOST,
        "max locked memory",
    ) {
        Ok(v) => v,
        Err(o) => return vec![o],
    };
    let min = input.thresholds.min_memlock_bytes;
    let evidence = format!(
        "Max locked memory is {} soft, {} hard (/proc/self/limits of the capturing process); threshold {}",
        show(&limit.soft),
        show(&limit.hard),
        bytes(min)
    );
    let too_low = matches!(limit.soft, LimitValue::Bytes(b) if b < min);
    if !too_low {
        return vec![Outcome::pass(HOST, evidence)];
    }
    let hard_note = match limit.hard {
        LimitValue::Bytes(h) if h < min => {
            " The hard limit is low too, so raising it needs root or the container/service settings below."
        }
        LimitValue::Bytes(_) => {
            " The hard limit allows more: `ulimit -l hard` in the launching shell raises the soft limit to it."
        }
        LimitValue::Unlimited => {
            " The hard limit allows more: `ulimit -l unlimited` in the launching shell is enough."
        }
    };
    vec![Outcome::fail(
        HOST,
        format!("{evidence}.{hard_note}"),
        "Shell: `ulimit -l unlimited` before starting the server; Docker: `docker run --ulimit memlock=-1 ...` (compose: `ulimits: {memlock: -1}`); systemd service: `LimitMEMLOCK=infinity` in [Service]; login sessions: `* - memlock unlimited` in /etc/security/limits.conf.",
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{Reading, ResourceLimit, UnknownReason};

    #[test]
    fn unlimited_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0]
                .evidence
                .starts_with("Max locked memory is unlimited soft"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn eight_mib_fails_on_the_dev_vm() {
        let out = check(&CHECK, &fixture("dev-vm"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("8.0 MiB soft, 8.0 MiB hard")
                && out[0].evidence.contains("hard limit is low too"),
            "{}",
            out[0].evidence
        );
        assert!(out[0].remedy.as_deref().is_some_and(
            |r| r.contains("--ulimit memlock=-1") && r.contains("LimitMEMLOCK=infinity")
        ));
    }

    #[test]
    fn low_soft_under_an_unlimited_hard_limit_fails_and_says_ulimit_suffices() {
        let mut s = fixture("h100");
        s.settings.memlock_limit = Reading::value(ResourceLimit {
            soft: LimitValue::Bytes(64 << 10),
            hard: LimitValue::Unlimited,
        });
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("`ulimit -l unlimited`"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn a_limit_at_the_threshold_passes() {
        let mut s = fixture("dev-vm");
        let t = Thresholds {
            min_memlock_bytes: 8 << 20,
            ..Thresholds::default()
        };
        assert_eq!(
            statuses(&run_with(&CHECK, &s, None, None, &t)),
            [Status::Pass]
        );
        s.settings.memlock_limit = Reading::value(ResourceLimit {
            soft: LimitValue::Bytes(128 << 30),
            hard: LimitValue::Bytes(128 << 30),
        });
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn unknown_when_limits_unreadable() {
        let mut s = fixture("h100");
        s.settings.memlock_limit =
            Reading::unknown(UnknownReason::PermissionDenied, "/proc/self/limits");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
