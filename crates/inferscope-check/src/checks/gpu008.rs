//! GPU008: the RDMA NIC nearest to a GPU is on the other socket.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::topology::pcie_link_class;
use inferscope_host::{LinkClass, Nic};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU008",
    title: "GPU and its nearest RDMA NIC on different sockets",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "Multi-node serving (tensor or pipeline parallel across hosts, disaggregated prefill, KV transfer) sends each GPU's traffic through an RDMA NIC; when the nearest one is across the socket link, NCCL does not use GPUDirect RDMA by default and stages data through host memory over UPI/Infinity Fabric, cutting inter-node bandwidth.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let rdma: Vec<&Nic> = s
        .nics
        .iter()
        .filter(|n| !n.rdma_devices.is_empty())
        .collect();
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            if rdma.is_empty() {
                return Outcome::pass(
                    subject,
                    format!(
                        "no RDMA NIC on this host ({} network adapters without an infiniband/ device in sysfs)",
                        s.nics.len()
                    ),
                );
            }
            let best = rdma
                .iter()
                .filter_map(|n| pcie_link_class(s, &g.pci_bus_id, &n.pci_bus_id).map(|c| (c, *n)))
                .min_by_key(|(c, _)| *c);
            let Some((class, nic)) = best else {
                return Outcome::unknown(
                    subject,
                    "the PCIe path to every RDMA NIC is unknown (GPU or NICs not in the snapshot's PCI tree)",
                );
            };
            let node = |r: &inferscope_host::Reading<inferscope_host::NumaNodeId>| {
                r.known().map_or("unknown".to_string(), |n| n.to_string())
            };
            let evidence = format!(
                "nearest of {} RDMA NIC(s): {} ({}) at {class} (sysfs PCI tree); GPU NUMA node {}, NIC NUMA node {}",
                rdma.len(),
                nic.display_name(),
                nic.pci_bus_id,
                node(&g.numa_node),
                node(&nic.numa_node)
            );
            if class == LinkClass::Sys {
                Outcome::fail(
                    subject,
                    evidence,
                    "Give the GPU a NIC on its own socket: install or move an RDMA NIC into a slot on the GPU's socket (or under the same PCIe switch). Until then, keep multi-node ranks on GPUs that have a local NIC, and list only socket-local NICs per rank in `NCCL_IB_HCA`; check with `nvidia-smi topo -m`.",
                )
            } else {
                Outcome::pass(subject, evidence)
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
    fn each_h100_has_a_nic_behind_its_switch() {
        let out = check(&CHECK, &fixture("h100"));
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(
            out[0].evidence.contains("mlx5_0 (0000:19:00.0) at PIX"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn gpus_on_the_socket_without_a_nic_fail() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(
            statuses(&out),
            [
                Status::Fail,
                Status::Fail,
                Status::Fail,
                Status::Fail,
                Status::Pass,
                Status::Pass,
                Status::Pass,
                Status::Pass
            ]
        );
        assert!(out[0].evidence.contains("at SYS"), "{}", out[0].evidence);
    }

    #[test]
    fn no_rdma_nic_passes() {
        let out = check(&CHECK, &fixture("rtx5090"));
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(out[0].evidence.starts_with("no RDMA NIC"));
    }

    #[test]
    fn unknown_when_the_gpu_is_not_in_the_pci_tree() {
        let mut s = fixture("h100");
        let id = s.gpus[0].pci_bus_id;
        s.pci_devices.retain(|d| d.bus_id != id);
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
    }
}
