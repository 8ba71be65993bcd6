//! `inferscope watch`: sample GPUs and processes at an interval, write JSON lines, show a live
//! table on a terminal, and end with a summary of what the detectors found.
//!
//! Capture is `inferscope_probe::watch::Sampler`; the detectors are
//! `inferscope_mem::watch` (pure). This module owns the clock, the loop, Ctrl-C and the bounded
//! series the detectors read.

use anyhow::{Context, bail};
use inferscope_host::CpuSet;
use inferscope_mem::watch::{self as detect, Drift, Saturation, Trend, TrendVerdict};
use inferscope_probe::FsRoot;
use inferscope_probe::watch::{GpuSample, ProcessSample, Sampler};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most points kept per series; beyond it every other point is dropped (the span is kept).
pub const MAX_POINTS: usize = 20_000;
/// GPU utilisation at or below which a sample counts as idle for the GPU-memory leak test.
pub const IDLE_UTILIZATION_PERCENT: u32 = 10;
/// Processes watched by `--all` when NVML cannot list GPU processes.
pub const ALL_WITHOUT_NVML: usize = 10;

/// `inferscope watch` arguments.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Watch this process (repeat, space- or comma-separated for several).
    #[arg(long = "pid", value_name = "PID", num_args = 1.., value_delimiter = ',', conflicts_with = "all")]
    pub pids: Vec<u32>,
    /// Watch every process NVML lists on a GPU (without NVML: the 10 largest by RSS).
    #[arg(long)]
    pub all: bool,
    /// Time between samples (500ms, 1s, 1m).
    #[arg(long, value_name = "D", default_value = "1s", value_parser = super::positive_duration_arg)]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = "D", value_parser = super::positive_duration_arg)]
    pub duration: Option<Duration>,
    /// Write every sample as one JSON line to FILE (`-`: standard output; the summary then goes
    /// to standard error).
    #[arg(long, value_name = "FILE.jsonl")]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// One line of the JSONL output.
#[derive(Debug, Serialize)]
struct SampleLine<'a> {
    /// Milliseconds since the watch started.
    t_ms: u64,
    gpus: &'a [GpuSample],
    processes: &'a [ProcessSample],
}

