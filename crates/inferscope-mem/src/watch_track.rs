//! The `watch` tracker: samples in, a summary with findings out (pure; the clock and the
//! sampling are the caller's).
//!
//! Per process it keeps host memory (RSS), GPU memory while that process's GPUs are idle, and
//! the share of its pages on remote NUMA nodes; per GPU, memory in use while idle and PCIe
//! throughput against the link. [`Tracker::summary`] runs the [`crate::watch`] detectors over
//! those series and writes one sentence per thing worth a look. An unknown reading (`None`) is
//! left out of a series, never counted as zero: a zero would read as a drop and then a rise.

use crate::watch::{self as detect, Drift, Saturation, Trend, TrendVerdict};
use crate::watch_sample::{GpuSample, ProcessSample};
use inferscope_host::CpuSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// Most points kept per series; beyond it every other point is dropped (the span is kept).
pub const MAX_POINTS: usize = 20_000;
/// GPU utilisation at or below which a sample counts as idle for the GPU-memory leak test.
pub const IDLE_UTILIZATION_PERCENT: u32 = 10;

#[derive(Debug, Default)]
struct Series(Vec<(f64, f64)>);

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        if self.0.len() >= MAX_POINTS {
            // Halving keeps memory bounded on a long watch while the span and shape survive.
            let kept: Vec<_> = self.0.iter().step_by(2).copied().collect();
            self.0 = kept;
        }
        self.0.push((t, v));
    }
}

#[derive(Debug, Default)]
struct ProcTrack {
    name: Option<String>,
    rss: Series,
    gpu_idle: Series,
    remote: Series,
    cpus: CpuSet,
    last_numa: BTreeMap<u32, u64>,
    exited_after_s: Option<f64>,
    rss_max: u64,
    rss_first: Option<u64>,
    rss_last: Option<u64>,
}

#[derive(Debug, Default)]
struct GpuTrack {
    sample: GpuSample,
    used_idle: Series,
    pcie: Vec<(f64, f64, f64)>,
}

/// Per process in the summary.
#[derive(Debug, Serialize)]
pub struct ProcessSummary {
    /// Pid.
    pub pid: u32,
    /// Command name.
    pub name: Option<String>,
    /// Seconds into the watch when it was first seen gone.
    pub exited_after_s: Option<f64>,
    /// RSS in the first sample that had one.
    pub rss_first_bytes: Option<u64>,
    /// RSS in the last sample that had one.
    pub rss_last_bytes: Option<u64>,
    /// Most RSS seen.
    pub rss_max_bytes: u64,
    /// Host memory trend.
    pub rss_trend: Trend,
    /// GPU memory trend over the samples where its GPUs were idle.
    pub gpu_memory_idle_trend: Option<Trend>,
    /// CPUs its threads ran on during the watch.
    pub cpus_ran_on: String,
    /// Resident bytes per NUMA node in the last sample.
    pub numa_bytes: BTreeMap<u32, u64>,
    /// Remote-node share and drift.
    pub remote: Option<Drift>,
    /// Flagged by the leak/creep detector (host or GPU memory grows steadily).
    pub leak: bool,
}

/// Per GPU in the summary.
#[derive(Debug, Serialize)]
pub struct GpuSummary {
    /// NVML index.
    pub index: u32,
    /// UUID.
    pub uuid: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Memory trend over idle samples.
    pub memory_idle_trend: Trend,
    /// PCIe saturation.
    pub pcie: Option<Saturation>,
}

/// What `watch` prints at the end.
#[derive(Debug, Serialize)]
pub struct WatchSummary {
    /// Seconds watched.
    pub duration_s: f64,
    /// Samples taken.
    pub samples: usize,
    /// Why there are no GPU figures, when there are none.
    pub nvml_note: Option<String>,
    /// Processes.
    pub processes: Vec<ProcessSummary>,
    /// GPUs.
    pub gpus: Vec<GpuSummary>,
    /// One sentence per thing worth a look.
    pub findings: Vec<String>,
}

/// Series kept over a watch, one set per process and per GPU.
#[derive(Debug, Default)]
pub struct Tracker {
    node_cpus: BTreeMap<u32, CpuSet>,
    procs: BTreeMap<u32, ProcTrack>,
    gpus: BTreeMap<u32, GpuTrack>,
    samples: usize,
}

