//! MEM008: the cgroup cpuset leaves the process none of a GPU's local CPUs.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::topology::gpu_local_cpus;
use inferscope_host::{Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM008",
    title: "cgroup cpuset excludes the GPU's local CPUs",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "When the container or service cpuset holds none of a GPU's local CPUs, every thread that feeds that GPU runs on the other socket: kernel launches, host-to-device copies and pinned buffers cross the socket interconnect, and NUMA binding to the GPU's node is impossible.",
    run,
};

/// Where the GPU's local CPUs come from, and the cgroup it is intersected with, for evidence.
fn sources(s: &Snapshot, g: &inferscope_host::Gpu) -> (String, String, String) {
    let local = match g.numa_node.known() {
        Some(n) => match s.numa_nodes.iter().find(|x| x.id == *n) {
            Some(node) => format!("node {n} CPUs {}", node.cpus),
            None => format!("local_cpulist {}", g.local_cpus),
        },
        None => format!("local_cpulist {} (NUMA node unknown)", g.local_cpus),
    };
    let (cpus, mems) = match &s.settings.cgroup {
        Reading::Value(cg) => (
            format!("cpuset.cpus.effective {}", cg.cpus_effective),
            format!("cpuset.mems.effective {}", cg.mems_effective),
        ),
        Reading::Unknown(u) => (format!("cgroup unknown: {}", u.detail), String::new()),
    };
    (local, cpus, mems)
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            let usable = match gpu_local_cpus(s, &g.pci_bus_id) {
                Reading::Value(c) => c,
                Reading::Unknown(u) => {
                    return Outcome::from_unknown(subject, "usable local CPUs", &u);
                }
            };
            let (local, cgroup, mems) = sources(s, g);
            if !usable.is_empty() {
                return Outcome::pass(
                    subject,
                    format!("usable local CPUs {usable} ({local} ∩ {cgroup})"),
                );
            }
            let node_cpus = match g.numa_node.known() {
                Some(n) => s
                    .numa_nodes
                    .iter()
                    .find(|x| x.id == *n)
                    .map(|x| x.cpus.clone()),
                None => None,
            }
            .or_else(|| g.local_cpus.known().cloned())
            .map(|c| c.to_string())
            .unwrap_or_else(|| "<the GPU's local CPUs>".to_string());
            let node = g
                .numa_node
                .known()
                .map(|n| n.to_string())
                .unwrap_or_else(|| "<node>".to_string());
            Outcome::fail(
                subject,
                format!(
                    "no usable local CPUs: {local} ∩ {cgroup} is empty{}",
                    if mems.is_empty() {
                        String::new()
                    } else {
                        format!(" ({mems})")
                    }
                ),
                format!(
                    "Give the server this GPU's node: Docker `--cpuset-cpus={node_cpus} --cpuset-mems={node}`; systemd `AllowedCPUs={node_cpus}` and `AllowedMemoryNodes={node}`; Kubernetes: static CPU Manager policy with Topology Manager `single-numa-node`. Or leave this GPU out (`CUDA_VISIBLE_DEVICES`) and use GPUs local to the CPUs the cgroup allows."
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::UnknownReason;

    #[test]
    fn unrestricted_cgroup_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(out.len(), 8);
        assert!(statuses(&out).iter().all(|s| *s == Status::Pass));
        assert!(
            out[0]
                .evidence
                .starts_with("usable local CPUs 0,2,4,6,8,10 (node 0 CPUs 0,2,4,6,8,10 ∩ cpuset.cpus.effective 0-11)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn gpu_on_the_excluded_node_fails_on_the_asymmetric_box() {
        // GPU0 sits on node 1; the vllm.service cgroup allows only node 0's CPUs.
        let out = check(&CHECK, &fixture("asymmetric"));
        assert_eq!(
            statuses(&out),
            [
                Status::Fail,
                Status::Pass,
                Status::Pass,
                Status::Pass,
                Status::Pass
            ]
        );
        assert!(out[0].subject.starts_with("GPU0 (0000:18:00.0)"));
        assert!(
            out[0]
                .evidence
                .contains("node 1 CPUs 8-15,24-31 ∩ cpuset.cpus.effective 0-7,16-23 is empty")
                && out[0].evidence.contains("cpuset.mems.effective 0"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("--cpuset-cpus=8-15,24-31 --cpuset-mems=1"))
        );
    }

    #[test]
    fn falls_back_to_local_cpulist_when_the_node_is_unknown() {
        let out = check(&CHECK, &fixture("cloud-vm"));
        assert_eq!(statuses(&out), [Status::Pass, Status::Pass]);
        assert!(
            out[0].evidence.contains("NUMA node unknown"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_the_cgroup_is_unknown() {
        let mut s = fixture("asymmetric");
        s.settings.cgroup = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/proc/self/cgroup: permission denied",
        );
        let out = check(&CHECK, &s);
        assert_eq!(out.len(), 5);
        assert!(statuses(&out).iter().all(|s| *s == Status::Unknown));
    }
}
