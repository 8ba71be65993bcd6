//! NUMA nodes from `/sys/devices/system/node`, CPU-less memory nodes included.

use crate::fsroot::FsRoot;
use inferscope_formats::hwloc_xml::decode_cpuset;
use inferscope_formats::{meminfo, sysfs};
use inferscope_host::{CpuSet, HugePagePool, NumaNode, NumaNodeId, Reading, UnknownReason};

/// Huge page pools under a `hugepages/` directory (system-wide or per node).
pub(crate) fn hugepage_pools(fs: &FsRoot, dir: &str) -> Vec<HugePagePool> {
    let Ok(names) = fs.list_dir(dir) else {
        return Vec::new();
    };
    let mut pools: Vec<HugePagePool> = names
        .iter()
        .filter_map(|n| {
            let kib = n
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            Some((n, kib))
        })
        .map(|(name, kib)| HugePagePool {
            page_size_kib: kib,
            total: fs.parse(&format!("{dir}/{name}/nr_hugepages"), sysfs::parse_u64),
            free: fs.parse(&format!("{dir}/{name}/free_hugepages"), sysfs::parse_u64),
        })
        .collect();
    pools.sort_by_key(|p| p.page_size_kib);
    pools
}

/// A node's CPUs, from the first of these the kernel provides: `cpulist`, `cpumap` (the only one
/// on kernels before 2.6.26, and the one hwloc reads: topology-linux.c `look_sysfsnode`), the
/// node's `cpuN` links. `None` when none of them can be read: the set is unknown, which a
/// capture problem says; it must not pass for a CPU-less node.
fn node_cpus(fs: &FsRoot, dir: &str, problems: &mut Vec<String>) -> Option<CpuSet> {
    let mut why = Vec::new();
    match fs.read_string(&format!("{dir}/cpulist")) {
        Ok(t) => match t.parse::<CpuSet>() {
            Ok(set) => return Some(set),
            // Said even when cpumap then gives the set: the file is bad either way.
            Err(e) => problems.push(format!("/{dir}/cpulist: line 1, {e}")),
        },
        Err(e) => why.push(e.to_string()),
    }
    match fs.read_string(&format!("{dir}/cpumap")) {
        Ok(t) => match decode_cpuset(t.trim()) {
            Ok(set) => return Some(set),
            Err(e) => why.push(format!("/{dir}/cpumap: line 1, {e}")),
        },
        Err(e) => why.push(e.to_string()),
    }
    if let Ok(names) = fs.list_dir(dir) {
        let links: Vec<u32> = names
            .iter()
            .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
            .collect();
        if !links.is_empty() {
            return Some(links.into_iter().collect());
        }
        why.push(format!("/{dir} has no cpuN links"));
    }
    problems.push(format!(
        "{}; the node's CPUs are unknown (left empty)",
        why.join("; ")
    ));
    None
}

/// Memory of a node from a meminfo reading.
fn mem_field(mem: &Reading<meminfo::Meminfo>, file: &str, key: &str) -> Reading<u64> {
    match mem {
        Reading::Value(m) => match m.bytes(key) {
            Some(b) => Reading::value(b),
            None => Reading::unknown(UnknownReason::NotPresent, format!("/{file} has no {key}")),
        },
        Reading::Unknown(u) => Reading::Unknown(u.clone()),
    }
}

/// A kernel built without NUMA (no `/sys/devices/system/node`, common on ARM boards) still has
/// one memory domain: node 0 with every CPU and all memory, as hwloc and `numactl -H` report.
fn implicit_node(fs: &FsRoot, online: &Reading<CpuSet>, problems: &mut Vec<String>) -> NumaNode {
    let cpus = match online.known() {
        Some(set) => set.clone(),
        None => crate::host::online_cpu_dirs(fs, online)
            .into_iter()
            .collect(),
    };
    problems.push(
        "/sys/devices/system/node: not present (kernel without NUMA); one implicit node 0 holds every CPU and all memory (/proc/meminfo)".to_string(),
    );
    let mem = fs.parse("proc/meminfo", meminfo::parse);
    NumaNode {
        id: NumaNodeId(0),
        cpus,
        memory_total_bytes: mem_field(&mem, "proc/meminfo", "MemTotal"),
        memory_free_bytes: mem_field(&mem, "proc/meminfo", "MemFree"),
        distances: Reading::unknown(
            UnknownReason::NotPresent,
            "kernel without NUMA: no node distances",
        ),
        hugepages: hugepage_pools(fs, "sys/kernel/mm/hugepages"),
    }
}

