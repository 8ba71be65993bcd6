//! MEM006: `/dev/shm` too small for NCCL and multi-process serving.

use super::support::{SettingFails, bytes, host_setting};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM006",
    title: "/dev/shm too small for NCCL / tensor parallelism",
    severity: Severity::Error,
    scope: Scope::Host,
    why: "NCCL's shared-memory transport and multi-process servers (vLLM TP workers, TGI shards) put buffers in /dev/shm; Docker's 64 MiB default makes tensor-parallel start-up fail with NCCL 'unhandled system error' or bus errors.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let min = input.thresholds.min_dev_shm_bytes;
    host_setting(
        &input.snapshot.settings.dev_shm,
        "/dev/shm size",
        |shm| {
            format!(
                "/dev/shm is {} ({}); threshold {}",
                bytes(shm.bytes),
                shm.basis.replace('_', " "),
                bytes(min)
            )
        },
        |shm| {
            (shm.bytes < min).then_some(SettingFails {
                consequence: None,
                remedy: "Docker: `docker run --shm-size=16g ...` (or `--ipc=host`); Kubernetes: mount an `emptyDir: {medium: Memory, sizeLimit: 16Gi}` at /dev/shm; host: `mount -o remount,size=16G /dev/shm`.",
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    #[test]
    fn kernel_default_half_of_ram_passes() {
        assert_eq!(statuses(&check(&CHECK, &fixture("h100"))), [Status::Pass]);
    }

    #[test]
    fn docker_default_64_mib_fails() {
        // The PLX box is modelled as a Docker container view with --shm-size defaulted.
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.starts_with("/dev/shm is 64.0 MiB"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_mounts_unreadable() {
        let mut s = fixture("h100");
        s.settings.dev_shm = inferscope_host::Reading::unknown(
            inferscope_host::UnknownReason::PermissionDenied,
            "/proc/self/mounts: permission denied",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
