//! GPU003: the driver reports no peer-to-peer access between GPUs of the tensor-parallel group.

use super::gpu002::{find_pair, gpu_name, group_subject, pairs, tp_group};
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{P2pStatus, Reading};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU003",
    title: "Peer-to-peer access unsupported between tensor-parallel GPUs",
    severity: Severity::Warn,
    scope: Scope::GpuGroup,
    why: "Without CUDA peer-to-peer, NCCL copies every all-reduce through host memory (its SHM transport) and the engines' custom all-reduce kernels (vLLM's among them) are disabled, which cuts tensor-parallel bandwidth and adds latency to every decoded token.",
    run,
};

fn status_name(p: P2pStatus) -> &'static str {
    match p {
        P2pStatus::Ok => "OK",
        P2pStatus::ChipsetNotSupported => "chipset not supported (CNS)",
        P2pStatus::GpuNotSupported => "GPU not supported (GNS)",
        P2pStatus::TopologyNotSupported => "topology not supported (TNS)",
        P2pStatus::DisabledByRegkey => "disabled by registry key (DR)",
        P2pStatus::NotSupported => "not supported (NS)",
        P2pStatus::Unknown => "unknown (U)",
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let group = tp_group(input);
    let subject = group_subject(s, &group.gpus);
    if group.gpus.len() < 2 {
        return vec![Outcome::pass(
            subject,
            format!(
                "{} GPU(s) in the group ({}): no peer traffic",
                group.gpus.len(),
                group.basis
            ),
        )];
    }
    if let Reading::Unknown(u) = &s.driver {
        return vec![Outcome::unknown(
            subject,
            format!(
                "P2P capability comes from the NVIDIA driver (nvmlDeviceGetP2PStatus), unknown here ({}): {}",
                u.reason, u.detail
            ),
        )];
    }
    let mut refused = Vec::new();
    let mut unknown = Vec::new();
    let mut found: Vec<P2pStatus> = Vec::new();
    let all = pairs(&group.gpus);
    for (a, b) in &all {
        let name = format!("{}–{}", gpu_name(s, a), gpu_name(s, b));
        let Some(p) = find_pair(s, a, b) else {
            unknown.push(format!("{name}: not in the driver's pair facts"));
            continue;
        };
        let mut bad = Vec::new();
        for (dir, r) in [("read", &p.p2p_read), ("write", &p.p2p_write)] {
            match r {
                Reading::Value(P2pStatus::Ok) => {}
                Reading::Value(st) => {
                    found.push(*st);
                    bad.push(format!("{dir} {}", status_name(*st)));
                }
                Reading::Unknown(u) => unknown.push(format!("{name} {dir}: {}", u.detail)),
            }
        }
        if !bad.is_empty() {
            refused.push(format!("{name}: {}", bad.join(", ")));
        }
    }
    let head = format!("group: {subject} ({}); ", group.basis);
    if !refused.is_empty() {
        let shown: Vec<String> = refused.iter().take(4).cloned().collect();
        let more = refused.len().saturating_sub(shown.len());
        let evidence = format!(
            "{head}{} of {} pairs without P2P (nvmlDeviceGetP2PStatus): {}{}",
            refused.len(),
            all.len(),
            shown.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        );
        return vec![Outcome::fail(subject, evidence, remedy(&found))];
    }
    if !unknown.is_empty() {
        return vec![Outcome::unknown(
            subject,
            format!("{head}P2P unknown for: {}", unknown.join("; ")),
        )];
    }
    vec![Outcome::pass(
        subject,
        format!(
            "{head}P2P read and write OK for all {} pairs (nvmlDeviceGetP2PStatus)",
            all.len()
        ),
    )]
}

fn remedy(found: &[P2pStatus]) -> String {
    let mut steps = Vec::new();
    if found.contains(&P2pStatus::DisabledByRegkey) {
        steps.push("remove the P2P override from the driver's registry keys (`NVreg_RegistryDwords` in /etc/modprobe.d/*nvidia*.conf), then reload the driver or reboot");
    }
    if found.iter().any(|s| {
        matches!(
            s,
            P2pStatus::ChipsetNotSupported | P2pStatus::TopologyNotSupported
        )
    }) {
        steps.push("keep the group under one PCIe switch or root complex (`nvidia-smi topo -m`: PIX/PXB/PHB/NODE, not SYS) with `CUDA_VISIBLE_DEVICES`; on bare metal disable PCIe ACS in the BIOS and boot with `iommu=pt`; in a VM enable P2P in the hypervisor (or use a bare-metal instance)");
    }
    if found.contains(&P2pStatus::GpuNotSupported) || found.contains(&P2pStatus::NotSupported) {
        steps.push("this GPU model or driver does not offer P2P (NVIDIA's driver does not enable PCIe P2P on GeForce cards such as the RTX 4090): prefer fewer GPUs per server (replicas instead of tensor parallelism) or pipeline parallelism, which needs far less GPU-to-GPU traffic");
    }
    steps.push("confirm with `nvidia-smi topo -p2p rw`; if a server hangs at start-up on this host, start it with vLLM `--disable-custom-all-reduce` and `NCCL_P2P_DISABLE=1`");
    steps.join("; ")
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::UnknownReason;

    #[test]
    fn healthy_driver_facts_pass() {
        let out = check(&CHECK, &h100_with_driver());
        assert_eq!(statuses(&out), [Status::Pass], "{}", out[0].evidence);
        assert!(out[0].evidence.contains("all 28 pairs"));
    }

    #[test]
    fn a_pair_refused_by_the_chipset_fails() {
        let mut s = h100_with_driver();
        s.gpu_pairs[0].p2p_read = Reading::value(P2pStatus::ChipsetNotSupported);
        s.gpu_pairs[0].p2p_write = Reading::value(P2pStatus::ChipsetNotSupported);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("1 of 28 pairs")
                && out[0]
                    .evidence
                    .contains("GPU0–GPU1: read chipset not supported (CNS)"),
            "{}",
            out[0].evidence
        );
        assert!(out[0].remedy.as_deref().unwrap_or("").contains("ACS"));
    }

    #[test]
    fn unknown_without_the_driver() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(out[0].evidence.contains("nvmlDeviceGetP2PStatus"));
    }

    #[test]
    fn unknown_when_nvml_refuses_the_query() {
        let mut s = h100_with_driver();
        s.gpu_pairs[3].p2p_write = Reading::unknown(UnknownReason::NotSupported, "NVML P2P: x");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
