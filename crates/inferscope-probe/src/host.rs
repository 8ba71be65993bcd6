//! Host identity and CPU inventory from procfs and `/sys/devices/system/cpu`.

use crate::fsroot::FsRoot;
use inferscope_formats::hwloc_xml::decode_cpuset;
use inferscope_formats::{cpuinfo, sysfs};
use inferscope_host::{CpuSet, Host, Reading, UnknownReason};
use std::collections::BTreeSet;

fn one_line(fs: &FsRoot, rel: &str) -> Reading<String> {
    match fs.read_string(rel) {
        Ok(s) if !s.trim().is_empty() => Reading::value(s.trim().to_string()),
        Ok(_) => Reading::unknown(UnknownReason::Malformed, format!("/{rel}: empty")),
        Err(e) => e.into_reading(),
    }
}

/// CPU numbers that have a `cpuN` directory and are online. Bounded by the directory listing,
/// never by the numbers in `online` (which could claim billions).
pub(crate) fn online_cpu_dirs(fs: &FsRoot, online: &Reading<CpuSet>) -> Vec<u32> {
    let Ok(names) = fs.list_dir("sys/devices/system/cpu") else {
        return Vec::new();
    };
    let mut cpus: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix("cpu"))
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|n| online.known().is_none_or(|set| set.contains(*n)))
        .collect();
    cpus.sort_unstable();
    cpus
}

/// Kernels before 2.6.29 have no `cpu/online` list, only `cpuN/online` for CPUs that can be
/// hot-unplugged: a `cpuN` without that file cannot go offline (cpu0 on x86), so it is online
/// (hwloc does the same in topology-linux.c `look_sysfscpu`). `None` when there are no `cpuN`
/// directories or one `online` file cannot be read.
fn per_cpu_online(fs: &FsRoot) -> Option<Reading<CpuSet>> {
    let names = fs.list_dir("sys/devices/system/cpu").ok()?;
    let mut online = Vec::new();
    for n in names
        .iter()
        .filter_map(|n| n.strip_prefix("cpu")?.parse::<u32>().ok())
    {
        match fs.read_string(&format!("sys/devices/system/cpu/cpu{n}/online")) {
            Ok(t) if t.trim() == "0" => {}
            // hwloc counts an empty file as online too (a gather that lost the content).
            Ok(t) if t.trim() == "1" || t.trim().is_empty() => online.push(n),
            Ok(t) => {
                return Some(Reading::unknown(
                    UnknownReason::Malformed,
                    format!(
                        "/sys/devices/system/cpu/cpu{n}/online: line 1: expected 0 or 1, found {:?}",
                        t.trim()
                    ),
                ));
            }
            Err(e) if e.reason == UnknownReason::NotPresent => online.push(n),
            Err(e) => return Some(e.into_reading()),
        }
    }
    if online.is_empty() {
        return None;
    }
    Some(Reading::value(online.into_iter().collect()))
}

/// What identifies a package or a core: the CPUs that share it, or (older trees) its ids.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Cpus(Vec<(u32, u32)>),
    Ids(i64, i64),
}

/// The CPUs sharing a package or core with one CPU: the first of `names` under `base` that
/// reads as a non-empty set, as a list (`core_cpus_list`) or as the mask hwloc reads
/// (`core_cpus`; some trees have only masks).
fn siblings(fs: &FsRoot, base: &str, names: &[&str]) -> Option<CpuSet> {
    names.iter().find_map(|n| {
        let set = match fs.read_string(&format!("{base}/{n}_list")) {
            Ok(t) => t.parse::<CpuSet>().ok()?,
            Err(_) => decode_cpuset(fs.read_string(&format!("{base}/{n}")).ok()?.trim()).ok()?,
        };
        (!set.is_empty()).then_some(set)
    })
}

