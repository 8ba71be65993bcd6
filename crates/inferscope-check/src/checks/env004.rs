//! ENV004: `NCCL_P2P_DISABLE` set on a host whose GPUs can talk peer to peer.
//!
//! Also home of [`nccl_switch`], the reading of NCCL's integer variables that ENV005 and
//! ENV006 share.

use super::env003::gpu_label;
use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{GpuVendor, P2pStatus, Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV004",
    title: "NCCL_P2P_DISABLE set although P2P works",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "With NCCL_P2P_DISABLE=1, NCCL stops using NVLink and PCIe peer-to-peer between GPUs and copies every tensor-parallel all-reduce through host shared memory, which costs a large share of all-reduce bandwidth and shows up directly as higher time per output token.",
    run,
};

/// An NCCL on/off variable as NCCL reads it (`strtoll`, base 0; an invalid value is ignored
/// and the default 0 kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NcclSwitch {
    /// Not in the environment.
    Unset,
    /// Set to 0.
    Off(String),
    /// Set to a non-zero integer.
    On(String),
    /// Set to something NCCL cannot parse; NCCL keeps the default (0).
    Invalid(String),
}

/// Read `name` from the captured environment.
pub(crate) fn nccl_switch(snapshot: &Snapshot, name: &str) -> NcclSwitch {
    let Some(raw) = snapshot.env.get(name) else {
        return NcclSwitch::Unset;
    };
    let t = raw.trim();
    let parsed = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else {
        t.parse::<i64>().ok()
    };
    match parsed {
        Some(0) => NcclSwitch::Off(raw.clone()),
        Some(_) => NcclSwitch::On(raw.clone()),
        None => NcclSwitch::Invalid(raw.clone()),
    }
}

/// The pass outcome for a switch that is not on, or `None` when it is on.
pub(crate) fn not_on(name: &str, sw: &NcclSwitch) -> Option<Outcome> {
    match sw {
        NcclSwitch::Unset => Some(Outcome::pass(
            HOST,
            format!("{name} is not set in the captured environment"),
        )),
        NcclSwitch::Off(v) => Some(Outcome::pass(HOST, format!("{name}={v:?}: off"))),
        NcclSwitch::Invalid(v) => Some(Outcome::pass(
            HOST,
            format!("{name}={v:?} is not an integer: NCCL ignores it and keeps the default 0"),
        )),
        NcclSwitch::On(_) => None,
    }
}

/// NVIDIA GPUs in the snapshot.
pub(crate) fn nvidia_gpus(snapshot: &Snapshot) -> usize {
    snapshot
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .count()
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let name = "NCCL_P2P_DISABLE";
    let sw = nccl_switch(s, name);
    if let Some(o) = not_on(name, &sw) {
        return vec![o];
    }
    let NcclSwitch::On(v) = sw else {
        return Vec::new();
    };
    let set = format!("{name}={v:?}");
    if nvidia_gpus(s) < 2 {
        return vec![Outcome::pass(
            HOST,
            format!("{set}, but fewer than two NVIDIA GPUs: NCCL has no peer to reach"),
        )];
    }
    if s.gpu_pairs.is_empty() {
        let why = match &s.driver {
            Reading::Unknown(u) => format!("{} ({})", u.reason, u.detail),
            Reading::Value(_) => "the driver reported no GPU pairs".to_string(),
        };
        return vec![Outcome::unknown(
            HOST,
            format!(
                "{set}; whether P2P works needs the driver's P2P and NVLink facts (NVML), unknown here: {why}"
            ),
        )];
    }
    let mut usable: Vec<String> = Vec::new();
    let mut unknown = 0usize;
    for p in &s.gpu_pairs {
        let links = p.nvlinks.known().copied().unwrap_or(0);
        let read_ok = p.p2p_read.known() == Some(&P2pStatus::Ok);
        let write_ok = p.p2p_write.known() == Some(&P2pStatus::Ok);
        if links > 0 || read_ok || write_ok {
            let how = if links > 0 {
                format!("NV{links}")
            } else {
                "PCIe P2P OK".to_string()
            };
            usable.push(format!(
                "{}–{}: {how}",
                gpu_label(s, &p.a),
                gpu_label(s, &p.b)
            ));
        } else if !p.nvlinks.is_known() || !p.p2p_read.is_known() {
            unknown += 1;
        }
    }
    if !usable.is_empty() {
        let n = usable.len();
        let shown: Vec<String> = usable.into_iter().take(4).collect();
        let more = if n > shown.len() {
            format!(" and {} more", n - shown.len())
        } else {
            String::new()
        };
        return vec![Outcome::fail(
            HOST,
            format!(
                "{set}, yet {n} GPU pair(s) support peer-to-peer (NVML): {}{more}",
                shown.join("; ")
            ),
            format!(
                "`unset {name}` (or `export {name}=0`) in the server's environment. If it was set to get past a P2P hang on PCIe, the cause is usually PCIe ACS or the IOMMU redirecting peer traffic: check with NCCL's troubleshooting guide and `nvidia-smi topo -p2p r` instead of disabling P2P."
            ),
        )];
    }
    if unknown > 0 {
        return vec![Outcome::unknown(
            HOST,
            format!(
                "{set}; no GPU pair is known to support P2P, but {unknown} pair(s) have unknown NVLink/P2P status"
            ),
        )];
    }
    vec![Outcome::pass(
        HOST,
        format!(
            "{set}, and no GPU pair supports P2P or NVLink (NVML): the variable changes nothing"
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    #[test]
    fn disabled_on_an_nvlink_host_fails() {
        let mut s = h100_with_driver();
        s.env.insert("NCCL_P2P_DISABLE".into(), "1".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("28 GPU pair(s) support peer-to-peer (NVML): GPU0 (0000:18:00.0)–GPU1 (0000:3a:00.0): NV18"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unset_zero_or_invalid_pass() {
        assert_eq!(
            statuses(&check(&CHECK, &h100_with_driver())),
            [Status::Pass]
        );
        let mut s = h100_with_driver();
        s.env.insert("NCCL_P2P_DISABLE".into(), "0".into());
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
        s.env.insert("NCCL_P2P_DISABLE".into(), "true".into());
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(out[0].evidence.contains("NCCL ignores it"));
    }

    #[test]
    fn no_pair_capable_passes() {
        let mut s = h100_with_driver();
        s.env.insert("NCCL_P2P_DISABLE".into(), "1".into());
        for p in &mut s.gpu_pairs {
            p.nvlinks = Reading::value(0);
            p.p2p_read = Reading::value(P2pStatus::ChipsetNotSupported);
            p.p2p_write = Reading::value(P2pStatus::ChipsetNotSupported);
        }
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn without_driver_facts_it_is_unknown() {
        // The cloud VM sets NCCL_P2P_DISABLE=1 and has no NVML facts.
        let out = check(&CHECK, &fixture("cloud-vm"));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("not captured"),
            "{}",
            out[0].evidence
        );
    }
}
