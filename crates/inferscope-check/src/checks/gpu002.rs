//! GPU002: the tensor-parallel group crosses the socket interconnect over PCIe.
//!
//! Also home of [`tp_group`], the GPUs a group check looks at, shared with GPU003.

use std::collections::BTreeMap;

use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::cuda::cuda_devices;
use inferscope_host::topology::pcie_link_class;
use inferscope_host::{GpuPair, GpuVendor, LinkClass, PciBusId, Reading, Snapshot};
use inferscope_plan::engines::{Engine, Knob, room};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU002",
    title: "Tensor-parallel GPUs span sockets without NVLink",
    severity: Severity::Warn,
    scope: Scope::GpuGroup,
    why: "Tensor parallelism all-reduces activations on every layer; between GPUs on different sockets without NVLink that traffic crosses the CPUs' UPI/Infinity Fabric link (nvidia-smi `SYS`), where P2P is usually unavailable and NCCL stages it through host memory, so each decoded token waits on the slowest hop.",
    run,
};

/// The GPUs a group check looks at, and how they were chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TpGroup {
    /// PCI addresses of the GPUs, in the order they were named.
    pub gpus: Vec<PciBusId>,
    /// How the group was chosen, for evidence (`CUDA_VISIBLE_DEVICES=0,1`).
    pub basis: String,
}

/// The tensor-parallel group: the plan's `gpus` when it names them; else the GPUs
/// `CUDA_VISIBLE_DEVICES` selects, when it is set and resolvable; else every NVIDIA GPU.
pub(crate) fn tp_group(input: &CheckInput) -> TpGroup {
    let s = input.snapshot;
    if let Some(plan) = input.plan
        && !plan.gpus.is_empty()
    {
        return TpGroup {
            gpus: plan.gpus.clone(),
            basis: "the GPUs the plan names".to_string(),
        };
    }
    let all_nvidia = || -> Vec<PciBusId> {
        s.gpus
            .iter()
            .filter(|g| g.vendor == GpuVendor::Nvidia)
            .map(|g| g.pci_bus_id)
            .collect()
    };
    match s.env.get("CUDA_VISIBLE_DEVICES") {
        Some(list) => match cuda_devices(s) {
            Reading::Value(d) => TpGroup {
                gpus: d.devices.iter().map(|(_, id)| *id).collect(),
                basis: format!(
                    "CUDA_VISIBLE_DEVICES={list} (CUDA_DEVICE_ORDER={})",
                    d.device_order
                ),
            },
            Reading::Unknown(u) => TpGroup {
                gpus: all_nvidia(),
                basis: format!(
                    "all NVIDIA GPUs (CUDA_VISIBLE_DEVICES={list} could not be resolved: {})",
                    u.detail
                ),
            },
        },
        None => TpGroup {
            gpus: all_nvidia(),
            basis: "all NVIDIA GPUs (no plan names GPUs; CUDA_VISIBLE_DEVICES unset)".to_string(),
        },
    }
}

/// `GPU3` for a GPU of the snapshot, the bus id otherwise.
pub(crate) fn gpu_name(snapshot: &Snapshot, id: &PciBusId) -> String {
    match snapshot.gpus.iter().position(|g| g.pci_bus_id == *id) {
        Some(i) => format!("GPU{i}"),
        None => id.to_string(),
    }
}

/// Subject of a group finding: `GPU0,GPU1,GPU2`.
pub(crate) fn group_subject(snapshot: &Snapshot, gpus: &[PciBusId]) -> String {
    if gpus.is_empty() {
        return "no GPU".to_string();
    }
    gpus.iter()
        .map(|g| gpu_name(snapshot, g))
        .collect::<Vec<_>>()
        .join(",")
}

/// Driver facts about one unordered pair, if captured.
pub(crate) fn find_pair<'a>(
    snapshot: &'a Snapshot,
    a: &PciBusId,
    b: &PciBusId,
) -> Option<&'a GpuPair> {
    snapshot
        .gpu_pairs
        .iter()
        .find(|p| (p.a == *a && p.b == *b) || (p.a == *b && p.b == *a))
}

