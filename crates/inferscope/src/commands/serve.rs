//! `inferscope serve --metrics`: a Prometheus endpoint. Each scrape captures the host, runs the
//! checks and samples GPUs and the watched processes; no state is kept between scrapes. A plain
//! `std::net` server: one connection at a time, requests capped at 8 KiB and 5 s.

use anyhow::{Context, bail};
use inferscope_probe::FsRoot;
use inferscope_probe::watch::Sampler;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

/// `inferscope serve` arguments.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Serve Prometheus metrics on /metrics (the only mode so far).
    #[arg(long)]
    pub metrics: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9400")]
    pub listen: String,
    /// Also export these processes' memory and NUMA placement.
    #[arg(long = "pid", value_name = "PID", num_args = 1..)]
    pub pids: Vec<u32>,
    /// Also export every process NVML reports on a GPU (re-read at each scrape).
    #[arg(long)]
    pub all: bool,
    /// Read this host's sysfs/procfs under DIR instead of / (in a container: the host's /sys and
    /// /proc mounted read-only at DIR/sys and DIR/proc). Unlike `--root` elsewhere, DIR must be
    /// this machine: NVML is still asked, and it always describes the machine serve runs on.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: std::path::PathBuf,
}

/// One scrape's body, reading the host under `fs`; `all` adds NVML's GPU processes to `pids`.
pub fn scrape_under(fs: &FsRoot, sampler: &mut Sampler, pids: &[u32], all: bool) -> String {
    let snap = inferscope_probe::capture(fs, &super::capture_options());
    let findings = inferscope_check::run_defaults(&snap);
    let (gpus, gpu_procs) = sampler.sample_gpus();
    let mut pids = pids.to_vec();
    if all {
        pids.extend(gpu_procs.keys().copied());
        pids.sort_unstable();
        pids.dedup();
    }
    let procs: Vec<_> = pids
        .iter()
        .map(|p| sampler.sample_process(*p, gpu_procs.get(p)))
        .collect();
    crate::render::metrics::write_metrics(&snap, &findings, &gpus, &procs)
}

fn handle(
    mut stream: TcpStream,
    fs: &FsRoot,
    sampler: &mut Sampler,
    args: &ServeArgs,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    let mut reader = BufReader::new((&stream).take(8192));
    reader.read_line(&mut line)?;
    // Drain headers (bounded by the take above).
    let mut h = String::new();
    while reader.read_line(&mut h)? > 2 {
        h.clear();
    }
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, ctype, body) = match (line.split_whitespace().next(), path) {
        (Some("GET"), "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            scrape_under(fs, sampler, &args.pids, args.all),
        ),
        // Nothing but metrics (docs/SECURITY.md): every other path and method is 404.
        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

use std::io::Read as _;

/// Run the server until killed.
pub fn run(args: ServeArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !args.metrics {
        bail!("serve: nothing to serve; use --metrics");
    }
    if !args.root.is_dir() {
        bail!("--root {}: not a directory", args.root.display());
    }
    let listener = TcpListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    eprintln!("inferscope: serving metrics on http://{addr}/metrics");
    let lib = std::env::var_os(inferscope_probe::nvml::LIB_ENV);
    let mut sampler = Sampler::new(FsRoot::host_mount(&args.root), lib.as_deref());
    let fs = FsRoot::host_mount(&args.root);
    for conn in listener.incoming() {
        match conn {
            Ok(s) => {
                if let Err(e) = handle(s, &fs, &mut sampler, &args) {
                    eprintln!("inferscope: note: metrics request failed: {e}");
                }
            }
            Err(e) => eprintln!("inferscope: note: accept failed: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