#[derive(Debug, Default)]
struct Series(Vec<(f64, f64)>);

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        if self.0.len() >= MAX_POINTS {
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
    /// RSS in the first and last sample, and the most seen.
    pub rss_first_bytes: Option<u64>,
    /// RSS in the last sample.
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

/// Run the watch.
pub fn run(args: WatchArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (interval, duration) = (args.interval, args.duration);
    let lib = std::env::var_os(inferscope_probe::nvml::LIB_ENV);
    let mut sampler = Sampler::new(FsRoot::new("/"), lib.as_deref());
    for pid in &args.pids {
        if !sampler.exists(*pid) {
            bail!("no process with pid {pid} (is it running, and in this PID namespace?)");
        }
    }
    let pids = choose_pids(&args, &mut sampler)?;
    // Ctrl-C and SIGTERM (`kill`, systemd, `timeout`) both end the watch with its summary.
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let to_stdout = args.out.as_deref() == Some(std::path::Path::new("-"));
    let mut jsonl: Option<Box<dyn Write>> = match &args.out {
        None => None,
        Some(_) if to_stdout => None,
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))),
    };
    let live = !to_stdout && !args.json && std::io::stdout().is_terminal();
    let node_cpus = sampler.node_cpus();
    let mut procs: BTreeMap<u32, ProcTrack> =
        pids.iter().map(|p| (*p, ProcTrack::default())).collect();
    let mut gpus: BTreeMap<u32, GpuTrack> = BTreeMap::new();
    let start = Instant::now();
    let mut samples = 0usize;
    let mut next = start;
    loop {
        let t = start.elapsed().as_secs_f64();
        let (gpu_samples, gpu_procs) = sampler.sample_gpus();
        let mut proc_samples = Vec::with_capacity(procs.len());
        for (pid, track) in procs.iter_mut() {
            if track.exited_after_s.is_some() {
                continue;
            }
            let s = sampler.sample_process(*pid, gpu_procs.get(pid));
            if !s.alive {
                track.exited_after_s = Some(t);
                if !args.json {
                    eprintln!(
                        "inferscope: note: process {pid} exited after {t:.1} s; still watching the rest"
                    );
                }
            } else {
                track_process(track, &s, t, &node_cpus, &gpu_samples);
            }
            proc_samples.push(s);
        }
        for g in &gpu_samples {
            track_gpu(gpus.entry(g.index).or_default(), g, t);
        }
        samples += 1;
        let line = SampleLine {
            t_ms: (t * 1000.0) as u64,
            gpus: &gpu_samples,
            processes: &proc_samples,
        };
        if to_stdout {
            serde_json::to_writer(&mut *out, &line)?;
            writeln!(out)?;
            out.flush()?;
        } else if let Some(w) = jsonl.as_mut() {
            serde_json::to_writer(&mut *w, &line)?;
            writeln!(w)?;
        }
        if live {
            // `out` escapes control characters (process names are outside text); the screen's
            // own clear sequence goes straight to the terminal, after what `out` holds.
            out.flush()?;
            std::io::stdout().write_all(b"\x1b[2J\x1b[H")?;
            crate::render::watch::write_live(t, &gpu_samples, &proc_samples, out)?;
            out.flush()?;
        }
        next += interval;
        if duration.is_some_and(|d| next.duration_since(start) > d) {
            break;
        }
        while Instant::now() < next {
            if STOP.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        if STOP.load(Ordering::SeqCst) {
            break;
        }
    }
    if let Some(w) = jsonl.as_mut() {
        w.flush()?;
    }
    let summary = summarise(
        start.elapsed().as_secs_f64(),
        samples,
        sampler.nvml_note(),
        procs,
        gpus,
    );
    if to_stdout {
        let mut err = std::io::stderr().lock();
        crate::render::watch::write_summary(&summary, &mut err)?;
    } else if args.json {
        serde_json::to_writer_pretty(&mut *out, &crate::render::versioned::versioned(&summary))?;
        writeln!(out)?;
    } else {
        crate::render::watch::write_summary(&summary, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The processes to watch: those named, else NVML's GPU processes (`--all` without NVML: the
/// largest by RSS).
fn choose_pids(args: &WatchArgs, sampler: &mut Sampler) -> anyhow::Result<Vec<u32>> {
    Ok(if args.all || args.pids.is_empty() {
        if sampler.nvml_note().is_none() {
            sampler.gpu_pids()
        } else if args.all {
            eprintln!(
                "inferscope: note: {}; watching the {ALL_WITHOUT_NVML} largest processes by RSS",
                sampler.nvml_note().unwrap_or("")
            );
            sampler.largest_processes(ALL_WITHOUT_NVML)
        } else {
            bail!(
                "nothing to watch: {} and no --pid given (use --pid PID or --all)",
                sampler.nvml_note().unwrap_or("no GPU")
            );
        }
    } else {
        args.pids.clone()
    })
}

/// Add one live sample of a process to its track: RSS, CPUs ran on, remote-node share, and GPU
/// memory while its GPUs are idle.
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

/// Add one GPU sample to its track: memory while idle, PCIe throughput against the link.
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

fn summarise(
    duration_s: f64,
    samples: usize,
    nvml_note: Option<&str>,
    procs: BTreeMap<u32, ProcTrack>,
    gpus: BTreeMap<u32, GpuTrack>,
) -> WatchSummary {
    let mut findings = Vec::new();
    let mut processes = Vec::new();
    for (pid, p) in procs {
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
        processes.push(ProcessSummary {
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
        });
    }
    let mut gpu_out = Vec::new();
    for (index, g) in gpus {
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
        gpu_out.push(GpuSummary {
            index,
            uuid: g.sample.uuid,
            pci_bus_id: g.sample.pci_bus_id,
            memory_idle_trend,
            pcie,
        });
    }
    WatchSummary {
        duration_s,
        samples,
        nvml_note: nvml_note.map(str::to_string),
        processes,
        gpus: gpu_out,
        findings,
    }
}