/// Read host facts.
pub fn probe_host(fs: &FsRoot) -> Host {
    let online_cpus: Reading<CpuSet> = match fs.read_string("sys/devices/system/cpu/online") {
        Ok(text) => match text.parse::<CpuSet>() {
            Ok(set) => Reading::value(set),
            Err(e) => Reading::unknown(
                UnknownReason::Malformed,
                format!("/sys/devices/system/cpu/online: line 1, {e}"),
            ),
        },
        Err(e) if e.reason == UnknownReason::NotPresent => {
            per_cpu_online(fs).unwrap_or_else(|| e.into_reading())
        }
        Err(e) => e.into_reading(),
    };
    let cpu_model = match fs.read_string("proc/cpuinfo") {
        Ok(text) => match cpuinfo::parse(&text) {
            Ok(info) => match (info.model_name, info.architecture_hint) {
                (Some(m), _) => Reading::value(m),
                (None, Some(hint)) => Reading::unknown(
                    UnknownReason::NotReported,
                    format!("/proc/cpuinfo has no model name ({hint})"),
                ),
                (None, None) => Reading::unknown(
                    UnknownReason::NotReported,
                    "/proc/cpuinfo has no model name",
                ),
            },
            Err(e) => Reading::unknown(UnknownReason::Malformed, format!("/proc/cpuinfo: {e}")),
        },
        Err(e) => e.into_reading(),
    };

    let cpus = online_cpu_dirs(fs, &online_cpus);
    // A package (core) is a set of CPUs that share one: hwloc groups CPUs by the kernel's
    // sibling lists (topology-linux.c look_sysfscpu), which stay right where ids do not: AMD
    // parts repeat core_id per die, s390 and POWER read physical_package_id -1. Ids are the
    // fallback for trees without the lists.
    let mut packages: BTreeSet<Key> = BTreeSet::new();
    let mut cores: BTreeSet<Key> = BTreeSet::new();
    let mut pkg_error: Option<Reading<u32>> = None;
    let mut core_error: Option<Reading<u32>> = None;
    for cpu in &cpus {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        let pkg_id = || match fs.parse(&format!("{base}/physical_package_id"), sysfs::parse_i64) {
            Reading::Value(p) if p >= 0 => Ok(p),
            Reading::Value(p) => Err(Reading::unknown(
                UnknownReason::NotReported,
                format!("/{base}/physical_package_id reads {p}"),
            )),
            Reading::Unknown(u) => Err(Reading::Unknown(u)),
        };
        match siblings(fs, &base, &["package_cpus", "core_siblings"]) {
            Some(set) => {
                packages.insert(Key::Cpus(set.ranges().to_vec()));
            }
            None => match pkg_id() {
                Ok(p) => {
                    packages.insert(Key::Ids(p, 0));
                }
                Err(e) => {
                    pkg_error.get_or_insert(e);
                }
            },
        }
        let core_id = |cpu: u32| {
            fs.parse(
                &format!("sys/devices/system/cpu/cpu{cpu}/topology/core_id"),
                sysfs::parse_i64,
            )
            .into_known()
        };
        match siblings(fs, &base, &["core_cpus", "thread_siblings"]) {
            // Siblings with different core ids are an AMD compute unit: hwloc makes each
            // thread a core (topology-linux.c `threadwithcoreid`).
            Some(set)
                if set
                    .iter()
                    .find(|c| c != cpu)
                    .is_some_and(|other| core_id(other) != core_id(*cpu)) =>
            {
                cores.insert(Key::Cpus(vec![(*cpu, *cpu)]));
            }
            Some(set) => {
                cores.insert(Key::Cpus(set.ranges().to_vec()));
            }
            None => match (
                pkg_id(),
                fs.parse(&format!("{base}/core_id"), sysfs::parse_i64),
            ) {
                (Ok(p), Reading::Value(c)) => {
                    cores.insert(Key::Ids(p, c));
                }
                (Err(e), _) => {
                    core_error.get_or_insert(e);
                }
                (_, Reading::Unknown(u)) => {
                    core_error.get_or_insert(Reading::Unknown(u));
                }
            },
        }
    }
    let none = || {
        Reading::unknown(
            UnknownReason::NotPresent,
            "/sys/devices/system/cpu: no online cpuN directories",
        )
    };
    let count = |err: Option<Reading<u32>>, keys: &BTreeSet<Key>| match err {
        Some(e) => e,
        None if cpus.is_empty() => none(),
        None => Reading::value(keys.len() as u32),
    };
    let sockets = count(pkg_error, &packages);
    let core_count = count(core_error, &cores);
    let threads = online_cpus
        .clone()
        .map(|s| u32::try_from(s.len()).unwrap_or(u32::MAX));
    Host {
        hostname: one_line(fs, "proc/sys/kernel/hostname"),
        kernel: one_line(fs, "proc/sys/kernel/osrelease"),
        cpu_model,
        sockets,
        cores: core_count,
        threads,
        online_cpus,
    }
}
