//! `inferscope serve --metrics`: a Prometheus endpoint. Each scrape captures the host, runs the
//! checks and samples GPUs and the watched processes; `/snapshot` serves the node's Snapshot
//! JSON (redacted like every snapshot), `/healthz` liveness. The HTTP server (limits, timeouts,
//! captures shared by queued requests) is `inferscope_probe::exporter`; this module owns the
//! flags, what one capture holds, and the NFD feature file.

use anyhow::{Context, bail};
use inferscope_probe::FsRoot;
use inferscope_probe::exporter::{self, Capture};
use inferscope_probe::watch::Sampler;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// `inferscope serve` arguments.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Serve Prometheus metrics on /metrics, the node's snapshot JSON on /snapshot and
    /// liveness on /healthz (the only mode so far).
    #[arg(long)]
    pub metrics: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9400")]
    pub listen: String,
    /// Also export these processes' memory and NUMA placement (repeat, space- or
    /// comma-separated).
    #[arg(long = "pid", value_name = "PID", num_args = 1.., value_delimiter = ',')]
    pub pids: Vec<u32>,
    /// Also export every process NVML reports on a GPU (re-read at each scrape).
    #[arg(long)]
    pub all: bool,
    /// Read this host's sysfs/procfs under DIR instead of / (in a container: the host's /sys and
    /// /proc mounted read-only at DIR/sys and DIR/proc). Unlike `--root` elsewhere, DIR must be
    /// this machine: NVML is still asked, and it always describes the machine serve runs on.
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Also write Node Feature Discovery's local feature file (what `inferscope labels`
    /// prints) to FILE, at start and every --nfd-interval: for the DaemonSet, FILE in
    /// the host's /etc/kubernetes/node-feature-discovery/features.d/. Written to a new
    /// temporary file beside it (`.NAME.XXXXXX.tmp`), then renamed.
    #[arg(long, value_name = "FILE")]
    pub nfd_features: Option<std::path::PathBuf>,
    /// Time between rewrites of --nfd-features (300, 5m; 10 s to a day).
    #[arg(long, value_name = "D", default_value = "300s", requires = "nfd_features",
          value_parser = super::nfd_interval_arg)]
    pub nfd_interval: Duration,
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
    inferscope_fleet::exposition::write_metrics(&snap, &findings, &gpus, &procs)
}

/// The NFD feature file's text for the node under `fs`: the same labels and header as
/// `inferscope labels --root`.
fn nfd_text(fs: &FsRoot) -> String {
    let snap = inferscope_probe::capture(fs, &super::capture_options());
    let findings = inferscope_check::run_defaults(&snap);
    let labels = inferscope_fleet::labels::labels(&snap, &findings);
    let header = format!(
        "Node Feature Discovery local features written by {} (serve --nfd-features) from \
         --root {}\n(docs/fleet.md; checks with the default thresholds)",
        crate::tool_name(),
        fs.root().display()
    );
    crate::render::fleet::labels_text(&labels, Some(&header))
}

/// Write `text` to `path` whole: a new temporary file beside it, then a rename. The temporary
/// file gets a random name and is created exclusively (`O_CREAT|O_EXCL`, which follows no
/// link), so a link planted at a predictable name (`.NAME.tmp`) cannot redirect the write
/// (issue 33).
fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    // Readable by the NFD worker like any file written with the usual umask.
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// What one scrape reads: the host under `fs`, NVML, and the watched processes.
struct HostCapture {
    fs: FsRoot,
    sampler: Sampler,
    pids: Vec<u32>,
    all: bool,
}

impl Capture for HostCapture {
    fn metrics(&mut self) -> String {
        scrape_under(&self.fs, &mut self.sampler, &self.pids, self.all)
    }

    fn snapshot(&mut self) -> Result<Vec<u8>, serde_json::Error> {
        let snap = inferscope_probe::capture(&self.fs, &super::capture_options());
        let mut v = serde_json::to_vec_pretty(&snap)?;
        v.push(b'\n');
        Ok(v)
    }
}

/// Rewrite the NFD feature file (run every --nfd-interval, one capture at a time with the
/// scrapes).
fn nfd_job(path: std::path::PathBuf) -> Arc<dyn Fn(&mut HostCapture) + Send + Sync> {
    Arc::new(move |c: &mut HostCapture| {
        if let Err(e) = write_whole(&path, &nfd_text(&c.fs)) {
            eprintln!(
                "inferscope: note: cannot write --nfd-features {}: {e}",
                path.display()
            );
        }
    })
}

/// Run the server until killed.
pub fn run(args: ServeArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !args.metrics {
        bail!("serve: nothing to serve; use --metrics");
    }
    let root = args
        .root
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("/"));
    if !root.is_dir() {
        bail!("--root {}: not a directory", root.display());
    }
    if let Some(f) = &args.nfd_features {
        let dir = match f.parent() {
            Some(d) if d.as_os_str().is_empty() => std::path::Path::new("."),
            Some(d) => d,
            None => bail!("--nfd-features {}: not a file path", f.display()),
        };
        if f.file_name().is_none() || !dir.is_dir() {
            bail!(
                "--nfd-features {}: no such directory {}",
                f.display(),
                dir.display()
            );
        }
    }
    let listener = std::net::TcpListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let lib = std::env::var_os(inferscope_probe::nvml::LIB_ENV);
    let capture = HostCapture {
        sampler: Sampler::new(FsRoot::host_mount(&root), lib.as_deref()),
        fs: FsRoot::host_mount(&root),
        pids: args.pids.clone(),
        all: args.all,
    };
    let job = args
        .nfd_features
        .map(|f| (args.nfd_interval, "labels", nfd_job(f)));
    eprintln!("inferscope: serving metrics on http://{addr}/metrics");
    exporter::serve(listener, capture, job)?;
    Ok(ExitCode::SUCCESS)
}
