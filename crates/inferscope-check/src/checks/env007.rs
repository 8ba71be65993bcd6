//! ENV007: `OMP_NUM_THREADS` unset, or above the CPUs each GPU worker can have.

use super::env004::nvidia_gpus;
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{Reading, topology};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV007",
    title: "OMP_NUM_THREADS unset or oversubscribed",
    severity: Severity::Info,
    scope: Scope::Environment,
    why: "Without OMP_NUM_THREADS, PyTorch starts one OpenMP thread per CPU in every worker process, so a server with one process per GPU runs GPUs × CPUs threads that fight over the cores feeding the GPUs (vLLM's multiprocessing executor resets it to 1 and warns 'Reducing Torch parallelism'; other engines' and plain torchrun workers may not).",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let (cpus, cpus_from) = match topology::allowed_cpus(s) {
        Reading::Value(c) => (c.len(), format!("cgroup cpuset.cpus.effective {c}")),
        Reading::Unknown(cg) => match &s.host.online_cpus {
            Reading::Value(c) => (
                c.len(),
                format!("online CPUs {c} (cgroup limit unknown: {})", cg.detail),
            ),
            Reading::Unknown(u) => {
                return vec![Outcome::unknown(
                    HOST,
                    format!(
                        "usable CPU count unknown: cgroup {}; /sys/devices/system/cpu/online {}",
                        cg.detail, u.detail
                    ),
                )];
            }
        },
    };
    let workers = nvidia_gpus(s).max(1) as u64;
    let per_worker = (cpus / workers).max(1);
    let basis = format!(
        "{cpus} usable CPUs ({cpus_from}) / {workers} GPU worker(s) = {per_worker} per worker"
    );
    let remedy = format!(
        "`export OMP_NUM_THREADS={per_worker}` in the server's environment (container env, systemd `Environment=`, launcher script); lower it if the server also runs CPU-heavy tokenization or preprocessing."
    );
    let Some(raw) = s.env.get("OMP_NUM_THREADS") else {
        return vec![Outcome::fail(
            HOST,
            format!(
                "OMP_NUM_THREADS is not set: each worker process starts one OpenMP thread per CPU; {basis}"
            ),
            remedy,
        )];
    };
    // `4` or a nested list `4,2`: the first level is the one PyTorch's intra-op pool uses.
    let first = raw.split(',').next().unwrap_or("").trim();
    match first.parse::<u64>() {
        Ok(n) if n >= 1 && n <= per_worker => vec![Outcome::pass(
            HOST,
            format!("OMP_NUM_THREADS={raw:?}; {basis}"),
        )],
        Ok(n) if n >= 1 => vec![Outcome::fail(
            HOST,
            format!(
                "OMP_NUM_THREADS={raw:?} is above the CPUs each worker can have: {basis}; {} threads compete for {cpus} CPUs",
                n.saturating_mul(workers)
            ),
            remedy,
        )],
        _ => vec![Outcome::fail(
            HOST,
            format!(
                "OMP_NUM_THREADS={raw:?} is not a positive number: the OpenMP runtime ignores it and starts one thread per CPU; {basis}"
            ),
            remedy,
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::UnknownReason;

    #[test]
    fn unset_fails_with_the_per_worker_share() {
        // PLX box: 28 CPUs, 8 GPUs.
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("28 usable CPUs"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap()
                .starts_with("`export OMP_NUM_THREADS=3`")
        );
    }

    #[test]
    fn within_share_passes_above_fails() {
        let mut s = fixture("rtx5090"); // 64 CPUs, 2 GPUs
        s.env.insert("OMP_NUM_THREADS".into(), "16".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
        s.env.insert("OMP_NUM_THREADS".into(), "64".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("128 threads compete for 64 CPUs"));
        s.env.insert("OMP_NUM_THREADS".into(), "auto".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Fail]);
    }

    #[test]
    fn cgroup_limit_is_the_budget() {
        // The asymmetric box's vllm.service is limited to 16 of 32 CPUs, with 5 GPUs.
        let mut s = fixture("asymmetric");
        s.env.insert("OMP_NUM_THREADS".into(), "4".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("16 usable CPUs"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_cpu_count_is_unknown() {
        let mut s = fixture("h100");
        s.settings.cgroup = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/proc/self/cgroup: permission denied",
        );
        s.host.online_cpus = Reading::unknown(
            UnknownReason::NotPresent,
            "/sys/devices/system/cpu/online: not present",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
