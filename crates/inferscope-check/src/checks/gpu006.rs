//! GPU006: a port on the GPU's PCIe path is slower or narrower than the GPU.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{LinkSpeed, PciBusId, Reading};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU006",
    title: "GPU slot slower than the GPU (slot-limited PCIe)",
    severity: Severity::Info,
    scope: Scope::Gpu,
    why: "A Gen5 card in a Gen4 slot (or behind a Gen3 switch or root port) gets half the host bandwidth it was built for: model loading, KV-cache offload and PCIe tensor-parallel traffic are capped by the slowest port on the path, however healthy the link looks.",
    run,
};

/// Usable bandwidth of one lane in one direction, MB/s, per generation (after line coding).
fn lane_mb_per_s(generation: u8) -> Option<u32> {
    match generation {
        1 => Some(250),
        2 => Some(500),
        3 => Some(985),
        4 => Some(1969),
        5 => Some(3938),
        6 => Some(7563),
        _ => None,
    }
}

fn describe(speed: &LinkSpeed, width: Option<u32>) -> String {
    let gen_part = match speed.generation() {
        Some(n) => format!("{speed} (Gen{n})"),
        None => speed.to_string(),
    };
    match (width, speed.generation().and_then(lane_mb_per_s)) {
        (Some(w), Some(lane)) => format!(
            "{gen_part} x{w}, about {:.0} GB/s each way",
            f64::from(lane * w) / 1000.0
        ),
        (Some(w), None) => format!("{gen_part} x{w}"),
        (None, _) => gen_part,
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            let Some(dev) = s.pci_devices.iter().find(|d| d.bus_id == g.pci_bus_id) else {
                return Outcome::unknown(
                    subject,
                    format!("{} is not in the snapshot's PCI tree", g.pci_bus_id),
                );
            };
            let gpu_speed = match &dev.link.max_speed {
                Reading::Value(v) => *v,
                Reading::Unknown(u) => {
                    return Outcome::from_unknown(subject, "the GPU's max_link_speed", u);
                }
            };
            let gpu_width = dev.link.max_width.known().copied();
            if dev.upstream_bridges.is_empty() {
                return Outcome::unknown(
                    subject,
                    format!(
                        "no PCIe port above {} in sysfs (a device on the host bridge's own bus, as in many VMs): the slot's capability is not visible",
                        g.pci_bus_id
                    ),
                );
            }
            // Slowest and narrowest port on the path from the root port down.
            let mut slowest: Option<(PciBusId, LinkSpeed)> = None;
            let mut narrowest: Option<(PciBusId, u32)> = None;
            for b in &dev.upstream_bridges {
                let Some(port) = s.pci_devices.iter().find(|d| d.bus_id == *b) else {
                    continue;
                };
                if let Some(sp) = port.link.max_speed.known()
                    && slowest.is_none_or(|(_, x)| sp.gt_per_s_tenths < x.gt_per_s_tenths)
                {
                    slowest = Some((*b, *sp));
                }
                if let Some(w) = port.link.max_width.known()
                    && narrowest.is_none_or(|(_, x)| *w < x)
                {
                    narrowest = Some((*b, *w));
                }
            }
            let Some((slow_port, slow_speed)) = slowest else {
                return Outcome::unknown(
                    subject,
                    "max_link_speed of every port above the GPU is unknown",
                );
            };
            let speed_capped = slow_speed.gt_per_s_tenths < gpu_speed.gt_per_s_tenths;
            let width_capped = matches!((narrowest, gpu_width), (Some((_, p)), Some(w)) if p < w);
            let gpu_text = describe(&gpu_speed, gpu_width);
            let path_width = match (narrowest, gpu_width) {
                (Some((_, p)), Some(w)) => Some(p.min(w)),
                (_, w) => w,
            };
            let path_speed = if speed_capped { slow_speed } else { gpu_speed };
            let path_text = describe(&path_speed, path_width);
            let mut evidence = format!("GPU max {gpu_text} (sysfs max_link_speed/max_link_width)");
            if speed_capped {
                evidence.push_str(&format!(
                    "; port {slow_port} on its path is limited to {slow_speed} (Gen{})",
                    slow_speed.generation().map_or("?".to_string(), |n| n.to_string())
                ));
            }
            if width_capped && let Some((p, w)) = narrowest {
                evidence.push_str(&format!("; port {p} on its path has only x{w}"));
            }
            if speed_capped || width_capped {
                Outcome::fail(
                    subject,
                    format!("{evidence}; the path allows {path_text}"),
                    "Move the GPU to a slot wired to a port of its own generation and width (motherboard manual: CPU-attached x16 Gen5 slots; avoid chipset slots and older switches), or accept the cap: it matters for model loading, KV-cache offload and PCIe tensor parallelism, not for decoding on one GPU.",
                )
            } else {
                Outcome::pass(
                    subject,
                    format!("{evidence}; every port on its path matches it (slowest {slow_port}: {slow_speed})"),
                )
            }
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
    fn gen5_cards_in_gen4_slots_fail() {
        let out = check(&CHECK, &fixture("rtx5090"));
        assert_eq!(statuses(&out), [Status::Fail, Status::Fail]);
        assert!(
            out[0].evidence.contains("GPU max 32.0 GT/s (Gen5) x16")
                && out[0]
                    .evidence
                    .contains("port 0000:00:01.1 on its path is limited to 16.0 GT/s (Gen4)")
                && out[0].evidence.contains("about 32 GB/s each way"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn matching_path_passes() {
        assert!(
            statuses(&check(&CHECK, &fixture("h100")))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn gen3_root_port_above_gen4_switches_fails() {
        let out = check(&CHECK, &fixture("plx"));
        assert!(statuses(&out).iter().all(|x| *x == Status::Fail));
        assert!(
            out[0].evidence.contains("port 0000:17:00.0"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn narrow_slot_fails() {
        let mut s = fixture("h100");
        let port = s
            .pci_devices
            .iter_mut()
            .find(|d| d.bus_id.to_string() == "0000:17:00.0")
            .unwrap();
        port.link.max_width = Reading::value(8);
        let out = check(&CHECK, &s);
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            out[0].evidence.contains("has only x8"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_the_gpu_speed_is_unreadable() {
        let mut s = fixture("rtx5090");
        let id = s.gpus[0].pci_bus_id;
        let dev = s.pci_devices.iter_mut().find(|d| d.bus_id == id).unwrap();
        dev.link.max_speed =
            Reading::unknown(UnknownReason::NotPresent, "max_link_speed: not present");
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
    }
}
