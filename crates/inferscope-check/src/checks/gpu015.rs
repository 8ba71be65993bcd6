//! GPU015: GPU memory is already taken, or processes already run, before the server starts.

use super::support::bytes;
use super::support::per_gpu_details;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{GpuMemory, Reading};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU015",
    title: "GPU memory already in use before the server starts",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "Servers size their KV cache from the memory they find (vLLM's --gpu-memory-utilization is a share of the whole GPU): memory held by a leftover process or another tenant shrinks the cache or makes start-up fail with out-of-memory.",
    run,
};

/// Memory allocated by processes, without the driver's reservation. NVML's v2 API and
/// `nvidia-smi` report Used without Reserved (Total = Reserved + Used + Free); the v1 API
/// folds the reservation into Used. Which one a snapshot holds is told by whether the
/// three known parts add up to the total.
pub(crate) fn allocated_bytes(m: &GpuMemory) -> u64 {
    match m.reserved_bytes.known() {
        Some(r) => {
            let parts = m.used_bytes.saturating_add(m.free_bytes).saturating_add(*r);
            // Allow for rounding in MiB-granular text imports, but less than the reservation.
            let slack = (m.total_bytes / 100).min(*r / 2);
            if parts <= m.total_bytes.saturating_add(slack) {
                m.used_bytes
            } else {
                m.used_bytes.saturating_sub(*r)
            }
        }
        None => m.used_bytes,
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let limit = input.thresholds.max_preused_gpu_memory_bytes;
    per_gpu_details(s, |_g, subject, d| {
        let mut parts = Vec::new();
        let mut over = false;
        match &d.memory {
            Reading::Value(m) => {
                let used = allocated_bytes(m);
                over = used > limit;
                parts.push(format!(
                        "{} in use of {} (nvmlDeviceGetMemoryInfo; driver reservation {} excluded); threshold {}",
                        bytes(used),
                        bytes(m.total_bytes),
                        m.reserved_bytes.known().map_or("unknown".to_string(), |r| bytes(*r)),
                        bytes(limit)
                    ));
            }
            Reading::Unknown(u) => parts.push(format!("memory use unknown ({})", u.reason)),
        }
        let mut pids = Vec::new();
        match &d.processes {
            Reading::Value(ps) if ps.is_empty() => parts
                .push("no compute processes (nvmlDeviceGetComputeRunningProcesses)".to_string()),
            Reading::Value(ps) => {
                let list: Vec<String> = ps
                    .iter()
                    .map(|p| {
                        let name = p.name.known().map_or(String::new(), |n| format!(" {n}"));
                        let mem = p
                            .used_memory_bytes
                            .known()
                            .map_or(String::new(), |b| format!(", {}", bytes(*b)));
                        format!("PID {}{name}{mem}", p.pid)
                    })
                    .collect();
                pids = ps.iter().map(|p| p.pid.to_string()).collect();
                parts.push(format!(
                    "{} compute process(es) (nvmlDeviceGetComputeRunningProcesses): {}",
                    ps.len(),
                    list.join("; ")
                ));
            }
            Reading::Unknown(u) => parts.push(format!("processes unknown ({})", u.reason)),
        }
        let evidence = parts.join("; ");
        if over || !pids.is_empty() {
            let who = if pids.is_empty() {
                "Find the owner with `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv -i N` (PIDs are the host's; inside a container it may be another container)".to_string()
            } else {
                format!(
                    "Stop the process(es) holding the GPU (`sudo kill {}` after checking what they are with `ps -o pid,user,cmd -p {}`; the PIDs are in the host's PID namespace)",
                    pids.join(" "),
                    pids.join(",")
                )
            };
            return Outcome::fail(
                subject,
                evidence,
                format!(
                    "{who}, or start the server on a free GPU with `CUDA_VISIBLE_DEVICES`; if sharing is intended, lower vLLM `--gpu-memory-utilization` so the server's share fits next to it."
                ),
            );
        }
        if d.memory.is_known() {
            Outcome::pass(subject, evidence)
        } else {
            Outcome::unknown(subject, evidence)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{GpuProcess, UnknownReason};

    #[test]
    fn empty_gpus_pass() {
        let out = check(&CHECK, &h100_with_driver());
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(
            out[0].evidence.starts_with("4.0 MiB in use of 79.6 GiB"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn used_memory_above_threshold_fails() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[6].details
            && let Reading::Value(m) = &mut d.memory
        {
            m.used_bytes = 20 << 30;
            m.free_bytes = m.total_bytes - m.used_bytes - 559_218_688;
        }
        let out = check(&CHECK, &s);
        assert_eq!(out[6].status, Status::Fail);
        assert!(
            out[6].evidence.starts_with("20.0 GiB in use"),
            "{}",
            out[6].evidence
        );
    }

    #[test]
    fn listed_processes_fail_with_their_pids() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[0].details {
            d.processes = Reading::value(vec![GpuProcess {
                pid: 4242,
                used_memory_bytes: Reading::value(300 << 20),
                name: Reading::value("python3".into()),
            }]);
        }
        let out = check(&CHECK, &s);
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            out[0].evidence.contains("PID 4242 python3, 300.0 MiB"),
            "{}",
            out[0].evidence
        );
        assert!(out[0].remedy.as_deref().unwrap_or("").contains("kill 4242"));
    }

    #[test]
    fn v1_used_including_reservation_is_corrected() {
        let m = GpuMemory {
            total_bytes: 80 << 30,
            used_bytes: (1 << 30) + (512 << 20),
            free_bytes: (80 << 30) - (1 << 30) - (512 << 20),
            reserved_bytes: Reading::value(1 << 30),
        };
        assert_eq!(allocated_bytes(&m), 512 << 20);
        let v2 = GpuMemory {
            total_bytes: 80 << 30,
            used_bytes: 512 << 20,
            free_bytes: (80 << 30) - (1 << 30) - (512 << 20),
            reserved_bytes: Reading::value(1 << 30),
        };
        assert_eq!(allocated_bytes(&v2), 512 << 20);
    }

    #[test]
    fn unknown_without_memory_facts() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[0].details {
            d.memory = Reading::unknown(
                UnknownReason::PermissionDenied,
                "NVML memory: No permission",
            );
        }
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        assert_eq!(check(&CHECK, &fixture("plx"))[0].status, Status::Unknown);
    }
}
