//! Kernel command line (`/proc/cmdline`) IOMMU parameters.
//!
//! Only IOMMU-related tokens matter to inferscope, so this is a filter, not a full
//! parser, and it cannot fail. It honours the kernel's double-quote rule (spaces inside
//! quotes do not split) and stops at `--`, after which arguments belong to init.

/// Returns the IOMMU-related tokens verbatim, in order: `intel_iommu=…`, `amd_iommu=…`,
/// `iommu=…`, `iommu.<name>=…` and `amd_iommu_<name>[=…]`.
pub fn iommu_params(text: &str) -> Vec<String> {
    split_cmdline(text)
        .into_iter()
        .take_while(|t| *t != "--")
        .filter(|t| is_iommu(t))
        .map(str::to_owned)
        .collect()
}

fn is_iommu(token: &str) -> bool {
    token.starts_with("intel_iommu=")
        || token.starts_with("amd_iommu=")
        || token.starts_with("iommu=")
        || token.starts_with("amd_iommu_")
        || token.strip_prefix("iommu.").is_some_and(|rest| {
            rest.split_once('=')
                .is_some_and(|(name, _)| !name.is_empty())
        })
}

/// Splits on whitespace outside double quotes.
fn split_cmdline(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut in_quotes = false;
    for (i, c) in text.char_indices() {
        if c == '"' {
            in_quotes = !in_quotes;
        }
        if c.is_whitespace() && !in_quotes {
            if let Some(s) = start.take() {
                out.push(text.get(s..i).unwrap_or(""));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(text.get(s..).unwrap_or(""));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/proc/cmdline` from this machine (Firecracker VM): no IOMMU flags, and init
    /// arguments after `--`.
    const FIRECRACKER: &str = "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet reboot=k panic=1 nomodule random.trust_cpu=1 swiotlb=noforce psi=1 nvproxy.enable=1 page_reporting.page_reporting_order=11 deferred_init=lazy nested_pvm=1 rcupdate.rcu_cpu_stall_cputime=1 cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=0 sched_vcpu_pack=15 rdinit=/process_api -- --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768\n";

    /// Models an Ubuntu GPU server set up for passthrough on Intel.
    const INTEL_GPU: &str = "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=1234 ro quiet splash intel_iommu=on iommu=pt vfio-pci.ids=10de:2330\n";

    /// Models an AMD EPYC host and an aarch64 (SMMU) host.
    const AMD: &str = "root=/dev/sda1 amd_iommu=on amd_iommu_intr=legacy iommu=pt";
    const ARM: &str =
        "console=ttyAMA0 iommu.passthrough=1 iommu.strict=0 arm-smmu.disable_bypass=0";

    #[test]
    fn samples() {
        assert!(iommu_params(FIRECRACKER).is_empty());
        assert_eq!(iommu_params(INTEL_GPU), vec!["intel_iommu=on", "iommu=pt"]);
        assert_eq!(
            iommu_params(AMD),
            vec!["amd_iommu=on", "amd_iommu_intr=legacy", "iommu=pt"]
        );
        assert_eq!(
            iommu_params(ARM),
            vec!["iommu.passthrough=1", "iommu.strict=0"]
        );
    }

    #[test]
    fn quotes_and_double_dash() {
        assert_eq!(
            iommu_params("a=\"x iommu=pt\" intel_iommu=on,sm_on -- iommu=off"),
            vec!["intel_iommu=on,sm_on"]
        );
        assert!(iommu_params("iommu. iommu.=1 noiommu xiommu=pt").is_empty());
        assert!(iommu_params("").is_empty());
    }
}