/// Read every NUMA node. `online` is the host's online CPU set: a node's offline CPUs are left
/// out (with a capture problem naming them), so every consumer of `cpus` (`run`, checks,
/// labels, `topo`) sees only CPUs a process can run on, as hwloc shows only online PUs.
pub fn probe_numa(
    fs: &FsRoot,
    online: &Reading<CpuSet>,
    problems: &mut Vec<String>,
) -> Vec<NumaNode> {
    let base = "sys/devices/system/node";
    let names = match fs.list_dir(base) {
        Ok(names) => names,
        Err(e) => {
            // Only a missing directory on a kernel that shows its CPUs means "no NUMA"; a
            // refused read or a tree without sysfs stays unknown.
            if e.reason == UnknownReason::NotPresent
                && fs.list_dir("sys/devices/system/cpu").is_ok()
            {
                return vec![implicit_node(fs, online, problems)];
            }
            return Vec::new();
        }
    };
    let mut ids: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    let count = ids.len();
    let mut nodes: Vec<NumaNode> = ids
        .iter()
        .map(|&id| {
            let dir = format!("{base}/node{id}");
            let mut cpus = node_cpus(fs, &dir, problems).unwrap_or_default();
            if let Some(on) = online.known() {
                let offline = minus(&cpus, on);
                if !offline.is_empty() {
                    problems.push(format!(
                        "/{dir}: CPUs {offline} are offline (/sys/devices/system/cpu/online is {on}); left out of the node's CPUs"
                    ));
                    cpus = cpus.intersection(on);
                }
            }
            let mem = fs.parse(&format!("{dir}/meminfo"), meminfo::parse);
            let meminfo_file = format!("{dir}/meminfo");
            let distances = fs
                .parse(&format!("{dir}/distance"), sysfs::parse_distances)
                .and_then(|d| {
                    if d.len() == count {
                        Reading::value(d)
                    } else {
                        Reading::unknown(
                            UnknownReason::Malformed,
                            format!(
                                "/{dir}/distance lists {} distances for {count} nodes",
                                d.len()
                            ),
                        )
                    }
                });
            NumaNode {
                id: NumaNodeId(id),
                cpus,
                memory_total_bytes: mem_field(&mem, &meminfo_file, "MemTotal"),
                memory_free_bytes: mem_field(&mem, &meminfo_file, "MemFree"),
                distances,
                hugepages: hugepage_pools(fs, &format!("{dir}/hugepages")),
            }
        })
        .collect();
    // Buggy firmware can give several nodes the same CPUs (hwloc's 8em64t-2s2ca2c-buggynuma:
    // eight nodes, each with CPUs 0-7). A CPU runs on one node: the lowest-numbered claim wins,
    // as in hwloc (topology-linux.c look_sysfsnode drops later overlapping nodes; we keep their
    // memory and say what was taken away).
    let mut claimed = CpuSet::new();
    for n in &mut nodes {
        let overlap = n.cpus.intersection(&claimed);
        if !overlap.is_empty() {
            problems.push(format!(
                "/{base}/node{}: CPUs {overlap} are also claimed by a lower-numbered node (a firmware bug); they are left to that node",
                n.id
            ));
            n.cpus = minus(&n.cpus, &overlap);
        }
        claimed = claimed.union(&n.cpus);
    }
    nodes
}

/// Members of `a` not in `b`, by ranges (a hostile `0-4294967295` costs nothing).
fn minus(a: &CpuSet, b: &CpuSet) -> CpuSet {
    let mut gaps = Vec::new();
    let mut next: u64 = 0;
    for &(lo, hi) in b.ranges() {
        if u64::from(lo) > next {
            gaps.push((next as u32, lo - 1));
        }
        next = u64::from(hi) + 1;
    }
    if next <= u64::from(u32::MAX) {
        gaps.push((next as u32, u32::MAX));
    }
    a.intersection(&CpuSet::from_ranges(gaps))
}
