//! GPU007: the kernel command line turns the IOMMU on in translated (DMA remapping) mode.

use super::support::HOST;
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU007",
    title: "IOMMU in translated mode on the kernel command line",
    severity: Severity::Warn,
    scope: Scope::Host,
    why: "With the IOMMU translating DMA, GPU peer-to-peer and GPUDirect RDMA traffic is redirected through the root complex (the kernel also turns on PCIe ACS), so NCCL's P2P bandwidth drops or transfers hang; `iommu=pt` keeps the IOMMU for VFIO while host devices use identity mapping.",
    run,
};

/// Tokens that turn DMA translation on.
fn enables(token: &str) -> bool {
    let on = |opts: &str| opts.split(',').any(|o| o == "on" || o == "force");
    match token.split_once('=') {
        Some(("intel_iommu", v)) | Some(("amd_iommu", v)) => on(v),
        Some(("iommu", v)) => v == "force" || v == "nopt",
        Some(("iommu.passthrough", v)) => v == "0" || v == "off" || v == "n",
        _ => false,
    }
}

/// Tokens that put host devices in passthrough (identity) mode, or turn the IOMMU off.
fn passthrough(token: &str) -> bool {
    matches!(
        token,
        "iommu=pt" | "iommu.passthrough=1" | "iommu.passthrough=on" | "iommu.passthrough=y"
    ) || matches!(token, "intel_iommu=off" | "amd_iommu=off" | "iommu=off")
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let params = match need(
        &input.snapshot.settings.kernel_iommu_params,
        HOST,
        "IOMMU kernel parameters (/proc/cmdline)",
    ) {
        Ok(v) => v,
        Err(o) => return vec![o],
    };
    let listed = if params.is_empty() {
        "none".to_string()
    } else {
        params.join(" ")
    };
    let evidence = format!("IOMMU parameters on /proc/cmdline: {listed}");
    let on: Vec<&String> = params.iter().filter(|t| enables(t)).collect();
    let pt = params.iter().any(|t| passthrough(t));
    if !on.is_empty() && !pt {
        vec![Outcome::fail(
            HOST,
            format!(
                "{evidence}: {} turns DMA translation on and no `iommu=pt` / `iommu.passthrough=1` follows",
                on.iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "Add `iommu=pt` to the kernel command line: append it to GRUB_CMDLINE_LINUX in /etc/default/grub, run `sudo update-grub` (RHEL: `sudo grub2-mkconfig -o /boot/grub2/grub.cfg`, or `sudo grubby --update-kernel=ALL --args=iommu=pt`), and reboot. Keep `intel_iommu=on` if VFIO needs it.",
        )]
    } else if params.is_empty() {
        vec![Outcome::pass(
            HOST,
            format!(
                "{evidence} (the kernel's build default applies; only the command line is checked)"
            ),
        )]
    } else {
        vec![Outcome::pass(HOST, evidence)]
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;
    use inferscope_host::{Reading, UnknownReason};

    fn with(params: &[&str]) -> inferscope_host::Snapshot {
        let mut s = fixture("h100");
        s.settings.kernel_iommu_params =
            Reading::value(params.iter().map(|p| p.to_string()).collect());
        s
    }

    #[test]
    fn passthrough_passes() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert_eq!(
            out[0].evidence,
            "IOMMU parameters on /proc/cmdline: intel_iommu=on iommu=pt"
        );
        assert_eq!(
            statuses(&check(&CHECK, &fixture("rtx5090"))),
            [Status::Pass]
        );
        assert_eq!(
            statuses(&check(&CHECK, &fixture("asymmetric"))),
            [Status::Pass]
        );
    }

    #[test]
    fn translated_mode_fails() {
        let out = check(&CHECK, &with(&["intel_iommu=on"]));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap_or("")
                .contains("GRUB_CMDLINE_LINUX")
        );
        assert_eq!(
            statuses(&check(&CHECK, &with(&["amd_iommu=on"]))),
            [Status::Fail]
        );
        assert_eq!(
            statuses(&check(&CHECK, &with(&["intel_iommu=on,sm_on"]))),
            [Status::Fail]
        );
        assert_eq!(
            statuses(&check(
                &CHECK,
                &with(&["amd_iommu=on", "iommu.passthrough=1"])
            )),
            [Status::Pass]
        );
    }

    #[test]
    fn no_parameters_pass_with_a_note() {
        let out = check(&CHECK, &fixture("plx"));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("build default"));
    }

    #[test]
    fn unknown_when_cmdline_unreadable() {
        let mut s = fixture("h100");
        s.settings.kernel_iommu_params = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/proc/cmdline: permission denied",
        );
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
