//! The tracker on sampled series shaped like what `watch` records: a steady leak, an allocator
//! sawtooth, unknown readings, an exit, NUMA drift and a saturated link.

use inferscope_host::CpuSet;
use inferscope_mem::watch::TrendVerdict;
use inferscope_mem::watch_sample::{GpuSample, ProcessSample};
use inferscope_mem::watch_track::{Tracker, WatchSummary};
use std::collections::BTreeMap;

const MIB: u64 = 1024 * 1024;

fn proc_sample(pid: u32, rss: Option<u64>) -> ProcessSample {
    ProcessSample {
        pid,
        alive: true,
        name: Some("python3".into()),
        rss_bytes: rss,
        ..ProcessSample::default()
    }
}

/// Feed one process's RSS readings at 1 s intervals; returns the summary.
fn watch_rss(rss: &[Option<u64>]) -> WatchSummary {
    let mut tr = Tracker::new(&[7], BTreeMap::new());
    for (i, r) in rss.iter().enumerate() {
        tr.add(i as f64, &[], &[proc_sample(7, *r)]);
    }
    tr.summary(rss.len() as f64, None)
}

#[test]
fn steady_rise_over_the_window_is_a_leak_finding() {
    // 2 GiB growing 4 MiB/s with ±1 MiB jitter over 60 s: a creeping host-side cache.
    let rss: Vec<_> = (0..60u64)
        .map(|i| Some(2048 * MIB + 4 * MIB * i + (i * 7919 % 3) * MIB))
        .collect();
    let s = watch_rss(&rss);
    let p = &s.processes[0];
    assert!(p.leak, "{p:?}");
    assert_eq!(p.rss_trend.verdict, TrendVerdict::SteadyGrowth);
    assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
    assert!(
        s.findings[0].starts_with("pid 7 (python3): host memory (RSS) grows steadily at 4.0 MiB/s"),
        "{}",
        s.findings[0]
    );
    assert_eq!(p.rss_first_bytes, Some(2048 * MIB));
    assert_eq!(s.samples, 60);
}

#[test]
fn sawtooth_back_to_baseline_is_not_a_leak() {
    // Allocate 40 MiB per step for 5 steps, free it all, repeat: an allocator cycle.
    let rss: Vec<_> = (0..60u64)
        .map(|i| Some(1024 * MIB + 40 * MIB * (i % 6)))
        .collect();
    let s = watch_rss(&rss);
    let p = &s.processes[0];
    assert!(!p.leak, "{p:?}");
    assert_ne!(p.rss_trend.verdict, TrendVerdict::SteadyGrowth);
    assert!(s.findings.is_empty(), "{:?}", s.findings);
    assert_eq!(p.rss_max_bytes, 1224 * MIB);
}

#[test]
fn unknown_readings_are_not_zeros() {
    // A flat 1 GiB with every third reading unknown: zeros would make a sawtooth of 1 GiB.
    let rss: Vec<_> = (0..30)
        .map(|i| (i % 3 != 0).then_some(1024 * MIB))
        .collect();
    let s = watch_rss(&rss);
    let p = &s.processes[0];
    assert_eq!(p.rss_trend.samples, 20);
    assert_eq!(p.rss_trend.verdict, TrendVerdict::Stable);
    assert_eq!(p.rss_first_bytes, Some(1024 * MIB));
    // Nothing known at all stays unknown, not 0.
    let none = watch_rss(&[None; 10]);
    assert_eq!(none.processes[0].rss_first_bytes, None);
    assert_eq!(
        none.processes[0].rss_trend.verdict,
        TrendVerdict::InsufficientData
    );
}

#[test]
fn gpu_memory_counts_only_while_utilisation_is_known_idle() {
    let gpu = |i: u64, util: Option<u32>| GpuSample {
        index: 0,
        memory_used_bytes: Some(10_000 * MIB + 50 * MIB * i),
        utilization_percent: util,
        ..GpuSample::default()
    };
    let run = |util: Option<u32>| {
        let mut tr = Tracker::new(&[], BTreeMap::new());
        for i in 0..30 {
            tr.add(i as f64, &[gpu(i, util)], &[]);
        }
        tr.summary(30.0, None)
    };
    let idle = run(Some(0));
    assert_eq!(
        idle.gpus[0].memory_idle_trend.verdict,
        TrendVerdict::SteadyGrowth
    );
    assert!(
        idle.findings[0].starts_with("GPU0: memory in use grows steadily while idle (50.0 MiB/s)")
    );
    let unknown = run(None);
    assert_eq!(
        unknown.gpus[0].memory_idle_trend.verdict,
        TrendVerdict::InsufficientData
    );
    assert!(unknown.findings.is_empty(), "{:?}", unknown.findings);
}

#[test]
fn an_exit_is_reported_once_and_stops_the_series() {
    let mut tr = Tracker::new(&[7, 8], BTreeMap::new());
    assert!(
        tr.add(
            0.0,
            &[],
            &[proc_sample(7, Some(MIB)), proc_sample(8, Some(MIB))]
        )
        .is_empty()
    );
    let gone = ProcessSample {
        pid: 8,
        ..ProcessSample::default()
    };
    assert_eq!(
        tr.add(1.5, &[], &[proc_sample(7, Some(MIB)), gone.clone()]),
        vec![8]
    );
    assert_eq!(tr.live_pids(), vec![7]);
    assert!(tr.add(2.0, &[], &[gone]).is_empty());
    let s = tr.summary(2.0, Some("NVML not loaded"));
    assert_eq!(s.processes[1].exited_after_s, Some(1.5));
    assert_eq!(s.findings, vec!["pid 8 (python3): exited after 1.5 s"]);
    assert_eq!(s.nvml_note.as_deref(), Some("NVML not loaded"));
}

#[test]
fn pages_drifting_to_the_other_node_are_a_finding() {
    let nodes: BTreeMap<u32, CpuSet> = [(0, "0-7".parse().unwrap()), (1, "8-15".parse().unwrap())]
        .into_iter()
        .collect();
    let mut tr = Tracker::new(&[7], nodes);
    for i in 0..10u64 {
        let mut s = proc_sample(7, Some(100 * MIB));
        s.cpus_ran_on = Some("0-3".into());
        s.numa_bytes = [(0, (100 - 5 * i) * MIB), (1, 5 * i * MIB)]
            .into_iter()
            .collect();
        tr.add(i as f64, &[], &[s]);
    }
    let s = tr.summary(10.0, None);
    assert!(s.processes[0].remote.as_ref().unwrap().drifting);
    assert_eq!(s.processes[0].cpus_ran_on, "0-3");
    assert_eq!(
        s.findings,
        vec!["pid 7 (python3): pages drift to remote NUMA nodes (0% → 45% remote)"]
    );
}

#[test]
fn a_saturated_link_is_a_finding() {
    // Gen4 x16: 31.5 GB/s per direction; 28 GB/s is 89 % of it.
    let g = GpuSample {
        index: 1,
        pcie_tx_bytes_per_s: Some(28_000_000_000),
        pcie_rx_bytes_per_s: Some(1_000_000_000),
        pcie_gen: Some(4),
        pcie_width: Some(16),
        ..GpuSample::default()
    };
    let mut tr = Tracker::new(&[], BTreeMap::new());
    for i in 0..4 {
        tr.add(i as f64, std::slice::from_ref(&g), &[]);
    }
    let s = tr.summary(4.0, None);
    assert_eq!(
        s.findings,
        vec!["GPU1: PCIe saturated in 4 of 4 samples (peak 89% of the link)"]
    );
}
