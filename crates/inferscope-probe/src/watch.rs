//! Sampling for `inferscope watch` and the metrics exporter: one call, one moment.
//!
//! Per GPU (NVML, when it loads): memory used/total, utilisation, PCIe throughput and link. Per
//! process, through the [`FsRoot`]:
//!
//! * `proc/PID/status`: `VmRSS` (falls back to `proc/PID/statm` × 4 KiB);
//! * `proc/PID/numa_maps`: resident bytes per NUMA node (what `numastat -p` adds up);
//! * `proc/PID/task/*/stat` field 39 (`processor`): the CPU each thread last ran on;
//! * NVML's running-process lists: the process's GPU memory.
//!
//! A process that is gone is a sample with `alive: false`, never an error: watch keeps going.
//! The clock is the caller's; nothing here sleeps.

use crate::fsroot::FsRoot;
use inferscope_formats::numa_maps;
use inferscope_host::CpuSet;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::enums::device::UsedGpuMemory;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;

/// Most threads whose `stat` is read per process and sample.
pub const MAX_THREADS: usize = 4096;

// The sample types are pure data read by `inferscope_mem::watch_track`; they live there.
pub use inferscope_mem::watch_sample::{GpuSample, ProcessSample};

/// Samples GPUs and processes; keeps NVML loaded between samples.
pub struct Sampler {
    fs: FsRoot,
    nvml: Option<Nvml>,
    nvml_note: Option<String>,
    gpu_nodes: BTreeMap<String, u32>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("root", &self.fs.root())
            .field("nvml", &self.nvml.is_some())
            .finish()
    }
}

fn kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let rest = line[key.len()..].trim_start_matches(':').trim();
    let num = rest.split_whitespace().next()?;
    num.parse::<u64>().ok()?.checked_mul(1024)
}

