//! `--gpus auto:N`: pick the N GPUs that work best together.
//!
//! Sets of N GPUs are compared by these keys, in order (smaller wins):
//!
//! 1. **Usable placement**: how many GPUs of the set sit on a node none of whose CPUs the cgroup
//!    allows (or whose node is unknown). `auto` should never pick what `run` must then refuse.
//! 2. **Worst link** inside the set: NVLink when the driver reports links for the pair (more
//!    links better), else the PCIe class from the PCI tree (`PIX` < `PXB` < `PHB` < `NODE` <
//!    `SYS`), else NVML's common ancestor, else unknown (worst). The worst pair bounds
//!    tensor-parallel all-reduce.
//! 3. **Sum of the links' ranks**, so that among sets with the same bottleneck the one with more
//!    good pairs wins.
//! 4. **GPU memory in use** (`details.memory.used_bytes`): first the number of GPUs where it is
//!    unknown (unknown is not zero), then the sum of the known values.
//! 5. **NUMA nodes** spanned (fewer wins); with PCIe classes this is mostly decided by 2 already.
//! 6. **PCI order** of the members, so the answer is deterministic.
//!
//! Every real host has few enough GPUs to try every set (at most [`EXHAUSTIVE_LIMIT`]
//! combinations; 16 GPUs choose 8 is 12,870). Beyond that a greedy search starts from every GPU
//! in turn and adds the GPU that keeps the key smallest. Hosts with more than [`MAX_GPUS`] GPUs
//! are refused rather than searched slowly.

use crate::error::LaunchError;
use crate::resolve::{gpu_node, node_cpus};
use inferscope_host::topology::pcie_link_class;
use inferscope_host::{CpuSet, LinkClass, NumaNodeId, Snapshot};

/// Largest number of combinations searched exhaustively.
pub const EXHAUSTIVE_LIMIT: u64 = 20_000;
/// Largest number of GPUs `auto` searches.
pub const MAX_GPUS: usize = 256;

/// The GPUs `auto:N` chose, in PCI order, and one sentence on why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    /// Indices into `snapshot.gpus`.
    pub gpus: Vec<usize>,
    /// Why these.
    pub reason: String,
}

/// The link between two GPUs of the snapshot: NVLink from the driver, else the PCIe class, else
/// NVML's common ancestor, else unknown.
pub fn gpu_link(snapshot: &Snapshot, a: usize, b: usize) -> LinkClass {
    let (Some(ga), Some(gb)) = (snapshot.gpus.get(a), snapshot.gpus.get(b)) else {
        return LinkClass::Unknown;
    };
    if a == b {
        return LinkClass::SelfLink;
    }
    let pair = snapshot.gpu_pairs.iter().find(|p| {
        (p.a == ga.pci_bus_id && p.b == gb.pci_bus_id)
            || (p.a == gb.pci_bus_id && p.b == ga.pci_bus_id)
    });
    if let Some(n) = pair.and_then(|p| p.nvlinks.known()).filter(|n| **n > 0) {
        return LinkClass::NvLink(*n);
    }
    if let Some(c) = pcie_link_class(snapshot, &ga.pci_bus_id, &gb.pci_bus_id) {
        return c;
    }
    pair.and_then(|p| p.common_ancestor.known().copied())
        .unwrap_or(LinkClass::Unknown)
}

/// Rank of a link class for scoring: lower is better.
pub fn link_rank(c: LinkClass) -> u32 {
    match c {
        LinkClass::SelfLink => 0,
        LinkClass::NvLink(n) => 100 - n.min(99),
        LinkClass::Pix => 200,
        LinkClass::Pxb => 300,
        LinkClass::Phb => 400,
        LinkClass::Node => 500,
        LinkClass::Sys => 600,
        LinkClass::Unknown => 700,
    }
}

struct GpuFacts {
    unusable: bool,
    mem_used: Option<u64>,
    node: Option<NumaNodeId>,
}

/// Greedy search state for one GPU: whether it is in the set yet, and its worst and summed link
/// rank to the set's members.
struct Running {
    in_set: bool,
    max_to: u32,
    sum_to: u64,
}

/// A [`Key`] without its member list, for comparing candidates during the greedy search.
type Partial = (u32, u32, u64, u32, u64, u32);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    unusable: u32,
    worst: u32,
    sum: u64,
    mem_unknown: u32,
    mem_used: u64,
    nodes: u32,
    ids: Vec<usize>,
}

