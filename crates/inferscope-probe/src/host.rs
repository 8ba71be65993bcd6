//! Host identity and CPU inventory from procfs and `/sys/devices/system/cpu`.

use crate::fsroot::FsRoot;
use inferscope_formats::{cpuinfo, sysfs};
use inferscope_model::{CpuSet, Host, Reading, UnknownReason};
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
    let mut packages = BTreeSet::new();
    let mut cores = BTreeSet::new();
    let mut topology_error: Option<Reading<u32>> = None;
    for cpu in &cpus {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        let pkg = fs.parse(&format!("{base}/physical_package_id"), sysfs::parse_i64);
        let core = fs.parse(&format!("{base}/core_id"), sysfs::parse_i64);
        match (pkg, core) {
            (Reading::Value(p), Reading::Value(c)) if p >= 0 => {
                packages.insert(p);
                cores.insert((p, c));
            }
            (Reading::Value(p), Reading::Value(_)) => {
                topology_error.get_or_insert(Reading::unknown(
                    UnknownReason::NotReported,
                    format!("/{base}/physical_package_id reads {p}"),
                ));
            }
            (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => {
                topology_error.get_or_insert(Reading::Unknown(u));
            }
        }
    }
    let (sockets, core_count) = match topology_error {
        Some(err) => (err.clone(), err),
        None if cpus.is_empty() => {
            let r = Reading::unknown(
                UnknownReason::NotPresent,
                "/sys/devices/system/cpu: no online cpuN directories",
            );
            (r.clone(), r)
        }
        None => (
            Reading::value(packages.len() as u32),
            Reading::value(cores.len() as u32),
        ),
    };
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
