//! GPU013: MIG is enabled, or will be after the next reset.

use super::support::per_gpu_details;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{Reading, UnknownReason};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU013",
    title: "MIG enabled or pending",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "With MIG on, CUDA sees only the MIG instances (one per process, with a slice of the memory and SMs), not the whole GPU: a server sized for the full GPU runs out of memory, and tensor parallelism across MIG instances is not supported by NCCL. A pending mode change takes effect at the next reset, surprising the next deployment.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    per_gpu_details(s, |_g, subject, d| {
        let mig = match &d.mig {
            Reading::Value(m) => m,
            // A GPU without MIG support cannot have MIG on.
            Reading::Unknown(u) if u.reason == UnknownReason::NotSupported => {
                return Outcome::pass(
                    subject,
                    format!(
                        "MIG not supported by this GPU (nvmlDeviceGetMigMode: {})",
                        u.detail
                    ),
                );
            }
            Reading::Unknown(u) => {
                return Outcome::from_unknown(subject, "MIG mode (nvmlDeviceGetMigMode)", u);
            }
        };
        let names: Vec<String> = mig
            .instances
            .iter()
            .map(|i| i.name.known().cloned().unwrap_or_else(|| "?".to_string()))
            .collect();
        let evidence = format!(
            "MIG mode current {}, pending {} (nvmlDeviceGetMigMode); {} instance(s){}",
            if mig.mode.current {
                "enabled"
            } else {
                "disabled"
            },
            if mig.mode.pending {
                "enabled"
            } else {
                "disabled"
            },
            names.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(": {}", names.join(", "))
            }
        );
        if mig.mode.current || mig.mode.pending {
            Outcome::fail(
                subject,
                evidence,
                "If the server should own the whole GPU: stop every process on it and run `sudo nvidia-smi -i N -mig 0` (then `sudo nvidia-smi -r -i N` or reboot if it stays pending); on Kubernetes set the GPU Operator's MIG manager label `nvidia.com/mig.config=all-disabled`. If MIG is intended, size the server for one instance and pass it by MIG UUID (`CUDA_VISIBLE_DEVICES=MIG-...`), without tensor parallelism across instances.",
            )
        } else {
            Outcome::pass(subject, evidence)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{MigInstance, MigState, PendingMode};

    fn set(s: &mut inferscope_host::Snapshot, gpu: usize, mig: Reading<MigState>) {
        if let Reading::Value(d) = &mut s.gpus[gpu].details {
            d.mig = mig;
        }
    }

    #[test]
    fn mig_off_passes() {
        assert!(
            statuses(&check(&CHECK, &h100_with_driver()))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn mig_on_fails_and_lists_instances() {
        let mut s = h100_with_driver();
        set(
            &mut s,
            2,
            Reading::value(MigState {
                mode: PendingMode {
                    current: true,
                    pending: true,
                },
                instances: vec![MigInstance {
                    uuid: Reading::unknown(UnknownReason::NotCaptured, "x"),
                    name: Reading::value("3g.40gb".into()),
                    memory_total_bytes: Reading::value(40 << 30),
                }],
            }),
        );
        let out = check(&CHECK, &s);
        assert_eq!(out[2].status, Status::Fail);
        assert!(
            out[2].evidence.ends_with("1 instance(s): 3g.40gb"),
            "{}",
            out[2].evidence
        );
    }

    #[test]
    fn pending_enable_fails() {
        let mut s = h100_with_driver();
        set(
            &mut s,
            0,
            Reading::value(MigState {
                mode: PendingMode {
                    current: false,
                    pending: true,
                },
                instances: vec![],
            }),
        );
        assert_eq!(check(&CHECK, &s)[0].status, Status::Fail);
    }

    #[test]
    fn unsupported_passes_and_missing_driver_is_unknown() {
        let mut s = h100_with_driver();
        set(
            &mut s,
            0,
            Reading::unknown(UnknownReason::NotSupported, "NVML MIG mode: Not Supported"),
        );
        assert_eq!(check(&CHECK, &s)[0].status, Status::Pass);
        set(
            &mut s,
            0,
            Reading::unknown(
                UnknownReason::PermissionDenied,
                "NVML MIG mode: No permission",
            ),
        );
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        assert_eq!(check(&CHECK, &fixture("plx"))[0].status, Status::Unknown);
    }
}
