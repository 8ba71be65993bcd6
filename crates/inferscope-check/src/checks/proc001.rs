//! PROC001: a running process may run on CPUs that are not local to its GPUs.
//!
//! Also home of the helpers PROC002 shares: which GPUs a process uses, and where a GPU is.

use super::env003::gpu_label;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::cuda::cuda_devices;
use inferscope_host::{CpuSet, NumaNodeId, PciBusId, ProcessFacts, Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PROC001",
    title: "Process CPU affinity not local to its GPU",
    severity: Severity::Warn,
    scope: Scope::Process,
    why: "A server whose threads may run on the other socket's CPUs launches kernels and stages host-to-device copies across the socket interconnect, and first-touch puts its pinned buffers on that socket's memory; TensorRT-LLM measured ~22% of worker memory on the remote node before binding at exec.",
    run,
};

/// `pid 4242 (python3)`.
pub(crate) fn process_subject(p: &ProcessFacts) -> String {
    match p.name.known() {
        Some(n) => format!("pid {} ({n})", p.pid),
        None => format!("pid {}", p.pid),
    }
}

/// The outcome for a missing `--pid`.
pub(crate) fn no_process() -> Outcome {
    Outcome::unknown(super::support::HOST, "no process given (pass --pid PID)")
}

/// The GPUs a process uses and how that was found: the driver's process list, else the
/// process's own `CUDA_VISIBLE_DEVICES` resolved with the snapshot's CUDA order.
pub(crate) fn process_gpus(
    s: &Snapshot,
    p: &ProcessFacts,
) -> Result<(Vec<PciBusId>, String), Outcome> {
    let subject = process_subject(p);
    if !p.gpus.is_empty() {
        return Ok((p.gpus.clone(), "NVML lists it as a compute process".into()));
    }
    let driver_note = match &s.driver {
        Reading::Unknown(u) => format!("no driver process list ({})", u.reason),
        Reading::Value(_) => "the driver lists it on no GPU".into(),
    };
    match &p.cuda_visible_devices {
        Reading::Value(Some(list)) => {
            let mut view = s.clone();
            view.env.insert("CUDA_VISIBLE_DEVICES".into(), list.clone());
            match cuda_devices(&view) {
                Reading::Value(d) if !d.devices.is_empty() => Ok((
                    d.devices.iter().map(|(_, id)| *id).collect(),
                    format!(
                        "its CUDA_VISIBLE_DEVICES={list:?} (/proc/{}/environ) in CUDA_DEVICE_ORDER={}",
                        p.pid, d.device_order
                    ),
                )),
                Reading::Value(_) => Err(Outcome::unknown(
                    subject,
                    format!(
                        "{driver_note}, and its CUDA_VISIBLE_DEVICES={list:?} selects no GPU of this host"
                    ),
                )),
                Reading::Unknown(u) => Err(Outcome::unknown(
                    subject,
                    format!(
                        "{driver_note}, and its CUDA_VISIBLE_DEVICES={list:?} cannot be resolved: {}",
                        u.detail
                    ),
                )),
            }
        }
        Reading::Value(None) => Err(Outcome::unknown(
            subject,
            format!(
                "no GPU can be attributed: {driver_note}, and its environment has no CUDA_VISIBLE_DEVICES"
            ),
        )),
        Reading::Unknown(u) => Err(Outcome::unknown(
            subject,
            format!(
                "no GPU can be attributed: {driver_note}, and its environment is unreadable ({})",
                u.detail
            ),
        )),
    }
}

/// NUMA node of a GPU: the kernel's, or the only node of a single-node host.
pub(crate) fn gpu_node(s: &Snapshot, id: &PciBusId) -> Reading<NumaNodeId> {
    let Some(g) = s.gpus.iter().find(|g| g.pci_bus_id == *id) else {
        return Reading::unknown(
            inferscope_host::UnknownReason::NotPresent,
            format!("no GPU at {id} in this snapshot"),
        );
    };
    match (&g.numa_node, s.numa_nodes.as_slice()) {
        (Reading::Value(n), _) => Reading::value(*n),
        (Reading::Unknown(_), [only]) => Reading::value(only.id),
        (Reading::Unknown(u), _) => Reading::Unknown(u.clone()),
    }
}

