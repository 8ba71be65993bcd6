//! Kernel, VM and process settings that decide whether a serving host behaves.

use crate::fsroot::FsRoot;
use crate::host::online_cpu_dirs;
use crate::numa::hugepage_pools;
use inferscope_formats::{cgroup, cmdline, limits, meminfo, mounts, sysfs, thp};
use inferscope_host::{
    Cgroup, CpuSet, GovernorGroup, HostSettings, LimitValue, ListError, NodeSet, Reading,
    ResourceLimit, ShmSize, UnknownReason,
};
use std::collections::BTreeMap;

fn meminfo_field(mem: &Reading<meminfo::Meminfo>, key: &str) -> Reading<u64> {
    match mem {
        Reading::Value(m) => match m.bytes(key) {
            Some(b) => Reading::value(b),
            None => Reading::unknown(
                UnknownReason::NotPresent,
                format!("/proc/meminfo has no {key}"),
            ),
        },
        Reading::Unknown(u) => Reading::Unknown(u.clone()),
    }
}

fn governors(fs: &FsRoot, online: &Reading<CpuSet>) -> Reading<Vec<GovernorGroup>> {
    let mut by_governor: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut first_error = None;
    for cpu in online_cpu_dirs(fs, online) {
        let rel = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        match fs.read_string(&rel) {
            Ok(g) => by_governor
                .entry(g.trim().to_string())
                .or_default()
                .push(cpu),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if by_governor.is_empty() {
        return match first_error {
            Some(e) if e.reason == UnknownReason::NotPresent => Reading::unknown(
                UnknownReason::NotPresent,
                format!("{e}: no cpufreq driver (usual in VMs; the hypervisor sets clocks)"),
            ),
            Some(e) => e.into_reading(),
            None => Reading::unknown(UnknownReason::NotPresent, "no online CPUs found"),
        };
    }
    Reading::value(
        by_governor
            .into_iter()
            .map(|(governor, cpus)| GovernorGroup {
                governor,
                cpus: cpus.into_iter().collect(),
            })
            .collect(),
    )
}

fn dev_shm(fs: &FsRoot, mem_total: &Reading<u64>) -> Reading<ShmSize> {
    let rel = "proc/self/mounts";
    let table = match fs.parse(rel, mounts::parse) {
        Reading::Value(t) => t,
        Reading::Unknown(u) => return Reading::Unknown(u),
    };
    // The last mount on a path is the one in effect.
    let Some(m) = table.iter().rev().find(|m| m.mount_point == "/dev/shm") else {
        return Reading::unknown(
            UnknownReason::NotPresent,
            "/proc/self/mounts: nothing is mounted on /dev/shm",
        );
    };
    if m.fs_type != "tmpfs" {
        return Reading::unknown(
            UnknownReason::NotSupported,
            format!("/proc/self/mounts: /dev/shm is {}, not tmpfs", m.fs_type),
        );
    }
    let half_ram = |why: &str| match mem_total.known() {
        Some(total) => Reading::value(ShmSize {
            bytes: total / 2,
            basis: why.to_string(),
        }),
        None => Reading::unknown(
            UnknownReason::NotReported,
            "/dev/shm has no size= option and MemTotal is unknown",
        ),
    };
    match m.option_value("size") {
        None => half_ram("kernel_default"),
        Some(v) => match mounts::parse_tmpfs_size(v) {
            Ok(mounts::TmpfsSize::Bytes(b)) => Reading::value(ShmSize {
                bytes: b,
                basis: "mount_option".into(),
            }),
            Ok(mounts::TmpfsSize::PercentOfRam(p)) => match mem_total.known() {
                Some(total) => Reading::value(ShmSize {
                    bytes: total / 100 * u64::from(p),
                    basis: "percent_of_ram".into(),
                }),
                None => Reading::unknown(
                    UnknownReason::NotReported,
                    format!("/dev/shm is size={v} and MemTotal is unknown"),
                ),
            },
            Err(e) => Reading::unknown(
                UnknownReason::Malformed,
                format!("/proc/self/mounts: /dev/shm size={v}: {e}"),
            ),
        },
    }
}

fn memlock(fs: &FsRoot) -> Reading<ResourceLimit> {
    fs.parse("proc/self/limits", limits::parse).and_then(|all| {
        let conv = |v: &limits::LimitValue| match v {
            limits::LimitValue::Unlimited => LimitValue::Unlimited,
            limits::LimitValue::Value(b) => LimitValue::Bytes(*b),
        };
        match limits::find(&all, "Max locked memory") {
            Some(l) => Reading::value(ResourceLimit {
                soft: conv(&l.soft),
                hard: conv(&l.hard),
            }),
            None => Reading::unknown(
                UnknownReason::NotPresent,
                "/proc/self/limits has no \"Max locked memory\" line",
            ),
        }
    })
}

/// `/a/b` → [`/a/b`, `/a`, `/`]: a cgroup and its ancestors, nearest first.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/').to_string();
    loop {
        out.push(if p.is_empty() {
            "/".to_string()
        } else {
            p.clone()
        });
        match p.rfind('/') {
            Some(i) if !p.is_empty() => p.truncate(i),
            _ => break,
        }
    }
    out
}

fn join(base: &str, cg: &str, file: &str) -> String {
    let cg = cg.trim_matches('/');
    if cg.is_empty() {
        format!("{base}/{file}")
    } else {
        format!("{base}/{cg}/{file}")
    }
}

/// First readable file among a cgroup and its ancestors, parsed as a one-line list.
fn nearest<T>(
    fs: &FsRoot,
    base: &str,
    path: &str,
    files: &[&str],
    parse: impl Fn(&str) -> Result<T, ListError>,
) -> Reading<T> {
    let mut last = None;
    for cg in ancestors(path) {
        for file in files {
            let rel = join(base, &cg, file);
            match fs.read_string(&rel) {
                Ok(text) => {
                    return match parse(&text) {
                        Ok(v) => Reading::value(v),
                        Err(e) => Reading::unknown(
                            UnknownReason::Malformed,
                            format!("/{rel}: line 1, {e}"),
                        ),
                    };
                }
                Err(e) => last = Some(e),
            }
        }
    }
    match last {
        Some(e) => e.into_reading(),
        None => Reading::unknown(
            UnknownReason::NotPresent,
            format!("/{base}: no cgroup files"),
        ),
    }
}

/// Tightest memory limit among a cgroup and its ancestors (limits nest).
fn tightest_memory(fs: &FsRoot, base: &str, path: &str, file: &str) -> Reading<LimitValue> {
    let mut tightest: Option<LimitValue> = None;
    let mut last_err = None;
    for cg in ancestors(path) {
        let rel = join(base, &cg, file);
        match fs.read_string(&rel) {
            Ok(text) => match cgroup::parse_memory_limit(&text) {
                Ok(cgroup::MemoryLimit::Bytes(b)) => {
                    tightest = Some(match tightest {
                        Some(LimitValue::Bytes(t)) => LimitValue::Bytes(t.min(b)),
                        _ => LimitValue::Bytes(b),
                    })
                }
                Ok(cgroup::MemoryLimit::Unlimited) => {
                    tightest.get_or_insert(LimitValue::Unlimited);
                }
                Err(e) => {
                    return Reading::unknown(UnknownReason::Malformed, format!("/{rel}: {e}"));
                }
            },
            Err(e) => last_err = Some(e),
        }
    }
    match (tightest, last_err) {
        (Some(v), _) => Reading::value(v),
        (None, Some(e)) => e.into_reading(),
        (None, None) => Reading::unknown(UnknownReason::NotPresent, format!("/{base}: no {file}")),
    }
}

fn cpus_parser(text: &str) -> Result<CpuSet, ListError> {
    text.parse::<CpuSet>()
}

fn nodes_parser(text: &str) -> Result<NodeSet, ListError> {
    text.parse::<NodeSet>()
}

fn cgroup_of(fs: &FsRoot) -> Reading<Cgroup> {
    let entries = match fs.parse("proc/self/cgroup", cgroup::parse_proc_cgroup) {
        Reading::Value(e) => e,
        Reading::Unknown(u) => return Reading::Unknown(u),
    };
    let unified = fs.read_string("sys/fs/cgroup/cgroup.controllers").is_ok();
    let v2 = entries.iter().find(|e| e.hierarchy_id == 0);
    if unified {
        let Some(e) = v2 else {
            return Reading::unknown(
                UnknownReason::Malformed,
                "/proc/self/cgroup: cgroup v2 is mounted but the process has no 0:: line",
            );
        };
        let base = "sys/fs/cgroup";
        return Reading::value(Cgroup {
            version: 2,
            path: e.path.clone(),
            cpus_effective: nearest(fs, base, &e.path, &["cpuset.cpus.effective"], cpus_parser),
            mems_effective: nearest(fs, base, &e.path, &["cpuset.mems.effective"], nodes_parser),
            memory_max: tightest_memory(fs, base, &e.path, "memory.max"),
        });
    }
    let find = |c: &str| {
        entries
            .iter()
            .find(|e| e.controllers.iter().any(|x| x == c))
    };
    let cpuset = find("cpuset");
    let memory = find("memory");
    if cpuset.is_none() && memory.is_none() {
        return Reading::unknown(
            UnknownReason::NotPresent,
            "/proc/self/cgroup: neither a cgroup v2 hierarchy nor v1 cpuset/memory controllers",
        );
    }
    let path = cpuset
        .or(memory)
        .map(|e| e.path.clone())
        .unwrap_or_default();
    fn absent<T>(what: &str) -> Reading<T> {
        Reading::unknown(
            UnknownReason::NotPresent,
            format!("/proc/self/cgroup: no v1 {what} controller"),
        )
    }
    Reading::value(Cgroup {
        version: 1,
        path,
        cpus_effective: match cpuset {
            Some(e) => nearest(
                fs,
                "sys/fs/cgroup/cpuset",
                &e.path,
                &["cpuset.effective_cpus", "cpuset.cpus"],
                cpus_parser,
            ),
            None => absent("cpuset"),
        },
        mems_effective: match cpuset {
            Some(e) => nearest(
                fs,
                "sys/fs/cgroup/cpuset",
                &e.path,
                &["cpuset.effective_mems", "cpuset.mems"],
                nodes_parser,
            ),
            None => absent("cpuset"),
        },
        memory_max: match memory {
            Some(e) => {
                tightest_memory(fs, "sys/fs/cgroup/memory", &e.path, "memory.limit_in_bytes")
            }
            None => absent("memory"),
        },
    })
}

/// Read all host settings.
pub fn probe_settings(fs: &FsRoot, online: &Reading<CpuSet>) -> HostSettings {
    let mem = fs.parse("proc/meminfo", meminfo::parse);
    let memory_total_bytes = meminfo_field(&mem, "MemTotal");
    let swap_total = meminfo_field(&mem, "SwapTotal");
    let swap_free = meminfo_field(&mem, "SwapFree");
    let swap_used_bytes = match (&swap_total, &swap_free) {
        (Reading::Value(t), Reading::Value(f)) => Reading::value(t.saturating_sub(*f)),
        (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => Reading::Unknown(u.clone()),
    };
    HostSettings {
        memory_available_bytes: meminfo_field(&mem, "MemAvailable"),
        thp_enabled: fs.parse(
            "sys/kernel/mm/transparent_hugepage/enabled",
            thp::parse_selected,
        ),
        thp_defrag: fs.parse(
            "sys/kernel/mm/transparent_hugepage/defrag",
            thp::parse_selected,
        ),
        hugepages: hugepage_pools(fs, "sys/kernel/mm/hugepages"),
        swap_total_bytes: swap_total,
        swap_used_bytes,
        vm_swappiness: fs.parse("proc/sys/vm/swappiness", sysfs::parse_u32),
        vm_zone_reclaim_mode: fs.parse("proc/sys/vm/zone_reclaim_mode", sysfs::parse_u32),
        kernel_numa_balancing: fs.parse("proc/sys/kernel/numa_balancing", sysfs::parse_u32),
        cpu_governors: governors(fs, online),
        dev_shm: dev_shm(fs, &memory_total_bytes),
        memlock_limit: memlock(fs),
        kernel_iommu_params: match fs.read_string("proc/cmdline") {
            Ok(t) => Reading::value(cmdline::iommu_params(&t)),
            Err(e) => e.into_reading(),
        },
        cgroup: cgroup_of(fs),
        memory_total_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_ancestors_nearest_first() {
        assert_eq!(ancestors("/a/b"), vec!["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/"), vec!["/"]);
        assert_eq!(
            join("sys/fs/cgroup", "/", "memory.max"),
            "sys/fs/cgroup/memory.max"
        );
        assert_eq!(
            join("sys/fs/cgroup", "/a/b", "memory.max"),
            "sys/fs/cgroup/a/b/memory.max"
        );
    }
}