/// Field 39 (`processor`) of a `/proc/PID/task/TID/stat` line.
pub fn stat_processor(stat: &str) -> Option<u32> {
    // `comm` (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}

impl Sampler {
    /// Sample under `fs`; NVML is loaded only on the live machine (`lib` overrides the library).
    pub fn new(fs: FsRoot, lib: Option<&OsStr>) -> Self {
        let (nvml, nvml_note) = if fs.is_live() {
            let r = match lib {
                Some(p) => Nvml::builder().lib_path(p).init(),
                None => Nvml::init(),
            };
            match r {
                Ok(n) => (Some(n), None),
                Err(e) => (None, Some(format!("NVML unavailable: {e}"))),
            }
        } else {
            (
                None,
                Some("NVML is asked only on the live machine (not under --root)".into()),
            )
        };
        Sampler {
            fs,
            nvml,
            nvml_note,
            gpu_nodes: BTreeMap::new(),
        }
    }

    /// Why GPU samples are empty, when they are.
    pub fn nvml_note(&self) -> Option<&str> {
        self.nvml_note.as_deref()
    }

    /// CPUs of each NUMA node (`/sys/devices/system/node/nodeN/cpulist`).
    pub fn node_cpus(&self) -> BTreeMap<u32, CpuSet> {
        let mut out = BTreeMap::new();
        let Ok(names) = self.fs.list_dir("sys/devices/system/node") else {
            return out;
        };
        for n in names {
            let Some(id) = n.strip_prefix("node").and_then(|i| i.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(t) = self
                .fs
                .read_string(&format!("sys/devices/system/node/{n}/cpulist"))
                && let Ok(set) = t.trim().parse::<CpuSet>()
            {
                out.insert(id, set);
            }
        }
        out
    }

    fn gpu_node(&mut self, bus: &str) -> Option<u32> {
        if let Some(n) = self.gpu_nodes.get(bus) {
            return Some(*n);
        }
        let id: inferscope_host::PciBusId = bus.parse().ok()?;
        let t = self
            .fs
            .read_string(&format!("sys/bus/pci/devices/{id}/numa_node"))
            .ok()?;
        let n = u32::try_from(t.trim().parse::<i64>().ok()?).ok()?;
        self.gpu_nodes.insert(bus.to_string(), n);
        Some(n)
    }

    /// Every GPU NVML reports, and which pid holds how much memory on which GPU.
    pub fn sample_gpus(&mut self) -> (Vec<GpuSample>, BTreeMap<u32, BTreeMap<u32, u64>>) {
        let mut gpus = Vec::new();
        let mut procs: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
        let mut buses = Vec::new();
        if let Some(nvml) = &self.nvml {
            let count = nvml.device_count().unwrap_or(0).min(1024);
            for i in 0..count {
                let Ok(d) = nvml.device_by_index(i) else {
                    continue;
                };
                let mem = d.memory_info().ok();
                let bus = d.pci_info().ok().map(|p| p.bus_id);
                for p in d.running_compute_processes().unwrap_or_default() {
                    if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                        procs.entry(p.pid).or_default().insert(i, b);
                    }
                }
                buses.push(bus.clone());
                gpus.push(GpuSample {
                    index: i,
                    uuid: d.uuid().ok(),
                    pci_bus_id: bus,
                    numa_node: None,
                    memory_used_bytes: mem.as_ref().map(|m| m.used),
                    memory_total_bytes: mem.as_ref().map(|m| m.total),
                    utilization_percent: d.utilization_rates().ok().map(|u| u.gpu),
                    pcie_tx_bytes_per_s: d
                        .pcie_throughput(PcieUtilCounter::Send)
                        .ok()
                        .map(|k| u64::from(k) * 1024),
                    pcie_rx_bytes_per_s: d
                        .pcie_throughput(PcieUtilCounter::Receive)
                        .ok()
                        .map(|k| u64::from(k) * 1024),
                    pcie_gen: d.current_pcie_link_gen().ok(),
                    pcie_width: d.current_pcie_link_width().ok(),
                });
            }
        }
        for (g, bus) in gpus.iter_mut().zip(buses) {
            g.numa_node = bus.and_then(|b| self.gpu_node(&b));
        }
        (gpus, procs)
    }

    /// Pids NVML lists on any GPU.
    pub fn gpu_pids(&mut self) -> Vec<u32> {
        self.sample_gpus().1.into_keys().collect()
    }

    /// True when `/proc/PID` exists now and is not a zombie (exited, not yet reaped).
    pub fn exists(&self, pid: u32) -> bool {
        match self.fs.read_string(&format!("proc/{pid}/stat")) {
            Ok(t) => !matches!(
                t.rfind(')')
                    .and_then(|i| t[i + 1..].split_whitespace().next()),
                Some("Z" | "X" | "x")
            ),
            Err(_) => false,
        }
    }

    /// The `n` processes with the largest RSS (for `--all` without NVML).
    pub fn largest_processes(&self, n: usize) -> Vec<u32> {
        let Ok(names) = self.fs.list_dir("proc") else {
            return Vec::new();
        };
        let mut v: Vec<(u64, u32)> = names
            .iter()
            .filter_map(|s| s.parse::<u32>().ok())
            .filter_map(|pid| {
                let t = self.fs.read_string(&format!("proc/{pid}/status")).ok()?;
                Some((kib_field(&t, "VmRSS")?, pid))
            })
            .collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().take(n).map(|(_, p)| p).collect()
    }

    /// One process now. `gpu` is the pid's memory per GPU from [`Sampler::sample_gpus`].
    pub fn sample_process(&self, pid: u32, gpu: Option<&BTreeMap<u32, u64>>) -> ProcessSample {
        let dir = format!("proc/{pid}");
        if !self.exists(pid) {
            return ProcessSample {
                pid,
                alive: false,
                problems: vec![format!("process {pid} has exited")],
                ..ProcessSample::default()
            };
        }
        let mut s = ProcessSample {
            pid,
            alive: true,
            gpu_memory_bytes: gpu.cloned().unwrap_or_default(),
            ..ProcessSample::default()
        };
        match self.fs.read_string(&format!("{dir}/status")) {
            Ok(t) => {
                s.name = t
                    .lines()
                    .find_map(|l| l.strip_prefix("Name:"))
                    .map(|n| n.trim().to_string());
                s.rss_bytes = kib_field(&t, "VmRSS");
            }
            Err(e) => {
                if e.reason == inferscope_host::UnknownReason::NotPresent {
                    s.alive = false;
                    s.problems.push(format!("process {pid} has exited"));
                    return s;
                }
                s.problems.push(e.to_string());
            }
        }
        if s.rss_bytes.is_none()
            && let Ok(t) = self.fs.read_string(&format!("{dir}/statm"))
        {
            s.rss_bytes = t
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
                .and_then(|p| p.checked_mul(4096));
        }
        match self.fs.parse(&format!("{dir}/numa_maps"), numa_maps::parse) {
            inferscope_host::Reading::Value(m) => {
                s.numa_bytes = m.nodes.iter().map(|(n, u)| (*n, u.bytes)).collect();
            }
            inferscope_host::Reading::Unknown(u) => s.problems.push(u.detail),
        }
        match self.fs.list_dir(&format!("{dir}/task")) {
            Ok(tids) => {
                let cpus: BTreeSet<u32> = tids
                    .iter()
                    .take(MAX_THREADS)
                    .filter_map(|tid| {
                        self.fs
                            .read_string(&format!("{dir}/task/{tid}/stat"))
                            .ok()
                            .and_then(|t| stat_processor(&t))
                    })
                    .collect();
                if !cpus.is_empty() {
                    s.cpus_ran_on = Some(cpus.into_iter().collect::<CpuSet>().to_string());
                }
            }
            Err(e) => s.problems.push(e.to_string()),
        }
        if !self.exists(pid) {
            s.alive = false;
            s.problems
                .push(format!("process {pid} exited while it was read"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_field_survives_odd_comm() {
        let stat = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 \
                    100 1000000 200 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 7 0 0 \
                    0 0 0";
        assert_eq!(stat_processor(stat), Some(7));
        assert_eq!(stat_processor("garbage"), None);
    }

    #[test]
    fn own_process_and_a_missing_one() {
        let s = Sampler::new(
            FsRoot::new("/"),
            Some(OsStr::new("/nonexistent/libnvml.so")),
        );
        let me = s.sample_process(std::process::id(), None);
        assert!(me.alive);
        assert!(me.rss_bytes.unwrap() > 0);
        assert!(me.cpus_ran_on.is_some());
        let gone = s.sample_process(u32::MAX - 1, None);
        assert!(!gone.alive);
    }
}