fn key(set: &[usize], ranks: &[Vec<u32>], facts: &[GpuFacts]) -> Key {
    let mut k = Key {
        unusable: 0,
        worst: 0,
        sum: 0,
        mem_unknown: 0,
        mem_used: 0,
        nodes: 0,
        ids: set.to_vec(),
    };
    let mut nodes: Vec<Option<NumaNodeId>> = Vec::new();
    for (x, &i) in set.iter().enumerate() {
        // `set` holds indices into `facts` and `ranks`, which both have one entry per GPU.
        let (Some(f), Some(row)) = (facts.get(i), ranks.get(i)) else {
            continue;
        };
        k.unusable += u32::from(f.unusable);
        match f.mem_used {
            Some(b) => k.mem_used = k.mem_used.saturating_add(b),
            None => k.mem_unknown += 1,
        }
        if f.node.is_none() || !nodes.contains(&f.node) {
            nodes.push(f.node);
        }
        for &r in set.iter().skip(x + 1).filter_map(|&j| row.get(j)) {
            k.worst = k.worst.max(r);
            k.sum += u64::from(r);
        }
    }
    k.nodes = nodes.len() as u32;
    k
}

fn combinations(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    let mut c: u64 = 1;
    for i in 0..k {
        // c * (n - i) / (i + 1) stays exact: c is C(n, i) and C(n, i+1) is an integer.
        c = match c.checked_mul(n - i) {
            Some(x) => x / (i + 1),
            None => return u64::MAX,
        };
        if c > EXHAUSTIVE_LIMIT {
            return u64::MAX;
        }
    }
    c
}

/// Choose `n` GPUs of the snapshot. `allowed` is the cgroup's CPU set, when known.
pub fn pick(
    snapshot: &Snapshot,
    n: u32,
    allowed: Option<&CpuSet>,
) -> Result<AutoChoice, LaunchError> {
    let s = snapshot;
    let m = s.gpus.len();
    let want = n as usize;
    let err = |detail: String| LaunchError::Auto { n, detail };
    let source = if s.is_live {
        "this machine"
    } else {
        "the snapshot"
    };
    if m == 0 {
        return Err(err(format!("{source} has no GPU")));
    }
    if want > m {
        return Err(err(format!(
            "{source} has only {m} GPU{}",
            if m == 1 { "" } else { "s" }
        )));
    }
    if m > MAX_GPUS {
        return Err(err(format!(
            "{source} has {m} GPUs; auto searches at most {MAX_GPUS}: name them with --gpus"
        )));
    }
    let facts = gpu_facts(s, allowed);
    let ranks: Vec<Vec<u32>> = (0..m)
        .map(|i| (0..m).map(|j| link_rank(gpu_link(s, i, j))).collect())
        .collect();
    let best: Key = if combinations(m as u64, want as u64) <= EXHAUSTIVE_LIMIT {
        exhaustive(want, &ranks, &facts)
    } else {
        match greedy(want, &ranks, &facts) {
            Some(b) => b,
            None => return Err(err("no GPU to choose from".into())),
        }
    };
    Ok(AutoChoice {
        reason: explain(s, n, &best),
        gpus: best.ids,
    })
}

/// Per GPU: its node, whether the cgroup lets it use any of that node's CPUs, memory in use.
fn gpu_facts(s: &Snapshot, allowed: Option<&CpuSet>) -> Vec<GpuFacts> {
    s.gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let node = gpu_node(s, i, g).ok().map(|(n, _)| n);
            let unusable = match node {
                None => true,
                Some(id) => match (node_cpus(s, id), allowed) {
                    (Some(c), Some(a)) => c.is_disjoint(a),
                    (Some(c), None) => c.is_empty(),
                    (None, _) => true,
                },
            };
            GpuFacts {
                unusable,
                mem_used: g
                    .details
                    .known()
                    .and_then(|d| d.memory.known())
                    .map(|mem| mem.used_bytes),
                node,
            }
        })
        .collect()
}

/// The best of every combination of `want` GPUs, in lexicographic order.
fn exhaustive(want: usize, ranks: &[Vec<u32>], facts: &[GpuFacts]) -> Key {
    let m = facts.len();
    let mut idx: Vec<usize> = (0..want).collect();
    let mut best = key(&idx, ranks, facts);
    // Next combination in lexicographic order: bump the rightmost position p that can still
    // move right (up to m - want + p) and reset the ones after it.
    while let Some(p) = idx.iter().zip(m - want..m).rposition(|(v, max)| *v != max) {
        if let Some((head, rest)) = idx.get_mut(p..).and_then(|t| t.split_first_mut()) {
            *head += 1;
            for (v, next) in rest.iter_mut().zip(*head + 1..) {
                *v = next;
            }
        }
        let k = key(&idx, ranks, facts);
        if k < best {
            best = k;
        }
    }
    best
}

