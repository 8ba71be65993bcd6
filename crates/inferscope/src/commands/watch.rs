//! `inferscope watch`: sample GPUs and processes at an interval, write JSON lines, show a live
//! table on a terminal, and end with a summary of what the detectors found.
//!
//! Capture is `inferscope_probe::watch::Sampler`; the series, detectors and summary are
//! `inferscope_mem::watch_track::Tracker` (pure). This module owns the flags, the clock, the
//! loop, Ctrl-C and the output.

use anyhow::{Context, bail};
use inferscope_mem::watch_track::Tracker;
pub use inferscope_mem::watch_track::WatchSummary;
use inferscope_probe::FsRoot;
use inferscope_probe::watch::{GpuSample, ProcessSample, Sampler};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let mut tracker = Tracker::new(&pids, sampler.node_cpus());
    let start = Instant::now();
    let mut next = start;
    loop {
        let t = start.elapsed().as_secs_f64();
        let (gpu_samples, gpu_procs) = sampler.sample_gpus();
        let proc_samples: Vec<ProcessSample> = tracker
            .live_pids()
            .into_iter()
            .map(|pid| sampler.sample_process(pid, gpu_procs.get(&pid)))
            .collect();
        for pid in tracker.add(t, &gpu_samples, &proc_samples) {
            if !args.json {
                eprintln!(
                    "inferscope: note: process {pid} exited after {t:.1} s; still watching the rest"
                );
            }
        }
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
    let summary = tracker.summary(start.elapsed().as_secs_f64(), sampler.nvml_note());
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
