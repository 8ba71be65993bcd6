//! The catalogue of behaviours ([`Mode`]) and the connection handler that plays them.

use crate::http::{Request, SSE_HEAD, chunk, done, event, read_request, respond, whole};
use crate::{Shared, flaky};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Token schedule of [`Mode::Paced`]: the offsets from the request's arrival at which each
/// token is written (one call per request).
pub type PaceFn = Arc<dyn Fn() -> Vec<Duration> + Send + Sync>;

/// How the server answers completions (and chat completions).
#[derive(Clone)]
pub enum Mode {
    /// Stream `tokens` tokens: the first after `ttft`, then one every `itl` (absolute schedule
    /// from the request's arrival), then a usage chunk and `[DONE]`.
    Stream {
        /// Time to the first token.
        ttft: Duration,
        /// Time between tokens.
        itl: Duration,
        /// Tokens per answer.
        tokens: u32,
        /// Give response n its own phase, (n % 1000)/1000 of `itl`, on one clock shared by all
        /// responses (the server's start): its tokens are written only at that phase, the first
        /// one at the earliest such instant ≥ arrival + `ttft`. 1000 streams then write exactly
        /// evenly, 1000/`itl` chunks per second, however their requests arrived (phases relative
        /// to each arrival bunched up to 4× the mean rate in one millisecond).
        stagger: bool,
    },
    /// Stream one token at each offset (from the request's arrival) the function returns, then
    /// usage and `[DONE]`: a server of any speed model, noise included.
    Paced(PaceFn),
    /// A server of known service time: `Mode::slots(n, s, k)`. N slots serve requests first
    /// come, first served; each request holds one for exactly S, then streams its K tokens at
    /// once. It completes at most N/S requests per second, and a request's time to first token
    /// is its wait for a slot plus S. Not a model of any engine's scheduler.
    Slots {
        /// The slots (a fair semaphore: waiters are served in arrival order).
        queue: Arc<Semaphore>,
        /// How long a request holds a slot.
        service: Duration,
        /// Tokens per answer.
        tokens: u32,
    },
    /// Stream the request's `max_tokens` (16 without) at once, each token its own chunk and its
    /// own write (as vLLM and llama.cpp send them), no pacing: a server that is not the
    /// bottleneck.
    Flood,
    /// 200 text/event-stream with HTML in the body, then close.
    Garbage,
    /// 200 text/event-stream with random non-UTF-8 bytes.
    Binary,
    /// A token every `.0`, forever.
    NeverEnds(Duration),
    /// Two tokens, then a TCP reset.
    Reset,
    /// `data: ` followed by this many bytes without a newline, written in 64 KiB pieces.
    HugeLine(usize),
    /// HTTP 503 with a JSON error.
    Status503,
    /// HTTP 404 to every request, `/v1/models` included, closing each connection.
    NotFound,
    /// `/v1/models` answers; every completion is a 302 to this URL.
    Redirect(String),
    /// Accept, read the request, then say nothing (idle).
    Silent,
    /// Stream these text pieces, one SSE chunk each (a piece may hold several tokens, as some
    /// servers send under load), then `finish_reason` and `[DONE]`, without any usage.
    Pieces(Vec<&'static str>),
    /// One non-streamed completion with this text and no usage (older TGI, some proxies).
    Whole(&'static str),
    /// Answer every connection's first request with these exact bytes, then close (an exporter
    /// or proxy of any shape).
    Raw(Arc<Vec<u8>>),
    /// Answer every connection's first request with `head`, then `piece` again and again until
    /// `limit` bytes of pieces are written (`None`: until the client leaves), then close: an
    /// endless, over-declared or oversized body.
    Endless {
        /// Status line, headers and the start of the body.
        head: Arc<Vec<u8>>,
        /// What is repeated (already framed, e.g. as a chunk).
        piece: Arc<Vec<u8>>,
        /// Bytes of pieces to write at most.
        limit: Option<usize>,
    },
    /// A healthy server that closes keep-alive connections as servers do, at the worst moments:
    /// a connection waits for its next request at most a random 0..`idle_max` (then is closed,
    /// like cpp-httplib's 5 s keep-alive timeout in llama-server, only far shorter so the races
    /// happen thousands of times a second); after a random 1..=`max_uses` responses (none says
    /// `Connection: close`) it is closed as the next request arrives, unread, which is what the
    /// client sees when it loses that race. Each answer streams `tokens` tokens at once. Every
    /// `cut_every`-th request (0 = none) is a genuine interruption: headers and one token, then
    /// the connection is closed mid-body.
    Flaky {
        /// Tokens per answer.
        tokens: u32,
        /// Longest wait for a connection's next request.
        idle_max: Duration,
        /// Most responses per connection.
        max_uses: u32,
        /// Cut every n-th response (0 = none).
        cut_every: u64,
    },
}

impl Mode {
    /// [`Mode::Slots`] with `slots` slots.
    pub fn slots(slots: usize, service: Duration, tokens: u32) -> Mode {
        Mode::Slots {
            queue: Arc::new(Semaphore::new(slots)),
            service,
            tokens,
        }
    }
}

/// Serve one connection.
pub(crate) async fn serve(
    sock: TcpStream,
    mode: Mode,
    shared: Shared,
    conn_no: u64,
) -> std::io::Result<()> {
    match mode {
        Mode::Flaky { .. } => flaky::serve(sock, mode, shared, conn_no).await,
        _ => serve_conn(sock, mode, shared).await,
    }
}

/// Answer a GET: models, version, health, metrics (when scripted), else 404.
pub(crate) async fn get(
    sock: &mut TcpStream,
    req: &Request,
    shared: &Shared,
) -> std::io::Result<()> {
    const JSON: &str = "application/json";
    match req.path.as_str() {
        "/v1/models" => {
            let body = serde_json::json!({"object": "list", "data": [{"id": shared.model, "object": "model"}]});
            respond(sock, "200 OK", JSON, &body.to_string()).await
        }
        "/version" => respond(sock, "200 OK", JSON, r#"{"version":"scripted-1.0"}"#).await,
        "/health" => respond(sock, "200 OK", JSON, r#"{"status":"ok"}"#).await,
        "/metrics" if shared.metrics.is_some() => {
            let n = shared.truth.scrapes.fetch_add(1, Ordering::SeqCst);
            let body = shared.metrics.as_ref().map(|f| f(n)).unwrap_or_default();
            respond(sock, "200 OK", "text/plain; version=0.0.4", &body).await
        }
        _ => respond(sock, "404 Not Found", "text/plain", "").await,
    }
}

/// Serve one connection in any mode but [`Mode::Flaky`]: one arm per behaviour. One piece: each
/// arm is a short, separate script; splitting them would hide the catalogue the tests rely on.
async fn serve_conn(mut sock: TcpStream, mode: Mode, shared: Shared) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let truth = shared.truth.clone();
    while let Some(req) = read_request(&mut sock, &mut buf).await? {
        let arrived = Instant::now();
        match &mode {
            Mode::Raw(bytes) => {
                sock.write_all(bytes).await?;
                return Ok(());
            }
            Mode::Endless { head, piece, limit } => {
                sock.write_all(head).await?;
                let mut sent = 0usize;
                while limit.is_none_or(|l| sent < l) {
                    sock.write_all(piece).await?;
                    sent += piece.len();
                }
                return Ok(());
            }
            Mode::NotFound => {
                let resp =
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                sock.write_all(resp).await?;
                return Ok(());
            }
            _ => {}
        }
        if req.method == "GET" {
            get(&mut sock, &req, &shared).await?;
            continue;
        }
        truth
            .bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.body.clone());
        truth.requests.fetch_add(1, Ordering::Relaxed);
        let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("cmpl-{n}");
        let chat = req.chat();
        match &mode {
            Mode::Stream {
                ttft,
                itl,
                tokens,
                stagger,
            } => {
                let earliest = arrived + *ttft;
                let first = if *stagger && !itl.is_zero() {
                    staggered(earliest, *itl, n, shared.epoch)
                } else {
                    earliest
                };
                let at: Vec<Instant> = (0..*tokens).map(|i| first + *itl * i).collect();
                stream_at(&mut sock, &shared, &id, chat, &at).await?;
            }
            Mode::Paced(pace) => {
                let at: Vec<Instant> = pace().into_iter().map(|d| arrived + d).collect();
                stream_at(&mut sock, &shared, &id, chat, &at).await?;
            }
            Mode::Slots {
                queue,
                service,
                tokens,
            } => {
                let slot = queue.acquire().await;
                tokio::time::sleep(*service).await;
                drop(slot);
                let now = Instant::now();
                stream_at(&mut sock, &shared, &id, chat, &vec![now; *tokens as usize]).await?;
            }
            Mode::Flood => {
                sock.write_all(SSE_HEAD).await?;
                let tokens = req.max_tokens().unwrap_or(16);
                for i in 0..tokens {
                    sock.write_all(&event(&id, chat, &format!(" t{i}"), None, None))
                        .await?;
                }
                let mut tail = event(&id, chat, "", Some("length"), Some(tokens));
                tail.extend(done());
                sock.write_all(&tail).await?;
            }
            Mode::Garbage => {
                let body = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n<html><body>502 Bad Gateway</body></html>\n\n";
                sock.write_all(body).await?;
                return Ok(());
            }
            Mode::Binary => {
                sock.write_all(SSE_HEAD).await?;
                sock.write_all(&chunk(b"data: \xff\xfe\xfd garbage\n\n"))
                    .await?;
                sock.write_all(b"0\r\n\r\n").await?;
            }
            Mode::NeverEnds(every) => {
                sock.write_all(SSE_HEAD).await?;
                loop {
                    sock.write_all(&event(&id, chat, "x", None, None)).await?;
                    tokio::time::sleep(*every).await;
                }
            }
            Mode::Reset => {
                sock.write_all(SSE_HEAD).await?;
                for _ in 0..2 {
                    sock.write_all(&event(&id, chat, "x", None, None)).await?;
                }
                sock.flush().await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
                // SO_LINGER 0: close sends RST instead of FIN.
                let _ = sock.set_zero_linger();
                return Ok(());
            }
            Mode::HugeLine(n) => {
                sock.write_all(SSE_HEAD).await?;
                sock.write_all(&chunk(b"data: ")).await?;
                let piece = vec![b'x'; 64 * 1024];
                let mut left = *n;
                while left > 0 {
                    let k = left.min(piece.len());
                    sock.write_all(&chunk(&piece[..k])).await?;
                    left -= k;
                }
                sock.write_all(&chunk(b"\n\n")).await?;
                sock.write_all(b"0\r\n\r\n").await?;
            }
            Mode::Status503 => {
                let body = r#"{"error":{"message":"overloaded"}}"#;
                respond(
                    &mut sock,
                    "503 Service Unavailable",
                    "application/json",
                    body,
                )
                .await?;
            }
            Mode::Redirect(target) => {
                let resp = format!(
                    "HTTP/1.1 302 Found\r\nlocation: {target}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                sock.write_all(resp.as_bytes()).await?;
                return Ok(());
            }
            Mode::Silent => tokio::time::sleep(Duration::from_secs(3600)).await,
            Mode::Pieces(pieces) => {
                sock.write_all(SSE_HEAD).await?;
                for p in pieces {
                    sock.write_all(&event(&id, chat, p, None, None)).await?;
                }
                let mut tail = event(&id, chat, "", Some("length"), None);
                tail.extend(done());
                sock.write_all(&tail).await?;
            }
            Mode::Whole(text) => {
                respond(
                    &mut sock,
                    "200 OK",
                    "application/json",
                    &whole(&id, chat, text),
                )
                .await?;
            }
            Mode::Raw(_) | Mode::Endless { .. } | Mode::NotFound | Mode::Flaky { .. } => {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The earliest instant ≥ `earliest` at response n's phase, (n % 1000)/1000 of `itl`, on the
/// clock that started at `epoch`.
fn staggered(earliest: Instant, itl: Duration, n: u64, epoch: Instant) -> Instant {
    let phase = itl.mul_f64((n % 1000) as f64 / 1000.0).as_nanos();
    let period = itl.as_nanos();
    let since = earliest.duration_since(epoch).as_nanos();
    let k = (since + period - phase).div_ceil(period);
    let at = phase + k * period - period;
    epoch + Duration::from_nanos(u64::try_from(at).unwrap_or(u64::MAX))
}

/// Stream one token ` tok{i}` at each instant, record when each was written, then usage and
/// `[DONE]`.
async fn stream_at(
    sock: &mut TcpStream,
    shared: &Shared,
    id: &str,
    chat: bool,
    at: &[Instant],
) -> std::io::Result<()> {
    sock.write_all(SSE_HEAD).await?;
    let mut times = Vec::with_capacity(at.len());
    for (i, t) in at.iter().enumerate() {
        if *t > Instant::now() {
            tokio::time::sleep_until(tokio::time::Instant::from_std(*t)).await;
        }
        let c = event(id, chat, &format!(" tok{i}"), None, None);
        times.push(Instant::now());
        sock.write_all(&c).await?;
    }
    let tokens = u32::try_from(at.len()).unwrap_or(u32::MAX);
    // Record the truth before the final chunk: once the client has seen `[DONE]` the test may
    // read it, and on a loaded machine this thread can lag behind.
    shared
        .truth
        .writes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.to_string(), times);
    let mut tail = event(id, chat, "", Some("length"), Some(tokens));
    tail.extend(done());
    sock.write_all(&tail).await
}
