//! CPU002: too few physical cores on a GPU's NUMA node for the GPUs there.

use super::support::gpu_subject;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::topology::allowed_cpus;
use inferscope_host::{Reading, Snapshot};

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "CPU002",
    title: "Too few local cores per GPU worker",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "Each GPU worker keeps at least one core busy launching kernels and copying inputs, and the API server, tokenizer and scheduler need more; with fewer local cores than that per GPU, workers share cores or run on the far socket, and the GPUs wait on the CPU (lower throughput, jittery time per output token).",
    run,
};

/// Threads per physical core from the host inventory, as (threads, cores), or why not known.
fn smt(s: &Snapshot) -> Result<(u64, u64), String> {
    match (s.host.threads.known(), s.host.cores.known()) {
        (Some(&t), Some(&c)) if c > 0 && t >= c => Ok((u64::from(t), u64::from(c))),
        (Some(t), Some(c)) => Err(format!(
            "host reports {t} threads and {c} cores, which give no threads-per-core ratio"
        )),
        _ => Err(format!(
            "host threads ({}) or cores ({}) unknown",
            s.host.threads, s.host.cores
        )),
    }
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let min = u64::from(input.thresholds.min_local_cores_per_gpu);
    let allowed = allowed_cpus(s);
    let smt = smt(s);
    s.gpus
        .iter()
        .map(|g| {
            let subject = gpu_subject(s, g);
            let id = match &g.numa_node {
                Reading::Value(n) => *n,
                Reading::Unknown(u) => return Outcome::from_unknown(subject, "NUMA node", u),
            };
            let Some(node) = s.numa_nodes.iter().find(|n| n.id == id) else {
                return Outcome::unknown(
                    subject,
                    format!("the GPU's NUMA node {id} is not among the snapshot's nodes"),
                );
            };
            let allowed = match &allowed {
                Reading::Value(a) => a,
                Reading::Unknown(u) => {
                    return Outcome::from_unknown(subject, "cgroup CPU limit", u);
                }
            };
            let usable = node.cpus.intersection(allowed);
            let cpus = usable.len();
            let (threads, cores, smt_text) = match &smt {
                Ok((t, c)) => (
                    *t,
                    *c,
                    format!(
                        "{t} threads / {c} cores = {} thread(s) per core (host inventory)",
                        fmt1(*t as f64 / *c as f64)
                    ),
                ),
                Err(why) => (1, 1, format!("{why}; counting each CPU as a core")),
            };
            let on_node: Vec<String> = s
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, x)| x.numa_node.known() == Some(&id))
                .map(|(i, _)| format!("GPU{i}"))
                .collect();
            let gpus = on_node.len().max(1) as u64;
            let node_cores = cpus as f64 * cores as f64 / threads as f64;
            let per_gpu = node_cores / gpus as f64;
            let evidence = format!(
                "node {id}: {cpus} usable CPUs (node CPUs {} ∩ cgroup cpuset.cpus.effective {allowed} = {}); {smt_text} → {} cores; {gpus} GPU(s) on node {id} ({}) → {} / {gpus} = {} cores per GPU; threshold {min}",
                node.cpus,
                if usable.is_empty() {
                    "none".to_string()
                } else {
                    usable.to_string()
                },
                fmt1(node_cores),
                on_node.join(","),
                fmt1(node_cores),
                fmt1(per_gpu),
            );
            // cpus / (threads / cores) < min × gpus, exactly.
            let short = u128::from(cpus) * u128::from(cores)
                < u128::from(min) * u128::from(gpus) * u128::from(threads);
            if !short {
                return Outcome::pass(subject, evidence);
            }
            let want_cpus = min.saturating_mul(gpus).saturating_mul(threads) / cores.max(1);
            let remedy = if usable.len() < node.cpus.len() {
                format!(
                    "The cgroup leaves {cpus} of node {id}'s {} CPUs: give the server the node (Docker `--cpuset-cpus={}`, systemd `AllowedCPUs={}`, Kubernetes: at least {want_cpus} whole CPUs with the static CPU Manager policy). Or run fewer GPU workers on node {id} (`CUDA_VISIBLE_DEVICES`).",
                    node.cpus.len(),
                    node.cpus,
                    node.cpus
                )
            } else {
                format!(
                    "Node {id} has too few cores for {gpus} GPU worker(s): run fewer workers on it (split tensor-parallel groups across nodes or select a subset with `CUDA_VISIBLE_DEVICES`), keep other CPU work off node {id}, or use a host with more cores per socket. If the server is not CPU-bound, lower `min_local_cores_per_gpu` under [thresholds] in the --config file."
                )
            };
            Outcome::fail(subject, evidence, remedy)
        })
        .collect()
}