impl Tracker {
    /// Track these processes; `node_cpus` (NUMA node → its CPUs) tells local from remote pages.
    pub fn new(pids: &[u32], node_cpus: BTreeMap<u32, CpuSet>) -> Self {
        Tracker {
            node_cpus,
            procs: pids.iter().map(|p| (*p, ProcTrack::default())).collect(),
            gpus: BTreeMap::new(),
            samples: 0,
        }
    }

    /// The tracked processes not yet seen gone: the ones still worth sampling.
    pub fn live_pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter(|(_, p)| p.exited_after_s.is_none())
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Add one moment `t` seconds into the watch. Returns the pids first seen gone in it.
    pub fn add(&mut self, t: f64, gpus: &[GpuSample], procs: &[ProcessSample]) -> Vec<u32> {
        let mut exited = Vec::new();
        for s in procs {
            let Some(track) = self.procs.get_mut(&s.pid) else {
                continue;
            };
            if track.exited_after_s.is_some() {
                continue;
            }
            if s.alive {
                track_process(track, s, t, &self.node_cpus, gpus);
            } else {
                track.exited_after_s = Some(t);
                exited.push(s.pid);
            }
        }
        for g in gpus {
            track_gpu(self.gpus.entry(g.index).or_default(), g, t);
        }
        self.samples += 1;
        exited
    }

    /// Judge the series: trends, drift, saturation and the findings.
    pub fn summary(self, duration_s: f64, nvml_note: Option<&str>) -> WatchSummary {
        let mut findings = Vec::new();
        let processes = self
            .procs
            .into_iter()
            .map(|(pid, p)| summarise_process(pid, p, &mut findings))
            .collect();
        let gpus = self
            .gpus
            .into_iter()
            .map(|(index, g)| summarise_gpu(index, g, &mut findings))
            .collect();
        WatchSummary {
            duration_s,
            samples: self.samples,
            nvml_note: nvml_note.map(str::to_string),
            processes,
            gpus,
            findings,
        }
    }
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / (1024.0 * 1024.0))
}

fn local_nodes(cpus: &CpuSet, node_cpus: &BTreeMap<u32, CpuSet>) -> Vec<u32> {
    node_cpus
        .iter()
        .filter(|(_, c)| !c.is_disjoint(cpus))
        .map(|(n, _)| *n)
        .collect()
}

/// Add one live sample of a process: RSS, CPUs ran on, remote-node share, and GPU memory
/// while its GPUs are idle.
fn track_process(
    track: &mut ProcTrack,
    s: &ProcessSample,
    t: f64,
    node_cpus: &BTreeMap<u32, CpuSet>,
    gpu_samples: &[GpuSample],
) {
    if track.name.is_none() {
        track.name.clone_from(&s.name);
    }
    if let Some(r) = s.rss_bytes {
        track.rss.push(t, r as f64);
        track.rss_first.get_or_insert(r);
        track.rss_last = Some(r);
        track.rss_max = track.rss_max.max(r);
    }
    let ran: CpuSet = s
        .cpus_ran_on
        .as_deref()
        .and_then(|c| c.parse().ok())
        .unwrap_or_default();
    track.cpus = track.cpus.union(&ran);
    let total: u64 = s.numa_bytes.values().sum();
    if total > 0 && !ran.is_empty() {
        let local = local_nodes(&ran, node_cpus);
        let remote: u64 = s
            .numa_bytes
            .iter()
            .filter(|(n, _)| !local.contains(n))
            .map(|(_, b)| *b)
            .sum();
        track.remote.push(t, remote as f64 / total as f64);
    }
    track.last_numa.clone_from(&s.numa_bytes);
    // Idle only when every GPU it holds memory on reports low utilisation; unknown is not idle.
    let idle = s.gpu_memory_bytes.keys().all(|g| {
        gpu_samples
            .iter()
            .find(|x| x.index == *g)
            .and_then(|x| x.utilization_percent)
            .is_some_and(|u| u <= IDLE_UTILIZATION_PERCENT)
    });
    if !s.gpu_memory_bytes.is_empty() && idle {
        track
            .gpu_idle
            .push(t, s.gpu_memory_bytes.values().sum::<u64>() as f64);
    }
}

