//! Node labels in Node Feature Discovery's vocabulary (`feature.node.kubernetes.io/inferscope-*`),
//! computed from a Snapshot and its check findings. Every value is a valid Kubernetes label value
//! (at most 63 characters of `[A-Za-z0-9_.-]`, alphanumeric at both ends); a fact inferscope
//! cannot see is labelled `unknown` rather than left out, so "not labelled yet" and "could not
//! tell" stay apart, and numeric operators (`Gt`, `Lt`) never match `unknown`.

use inferscope_check::{Finding, Severity, Status};
use inferscope_host::{P2pStatus, Reading, Snapshot};
use std::collections::{BTreeMap, BTreeSet};

/// The NFD namespace and the inferscope prefix of every label name.
pub const PREFIX: &str = "feature.node.kubernetes.io/inferscope-";

/// Value of a fact that could not be determined.
pub const UNKNOWN: &str = "unknown";

/// One label: the full key (with [`PREFIX`]) and its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Label {
    /// `feature.node.kubernetes.io/inferscope-gpu.count`.
    pub key: String,
    /// `8`.
    pub value: String,
}

/// Make `text` a valid label value: other characters become `-`, runs of them collapse, both
/// ends are trimmed to alphanumerics, and the result is cut at 63 characters.
pub fn label_value(text: &str) -> String {
    let mut v = String::new();
    for c in text.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            c
        } else {
            '-'
        };
        if c == '-' && v.ends_with('-') {
            continue;
        }
        v.push(c);
    }
    let mut v: String = v.chars().take(63).collect();
    while v.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        v.pop();
    }
    v.trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Whether two GPUs can do peer-to-peer (NVLink, or P2P read and write both OK);
/// `None` when the driver facts are not in the snapshot.
fn p2p_matrix(s: &Snapshot) -> Option<Vec<Vec<bool>>> {
    s.driver.known()?;
    let n = s.gpus.len();
    let mut m = vec![vec![false; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        if let Some(own) = row.get_mut(i) {
            *own = true;
        }
    }
    for p in &s.gpu_pairs {
        let (Some(i), Some(j)) = (
            s.gpus.iter().position(|g| g.pci_bus_id == p.a),
            s.gpus.iter().position(|g| g.pci_bus_id == p.b),
        ) else {
            continue;
        };
        let nvlink = p.nvlinks.known().is_some_and(|n| *n > 0);
        let p2p = p.p2p_read.known() == Some(&P2pStatus::Ok)
            && p.p2p_write.known() == Some(&P2pStatus::Ok);
        if nvlink || p2p {
            for (a, b) in [(i, j), (j, i)] {
                if let Some(cell) = m.get_mut(a).and_then(|row| row.get_mut(b)) {
                    *cell = true;
                }
            }
        }
    }
    Some(m)
}

/// Size of the largest set of `members` that are pairwise connected in `ok` (branch and bound;
/// GPU counts per host are small).
fn largest_group(ok: &[Vec<bool>], members: &[usize]) -> usize {
    fn grow(ok: &[Vec<bool>], chosen: usize, candidates: &[usize], best: &mut usize) {
        if chosen + candidates.len() <= *best {
            return;
        }
        if candidates.is_empty() {
            *best = chosen;
            return;
        }
        let mut rest = candidates;
        while let Some((&c, tail)) = rest.split_first() {
            if chosen + rest.len() <= *best {
                return;
            }
            let next: Vec<usize> = tail
                .iter()
                .copied()
                .filter(|&d| {
                    ok.get(c)
                        .and_then(|row| row.get(d))
                        .copied()
                        .unwrap_or(false)
                })
                .collect();
            grow(ok, chosen + 1, &next, best);
            rest = tail;
        }
    }
    let mut best = 0;
    grow(ok, 0, members, &mut best);
    best
}

/// The NUMA node of each GPU (by position); on a host with a single NUMA node an unreported
/// node is that node.
fn gpu_nodes(s: &Snapshot) -> Vec<Option<u32>> {
    let only = match s.numa_nodes.as_slice() {
        [one] => Some(one.id.0),
        _ => None,
    };
    s.gpus
        .iter()
        .map(|g| g.numa_node.known().map(|n| n.0).or(only))
        .collect()
}

fn yes_no_unknown(v: Option<bool>) -> String {
    match v {
        Some(true) => "true".into(),
        Some(false) => "false".into(),
        None => UNKNOWN.into(),
    }
}

/// One `(name, value)` pair per label, before the prefix is added.
type Put<'a> = dyn FnMut(&str, String) + 'a;

/// The labels of one node.
pub fn labels(s: &Snapshot, findings: &[Finding]) -> Vec<Label> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    gpu_labels(s, &mut put);
    let placement = Placement::of(s);
    tp_labels(s, &placement, &mut put);
    numa_labels(s, &placement, &mut put);
    driver_labels(s, &mut put);
    check_labels(findings, &mut put);
    out.into_iter()
        .map(|(k, value)| Label {
            key: format!("{PREFIX}{k}"),
            value,
        })
        .collect()
}