/// Every unordered pair of the group, in order.
pub(crate) fn pairs(gpus: &[PciBusId]) -> Vec<(PciBusId, PciBusId)> {
    let mut out = Vec::new();
    for (i, a) in gpus.iter().enumerate() {
        for b in gpus.iter().skip(i + 1) {
            out.push((*a, *b));
        }
    }
    out
}

/// PCI device ids of SXM boards, whose GPUs are always wired with NVLink (A100 SXM4 40/80 GB,
/// H100 SXM5, H200 SXM, B200). Used only when the driver is absent, to say "unknown" instead of
/// failing a board that almost certainly has NVLink.
const NVLINK_SXM_DEVICE_IDS: &[u16] = &[0x20b0, 0x20b2, 0x2330, 0x2335, 0x2901];

fn is_sxm(snapshot: &Snapshot, id: &PciBusId) -> bool {
    snapshot
        .gpus
        .iter()
        .find(|g| g.pci_bus_id == *id)
        .and_then(|g| g.device_id.known())
        .is_some_and(|d| NVLINK_SXM_DEVICE_IDS.contains(&d.0))
}

/// What is known about NVLink between two GPUs.
enum NvLinkFact {
    Links,
    None,
    Unknown(String),
}

fn nvlink_fact(snapshot: &Snapshot, a: &PciBusId, b: &PciBusId) -> NvLinkFact {
    match find_pair(snapshot, a, b).map(|p| &p.nvlinks) {
        Some(Reading::Value(0)) => NvLinkFact::None,
        Some(Reading::Value(_)) => NvLinkFact::Links,
        Some(Reading::Unknown(u)) => {
            NvLinkFact::Unknown(format!("NVLink count unknown: {}", u.detail))
        }
        None => NvLinkFact::Unknown(match &snapshot.driver {
            Reading::Unknown(u) => format!("no NVLink facts (no driver: {})", u.reason),
            Reading::Value(_) => "no NVLink facts for this pair from the driver".to_string(),
        }),
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
                "{} GPU(s) in the group ({}): no GPU-to-GPU traffic",
                group.gpus.len(),
                group.basis
            ),
        )];
    }
    let mut crossing = Vec::new();
    let mut uncertain = Vec::new();
    let mut unplaced = Vec::new();
    let mut sys_over_nvlink = 0usize;
    for (a, b) in pairs(&group.gpus) {
        let pair = format!("{}–{}", gpu_name(s, &a), gpu_name(s, &b));
        match pcie_link_class(s, &a, &b) {
            None => unplaced.push(pair),
            Some(LinkClass::Sys) => match nvlink_fact(s, &a, &b) {
                NvLinkFact::Links => sys_over_nvlink += 1,
                NvLinkFact::None => crossing.push(format!("{pair}: PCIe SYS, 0 NVLinks (NVML)")),
                NvLinkFact::Unknown(why) if is_sxm(s, &a) && is_sxm(s, &b) => {
                    uncertain.push(format!("{pair}: PCIe SYS; SXM GPUs; {why}"))
                }
                NvLinkFact::Unknown(why) => crossing.push(format!("{pair}: PCIe SYS; {why}")),
            },
            Some(_) => {}
        }
    }
    let total = group.gpus.len() * (group.gpus.len() - 1) / 2;
    let mut evidence = format!("group: {} ({}); ", subject, group.basis);
    if !crossing.is_empty() {
        evidence.push_str(&format!(
            "{} of {total} pairs cross sockets over PCIe (sysfs PCI tree and numa_node): {}",
            crossing.len(),
            summarize(&crossing)
        ));
        return vec![Outcome::fail(subject, evidence, remedy(s, &group.gpus))];
    }
    if !uncertain.is_empty() {
        evidence.push_str(&format!(
            "{} pairs cross sockets over PCIe and NVLink is unknown: {}; capture with the NVIDIA driver loaded (or import `nvidia-smi -q`) to see the NV# links",
            uncertain.len(),
            summarize(&uncertain)
        ));
        return vec![Outcome::unknown(subject, evidence)];
    }
    if !unplaced.is_empty() {
        evidence.push_str(&format!(
            "PCIe path unknown for {} pairs (a GPU not in the snapshot's PCI tree): {}",
            unplaced.len(),
            summarize(&unplaced)
        ));
        return vec![Outcome::unknown(subject, evidence)];
    }
    evidence.push_str(&format!(
        "no pair crosses sockets over PCIe alone ({total} pairs; {sys_over_nvlink} SYS pairs joined by NVLink)"
    ));
    vec![Outcome::pass(subject, evidence)]
}