/// Grow a set from each GPU in turn, adding the GPU that keeps the key smallest; the best set.
fn greedy(want: usize, ranks: &[Vec<u32>], facts: &[GpuFacts]) -> Option<Key> {
    // Greedy, with running aggregates so each step costs O(m), not O(m·k²).
    let mut best: Option<Key> = None;
    for (seed, (seed_facts, seed_ranks)) in facts.iter().zip(ranks).enumerate() {
        let mut set = vec![seed];
        // Per GPU: in the set yet, and its worst and summed rank to the set's members.
        let mut to: Vec<Running> = seed_ranks
            .iter()
            .enumerate()
            .map(|(x, &r)| Running {
                in_set: x == seed,
                max_to: r,
                sum_to: u64::from(r),
            })
            .collect();
        let mut partial = key(&set, ranks, facts);
        let mut node_seen: Vec<Option<NumaNodeId>> = vec![seed_facts.node];
        while set.len() < want {
            let mut choice: Option<(Partial, usize, &GpuFacts, &Vec<u32>)> = None;
            let candidates = facts.iter().zip(ranks).zip(&to).enumerate();
            for (j, ((f, row), run)) in candidates.filter(|(_, (_, run))| !run.in_set) {
                let new_node = f.node.is_none() || !node_seen.contains(&f.node);
                let t = (
                    partial.unusable + u32::from(f.unusable),
                    partial.worst.max(run.max_to),
                    partial.sum + run.sum_to,
                    partial.mem_unknown + u32::from(f.mem_used.is_none()),
                    partial.mem_used.saturating_add(f.mem_used.unwrap_or(0)),
                    partial.nodes + u32::from(new_node),
                );
                if choice.as_ref().is_none_or(|(c, ..)| t < *c) {
                    choice = Some((t, j, f, row));
                }
            }
            let Some((t, j, f, row)) = choice else { break };
            (
                partial.unusable,
                partial.worst,
                partial.sum,
                partial.mem_unknown,
                partial.mem_used,
                partial.nodes,
            ) = t;
            set.push(j);
            if f.node.is_none() || !node_seen.contains(&f.node) {
                node_seen.push(f.node);
            }
            for (x, (run, &r)) in to.iter_mut().zip(row).enumerate() {
                run.in_set |= x == j;
                run.max_to = run.max_to.max(r);
                run.sum_to += u64::from(r);
            }
        }
        set.sort_unstable();
        let k = key(&set, ranks, facts);
        if best.as_ref().is_none_or(|b| k < *b) {
            best = Some(k);
        }
    }
    best
}

/// The reason sentence for the chosen set.
fn explain(s: &Snapshot, n: u32, best: &Key) -> String {
    let m = s.gpus.len();
    let names: Vec<String> = best.ids.iter().map(|i| format!("GPU{i}")).collect();
    let worst = best
        .ids
        .iter()
        .flat_map(|&i| best.ids.iter().map(move |&j| (i, j)))
        .filter(|(i, j)| i < j)
        .map(|(i, j)| gpu_link(s, i, j))
        .max_by_key(|c| link_rank(*c));
    let link = match worst {
        Some(c) => format!("worst link {c}"),
        None => "a single GPU".to_string(),
    };
    let mem = if best.mem_unknown > 0 {
        "memory in use unknown".to_string()
    } else {
        format!("{} MiB of GPU memory in use", best.mem_used >> 20)
    };
    let nodes = match best.nodes {
        1 => "one NUMA node".to_string(),
        k => format!("{k} NUMA nodes"),
    };
    format!(
        "auto:{n} chose {} of {m} GPUs: {link}, {mem}, {nodes} (ranked by best mutual link, then least memory in use, then fewest NUMA nodes, then PCI order)",
        names.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combination_counts_saturate() {
        assert_eq!(combinations(8, 4), 70);
        assert_eq!(combinations(16, 8), 12_870);
        assert_eq!(combinations(5, 5), 1);
        assert_eq!(combinations(256, 128), u64::MAX);
    }

    #[test]
    fn ranks_order_links() {
        assert!(link_rank(LinkClass::NvLink(18)) < link_rank(LinkClass::NvLink(4)));
        assert!(link_rank(LinkClass::NvLink(1)) < link_rank(LinkClass::Pix));
        assert!(link_rank(LinkClass::Sys) < link_rank(LinkClass::Unknown));
    }

    #[test]
    fn exhaustive_and_greedy_search_agree_on_a_clear_best_set() {
        // Four GPUs on two nodes; 2 and 3 are NVLinked (rank 1), every other pair crosses the
        // socket (rank 9); GPU3 is outside the cgroup's CPUs in the second case.
        let f = |node: u32, unusable: bool| GpuFacts {
            unusable,
            mem_used: Some(0),
            node: Some(NumaNodeId(node)),
        };
        let mut ranks = vec![vec![9u32; 4]; 4];
        ranks[2][3] = 1;
        ranks[3][2] = 1;
        for (i, row) in ranks.iter_mut().enumerate() {
            row[i] = 0;
        }
        let facts = [f(0, false), f(0, false), f(1, false), f(1, false)];
        assert_eq!(exhaustive(2, &ranks, &facts).ids, [2, 3]);
        assert_eq!(greedy(2, &ranks, &facts).unwrap().ids, [2, 3]);
        let facts = [f(0, false), f(0, false), f(1, false), f(1, true)];
        // Usable first: the NVLinked pair loses to two usable GPUs on one node.
        assert_eq!(exhaustive(2, &ranks, &facts).ids, [0, 1]);
        assert_eq!(greedy(2, &ranks, &facts).unwrap().ids, [0, 1]);
        assert!(greedy(1, &ranks, &[]).is_none());
    }
}
