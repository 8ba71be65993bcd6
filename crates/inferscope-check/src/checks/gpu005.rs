//! GPU005: the GPU's PCIe link trained narrower than it can run, or slower while the GPU is busy.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{GpuDetails, LinkSpeed, PciDevice, Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU005",
    title: "PCIe link running below its maximum width or generation",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "A link that trained at x8 instead of x16 (a bad riser, a dirty or half-seated card, a bifurcated slot) halves host-to-GPU bandwidth for good: weight loading, KV-cache offload and PCIe tensor-parallel traffic all slow down. Idle GPUs lower the link generation to save power, so only a busy GPU's generation is judged.",
    run,
};

/// Share of the power limit above which a GPU counts as busy.
const BUSY_POWER_PERCENT: u64 = 50;
/// Share of the maximum SM clock above which a GPU counts as busy.
const BUSY_CLOCK_PERCENT: u64 = 90;

fn device<'a>(s: &'a Snapshot, g: &inferscope_host::Gpu) -> Option<&'a PciDevice> {
    s.pci_devices.iter().find(|d| d.bus_id == g.pci_bus_id)
}

fn gen_text(speed: &LinkSpeed) -> String {
    match speed.generation() {
        Some(n) => format!("{speed} (Gen{n})"),
        None => speed.to_string(),
    }
}

