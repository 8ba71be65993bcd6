//! GPU010: persistence mode is off.

use super::support::per_gpu_details;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU010",
    title: "Persistence mode off",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "Without persistence the driver tears the GPU down whenever no client holds it, so every server start, health probe or `nvidia-smi` call pays seconds of re-initialisation, and settings such as application clocks are lost between runs.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    per_gpu_details(s, |_g, subject, d| {
        match need(
            &d.persistence_mode,
            &subject,
            "persistence mode (nvmlDeviceGetPersistenceMode)",
        ) {
            Ok(true) => Outcome::pass(
                subject,
                "persistence mode on (nvmlDeviceGetPersistenceMode)",
            ),
            Ok(false) => Outcome::fail(
                subject,
                "persistence mode off (nvmlDeviceGetPersistenceMode)",
                "Run the persistence daemon: `sudo systemctl enable --now nvidia-persistenced` (it ships with the driver); for a quick test `sudo nvidia-smi -pm 1` (lost at reboot). Kubernetes: the GPU Operator's driver container starts nvidia-persistenced.",
            ),
            Err(o) => o,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::Reading;

    #[test]
    fn on_passes() {
        assert!(
            statuses(&check(&CHECK, &h100_with_driver()))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn off_fails() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[1].details {
            d.persistence_mode = Reading::value(false);
        }
        let out = check(&CHECK, &s);
        assert_eq!(out[1].status, Status::Fail);
        assert!(
            out[1]
                .remedy
                .as_deref()
                .unwrap_or("")
                .contains("nvidia-persistenced")
        );
    }

    #[test]
    fn unknown_without_driver() {
        let out = check(&CHECK, &fixture("rtx5090"));
        assert_eq!(statuses(&out), [Status::Unknown, Status::Unknown]);
        assert!(
            out[0]
                .evidence
                .starts_with("driver facts (NVML) unknown (not captured)")
        );
    }
}
