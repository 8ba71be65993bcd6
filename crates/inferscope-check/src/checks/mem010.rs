//! MEM010: host RAM (or the bound NUMA nodes' RAM) too small to load the model.

use super::mem009::load_need;
use super::support::{HOST, bytes};
use crate::outcome::need;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "MEM010",
    title: "Host RAM too small to load the model",
    severity: Severity::Error,
    scope: Scope::Plan,
    why: "Servers memory-map safetensors shards and read them through the page cache, staging tensors in host memory before copying them to the GPUs; with less free RAM than the checkpoint the load swaps, thrashes the page cache or is OOM-killed, and a server bound to one NUMA node can only use that node's memory.",
    run,
};

fn run(input: &CheckInput) -> Vec<Outcome> {
    let Some(plan) = input.plan else {
        return vec![Outcome::unknown(HOST, "no plan given (pass --plan FILE)")];
    };
    let Some(weights) = plan.weights_bytes_total else {
        return vec![Outcome::unknown(
            HOST,
            "the plan has no weights_bytes_total, so the host memory loading needs is unknown (`inferscope plan --json` writes it; add it to a hand-written plan)",
        )];
    };
    let s = input.snapshot;
    let available = match need(&s.settings.memory_available_bytes, HOST, "MemAvailable") {
        Ok(v) => *v,
        Err(o) => return vec![o],
    };
    let factor = input.thresholds.host_ram_load_factor;
    let needed = load_need(weights, factor);
    let mut short = Vec::new();
    let mut evidence = vec![
        format!(
            "loading needs {} (weights_bytes_total {} × host_ram_load_factor {factor})",
            bytes(needed),
            bytes(weights)
        ),
        format!("MemAvailable {} (/proc/meminfo)", bytes(available)),
    ];
    if available < needed {
        short.push(format!("the host has {} available", bytes(available)));
    }
    let mut bound = plan.numa_nodes.clone();
    bound.sort_unstable();
    bound.dedup();
    if !bound.is_empty() {
        let mut free_sum: u64 = 0;
        let mut parts = Vec::new();
        for id in &bound {
            let Some(node) = s.numa_nodes.iter().find(|n| n.id.0 == *id) else {
                let have: Vec<String> = s.numa_nodes.iter().map(|n| n.id.to_string()).collect();
                return vec![Outcome::unknown(
                    HOST,
                    format!(
                        "the plan binds to NUMA node {id}, which this snapshot does not have (nodes: {})",
                        if have.is_empty() {
                            "none".to_string()
                        } else {
                            have.join(",")
                        }
                    ),
                )];
            };
            let free = match need(
                &node.memory_free_bytes,
                HOST,
                &format!("MemFree of NUMA node {id}"),
            ) {
                Ok(v) => *v,
                Err(o) => return vec![o],
            };
            free_sum = free_sum.saturating_add(free);
            parts.push(format!("node {id} {}", bytes(free)));
        }
        let nodes: Vec<String> = bound.iter().map(|n| n.to_string()).collect();
        let nodes = nodes.join(",");
        evidence.push(format!(
            "the plan binds to node(s) {nodes}: MemFree {} (/sys/devices/system/node/node*/meminfo: {})",
            bytes(free_sum),
            parts.join(", ")
        ));
        if free_sum < needed {
            short.push(format!(
                "a server bound to node(s) {nodes} can only use their {} free",
                bytes(free_sum)
            ));
        }
    }
    let evidence = evidence.join("; ");
    if short.is_empty() {
        return vec![Outcome::pass(HOST, evidence)];
    }
    vec![Outcome::fail(
        HOST,
        format!(
            "{evidence}. Too little: {}. Safetensors are memory-mapped and read through the page cache, and each tensor is staged in host memory on its way to the GPU.",
            short.join("; ")
        ),
        "Free host memory before starting (stop other servers; `sync; echo 1 > /proc/sys/vm/drop_caches` drops clean page cache); bind to more nodes (`inferscope run --numa-node 0,1 ...`) or load without a memory bind; or plan a smaller (quantised) checkpoint or a host with more RAM.",
    )]
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::{PlanFacts, Reading, UnknownReason};

    fn plan(weights: Option<u64>, nodes: &[u32]) -> PlanFacts {
        PlanFacts {
            weights_bytes_total: weights,
            numa_nodes: nodes.to_vec(),
            ..PlanFacts::default()
        }
    }

    fn go(snapshot: &str, p: &PlanFacts) -> Vec<Outcome> {
        run_with(
            &CHECK,
            &fixture(snapshot),
            Some(p),
            None,
            &Thresholds::default(),
        )
    }

    #[test]
    fn no_plan_is_unknown() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert_eq!(out[0].evidence, "no plan given (pass --plan FILE)");
    }

    #[test]
    fn plan_without_weights_is_unknown_with_that_reason() {
        let out = go("h100", &plan(None, &[]));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("no weights_bytes_total"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn big_host_passes() {
        let out = go("h100", &plan(Some(140 << 30), &[0]));
        assert_eq!(statuses(&out), [Status::Pass]);
        assert!(
            out[0]
                .evidence
                .contains("the plan binds to node(s) 0: MemFree"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn too_little_available_fails_on_the_dev_vm() {
        // 23.1 GiB available; 30 GiB × 1.2 = 36 GiB.
        let out = go("dev-vm", &plan(Some(30 << 30), &[]));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0].evidence.contains("loading needs 36.0 GiB")
                && out[0].evidence.contains("the host has 23.1 GiB available")
                && out[0].evidence.contains("page cache"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn the_bound_node_is_too_small_though_the_host_is_not() {
        // Asymmetric box: 101 GiB available host-wide, node 0 has 36.6 GiB free,
        // node 1 57.0 GiB. 40 GiB × 1.2 = 48 GiB.
        let host_wide = go("asymmetric", &plan(Some(40 << 30), &[]));
        assert_eq!(statuses(&host_wide), [Status::Pass]);
        let out = go("asymmetric", &plan(Some(40 << 30), &[0]));
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("a server bound to node(s) 0 can only use their 36.6 GiB free")
                && !out[0].evidence.contains("the host has"),
            "{}",
            out[0].evidence
        );
        let both = go("asymmetric", &plan(Some(40 << 30), &[1, 0, 0]));
        assert_eq!(statuses(&both), [Status::Pass]);
    }

    #[test]
    fn unknown_node_or_reading_is_unknown() {
        let out = go("h100", &plan(Some(1 << 30), &[3]));
        assert_eq!(statuses(&out), [Status::Unknown]);
        assert!(
            out[0].evidence.contains("node 3") && out[0].evidence.contains("nodes: 0,1"),
            "{}",
            out[0].evidence
        );
        let mut s = fixture("h100");
        s.settings.memory_available_bytes =
            Reading::unknown(UnknownReason::Malformed, "/proc/meminfo line 3");
        let p = plan(Some(1 << 30), &[]);
        assert_eq!(
            statuses(&run_with(
                &CHECK,
                &s,
                Some(&p),
                None,
                &Thresholds::default()
            )),
            [Status::Unknown]
        );
    }
}
