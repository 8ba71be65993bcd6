//! GPU011: the GPU has seen uncorrectable ECC errors.

use super::support::per_gpu_details;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::Reading;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU011",
    title: "Uncorrectable ECC errors",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "An uncorrectable ECC error means data in GPU memory was lost: the CUDA context that touched it dies (Xid 48/94/95), so a server on this GPU crashes or returns corrupted results until the GPU is reset and its memory repaired.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    per_gpu_details(s, |_g, subject, d| {
        let ecc = match need(&d.ecc, &subject, "ECC state (nvmlDeviceGetTotalEccErrors)") {
            Ok(e) => e,
            Err(o) => return o,
        };
        let mode = match &ecc.mode {
            Reading::Value(m) if m.current => "ECC on".to_string(),
            Reading::Value(m) if m.pending => "ECC off (on after the next reset)".to_string(),
            Reading::Value(_) => "ECC off: errors are neither corrected nor counted".to_string(),
            Reading::Unknown(u) => format!("ECC mode unknown ({})", u.reason),
        };
        let (vol, agg) = (&ecc.volatile_uncorrected, &ecc.aggregate_uncorrected);
        let show = |r: &Reading<u64>| match r {
            Reading::Value(n) => n.to_string(),
            Reading::Unknown(u) => format!("unknown ({})", u.reason),
        };
        let evidence = format!(
            "{mode}; uncorrected errors: volatile {}, aggregate {} (nvmlDeviceGetTotalEccErrors)",
            show(vol),
            show(agg)
        );
        let v = vol.known().copied().unwrap_or(0);
        let a = agg.known().copied().unwrap_or(0);
        if v > 0 {
            Outcome::fail(
                subject,
                format!("{evidence}: errors since the driver loaded"),
                "Drain the GPU, then reset it (`sudo nvidia-smi -r -i N`, or reboot) so row remapping / page retirement takes effect; check `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i N` and the kernel log for Xid 48/63/64/94/95. Errors that return after the reset need an RMA.",
            )
        } else if a > 0 {
            Outcome::fail(
                subject,
                format!("{evidence}: errors in the GPU's lifetime"),
                "Check that the memory was repaired: `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT -i N` should show no pending remap and no remap failure (GPU012). If the count keeps growing, open an RMA; once understood, silence this GPU's history with `[checks.GPU011] enabled = false`.",
            )
        } else if vol.is_known() || agg.is_known() {
            Outcome::pass(subject, evidence)
        } else {
            Outcome::unknown(subject, format!("{evidence}: error counts unknown"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{EccState, PendingMode, UnknownReason};

    fn set_ecc(s: &mut inferscope_host::Snapshot, gpu: usize, f: impl Fn(&mut EccState)) {
        if let Reading::Value(d) = &mut s.gpus[gpu].details
            && let Reading::Value(e) = &mut d.ecc
        {
            f(e);
        }
    }

    #[test]
    fn no_errors_pass() {
        let out = check(&CHECK, &h100_with_driver());
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(
            out[0]
                .evidence
                .starts_with("ECC on; uncorrected errors: volatile 0, aggregate 0")
        );
    }

    #[test]
    fn volatile_errors_fail() {
        let mut s = h100_with_driver();
        set_ecc(&mut s, 4, |e| e.volatile_uncorrected = Reading::value(2));
        let out = check(&CHECK, &s);
        assert_eq!(out[4].status, Status::Fail);
        assert!(out[4].evidence.contains("volatile 2"));
    }

    #[test]
    fn aggregate_errors_fail() {
        let mut s = h100_with_driver();
        set_ecc(&mut s, 0, |e| e.aggregate_uncorrected = Reading::value(1));
        assert_eq!(check(&CHECK, &s)[0].status, Status::Fail);
    }

    #[test]
    fn ecc_off_is_evidence_not_failure() {
        let mut s = h100_with_driver();
        set_ecc(&mut s, 0, |e| {
            e.mode = Reading::value(PendingMode {
                current: false,
                pending: false,
            })
        });
        let out = check(&CHECK, &s);
        assert_eq!(out[0].status, Status::Pass);
        assert!(out[0].evidence.starts_with("ECC off"));
    }

    #[test]
    fn unknown_when_counts_unsupported() {
        let mut s = h100_with_driver();
        set_ecc(&mut s, 0, |e| {
            let u = || Reading::unknown(UnknownReason::NotSupported, "NVML ECC: Not Supported");
            e.volatile_uncorrected = u();
            e.aggregate_uncorrected = u();
        });
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        assert!(
            statuses(&check(&CHECK, &fixture("h100")))
                .iter()
                .all(|x| *x == Status::Unknown)
        );
    }
}