/// `gpu.count`, `gpu.product`, `gpu.memory-mib`, `gpu.nvlink`.
fn gpu_labels(s: &Snapshot, put: &mut Put<'_>) {
    let n = s.gpus.len();
    put("gpu.count", n.to_string());

    let names: BTreeSet<Option<&String>> = s
        .gpus
        .iter()
        .map(|g| g.details.known().and_then(|d| d.name.known()))
        .collect();
    put(
        "gpu.product",
        match names.iter().collect::<Vec<_>>().as_slice() {
            [] => "none".into(),
            [Some(name)] => label_value(name),
            [None] => UNKNOWN.into(),
            _ if names.contains(&None) => UNKNOWN.into(),
            _ => "mixed".into(),
        },
    );
    let memory: Option<Vec<u64>> = s
        .gpus
        .iter()
        .map(|g| {
            g.details
                .known()
                .and_then(|d| d.memory.known())
                .map(|m| m.total_bytes >> 20)
        })
        .collect();
    put(
        "gpu.memory-mib",
        match memory {
            Some(m) => match m.iter().min() {
                Some(least) => least.to_string(),
                // No GPUs: no GPU memory, a fact rather than an unknown.
                None => "0".into(),
            },
            None => UNKNOWN.into(),
        },
    );

    let nvlink = if n == 0 {
        Some(false)
    } else if s.driver.known().is_none() {
        None
    } else {
        let pair = s
            .gpu_pairs
            .iter()
            .any(|p| p.nvlinks.known().is_some_and(|c| *c > 0));
        let links = s.gpus.iter().any(|g| {
            g.details
                .known()
                .and_then(|d| d.nvlinks.known())
                .is_some_and(|l| l.iter().any(|l| l.active))
        });
        Some(pair || links)
    };
    put("gpu.nvlink", yes_no_unknown(nvlink));
}

/// Where the GPUs are: the GPUs (by position) on each NUMA node, and whether every GPU's node
/// is known.
struct Placement {
    per_node: BTreeMap<u32, Vec<usize>>,
    placed: bool,
}

impl Placement {
    fn of(s: &Snapshot) -> Placement {
        let nodes = gpu_nodes(s);
        let mut per_node: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Some(node) = node {
                per_node.entry(*node).or_default().push(i);
            }
        }
        Placement {
            per_node,
            placed: nodes.iter().all(Option::is_some),
        }
    }
}

/// Tensor-parallel groups (`tp.max-numa-local`, `tp.max`): GPUs pairwise NVLinked or
/// P2P-capable; on one NUMA node or anywhere.
fn tp_labels(s: &Snapshot, p: &Placement, put: &mut Put<'_>) {
    let n = s.gpus.len();
    let matrix = p2p_matrix(s);
    let local = match (&matrix, p.placed) {
        (_, false) => None,
        (Some(m), true) => p
            .per_node
            .values()
            .map(|g| largest_group(m, g))
            .max()
            .or(Some(0)),
        // Without driver facts only single-GPU nodes are certain.
        (None, true) => {
            let most = p.per_node.values().map(Vec::len).max().unwrap_or(0);
            (most <= 1).then_some(most)
        }
    };
    put(
        "tp.max-numa-local",
        local.map_or(UNKNOWN.into(), |v| v.to_string()),
    );
    let all: Vec<usize> = (0..n).collect();
    let anywhere = match &matrix {
        Some(m) => Some(largest_group(m, &all)),
        None => (n <= 1).then_some(n),
    };
    put("tp.max", anywhere.map_or(UNKNOWN.into(), |v| v.to_string()));
}

/// `numa.nodes` (nodes with CPUs) and `gpu.per-numa-node` (`4.4`: GPUs on each such node).
fn numa_labels(s: &Snapshot, p: &Placement, put: &mut Put<'_>) {
    let cpu_nodes: Vec<_> = s.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).collect();
    put("numa.nodes", cpu_nodes.len().to_string());
    put(
        "gpu.per-numa-node",
        if !p.placed {
            UNKNOWN.into()
        } else if cpu_nodes.is_empty() {
            s.gpus.len().to_string()
        } else {
            label_value(
                &cpu_nodes
                    .iter()
                    .map(|c| p.per_node.get(&c.id.0).map_or(0, Vec::len).to_string())
                    .collect::<Vec<_>>()
                    .join("."),
            )
        },
    );
}

/// `driver.version`, `cuda.driver-version`.
fn driver_labels(s: &Snapshot, put: &mut Put<'_>) {
    let driver = s.driver.known();
    let text = |r: Option<&Reading<String>>| {
        r.and_then(Reading::known)
            .map_or(UNKNOWN.into(), |v| label_value(v))
    };
    put("driver.version", text(driver.map(|d| &d.driver_version)));
    put(
        "cuda.driver-version",
        text(driver.map(|d| &d.cuda_driver_version)),
    );
}