/// Add one GPU sample: memory while idle, PCIe throughput against the link.
fn track_gpu(track: &mut GpuTrack, g: &GpuSample, t: f64) {
    track.sample = g.clone();
    if let Some(u) = g.memory_used_bytes
        && g.utilization_percent
            .is_some_and(|p| p <= IDLE_UTILIZATION_PERCENT)
    {
        track.used_idle.push(t, u as f64);
    }
    if let (Some(tx), Some(rx), Some(generation), Some(w)) = (
        g.pcie_tx_bytes_per_s,
        g.pcie_rx_bytes_per_s,
        g.pcie_gen,
        g.pcie_width,
    ) && let Some(lane) = detect::pcie_lane_bytes_per_s(generation)
        && track.pcie.len() < MAX_POINTS
    {
        track.pcie.push((tx as f64, rx as f64, lane * f64::from(w)));
    }
}

fn summarise_process(pid: u32, p: ProcTrack, findings: &mut Vec<String>) -> ProcessSummary {
    let label = format!("pid {pid} ({})", p.name.as_deref().unwrap_or("?"));
    let rss_trend = detect::trend(&p.rss.0);
    let gpu_trend = (!p.gpu_idle.0.is_empty()).then(|| detect::trend(&p.gpu_idle.0));
    let remote = detect::remote_drift(&p.remote.0);
    let mut leak = false;
    for (what, tr) in [
        ("host memory (RSS)", Some(&rss_trend)),
        ("GPU memory while idle", gpu_trend.as_ref()),
    ] {
        let Some(tr) = tr else { continue };
        match tr.verdict {
            TrendVerdict::SteadyGrowth => {
                leak = true;
                findings.push(format!(
                    "{label}: {what} grows steadily at {}/s ({} over {:.0} s, r² {:.2}, confidence {:.2}): a leak or creep",
                    mib(tr.slope_bytes_per_s),
                    mib(tr.growth_bytes),
                    tr.span_s,
                    tr.r_squared,
                    tr.confidence
                ));
            }
            TrendVerdict::Plateau => findings.push(format!(
                "{label}: {what} grew by {} and levelled off (a cache warming up or a one-off allocation, not a leak)",
                mib(tr.growth_bytes)
            )),
            _ => {}
        }
    }
    if let Some(d) = &remote
        && d.drifting
    {
        findings.push(format!(
            "{label}: pages drift to remote NUMA nodes ({:.0}% → {:.0}% remote)",
            d.first_remote_share * 100.0,
            d.last_remote_share * 100.0
        ));
    }
    if let Some(t) = p.exited_after_s {
        findings.push(format!("{label}: exited after {t:.1} s"));
    }
    ProcessSummary {
        pid,
        name: p.name,
        exited_after_s: p.exited_after_s,
        rss_first_bytes: p.rss_first,
        rss_last_bytes: p.rss_last,
        rss_max_bytes: p.rss_max,
        rss_trend,
        gpu_memory_idle_trend: gpu_trend,
        cpus_ran_on: p.cpus.to_string(),
        numa_bytes: p.last_numa,
        remote,
        leak,
    }
}

fn summarise_gpu(index: u32, g: GpuTrack, findings: &mut Vec<String>) -> GpuSummary {
    let memory_idle_trend = detect::trend(&g.used_idle.0);
    let pcie = detect::pcie_saturation(&g.pcie);
    if memory_idle_trend.verdict == TrendVerdict::SteadyGrowth {
        findings.push(format!(
            "GPU{index}: memory in use grows steadily while idle ({}/s)",
            mib(memory_idle_trend.slope_bytes_per_s)
        ));
    }
    if let Some(s) = &pcie
        && s.saturated
    {
        findings.push(format!(
            "GPU{index}: PCIe saturated in {} of {} samples (peak {:.0}% of the link)",
            s.saturated_samples,
            s.samples,
            s.max_share * 100.0
        ));
    }
    GpuSummary {
        index,
        uuid: g.sample.uuid,
        pci_bus_id: g.sample.pci_bus_id,
        memory_idle_trend,
        pcie,
    }
}
