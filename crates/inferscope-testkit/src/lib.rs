//! Test support for the inferscope workspace (`publish = false`, a dev-dependency only): the one
//! scripted OpenAI-compatible server that every test and benchmark talks to.
//!
//! A raw tokio `TcpListener` on 127.0.0.1:0 speaking enough HTTP/1.1 (keep-alive, chunked
//! responses) to stream tokens on a known schedule and to misbehave in known ways
//! ([`Mode`]). It answers `POST /v1/completions` and `POST /v1/chat/completions` (SSE with a usage
//! chunk, or one JSON body), `GET /v1/models`, `/version`, `/health`, and `/metrics` when given an
//! exposition ([`Script::metrics`]). It records the instant it wrote every token chunk, per
//! response id ([`Truth`]), so tests compare the client's measurements with the truth on the
//! same clock.
//!
//! Servers that must run as a separate process (`tune` starts its "servers" as commands) use
//! `crates/inferscope/tests/scripts/scripted_server.py`, the one out-of-process script
//! (docs/testing.md).

mod flaky;
mod http;
mod modes;

pub use modes::Mode;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::net::TcpListener;

/// The body of `GET /metrics` for the n-th scrape (0, 1, 2, ...).
pub type MetricsFn = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// What the server recorded.
#[derive(Default)]
pub struct Truth {
    /// Response id -> instants at which each token chunk was written.
    pub writes: Mutex<HashMap<String, Vec<Instant>>>,
    /// Completion requests seen (POSTs).
    pub requests: AtomicU64,
    /// TCP connections accepted.
    pub connections: AtomicU64,
    /// `GET /metrics` answered.
    pub scrapes: AtomicU64,
    /// [`Mode::Flaky`]: connections closed between requests (idle limit or use count).
    pub keepalive_closes: AtomicU64,
    /// [`Mode::Flaky`]: responses cut mid-body.
    pub cut: AtomicU64,
    /// Every POST body, in arrival order (not kept by [`Mode::Flaky`]).
    pub bodies: Mutex<Vec<String>>,
}

/// A running scripted server (it lives as long as the test process).
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it recorded.
    pub truth: Arc<Truth>,
}

impl TestServer {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A server to start: a [`Mode`] plus the options every mode shares.
#[derive(Clone)]
pub struct Script {
    mode: Mode,
    model: String,
    metrics: Option<MetricsFn>,
}

/// Options shared by the connection handlers.
#[derive(Clone)]
pub(crate) struct Shared {
    pub model: String,
    pub metrics: Option<MetricsFn>,
    pub truth: Arc<Truth>,
    pub next_id: Arc<AtomicU64>,
    pub epoch: Instant,
}

impl Script {
    /// A server in this mode, listing the model `scripted`, without `/metrics`.
    pub fn new(mode: Mode) -> Script {
        Script {
            mode,
            model: "scripted".into(),
            metrics: None,
        }
    }

    /// The model id `/v1/models` lists.
    pub fn model(mut self, id: &str) -> Script {
        self.model = id.into();
        self
    }

    /// Answer `GET /metrics` with `body(n)` for the n-th scrape (Prometheus text).
    pub fn metrics(mut self, body: impl Fn(u64) -> String + Send + Sync + 'static) -> Script {
        self.metrics = Some(Arc::new(body));
        self
    }

    /// Start on the current tokio runtime.
    pub async fn start(self) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let truth = Arc::new(Truth::default());
        let shared = Shared {
            model: self.model,
            metrics: self.metrics,
            truth: truth.clone(),
            next_id: Arc::new(AtomicU64::new(0)),
            epoch: Instant::now(),
        };
        let mode = self.mode;
        tokio::spawn(async move {
            let mut conns = 0u64;
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let _ = sock.set_nodelay(true);
                conns += 1;
                shared.truth.connections.fetch_add(1, Ordering::Relaxed);
                let (mode, shared, conn_no) = (mode.clone(), shared.clone(), conns);
                tokio::spawn(async move {
                    let _ = modes::serve(sock, mode, shared, conn_no).await;
                });
            }
        });
        TestServer { addr, truth }
    }

    /// Start on a single-threaded runtime in an OS thread of its own, as a separate server
    /// process would be: its timer bursts then do not queue ahead of the client's tasks. The
    /// thread is pinned to the second CPU (clients that measure timing pin theirs to the first).
    pub fn start_in_thread(self) -> TestServer {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            pin_this_thread(1);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            rt.block_on(async move {
                let s = self.start().await;
                let _ = tx.send(s);
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("the server thread started")
    }
}

/// [`Script::start_in_thread`] with the default options.
pub fn start_in_thread(mode: Mode) -> TestServer {
    Script::new(mode).start_in_thread()
}

/// [`Script::start`] with the default options.
pub async fn start(mode: Mode) -> TestServer {
    Script::new(mode).start().await
}

/// The real exposition captured from an engine, `fixtures/server-metrics/<name>.metrics`
/// (`llama-server`, `vllm-0.10.0`; each file names its source).
pub fn metrics_fixture(name: &str) -> String {
    let path = format!(
        "{}/../../fixtures/server-metrics/{name}.metrics",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Pin the calling thread to the `k`-th CPU it may run on, modulo how many there are (best
/// effort: where affinity cannot be read or set, the thread stays where it was). Without it the
/// kernel may wake the client on the server's core and leave it there for milliseconds.
pub fn pin_this_thread(k: usize) {
    // SAFETY: cpu_set_t is plain data (a zeroed one is the empty set); both calls only read and
    // write the set passed, for the calling thread (pid 0).
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        if cpus.is_empty() {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[k % cpus.len()], &mut one);
        libc::sched_setaffinity(0, size, &one);
    }
}