/// Failing checks: a count, a count of error-severity ones, and one label per code.
fn check_labels(findings: &[Finding], put: &mut Put<'_>) {
    let mut failing: BTreeMap<&str, Severity> = BTreeMap::new();
    for f in findings.iter().filter(|f| f.status == Status::Fail) {
        let e = failing.entry(f.code.as_str()).or_insert(f.severity);
        *e = (*e).max(f.severity);
    }
    put("check.failing", failing.len().to_string());
    put(
        "check.errors",
        failing
            .values()
            .filter(|s| **s == Severity::Error)
            .count()
            .to_string(),
    );
    for (code, sev) in &failing {
        put(&format!("check.{}", label_value(code)), sev.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_valid() {
        assert_eq!(
            label_value("NVIDIA H100 80GB HBM3"),
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(label_value("  (x) "), "x");
        assert_eq!(label_value(&"a".repeat(100)).len(), 63);
        assert_eq!(label_value("565.57.01"), "565.57.01");
    }

    #[test]
    fn largest_group_finds_cliques() {
        // 0-1-2 a triangle, 3 linked to 0 only.
        let mut ok = vec![vec![false; 4]; 4];
        for (a, b) in [(0, 1), (1, 2), (0, 2), (0, 3)] {
            ok[a][b] = true;
            ok[b][a] = true;
        }
        for (i, row) in ok.iter_mut().enumerate() {
            row[i] = true;
        }
        assert_eq!(largest_group(&ok, &[0, 1, 2, 3]), 3);
        assert_eq!(largest_group(&ok, &[1, 3]), 1);
        assert_eq!(largest_group(&ok, &[]), 0);
    }

    fn value<'a>(labels: &'a [Label], key: &str) -> Option<&'a str> {
        labels
            .iter()
            .find(|l| l.key == format!("{PREFIX}{key}"))
            .map(|l| l.value.as_str())
    }

    #[test]
    fn fleet_node_a_answers_the_scheduling_questions() {
        // 8x H100 SXM on two sockets, 4 per node, NVLink x18 to every peer (fixtures/fleet).
        let s = crate::testing::node("a");
        let l = labels(&s, &inferscope_check::run_defaults(&s));
        assert_eq!(value(&l, "gpu.count"), Some("8"));
        assert_eq!(value(&l, "gpu.product"), Some("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(value(&l, "gpu.memory-mib"), Some("81559"));
        assert_eq!(value(&l, "gpu.nvlink"), Some("true"));
        assert_eq!(value(&l, "tp.max-numa-local"), Some("4"));
        assert_eq!(value(&l, "tp.max"), Some("8"));
        assert_eq!(value(&l, "gpu.per-numa-node"), Some("4.4"));
        assert_eq!(value(&l, "driver.version"), Some("565.57.01"));
        assert!(l.iter().all(|l| l.value.len() <= 63));
    }

    #[test]
    fn planted_differences_show_as_failing_checks() {
        // node-b: THP always, swappiness 60, GPU3 at x8 (fixtures/fleet/README.md).
        let a = crate::testing::node("a");
        let b = crate::testing::node("b");
        let la = labels(&a, &inferscope_check::run_defaults(&a));
        let lb = labels(&b, &inferscope_check::run_defaults(&b));
        assert_eq!(value(&la, "check.GPU005"), None);
        assert_eq!(value(&lb, "check.GPU005"), Some("warn"));
        assert_eq!(value(&lb, "check.MEM001"), Some("info"));
        let failing = |l: &[Label]| value(l, "check.failing").map(|v| v.parse::<usize>().unwrap());
        assert_eq!(failing(&lb), failing(&la).map(|n| n + 2));
    }

    #[test]
    fn without_driver_facts_links_are_unknown_not_false() {
        let mut s = crate::testing::node("a");
        s.driver = Reading::unknown(inferscope_host::UnknownReason::NotCaptured, "test");
        let l = labels(&s, &[]);
        assert_eq!(value(&l, "gpu.nvlink"), Some(UNKNOWN));
        assert_eq!(value(&l, "tp.max"), Some(UNKNOWN));
        assert_eq!(value(&l, "tp.max-numa-local"), Some(UNKNOWN));
        assert_eq!(value(&l, "driver.version"), Some(UNKNOWN));
        assert_eq!(value(&l, "check.failing"), Some("0"));
    }

    #[test]
    fn a_gpu_without_a_node_makes_placement_unknown() {
        let mut s = crate::testing::node("a");
        if let Some(g) = s.gpus.get_mut(2) {
            g.numa_node = Reading::unknown(inferscope_host::UnknownReason::NotReported, "-1");
        }
        let l = labels(&s, &[]);
        assert_eq!(value(&l, "gpu.per-numa-node"), Some(UNKNOWN));
        assert_eq!(value(&l, "tp.max-numa-local"), Some(UNKNOWN));
        assert_eq!(value(&l, "tp.max"), Some("8"));
    }
}
