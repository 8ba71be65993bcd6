//! PROC002: a running process keeps much of its memory on NUMA nodes away from its GPUs.

use super::env003::gpu_label;
use super::proc001::{gpu_node, no_process, process_gpus, process_subject};
use super::support::bytes;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::{NumaNodeId, Reading};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "PROC002",
    title: "Process memory on a remote NUMA node",
    severity: Severity::Warn,
    scope: Scope::Process,
    why: "Pinned host buffers, the CPU KV-cache swap space and the tokenizer's memory on another socket's node make every host-device transfer and CPU-side step cross the socket interconnect; numastat shows the node, but not that it is the wrong one for the GPU.",
    run,
};

/// numastat-style list: `N0=1200 (4.7 MiB), N1=300 (1.2 MiB)`.
fn per_node(pages: &std::collections::BTreeMap<u32, u64>) -> String {
    pages
        .iter()
        .map(|(n, p)| format!("N{n}={p} ({})", bytes(p.saturating_mul(4096))))
        .collect::<Vec<_>>()
        .join(", ")
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(p) = input.process else {
        return vec![no_process()];
    };
    let s = input.snapshot;
    let subject = process_subject(p);
    let pages = match &p.pages_per_node {
        Reading::Value(m) => m,
        Reading::Unknown(u) => {
            return vec![Outcome::from_unknown(subject, "pages per NUMA node", u)];
        }
    };
    let total: u64 = pages.values().fold(0u64, |a, b| a.saturating_add(*b));
    let max_remote = u64::from(input.thresholds.max_remote_memory_percent);
    if total == 0 {
        return vec![Outcome::unknown(
            subject,
            format!(
                "/proc/{}/numa_maps lists no resident pages on any node",
                p.pid
            ),
        )];
    }
    let (gpus, how) = match process_gpus(s, p) {
        Ok(x) => x,
        Err(o) => return vec![o],
    };
    let mut nodes: Vec<NumaNodeId> = Vec::new();
    for id in &gpus {
        match gpu_node(s, id) {
            Reading::Value(n) => {
                if !nodes.contains(&n) {
                    nodes.push(n);
                }
            }
            Reading::Unknown(u) => {
                return vec![Outcome::unknown(
                    subject,
                    format!("NUMA node of {} unknown: {}", gpu_label(s, id), u.detail),
                )];
            }
        }
    }
    let remote: u64 = pages
        .iter()
        .filter(|(n, _)| !nodes.contains(&NumaNodeId(**n)))
        .fold(0u64, |a, (_, p)| a.saturating_add(*p));
    let pct = remote as f64 * 100.0 / total as f64;
    let node_list = nodes
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mems = match &p.mems_allowed {
        Reading::Value(m) => format!("Mems_allowed_list {m}"),
        Reading::Unknown(u) => format!("Mems_allowed_list unknown ({})", u.reason),
    };
    let evidence = format!(
        "resident 4 KiB pages per node (/proc/{}/numa_maps): {}; GPU node(s) {node_list} ({how}); {:.1}% ({}) on other nodes, threshold {max_remote}%; {mems}",
        p.pid,
        per_node(pages),
        pct,
        bytes(remote.saturating_mul(4096))
    );
    if remote.saturating_mul(100) <= total.saturating_mul(max_remote) {
        return vec![Outcome::pass(subject, evidence)];
    }
    let from: Vec<String> = pages
        .keys()
        .filter(|n| !nodes.contains(&NumaNodeId(**n)))
        .map(|n| n.to_string())
        .collect();
    let to = nodes.first().map(|n| n.to_string()).unwrap_or_default();
    vec![Outcome::fail(
        subject,
        evidence,
        format!(
            "Restart the server with its memory bound to the GPU's node: `numactl --cpunodebind={node_list} --membind={node_list} -- <server command>` (one process per GPU: each worker on its own GPU's node). To move the running process's pages now: `migratepages {} {} {to}` (numactl package; pinned/CUDA-registered pages do not move).",
            p.pid,
            from.join(",")
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{ProcessFacts, Snapshot, UnknownReason};
    use std::collections::BTreeMap;

    fn process(pages: &[(u32, u64)], cvd: &str) -> ProcessFacts {
        ProcessFacts {
            pid: 4242,
            name: Reading::value("python3".into()),
            cpus_allowed: Reading::value("0-11".parse().unwrap()),
            mems_allowed: Reading::value("0-1".parse().unwrap()),
            pages_per_node: Reading::value(pages.iter().copied().collect::<BTreeMap<_, _>>()),
            gpus: Vec::new(),
            cuda_visible_devices: Reading::value(Some(cvd.to_string())),
        }
    }

    fn run_p(s: &Snapshot, p: &ProcessFacts) -> Vec<Outcome> {
        run_with(&CHECK, s, None, Some(p), &Thresholds::default())
    }

    #[test]
    fn a_third_of_pages_on_the_other_socket_fails() {
        // Worker of GPU0 (node 0) on the H100 box with 1/3 of its pages on node 1.
        let s = fixture("h100");
        let out = run_p(&s, &process(&[(0, 2_000_000), (1, 1_000_000)], "0"));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("N0=2000000 (7.6 GiB), N1=1000000 (3.8 GiB)"),
            "{}",
            out[0].evidence
        );
        assert!(out[0].evidence.contains("33.3%"));
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap()
                .contains("migratepages 4242 1 0")
        );
    }

    #[test]
    fn mostly_local_passes() {
        let s = fixture("h100");
        // GPU4 is on node 1: 5% on node 0 is within the threshold.
        let out = run_p(&s, &process(&[(0, 50), (1, 950)], "4"));
        assert_eq!(statuses(&out), [Status::Pass], "{}", out[0].evidence);
    }

    #[test]
    fn single_node_vm_with_unknown_gpu_node_passes() {
        let s = fixture("cloud-vm");
        let out = run_p(&s, &process(&[(0, 1000)], "0"));
        assert_eq!(statuses(&out), [Status::Pass]);
    }

    #[test]
    fn unreadable_numa_maps_is_unknown() {
        let s = fixture("h100");
        let mut p = process(&[], "0");
        p.pages_per_node = Reading::unknown(
            UnknownReason::PermissionDenied,
            "/proc/4242/numa_maps: permission denied",
        );
        let out = run_p(&s, &p);
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(out[0].evidence.contains("permission denied"));
        assert_eq!(statuses(&run_p(&s, &process(&[], "0"))), [Status::Unknown]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Unknown]);
    }
}
