//! The HTTP side of `inferscope serve --metrics`: serves what a [`Capture`] produces on
//! `GET /metrics` and `GET /snapshot`, and `GET /healthz`; nothing from one capture is served
//! to a request that arrived after that capture started.
//!
//! HTTP is hyper's HTTP/1 server on a single-threaded tokio runtime: many connections at once
//! (up to [`MAX_CONNECTIONS`]; past that, new ones wait in the kernel's backlog), request heads
//! capped at 8 KiB and 32 headers, a 5 s limit to send a request head (which also closes idle
//! keep-alive connections), and a 10 s limit on a write that makes no progress. Captures run
//! one at a time on a blocking thread, so a slow NVML call never stalls the accept loop, and
//! requests that queued behind one capture share the next one (never an older one), so a burst
//! of requests costs at most two captures per path, not one each. Every other path is 404 and
//! closes the connection.

mod write_timeout;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::io::Write;
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

/// What the exporter serves; called one at a time, on a blocking thread.
pub trait Capture: Send + 'static {
    /// The Prometheus text of one scrape.
    fn metrics(&mut self) -> String;
    /// The node's Snapshot as JSON.
    fn snapshot(&mut self) -> Result<Vec<u8>, serde_json::Error>;
}

/// A job run every interval under the same lock as the captures (the NFD feature file): the
/// interval, what to call it in a note if it panics, and the job.
pub type Periodic<C> = (Duration, &'static str, Arc<dyn Fn(&mut C) + Send + Sync>);

/// The capture and the last body of each kind with when its capture started. A body is handed
/// only to requests that arrived before that start, so nothing is stale: a burst of requests
/// queued behind one capture is answered by the next, instead of each waiting for its own.
struct Node<C> {
    capture: C,
    last_metrics: Option<(Instant, Bytes)>,
    last_snapshot: Option<(Instant, Bytes)>,
}

enum Route {
    Metrics,
    Snapshot,
    Healthz,
}

impl<C: Capture> Node<C> {
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
            Route::Snapshot => Bytes::from(self.capture.snapshot()?),
            _ => Bytes::from(self.capture.metrics()),
        };
        let slot = match route {
            Route::Snapshot => &mut self.last_snapshot,
            _ => &mut self.last_metrics,
        };
        *slot = Some((started, body.clone()));
        Ok(body)
    }
}

/// One line on stderr; a closed stderr is not a panic.
fn note(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "inferscope: note: {msg}");
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

async fn respond<C: Capture>(
    req: Request<Incoming>,
    node: Arc<tokio::sync::Mutex<Node<C>>>,
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
    let failed = || {
        response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            &b"capture failed\n"[..],
            true,
        )
    };
    Ok(match work.await {
        Ok(Ok((ctype, body))) => response(StatusCode::OK, ctype, body, false),
        Ok(Err(e)) => {
            note(format_args!("snapshot not serialised: {e}"));
            failed()
        }
        Err(e) => {
            note(format_args!("capture failed: {e}"));
            failed()
        }
    })
}

/// Run `job` every `every` under the captures' lock, so it never runs beside a scrape.
async fn periodic<C: Capture>(job: Periodic<C>, node: Arc<tokio::sync::Mutex<Node<C>>>) {
    let (every, what, job) = job;
    loop {
        let mut guard = node.clone().lock_owned().await;
        let run = job.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || run(&mut guard.capture)).await {
            note(format_args!("{what} failed: {e}"));
        }
        tokio::time::sleep(every).await;
    }
}

async fn accept_loop<C: Capture>(
    listener: tokio::net::TcpListener,
    node: Arc<tokio::sync::Mutex<Node<C>>>,
) -> anyhow::Result<()> {
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
                note(format_args!("accept failed: {e}"));
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

/// Serve `capture` on `listener` (bound, non-blocking) until killed; `job` runs every interval
/// under the captures' lock.
pub fn serve<C: Capture>(
    listener: std::net::TcpListener,
    capture: C,
    job: Option<Periodic<C>>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    let node = Arc::new(tokio::sync::Mutex::new(Node {
        capture,
        last_metrics: None,
        last_snapshot: None,
    }));
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        if let Some(job) = job {
            tokio::spawn(periodic(job, node.clone()));
        }
        accept_loop(listener, node).await
    })
}