fn summarize(items: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > SHOWN {
        text.push_str(&format!("; and {} more", items.len() - SHOWN));
    }
    text
}

/// A remedy naming the GPUs of each socket, as `CUDA_VISIBLE_DEVICES` under PCI_BUS_ID order.
fn remedy(s: &Snapshot, gpus: &[PciBusId]) -> String {
    let pci_order: Vec<PciBusId> = match &s.cuda_order {
        Reading::Value(o) => o.pci_bus_id.clone(),
        Reading::Unknown(_) => s.gpus.iter().map(|g| g.pci_bus_id).collect(),
    };
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in gpus {
        let node = s
            .gpus
            .iter()
            .find(|g| g.pci_bus_id == *id)
            .and_then(|g| g.numa_node.known())
            .map(|n| format!("NUMA node {n}"))
            .unwrap_or_else(|| "unknown node".to_string());
        let ordinal = pci_order
            .iter()
            .position(|p| p == id)
            .map(|i| i.to_string())
            .unwrap_or_else(|| id.to_string());
        by_node.entry(node).or_default().push(ordinal);
    }
    let per_socket = by_node
        .iter()
        .map(|(node, ords)| {
            format!(
                "`CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={}` ({node})",
                ords.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let sizes: Vec<usize> = by_node.values().map(Vec::len).collect();
    let pp = match sizes.as_slice() {
        [first, ..] if sizes.len() > 1 && sizes.iter().all(|n| n == first) => format!(
            "vLLM `--tensor-parallel-size {first} --pipeline-parallel-size {}`",
            sizes.len()
        ),
        _ => "vLLM `--tensor-parallel-size <GPUs per socket> --pipeline-parallel-size <sockets>`"
            .to_string(),
    };
    // the other engines' own flags for the same split, from their rooms
    let others: String = Engine::ALL
        .into_iter()
        .filter_map(|e| {
            let r = room(e);
            let (tp, pp) = (
                r.flag(Knob::TensorParallel)?,
                r.flag(Knob::PipelineParallel)?,
            );
            Some(format!(", {} `{tp} N {pp} M`", e.name()))
        })
        .collect();
    format!(
        "Keep tensor parallelism on one socket: run one server per socket with {per_socket} and a matching --tensor-parallel-size; or, to use every GPU for one model, split across sockets with pipeline parallelism ({pp}{others}), which sends far less traffic over the socket link than tensor parallelism. Check with `nvidia-smi topo -m`."
    )
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{PlanFacts, UnknownReason};

    #[test]
    fn eight_pcie_gpus_on_two_sockets_fail() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert_eq!(out[0].subject, "GPU0,GPU1,GPU2,GPU3,GPU4,GPU5,GPU6,GPU7");
        assert!(
            out[0].evidence.contains("16 of 28 pairs")
                && out[0].evidence.contains("no NVLink facts (no driver"),
            "{}",
            out[0].evidence
        );
        let remedy = out[0].remedy.as_deref().unwrap_or_default();
        assert!(
            remedy.contains("CUDA_VISIBLE_DEVICES=0,1,2,3` (NUMA node 0)")
                && remedy.contains("--tensor-parallel-size 4 --pipeline-parallel-size 2"),
            "{remedy}"
        );
        // the other engines' flags for the same split come from their rooms
        let mut named = 0;
        for e in Engine::ALL {
            let r = room(e);
            if let (Some(tp), Some(pp)) =
                (r.flag(Knob::TensorParallel), r.flag(Knob::PipelineParallel))
            {
                let aside = format!(", {} `{tp} N {pp} M`", e.name());
                assert!(remedy.contains(&aside), "{aside}: {remedy}");
                named += 1;
            }
        }
        assert!(named > 0, "{remedy}");
    }

    #[test]
    fn one_socket_of_the_plx_box_passes() {
        let mut s = fixture("plx");
        s.env
            .insert("CUDA_VISIBLE_DEVICES".into(), "4,5,6,7".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass], "{}", out[0].evidence);
        assert_eq!(out[0].subject, "GPU4,GPU5,GPU6,GPU7");
    }

    #[test]
    fn nvswitch_board_with_driver_passes() {
        let out = check(&CHECK, &h100_with_driver());
        assert_eq!(statuses(&out), [Status::Pass], "{}", out[0].evidence);
        assert!(out[0].evidence.contains("16 SYS pairs joined by NVLink"));
    }

    #[test]
    fn zero_nvlinks_reported_by_the_driver_fail() {
        let mut s = h100_with_driver();
        for p in &mut s.gpu_pairs {
            p.nvlinks = Reading::value(0);
        }
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("0 NVLinks (NVML)"));
    }

    #[test]
    fn sxm_board_without_driver_is_unknown() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Unknown], "{}", out[0].evidence);
    }

    #[test]
    fn nvlink_count_unknown_on_pcie_cards_still_fails() {
        let mut s = fixture("plx");
        s.gpu_pairs = vec![GpuPair {
            a: s.gpus[0].pci_bus_id,
            b: s.gpus[4].pci_bus_id,
            common_ancestor: Reading::value(LinkClass::Sys),
            nvlinks: Reading::unknown(UnknownReason::PermissionDenied, "NVML: no permission"),
            p2p_read: Reading::unknown(UnknownReason::PermissionDenied, "x"),
            p2p_write: Reading::unknown(UnknownReason::PermissionDenied, "x"),
        }];
        let plan = PlanFacts {
            gpus: vec![s.gpus[0].pci_bus_id, s.gpus[4].pci_bus_id],
            ..PlanFacts::default()
        };
        let out = run_with(&CHECK, &s, Some(&plan), None, &Thresholds::default());
        assert_eq!(statuses(&out), [Status::Fail]);
        assert_eq!(out[0].subject, "GPU0,GPU4");
        assert!(
            out[0].evidence.contains("NVLink count unknown"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn group_follows_plan_then_cuda_visible_devices_then_all() {
        let s = fixture("asymmetric");
        let th = Thresholds::default();
        let input = |plan| CheckInput {
            snapshot: &s,
            plan,
            process: None,
            thresholds: &th,
        };
        let g = tp_group(&input(None));
        assert_eq!(group_subject(&s, &g.gpus), "GPU1,GPU2,GPU3,GPU4");
        assert!(g.basis.starts_with("CUDA_VISIBLE_DEVICES=1,2,3,4"));
        let plan = PlanFacts {
            gpus: vec![s.gpus[0].pci_bus_id],
            ..PlanFacts::default()
        };
        assert_eq!(tp_group(&input(Some(&plan))).gpus, [s.gpus[0].pci_bus_id]);
        let mut s2 = s.clone();
        s2.env.remove("CUDA_VISIBLE_DEVICES");
        let g = tp_group(&CheckInput {
            snapshot: &s2,
            plan: None,
            process: None,
            thresholds: &Thresholds::default(),
        });
        assert_eq!(g.gpus.len(), 5);
    }

    #[test]
    fn asymmetric_box_group_on_socket_zero_passes_and_across_fails() {
        let mut s = fixture("asymmetric");
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
        s.env.insert("CUDA_VISIBLE_DEVICES".into(), "0,1".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Fail]);
    }

    #[test]
    fn single_gpu_passes() {
        let out = check(&CHECK, &fixture("dev-vm"));
        assert_eq!(statuses(&out), [Status::Pass]);
    }
}
