//! GPU001: the kernel does not know which NUMA node a GPU is on.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{Reading, UnknownReason};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU001",
    title: "GPU NUMA node unknown (numa_node = -1)",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "Without a NUMA node, numactl wrappers, vLLM's --numa-bind and inferscope run cannot place the server's CPU threads and pinned buffers next to the GPU; host-to-device copies may cross the socket interconnect.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            match &g.numa_node {
                Reading::Value(n) => Outcome::pass(subject, format!("numa_node = {n}")),
                Reading::Unknown(u) if u.reason == UnknownReason::NotReported => Outcome::fail(
                    subject,
                    u.detail.clone(),
                    "Bare metal: enable ACPI SRAT/_PXM (\"NUMA\" / \"ACPI SRAT L3 cache as NUMA\") in the BIOS. Cloud VM: pick an instance type with a NUMA-aware vCPU topology, or bind by hand with `inferscope run --numa-node N` after checking `nvidia-smi topo -m`'s NUMA Affinity.",
                ),
                Reading::Unknown(u) => Outcome::from_unknown(subject, "NUMA node", u),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    #[test]
    fn passes_on_a_host_whose_firmware_reports_nodes() {
        assert!(
            statuses(&check(&CHECK, &fixture("h100")))
                .iter()
                .all(|s| *s == Status::Pass)
        );
    }

    #[test]
    fn fails_on_the_cloud_vm_whose_numa_node_reads_minus_one() {
        let out = check(&CHECK, &fixture("cloud-vm"));
        assert_eq!(statuses(&out), [Status::Fail, Status::Fail]);
        assert!(out[0].evidence.contains("reads -1"), "{}", out[0].evidence);
    }
}
