//! ENV006: `NCCL_IB_DISABLE` set on a host with RDMA NICs.

use super::env004::{NcclSwitch, nccl_switch, not_on};
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV006",
    title: "NCCL_IB_DISABLE set although RDMA NICs are present",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "NCCL_IB_DISABLE=1 makes NCCL ignore InfiniBand/RoCE adapters and send inter-node traffic (multi-node tensor or pipeline parallelism, KV-cache transfer) over TCP sockets, at a fraction of the RDMA bandwidth and with much higher latency.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let name = "NCCL_IB_DISABLE";
    let sw = nccl_switch(s, name);
    if let Some(o) = not_on(name, &sw) {
        return vec![o];
    }
    let NcclSwitch::On(v) = sw else {
        return Vec::new();
    };
    let rdma: Vec<String> = s
        .nics
        .iter()
        .filter(|n| !n.rdma_devices.is_empty())
        .map(|n| format!("{} ({})", n.rdma_devices.join("/"), n.pci_bus_id))
        .collect();
    if rdma.is_empty() {
        return vec![Outcome::pass(
            HOST,
            format!(
                "{name}={v:?}, and no NIC has an RDMA device (/sys/bus/pci/devices/*/infiniband): nothing is disabled"
            ),
        )];
    }
    let n = rdma.len();
    let shown: Vec<String> = rdma.into_iter().take(6).collect();
    let more = if n > shown.len() {
        format!(" and {} more", n - shown.len())
    } else {
        String::new()
    };
    vec![Outcome::fail(
        HOST,
        format!(
            "{name}={v:?} while {n} RDMA NIC(s) are present: {}{more}",
            shown.join(", ")
        ),
        format!(
            "`unset {name}` (or `export {name}=0`). To pick adapters rather than disable them all, use `NCCL_IB_HCA` (e.g. `export NCCL_IB_HCA=mlx5_0,mlx5_3`); in containers pass the devices in (`--device=/dev/infiniband` and `--cap-add=IPC_LOCK`)."
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    #[test]
    fn set_on_the_12_nic_h100_host_fails() {
        let mut s = fixture("h100");
        s.env.insert("NCCL_IB_DISABLE".into(), "1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("12 RDMA NIC(s) are present: mlx5_0 (0000:19:00.0)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unset_passes_and_no_rdma_passes() {
        assert_eq!(statuses(&check(&CHECK, &fixture("h100"))), [Status::Pass]);
        let mut s = fixture("rtx5090");
        s.env.insert("NCCL_IB_DISABLE".into(), "1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("no NIC has an RDMA device"));
    }
}
