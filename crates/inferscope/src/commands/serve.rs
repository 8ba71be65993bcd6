//! `inferscope serve --metrics`: a Prometheus endpoint. Each scrape captures the host, runs the
//! checks and samples GPUs and the watched processes; nothing from one scrape is served to a
//! request that arrived after that scrape's capture started.
//!
//! HTTP is hyper's HTTP/1 server on a single-threaded tokio runtime: many connections at once
//! (up to [`MAX_CONNECTIONS`]; past that, new ones wait in the kernel's backlog), request heads
//! capped at 8 KiB and 32 headers, a 5 s limit to send a request head (which also closes idle
//! keep-alive connections), and a 10 s limit on a write that makes no progress. Captures run
//! one at a time on a blocking thread, so a slow NVML call never stalls the accept loop, and
//! requests that queued behind one capture share the next one (never an older one), so a burst
//! of requests costs at most two captures per path, not one each.
//! Paths: `GET /metrics`, `GET /snapshot` (the node's Snapshot JSON, redacted like every
//! snapshot), `GET /healthz`; everything else is 404 and closes the connection.

mod write_timeout;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use inferscope_probe::FsRoot;
use inferscope_probe::watch::Sampler;
use std::convert::Infallible;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections served at once; more wait in the listen backlog until one closes. Sized so that
/// a few hundred idle or slow clients still leave room for scrapes (an idle connection costs
/// hyper about 10 KiB).
pub const MAX_CONNECTIONS: usize = 512;
/// Time a client has to send a whole request head, counted from the connection's start or the
/// end of its previous response: slowloris senders and idle keep-alive connections are closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A write that makes no progress for this long closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (hyper's minimum buffer size).
pub const MAX_REQUEST_HEAD: usize = 8192;
/// Most request headers.
pub const MAX_HEADERS: usize = 32;

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
    crate::render::metrics::write_metrics(&snap, &findings, &gpus, &procs)
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

/// Rewrite the NFD feature file every `every`, one capture at a time with the scrapes.
async fn nfd_loop(path: std::path::PathBuf, every: Duration, node: Arc<tokio::sync::Mutex<Node>>) {
    loop {
        let guard = node.clone().lock_owned().await;
        let p = path.clone();
        let done = tokio::task::spawn_blocking(move || write_whole(&p, &nfd_text(&guard.fs))).await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!(
                "inferscope: note: cannot write --nfd-features {}: {e}",
                path.display()
            ),
            Err(e) => eprintln!("inferscope: note: labels failed: {e}"),
        }
        tokio::time::sleep(every).await;
    }
}

/// What a request may ask for; shared by every connection, used one capture at a time.
struct Node {
    fs: FsRoot,
    sampler: Sampler,
    pids: Vec<u32>,
    all: bool,
    // The last body of each kind and when its capture started. Handed only to requests that
    // arrived before that start, so nothing is stale: a burst of requests queued behind one
    // capture is answered by the next, instead of each waiting for its own.
    last_metrics: Option<(Instant, Bytes)>,
    last_snapshot: Option<(Instant, Bytes)>,
}

impl Node {
    /// The body for `route` from a capture that started at or after `arrived`.
    fn body(&mut self, route: &Route, arrived: Instant) -> Result<Bytes, serde_json::Error> {
        let cached = match route {
            Route::Snapshot => &self.last_snapshot,
            _ => &self.last_metrics,
        };
        if let Some((started, body)) = cached
            && *started >= arrived
        {
            return Ok(body.clone());
        }
        let started = Instant::now();
        let body = match route {
            Route::Snapshot => {
                let snap = inferscope_probe::capture(&self.fs, &super::capture_options());
                let mut v = serde_json::to_vec_pretty(&snap)?;
                v.push(b'\n');
                Bytes::from(v)
            }
            _ => Bytes::from(scrape_under(
                &self.fs,
                &mut self.sampler,
                &self.pids,
                self.all,
            )),
        };
        let slot = match route {
            Route::Snapshot => &mut self.last_snapshot,
            _ => &mut self.last_metrics,
        };
        *slot = Some((started, body.clone()));
        Ok(body)
    }
}

enum Route {
    Metrics,
    Snapshot,
    Healthz,
}

fn response(
    status: StatusCode,
    ctype: &str,
    body: impl Into<Bytes>,
    close: bool,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    if close {
        r.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

async fn respond(
    req: Request<Incoming>,
    node: Arc<tokio::sync::Mutex<Node>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let route = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => Route::Metrics,
        (&Method::GET, "/snapshot") => Route::Snapshot,
        (&Method::GET, "/healthz") => Route::Healthz,
        // Nothing else (docs/SECURITY.md). Close: a body we did not read must not be taken for
        // the next request, and whoever asks for other paths is not a scraper worth keeping.
        _ => {
            return Ok(response(
                StatusCode::NOT_FOUND,
                "text/plain",
                &b"not found\n"[..],
                true,
            ));
        }
    };
    if let Route::Healthz = route {
        return Ok(response(StatusCode::OK, "text/plain", &b"ok\n"[..], false));
    }
    let arrived = Instant::now();
    // One capture at a time, waited for here rather than on a blocking thread each.
    let guard = node.lock_owned().await;
    let ctype = match route {
        Route::Snapshot => "application/json",
        _ => "text/plain; version=0.0.4; charset=utf-8",
    };
    let work = tokio::task::spawn_blocking(move || {
        let mut n = guard;
        n.body(&route, arrived).map(|b| (ctype, b))
    });
    Ok(match work.await {
        Ok(Ok((ctype, body))) => response(StatusCode::OK, ctype, body, false),
        Ok(Err(e)) => {
            eprintln!("inferscope: note: snapshot not serialised: {e}");
            response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                &b"capture failed\n"[..],
                true,
            )
        }
        Err(e) => {
            eprintln!("inferscope: note: capture failed: {e}");
            response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                &b"capture failed\n"[..],
                true,
            )
        }
    })
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    node: Arc<tokio::sync::Mutex<Node>>,
) -> anyhow::Result<ExitCode> {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_REQUEST_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    loop {
        // Waiting for a slot before accepting leaves extra clients in the kernel's backlog.
        let slot = slots.clone().acquire_owned().await?;
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of file descriptors and the like: pause instead of spinning.
                eprintln!("inferscope: note: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let io =
            hyper_util::rt::TokioIo::new(write_timeout::WriteTimeout::new(stream, WRITE_TIMEOUT));
        let node = node.clone();
        let conn = http.serve_connection(
            io,
            hyper::service::service_fn(move |req| respond(req, node.clone())),
        );
        tokio::spawn(async move {
            // Timeouts and resets are how hostile or impatient clients end; not worth a line each.
            let _ = conn.await;
            drop(slot);
        });
    }
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    let lib = std::env::var_os(inferscope_probe::nvml::LIB_ENV);
    let node = Node {
        sampler: Sampler::new(FsRoot::host_mount(&root), lib.as_deref()),
        fs: FsRoot::host_mount(&root),
        pids: args.pids.clone(),
        all: args.all,
        last_metrics: None,
        last_snapshot: None,
    };
    let node = Arc::new(tokio::sync::Mutex::new(node));
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        eprintln!("inferscope: serving metrics on http://{addr}/metrics");
        if let Some(f) = args.nfd_features {
            let every = args.nfd_interval;
            tokio::spawn(nfd_loop(f, every, node.clone()));
        }
        accept_loop(listener, node).await
    })
}