/// One decimal place (`3.5`, `6.0`).
fn fmt1(x: f64) -> String {
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::UnknownReason;

    #[test]
    fn six_cpus_for_four_gpus_fails_on_the_h100_box() {
        let out = check(&CHECK, &fixture("h100"));
        assert_eq!(out.len(), 8);
        assert!(statuses(&out).iter().all(|s| *s == Status::Fail));
        assert!(
            out[0].evidence.contains("6 usable CPUs")
                && out[0].evidence.contains("1.0 thread(s) per core")
                && out[0]
                    .evidence
                    .contains("4 GPU(s) on node 0 (GPU0,GPU1,GPU2,GPU3) → 6.0 / 4 = 1.5 cores per GPU; threshold 4"),
            "{}",
            out[0].evidence
        );
        assert!(out[4].evidence.contains("GPU4,GPU5,GPU6,GPU7"));
    }

    #[test]
    fn fourteen_cpus_for_four_gpus_is_three_and_a_half_and_fails_at_four() {
        let out = check(&CHECK, &fixture("plx"));
        assert!(statuses(&out).iter().all(|s| *s == Status::Fail));
        assert!(
            out[0]
                .evidence
                .contains("→ 14.0 / 4 = 3.5 cores per GPU; threshold 4"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("min_local_cores_per_gpu"))
        );
        let t = Thresholds {
            min_local_cores_per_gpu: 3,
            ..Thresholds::default()
        };
        let out = run_with(&CHECK, &fixture("plx"), None, None, &t);
        assert!(statuses(&out).iter().all(|s| *s == Status::Pass));
    }

    #[test]
    fn smt_siblings_count_as_one_core() {
        // Threadripper: 64 threads on 32 cores, 2 GPUs → 32 / 2 = 16 cores per GPU.
        let out = check(&CHECK, &fixture("rtx5090"));
        assert_eq!(statuses(&out), [Status::Pass, Status::Pass]);
        assert!(
            out[0]
                .evidence
                .contains("64 threads / 32 cores = 2.0 thread(s) per core")
                && out[0].evidence.contains("→ 32.0 / 2 = 16.0 cores per GPU"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn the_cgroup_limits_the_cores_on_the_asymmetric_box() {
        // GPU0 on node 1, whose CPUs the cgroup excludes; GPU1-4 share node 0's 16 CPUs
        // = 8 cores (2 threads per core) → 2 cores per GPU.
        let out = check(&CHECK, &fixture("asymmetric"));
        assert!(statuses(&out).iter().all(|s| *s == Status::Fail));
        assert!(
            out[0].evidence.contains("= none)")
                && out[0].evidence.contains("0.0 / 1 = 0.0 cores per GPU"),
            "{}",
            out[0].evidence
        );
        assert!(
            out[0]
                .remedy
                .as_deref()
                .is_some_and(|r| r.contains("--cpuset-cpus=8-15,24-31"))
        );
        assert!(
            out[1].evidence.contains("8.0 / 4 = 2.0 cores per GPU"),
            "{}",
            out[1].evidence
        );
    }

    #[test]
    fn unknown_node_is_unknown() {
        let out = check(&CHECK, &fixture("cloud-vm"));
        assert_eq!(statuses(&out), [Status::Unknown, Status::Unknown]);
        assert!(
            out[0]
                .evidence
                .starts_with("NUMA node unknown (not reported)"),
            "{}",
            out[0].evidence
        );
    }

    #[test]
    fn unknown_cgroup_is_unknown() {
        let mut s = fixture("h100");
        s.settings.cgroup = Reading::unknown(UnknownReason::PermissionDenied, "/proc/self/cgroup");
        assert!(
            statuses(&check(&CHECK, &s))
                .iter()
                .all(|x| *x == Status::Unknown)
        );
    }

    #[test]
    fn unknown_smt_counts_cpus_as_cores_and_says_so() {
        let mut s = fixture("rtx5090");
        s.host.cores = Reading::unknown(UnknownReason::Malformed, "/proc/cpuinfo");
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Pass, Status::Pass]);
        assert!(
            out[0].evidence.contains("counting each CPU as a core"),
            "{}",
            out[0].evidence
        );
    }
}