/// CPUs local to a GPU, with where that came from.
fn gpu_cpus(s: &Snapshot, id: &PciBusId) -> Reading<(CpuSet, String)> {
    if let Some(n) = gpu_node(s, id).known()
        && let Some(node) = s.numa_nodes.iter().find(|x| x.id == *n)
        && !node.cpus.is_empty()
    {
        return Reading::value((node.cpus.clone(), format!("node {n} = CPUs {}", node.cpus)));
    }
    let Some(g) = s.gpus.iter().find(|g| g.pci_bus_id == *id) else {
        return Reading::unknown(
            inferscope_host::UnknownReason::NotPresent,
            format!("no GPU at {id} in this snapshot"),
        );
    };
    if let Some(c) = g.local_cpus.known() {
        return Reading::value((c.clone(), format!("local_cpulist {c}")));
    }
    if let Some(c) = g.details.known().and_then(|d| d.cpu_affinity.known()) {
        return Reading::value((c.clone(), format!("NVML CPU affinity {c}")));
    }
    match &g.local_cpus {
        Reading::Unknown(u) => Reading::Unknown(u.clone()),
        Reading::Value(_) => Reading::unknown(
            inferscope_host::UnknownReason::NotReported,
            "GPU locality unknown",
        ),
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(p) = input.process else {
        return vec![no_process()];
    };
    let s = input.snapshot;
    let subject = process_subject(p);
    let allowed = match &p.cpus_allowed {
        Reading::Value(c) => c,
        Reading::Unknown(u) => {
            return vec![Outcome::from_unknown(subject, "CPU affinity", u)];
        }
    };
    let (gpus, how) = match process_gpus(s, p) {
        Ok(x) => x,
        Err(o) => return vec![o],
    };
    let mut local = CpuSet::new();
    let mut per_gpu = Vec::new();
    let mut nodes: Vec<NumaNodeId> = Vec::new();
    for id in &gpus {
        match gpu_cpus(s, id) {
            Reading::Value((cpus, from)) => {
                local = local.union(&cpus);
                per_gpu.push(format!("{} local to {from}", gpu_label(s, id)));
                if let Some(n) = gpu_node(s, id).known()
                    && !nodes.contains(n)
                {
                    nodes.push(*n);
                }
            }
            Reading::Unknown(u) => {
                return vec![Outcome::unknown(
                    subject,
                    format!(
                        "local CPUs of {} unknown ({}): {}",
                        gpu_label(s, id),
                        u.reason,
                        u.detail
                    ),
                )];
            }
        }
    }
    let evidence = format!(
        "Cpus_allowed_list {allowed} (/proc/{}/status); GPUs from {how}: {}",
        p.pid,
        per_gpu.join("; ")
    );
    if allowed.is_subset(&local) {
        return vec![Outcome::pass(subject, evidence)];
    }
    let remote = allowed.len() - allowed.intersection(&local).len();
    let target = allowed.intersection(&local);
    let target = if target.is_empty() {
        local.clone()
    } else {
        target
    };
    let nodes_list = nodes
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let restart = if nodes_list.is_empty() {
        format!("`taskset -c {target} <server command>`")
    } else {
        format!("`numactl --cpunodebind={nodes_list} --membind={nodes_list} -- <server command>`")
    };
    vec![Outcome::fail(
        subject,
        format!(
            "{evidence}; {remote} of the {} allowed CPUs are not local to its GPU(s)",
            allowed.len()
        ),
        format!(
            "Restart the server bound to its GPU's node: {restart} (one process per GPU: bind each worker to its own GPU's node). For the running process (threads only; memory stays where it is, see PROC002): `taskset -a -cp {target} {}`.",
            p.pid
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{GpuProcess, UnknownReason};
    use std::collections::BTreeMap;

    pub(crate) fn process(pid: u32, cpus: &str, cvd: Option<&str>) -> ProcessFacts {
        ProcessFacts {
            pid,
            name: Reading::value("python3".into()),
            cpus_allowed: Reading::value(cpus.parse().unwrap()),
            mems_allowed: Reading::value("0-1".parse().unwrap()),
            pages_per_node: Reading::value(BTreeMap::new()),
            gpus: Vec::new(),
            cuda_visible_devices: Reading::value(cvd.map(str::to_string)),
        }
    }

    fn run_p(s: &Snapshot, p: &ProcessFacts) -> Vec<Outcome> {
        run_with(&CHECK, s, None, Some(p), &Thresholds::default())
    }

    #[test]
    fn unpinned_worker_on_a_two_socket_host_fails() {
        // vLLM worker for GPU4 (node 1 = CPUs 1,3,5,7,9,11) allowed on every CPU.
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[4].details {
            d.processes = Reading::value(vec![GpuProcess {
                pid: 4242,
                used_memory_bytes: Reading::value(70 << 30),
                name: Reading::value("python3".into()),
            }]);
        }
        let mut p = process(4242, "0-11", None);
        p.gpus = vec![s.gpus[4].pci_bus_id];
        let out = run_p(&s, &p);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert_eq!(out[0].subject, "pid 4242 (python3)");
        assert!(
            out[0].evidence.contains("6 of the 12 allowed CPUs"),
            "{}",
            out[0].evidence
        );
        let r = out[0].remedy.as_deref().unwrap();
        assert!(r.contains("numactl --cpunodebind=1 --membind=1"), "{r}");
        assert!(r.contains("taskset -a -cp 1,3,5,7,9,11 4242"), "{r}");
    }

    #[test]
    fn bound_worker_passes_resolving_its_cuda_visible_devices() {
        // No driver facts: GPU taken from the process's CUDA_VISIBLE_DEVICES=1 → 0000:3a:00.0.
        let s = fixture("h100");
        let p = process(77, "0,2,4", Some("1"));
        let out = run_p(&s, &p);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0]
                .evidence
                .contains("GPU1 (0000:3a:00.0) local to node 0"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unattributable_or_unreadable_is_unknown() {
        let s = fixture("h100");
        let out = run_p(&s, &process(77, "0-11", None));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(out[0].evidence.contains("no GPU can be attributed"));
        let mut p = process(77, "0-11", Some("0"));
        p.cpus_allowed =
            Reading::unknown(UnknownReason::NotPresent, "/proc/77/status: not present");
        assert_eq!(statuses(&run_p(&s, &p)), [Status::Unknown]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
        assert!(check(&CHECK, &s)[0].evidence.contains("--pid"));
    }
}
