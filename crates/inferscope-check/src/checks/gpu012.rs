//! GPU012: a memory repair (row remap or page retirement) is pending or has failed.

use super::support::per_gpu_details;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::Reading;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU012",
    title: "Row remapping or page retirement pending or failed",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "A pending row remap or page retirement means faulty GPU memory is still in use until the GPU is reset, so a server may hit the same uncorrectable error again; a failed remap means the GPU has run out of spare rows and needs replacement.",
    run,
};

fn show<T: std::fmt::Display>(r: &Reading<T>) -> String {
    match r {
        Reading::Value(v) => v.to_string(),
        Reading::Unknown(u) => format!("unknown ({})", u.reason),
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    per_gpu_details(s, |_g, subject, d| {
        let m = match need(&d.memory_repair, &subject, "memory repair state (NVML)") {
            Ok(m) => m,
            Err(o) => return o,
        };
        let evidence = format!(
            "row remapping (nvmlDeviceGetRemappedRows): pending {}, failure {}, rows remapped uncorrectable {} / correctable {}; page retirement (nvmlDeviceGetRetiredPages): pending {}, double-bit pages {}, single-bit pages {}",
            show(&m.remap_pending),
            show(&m.remap_failure),
            show(&m.remapped_rows_uncorrectable),
            show(&m.remapped_rows_correctable),
            show(&m.retirement_pending),
            show(&m.retired_pages_double_bit),
            show(&m.retired_pages_single_bit)
        );
        let yes = |r: &Reading<bool>| r.known() == Some(&true);
        if yes(&m.remap_failure) {
            return Outcome::fail(
                subject,
                format!("{evidence}: a row remap failed"),
                "The GPU has no spare rows left: take it out of service (drain, `nvidia-smi -i N` excluded via CUDA_VISIBLE_DEVICES / node cordon) and open an RMA with the board serial from `nvidia-smi -q -i N`.",
            );
        }
        let mut why = Vec::new();
        if yes(&m.remap_pending) {
            why.push("a row remap is pending");
        }
        if yes(&m.retirement_pending) {
            why.push("a page retirement is pending");
        }
        if m.retired_pages_double_bit.known().is_some_and(|n| *n > 0) {
            why.push("pages were retired for double-bit (uncorrectable) errors");
        }
        if !why.is_empty() {
            return Outcome::fail(
                subject,
                format!("{evidence}: {}", why.join("; ")),
                "Drain the GPU and reset it so the repair takes effect: `sudo nvidia-smi -r -i N` (stop every process on it first), or reboot; then re-check with `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT -i N`. Repeated repairs mean the board needs an RMA.",
            );
        }
        let flags = [&m.remap_pending, &m.remap_failure, &m.retirement_pending];
        if flags.iter().any(|r| r.is_known()) || m.retired_pages_double_bit.is_known() {
            Outcome::pass(subject, evidence)
        } else {
            Outcome::unknown(
                subject,
                format!("{evidence}: neither row remapping nor page retirement could be read"),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{MemoryRepair, UnknownReason};

    fn set(s: &mut inferscope_host::Snapshot, gpu: usize, f: impl Fn(&mut MemoryRepair)) {
        if let Reading::Value(d) = &mut s.gpus[gpu].details
            && let Reading::Value(m) = &mut d.memory_repair
        {
            f(m);
        }
    }

    #[test]
    fn healthy_memory_passes() {
        assert!(
            statuses(&check(&CHECK, &h100_with_driver()))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn pending_remap_fails() {
        let mut s = h100_with_driver();
        set(&mut s, 3, |m| m.remap_pending = Reading::value(true));
        let out = check(&CHECK, &s);
        assert_eq!(out[3].status, Status::Fail);
        assert!(
            out[3].evidence.ends_with("a row remap is pending"),
            "{}",
            out[3].evidence
        );
    }

    #[test]
    fn remap_failure_fails_with_rma_remedy() {
        let mut s = h100_with_driver();
        set(&mut s, 0, |m| m.remap_failure = Reading::value(true));
        let out = check(&CHECK, &s);
        assert_eq!(out[0].status, Status::Fail);
        assert!(out[0].remedy.as_deref().unwrap_or("").contains("RMA"));
    }

    #[test]
    fn double_bit_retired_pages_fail() {
        let mut s = h100_with_driver();
        set(&mut s, 0, |m| {
            m.retired_pages_double_bit = Reading::value(2)
        });
        assert_eq!(check(&CHECK, &s)[0].status, Status::Fail);
    }

    #[test]
    fn unknown_when_nothing_readable() {
        let mut s = h100_with_driver();
        set(&mut s, 0, |m| {
            let u = || Reading::unknown(UnknownReason::NotSupported, "NVML: Not Supported");
            m.remap_pending = u();
            m.remap_failure = u();
            m.retirement_pending = u();
            m.retired_pages_double_bit =
                Reading::unknown(UnknownReason::NotSupported, "NVML: Not Supported");
        });
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        assert_eq!(check(&CHECK, &fixture("plx"))[0].status, Status::Unknown);
    }
}