/// Why the driver says the GPU is busy; `None` when it looks idle or the driver is absent.
fn busy_reason(d: Option<&GpuDetails>) -> Option<String> {
    let d = d?;
    if let (Some(draw), Some(limit)) = (d.power_draw_mw.known(), d.power_limit_mw.known())
        && *limit > 0
        && u64::from(*draw) * 100 > u64::from(*limit) * BUSY_POWER_PERCENT
    {
        return Some(format!(
            "drawing {} W of a {} W limit",
            draw / 1000,
            limit / 1000
        ));
    }
    if let Some(ps) = d.processes.known()
        && !ps.is_empty()
    {
        return Some(format!("{} compute process(es) running", ps.len()));
    }
    if let Some(c) = d.clocks.known()
        && let (Some(sm), Some(max)) = (c.sm_mhz.known(), c.sm_max_mhz.known())
        && *max > 0
        && u64::from(*sm) * 100 >= u64::from(*max) * BUSY_CLOCK_PERCENT
    {
        return Some(format!("SM clock {sm} of {max} MHz"));
    }
    None
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            let Some(dev) = device(s, g) else {
                return Outcome::unknown(
                    subject,
                    format!("{} is not in the snapshot's PCI tree: its link is unknown", g.pci_bus_id),
                );
            };
            let sysfs = format!("/sys/bus/pci/devices/{}", g.pci_bus_id);
            // The link trains with the port directly above the GPU; that port can cap it too.
            let port = dev
                .upstream_bridges
                .last()
                .and_then(|b| s.pci_devices.iter().find(|d| d.bus_id == *b));
            let l = &dev.link;
            let (cur_w, max_w) = match (&l.current_width, &l.max_width) {
                (Reading::Value(c), Reading::Value(m)) => (*c, *m),
                (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => {
                    return Outcome::from_unknown(subject, &format!("PCIe link width ({sysfs})"), u);
                }
            };
            let port_w = port.and_then(|p| p.link.max_width.known().copied());
            let can_w = port_w.map_or(max_w, |p| p.min(max_w));
            let details = g.details.known();
            let busy = busy_reason(details);
            let mut evidence = format!(
                "{sysfs}: width x{cur_w} of x{max_w}{}",
                match port_w {
                    Some(p) if p < max_w => format!(" (port above allows x{p})"),
                    _ => String::new(),
                }
            );
            let mut speed_short = None;
            match (&l.current_speed, &l.max_speed) {
                (Reading::Value(c), Reading::Value(m)) => {
                    let port_s = port.and_then(|p| p.link.max_speed.known().copied());
                    let can = match port_s {
                        Some(p) if p.gt_per_s_tenths < m.gt_per_s_tenths => p,
                        _ => *m,
                    };
                    evidence.push_str(&format!(
                        ", speed {} of {}{}",
                        gen_text(c),
                        gen_text(m),
                        if can != *m {
                            format!(" (port above allows {})", gen_text(&can))
                        } else {
                            String::new()
                        }
                    ));
                    if c.gt_per_s_tenths < can.gt_per_s_tenths {
                        speed_short = Some(can);
                    }
                }
                (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => {
                    evidence.push_str(&format!(", speed unknown ({})", u.reason));
                }
            }
            if cur_w < can_w {
                return Outcome::fail(
                    subject,
                    format!("{evidence}: the link trained narrower than both ends allow (width does not drop at idle)"),
                    format!("Power off, reseat the GPU and any riser or cable, and make sure the slot is wired x{can_w} (motherboard manual; PCIe bifurcation setting in the BIOS, e.g. x16 not x8x8); confirm with `sudo lspci -vv -s {} | grep -E 'LnkCap|LnkSta'`.", g.pci_bus_id),
                );
            }
            match (speed_short, busy) {
                (Some(can), Some(why)) => Outcome::fail(
                    subject,
                    format!("{evidence}: below {} while the GPU is busy ({why}, NVML)", gen_text(&can)),
                    format!("Set the slot's link speed to Auto or Gen{} in the BIOS, reseat the card and replace risers or cables not rated for that generation, and look for PCIe AER errors (`dmesg | grep -i aer`); confirm under load with `nvidia-smi -q -d PCIE -i N`.", can.generation().unwrap_or(0)),
                ),
                (Some(_), None) => Outcome::pass(
                    subject,
                    format!("{evidence}: the generation is below its maximum, but the GPU {} and idle GPUs lower the link speed to save power; re-check under load (`nvidia-smi -q -d PCIE`)",
                        if details.is_some() { "looks idle (NVML power, clocks, processes)," } else { "may be idle (no driver facts to tell)," }),
                ),
                (None, _) => Outcome::pass(subject, evidence),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{GpuProcess, UnknownReason};

    fn link_of(s: &mut Snapshot, gpu: usize) -> &mut inferscope_host::PcieLink {
        let id = s.gpus[gpu].pci_bus_id;
        let dev = s.pci_devices.iter_mut().find(|d| d.bus_id == id).unwrap();
        &mut dev.link
    }

    #[test]
    fn full_links_pass() {
        assert!(
            statuses(&check(&CHECK, &fixture("h100")))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn idle_gen1_link_passes_with_evidence() {
        let out = check(&CHECK, &fixture("asymmetric"));
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(
            out[3]
                .evidence
                .contains("speed 2.5 GT/s (Gen1) of 16.0 GT/s (Gen4)")
                && out[3].evidence.contains("may be idle"),
            "{}",
            out[3].evidence
        );
    }

    #[test]
    fn x8_of_x16_fails() {
        let mut s = fixture("asymmetric");
        link_of(&mut s, 1).current_width = Reading::value(8);
        let out = check(&CHECK, &s);
        assert_eq!(out[1].status, Status::Fail);
        assert!(
            out[1].evidence.contains("width x8 of x16"),
            "{}",
            out[1].evidence
        );
        assert!(
            out[1]
                .remedy
                .as_deref()
                .unwrap_or("")
                .contains("lspci -vv -s 0000:3b:00.0")
        );
    }

    #[test]
    fn slow_generation_on_a_busy_gpu_fails() {
        let mut s = h100_with_driver();
        link_of(&mut s, 0).current_speed = Reading::value(LinkSpeed {
            gt_per_s_tenths: 80,
        });
        let out = check(&CHECK, &s);
        // healthy_details runs the SM clock at its maximum: busy.
        assert_eq!(out[0].status, Status::Fail, "{}", out[0].evidence);
        assert!(out[0].evidence.contains("SM clock 1980 of 1980 MHz"));
        // The same GPU at idle clocks, no processes and low power passes.
        if let Reading::Value(d) = &mut s.gpus[0].details {
            if let Reading::Value(c) = &mut d.clocks {
                c.sm_mhz = Reading::value(345);
            }
            d.processes = Reading::value(Vec::<GpuProcess>::new());
        }
        assert_eq!(check(&CHECK, &s)[0].status, Status::Pass);
    }

    #[test]
    fn slot_limited_generation_is_left_to_gpu006() {
        // Gen5 cards in Gen4 root ports run at Gen4: not a downtrained link.
        let out = check(&CHECK, &fixture("rtx5090"));
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(
            out[0]
                .evidence
                .contains("port above allows 16.0 GT/s (Gen4)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_when_sysfs_width_unreadable() {
        let mut s = fixture("h100");
        link_of(&mut s, 0).current_width =
            Reading::unknown(UnknownReason::NotPresent, "current_link_width: not present");
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
    }
}
