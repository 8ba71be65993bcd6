//! NUMA nodes from `/sys/devices/system/node`, CPU-less memory nodes included.

use crate::fsroot::FsRoot;
use inferscope_formats::{meminfo, sysfs};
use inferscope_model::{CpuSet, HugePagePool, NumaNode, NumaNodeId, Reading, UnknownReason};

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

/// Read every NUMA node.
pub fn probe_numa(fs: &FsRoot, problems: &mut Vec<String>) -> Vec<NumaNode> {
    let base = "sys/devices/system/node";
    let Ok(names) = fs.list_dir(base) else {
        return Vec::new();
    };
    let mut ids: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    let count = ids.len();
    ids.iter()
        .map(|&id| {
            let dir = format!("{base}/node{id}");
            let cpus = match fs.read_string(&format!("{dir}/cpulist")) {
                Ok(t) => t.parse::<CpuSet>().unwrap_or_else(|e| {
                    problems.push(format!(
                        "/{dir}/cpulist: line 1, {e}; node treated as CPU-less"
                    ));
                    CpuSet::new()
                }),
                Err(e) => {
                    problems.push(format!("{e}; node treated as CPU-less"));
                    CpuSet::new()
                }
            };
            let mem = fs.parse(&format!("{dir}/meminfo"), meminfo::parse);
            let mem_field = |key: &str| match &mem {
                Reading::Value(m) => match m.bytes(key) {
                    Some(b) => Reading::value(b),
                    None => Reading::unknown(
                        UnknownReason::NotPresent,
                        format!("/{dir}/meminfo has no {key}"),
                    ),
                },
                Reading::Unknown(u) => Reading::Unknown(u.clone()),
            };
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
                memory_total_bytes: mem_field("MemTotal"),
                memory_free_bytes: mem_field("MemFree"),
                distances,
                hugepages: hugepage_pools(fs, &format!("{dir}/hugepages")),
            }
        })
        .collect()
}
