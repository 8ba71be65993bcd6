//! One running process (`inferscope check --pid PID`): its CPU and memory placement from
//! `/proc/PID`, and the GPUs the driver says it uses.
//!
//! Read through the [`FsRoot`] like everything else, so `--root` and gathered archives work and
//! every unknown names its file. What is read:
//!
//! * `proc/PID/comm`: the command name;
//! * `proc/PID/status`: `Cpus_allowed_list` and `Mems_allowed_list`;
//! * `proc/PID/numa_maps`: resident memory per NUMA node, summed like `numastat -p`. Mappings use
//!   different page sizes (4 KiB, 2 MiB or 1 GiB huge pages), so the counts are converted to
//!   **4 KiB pages** before they are added: `pages_per_node` is bytes / 4096;
//! * `proc/PID/environ`: only `CUDA_VISIBLE_DEVICES` (the process's environment at exec time;
//!   reading it needs the same user or `CAP_SYS_PTRACE`);
//! * the GPUs whose NVML process list (`snapshot.gpus[].details.processes`) has this pid. NVML
//!   reports host pids, so inside a container the list may not match the container's pids.

use crate::fsroot::FsRoot;
use inferscope_formats::{environ, numa_maps};
use inferscope_host::{CpuSet, NodeSet, PciBusId, ProcessFacts, Reading, Snapshot, UnknownReason};
use std::collections::BTreeMap;
use std::str::FromStr;

/// Unit of [`ProcessFacts::pages_per_node`] as captured here.
pub const PAGE_UNIT_BYTES: u64 = 4096;

/// Read what `/proc/<pid>` and the snapshot's driver facts say about one process.
pub fn capture_process(fs: &FsRoot, pid: u32, snapshot: &Snapshot) -> ProcessFacts {
    let dir = format!("proc/{pid}");
    let name = match fs.read_string(&format!("{dir}/comm")) {
        Ok(t) => {
            let n = t.trim_end_matches(['\n', '\0']).to_string();
            if n.is_empty() {
                Reading::unknown(UnknownReason::Malformed, format!("/{dir}/comm is empty"))
            } else {
                Reading::value(n)
            }
        }
        Err(e) => e.into_reading(),
    };
    let (cpus_allowed, mems_allowed) = match fs.read_string(&format!("{dir}/status")) {
        Ok(text) => (
            status_list::<CpuSet>(&text, &dir, "Cpus_allowed_list"),
            status_list::<NodeSet>(&text, &dir, "Mems_allowed_list"),
        ),
        Err(e) => (e.clone().into_reading(), e.into_reading()),
    };
    let pages_per_node = fs
        .parse(&format!("{dir}/numa_maps"), numa_maps::parse)
        .map(|m| {
            m.nodes
                .iter()
                .map(|(node, u)| (*node, u.bytes / PAGE_UNIT_BYTES))
                .collect::<BTreeMap<u32, u64>>()
        });
    let cuda_visible_devices = match fs.read_bytes(&format!("{dir}/environ")) {
        Ok(bytes) => Reading::value(
            environ::parse(&bytes)
                .into_iter()
                .rev()
                .find(|(k, _)| k == "CUDA_VISIBLE_DEVICES")
                .map(|(_, v)| v),
        ),
        Err(e) => e.into_reading(),
    };
    ProcessFacts {
        pid,
        name,
        cpus_allowed,
        mems_allowed,
        pages_per_node,
        gpus: gpus_of(snapshot, pid),
        cuda_visible_devices,
    }
}

/// GPUs whose driver process list contains `pid`, in snapshot (PCI) order.
fn gpus_of(snapshot: &Snapshot, pid: u32) -> Vec<PciBusId> {
    snapshot
        .gpus
        .iter()
        .filter(|g| {
            g.details
                .known()
                .and_then(|d| d.processes.known())
                .is_some_and(|ps| ps.iter().any(|p| p.pid == pid))
        })
        .map(|g| g.pci_bus_id)
        .collect()
}

/// A `Key:\t<list>` line of `/proc/PID/status`, parsed as a Linux list.
fn status_list<T>(text: &str, dir: &str, key: &str) -> Reading<T>
where
    T: FromStr<Err = inferscope_host::ListError>,
{
    for (idx, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) else {
            continue;
        };
        let value = rest.trim_start();
        // 1-based column of the value's first character in the line.
        let value_col = line.chars().count() - value.chars().count() + 1;
        return match value.parse::<T>() {
            Ok(v) => Reading::value(v),
            Err(e) => Reading::unknown(
                UnknownReason::Malformed,
                format!(
                    "/{dir}/status: line {}, column {}: expected {}, found {:?}",
                    idx + 1,
                    value_col + e.column - 1,
                    e.expected,
                    e.found
                ),
            ),
        };
    }
    Reading::unknown(
        UnknownReason::NotPresent,
        format!("/{dir}/status has no {key} line"),
    )
}
