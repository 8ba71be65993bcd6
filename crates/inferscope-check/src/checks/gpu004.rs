//! GPU004: NVLinks of a GPU are down while its other links, or its peers' links, are up.

use super::support::gpu_subject;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{NvLink, Reading, Snapshot, UnknownReason};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU004",
    title: "NVLink links down",
    severity: Severity::Error,
    scope: Scope::Gpu,
    why: "A GPU with inactive NVLinks loses a share of its GPU-to-GPU bandwidth (all of it when every link is down and traffic falls back to PCIe), so tensor-parallel all-reduces slow down for the whole group; on NVSwitch boards the fabric manager may also refuse to start CUDA jobs.",
    run,
};

/// True when some other GPU of the snapshot reports an active NVLink.
fn peers_have_links(s: &Snapshot, me: usize) -> bool {
    s.gpus
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .filter_map(|(_, g)| g.details.known())
        .filter_map(|d| d.nvlinks.known())
        .any(|links| links.iter().any(|l| l.active))
}

fn link_list(links: &[&NvLink]) -> String {
    links
        .iter()
        .map(|l| l.link.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    s.gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let subject = gpu_subject(s, g);
            let details = match need(&g.details, &subject, "driver facts (NVML)") {
                Ok(d) => d,
                Err(o) => return o,
            };
            let links = match &details.nvlinks {
                Reading::Value(l) => l,
                // NVML answers NOT_SUPPORTED on link 0 of a GPU that has no NVLink at all.
                Reading::Unknown(u) if u.reason == UnknownReason::NotSupported => {
                    return Outcome::pass(
                        subject,
                        format!("no NVLink on this GPU (NVML: not supported: {})", u.detail),
                    );
                }
                Reading::Unknown(u) => {
                    return Outcome::from_unknown(
                        subject,
                        "NVLink state (nvmlDeviceGetNvLinkState)",
                        u,
                    );
                }
            };
            let up: Vec<&NvLink> = links.iter().filter(|l| l.active).collect();
            let down: Vec<&NvLink> = links.iter().filter(|l| !l.active).collect();
            let remedy = "Check the fabric: `nvidia-smi nvlink --status -i N` and `nvidia-smi nvlink -e -i N` (error counters); on NVSwitch boards `systemctl status nvidia-fabricmanager` and its log; reset the GPU when idle (`nvidia-smi -r -i N`) or reboot; links that stay down after a reboot need a hardware ticket (reseat the NVLink bridge on PCIe cards).";
            if !up.is_empty() && !down.is_empty() {
                return Outcome::fail(
                    subject,
                    format!(
                        "{} of {} NVLinks inactive (links {}); active: {} (nvmlDeviceGetNvLinkState)",
                        down.len(),
                        links.len(),
                        link_list(&down),
                        link_list(&up)
                    ),
                    remedy,
                );
            }
            if up.is_empty() && !links.is_empty() && peers_have_links(s, i) {
                return Outcome::fail(
                    subject,
                    format!(
                        "all {} NVLinks inactive while other GPUs of this host have active links (nvmlDeviceGetNvLinkState)",
                        links.len()
                    ),
                    remedy,
                );
            }
            if links.is_empty() {
                Outcome::pass(subject, "the driver reports no NVLinks for this GPU")
            } else if up.is_empty() {
                Outcome::pass(
                    subject,
                    format!(
                        "{} NVLinks, none active, and no other GPU of this host has an active link: a PCIe card without an NVLink bridge",
                        links.len()
                    ),
                )
            } else {
                Outcome::pass(subject, format!("all {} NVLinks active", links.len()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    fn set_links(s: &mut inferscope_host::Snapshot, gpu: usize, f: impl Fn(&mut NvLink)) {
        if let Reading::Value(d) = &mut s.gpus[gpu].details
            && let Reading::Value(links) = &mut d.nvlinks
        {
            links.iter_mut().for_each(f);
        }
    }

    #[test]
    fn all_links_up_pass() {
        let out = check(&CHECK, &h100_with_driver());
        assert!(statuses(&out).iter().all(|s| *s == Status::Pass));
        assert_eq!(out[0].evidence, "all 18 NVLinks active");
    }

    #[test]
    fn some_links_down_fail() {
        let mut s = h100_with_driver();
        set_links(&mut s, 2, |l| l.active = l.link != 5 && l.link != 11);
        let out = check(&CHECK, &s);
        assert_eq!(out[2].status, Status::Fail);
        assert!(
            out[2]
                .evidence
                .starts_with("2 of 18 NVLinks inactive (links 5,11)"),
            "{}",
            out[2].evidence
        );
        assert_eq!(out[1].status, Status::Pass);
    }

    #[test]
    fn a_gpu_with_every_link_down_among_linked_peers_fails() {
        let mut s = h100_with_driver();
        set_links(&mut s, 7, |l| l.active = false);
        let out = check(&CHECK, &s);
        assert_eq!(out[7].status, Status::Fail);
        assert!(
            out[7]
                .evidence
                .contains("other GPUs of this host have active links")
        );
    }

    #[test]
    fn pcie_cards_without_bridges_pass() {
        let mut s = h100_with_driver();
        for i in 0..s.gpus.len() {
            set_links(&mut s, i, |l| l.active = false);
        }
        assert!(
            statuses(&check(&CHECK, &s))
                .iter()
                .all(|x| *x == Status::Pass)
        );
    }

    #[test]
    fn unknown_without_driver_or_when_nvml_refuses() {
        assert!(
            statuses(&check(&CHECK, &fixture("plx")))
                .iter()
                .all(|x| *x == Status::Unknown)
        );
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[0].details {
            d.nvlinks = Reading::unknown(
                UnknownReason::PermissionDenied,
                "NVML NVLink state: No permission",
            );
        }
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        if let Reading::Value(d) = &mut s.gpus[0].details {
            d.nvlinks = Reading::unknown(
                UnknownReason::NotSupported,
                "NVML NVLink state: Not Supported",
            );
        }
        assert_eq!(check(&CHECK, &s)[0].status, Status::Pass);
    }
}
