//! A scripted OpenAI-like test server: a raw tokio TcpListener on 127.0.0.1:0 speaking enough
//! HTTP/1.1 (keep-alive, chunked responses) to stream tokens with a known timing, and to
//! misbehave in known ways. It records the instant it wrote every token chunk, per response id,
//! so tests can compare the client's measurements with the truth on the same clock.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server answers completions.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Stream `tokens` tokens: the first after `ttft`, then one every `itl` (absolute schedule
    /// from the request's arrival), then a usage chunk and `[DONE]`.
    Stream {
        ttft: Duration,
        itl: Duration,
        tokens: u32,
        /// Give response n its own phase, (n % 1000)/1000 of `itl`, on one clock shared by all
        /// responses (the server's start): its tokens are written only at that phase, the first
        /// one at the earliest such instant ≥ arrival + `ttft`. 1000 streams then write exactly
        /// evenly, 1000/`itl` chunks per second, however their requests arrived (phases relative
        /// to each arrival bunched up to 4× the mean rate in one millisecond).
        stagger: bool,
    },
    /// 200 text/event-stream with HTML in the body, then close.
    Garbage,
    /// 200 text/event-stream with random non-UTF-8 bytes.
    Binary,
    /// A token every 20 ms, forever.
    NeverEnds,
    /// Two tokens, then a TCP reset.
    Reset,
    /// `data: ` followed by this many bytes without a newline, written in 64 KiB pieces.
    HugeLine(usize),
    /// HTTP 503 with a JSON error.
    Status503,
    /// Accept, read the request, then say nothing (idle).
    Silent,
    /// Stream these text pieces, one SSE chunk each (a piece may hold several tokens, as SGLang
    /// and TGI send under load), then `finish_reason` and `[DONE]`, without any usage.
    Pieces(Vec<&'static str>),
    /// One non-streamed completion with this text and no usage (older TGI, some proxies).
    Whole(&'static str),
    /// A healthy server that closes keep-alive connections as servers do, at the worst moments:
    /// a connection waits for its next request at most a random 0..`idle_max` (then is closed,
    /// like cpp-httplib's 5 s keep-alive timeout in llama-server, only far shorter so the races
    /// happen thousands of times a second); after a random 1..=`max_uses` responses (none says
    /// `Connection: close`) it is closed as the next request arrives, unread, which is what the
    /// client sees when it loses that race. Each answer streams `tokens` tokens at once. Every
    /// `cut_every`-th request (0 = none) is a genuine interruption: headers and one token, then
    /// the connection is closed mid-body.
    Flaky {
        tokens: u32,
        idle_max: Duration,
        max_uses: u32,
        cut_every: u64,
    },
}

/// What the server recorded.
#[derive(Default)]
pub struct Truth {
    /// Response id -> instants at which each token chunk was written.
    pub writes: Mutex<HashMap<String, Vec<Instant>>>,
    /// Requests seen.
    pub requests: AtomicU64,
    /// [`Mode::Flaky`]: connections closed between requests (idle limit or use count).
    pub keepalive_closes: AtomicU64,
    /// [`Mode::Flaky`]: responses cut mid-body.
    pub cut: AtomicU64,
    /// Every POST body, in arrival order (not kept by [`Mode::Flaky`]).
    pub bodies: Mutex<Vec<String>>,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub truth: Arc<Truth>,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Start the server on its own single-threaded runtime in its own OS thread, as a separate
/// server process would be: its timer bursts then do not queue ahead of the client's tasks.
pub fn start_in_thread(mode: Mode) -> TestServer {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // The server gets a core of its own (the client's timing tests pin theirs to CPU 0), as
        // in the client-cost measurements: one core for the server, one for the client.
        pin_this_thread(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let s = start(mode).await;
            tx.send(s).unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv().unwrap()
}

/// Start the server on the current tokio runtime.
pub async fn start(mode: Mode) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let truth = Arc::new(Truth::default());
    let t = truth.clone();
    let epoch = Instant::now();
    tokio::spawn(async move {
        let next_id = Arc::new(AtomicU64::new(0));
        let mut conns = 0u64;
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let _ = sock.set_nodelay(true);
            let (mode, t, next_id) = (mode.clone(), t.clone(), next_id.clone());
            conns += 1;
            let conn_no = conns;
            tokio::spawn(async move {
                let _ = match mode {
                    Mode::Flaky { .. } => serve_flaky(sock, mode, t, next_id, conn_no).await,
                    _ => serve_conn(sock, mode, t, next_id, epoch).await,
                };
            });
        }
    });
    TestServer { addr, truth }
}

/// Read one request; returns (method, path) or None at EOF.
async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<(String, String)>> {
    Ok(read_request_body(sock, buf).await?.map(|(m, p, _)| (m, p)))
}

/// Read one request; returns (method, path, body) or None at EOF.
async fn read_request_body(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<(String, String, String)>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let first = lines.next().unwrap_or("");
            let mut parts = first.split(' ');
            let method = parts.next().unwrap_or("").to_string();
            let path = parts.next().unwrap_or("").to_string();
            let len: usize = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            let total = end + 4 + len;
            while buf.len() < total {
                let mut tmp = [0u8; 8192];
                let n = sock.read(&mut tmp).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..total]).into_owned();
            buf.drain(..total);
            return Ok(Some((method, path, body)));
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// Serve one connection of the scripted server: one arm per [`Mode`] of misbehaviour. One piece
/// (~155 lines): each arm is a short, separate script; splitting them would hide the catalogue of
/// failures the client tests rely on.
async fn serve_conn(
    mut sock: TcpStream,
    mode: Mode,
    truth: Arc<Truth>,
    next_id: Arc<AtomicU64>,
    epoch: Instant,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some((method, path, body)) = read_request_body(&mut sock, &mut buf).await? {
        let arrived = Instant::now();
        if method == "POST" {
            truth.bodies.lock().unwrap().push(body);
        }
        if method == "GET" {
            let body = if path == "/v1/models" {
                r#"{"object":"list","data":[{"id":"scripted","object":"model"}]}"#
            } else if path == "/version" {
                r#"{"version":"scripted-1.0"}"#
            } else {
                let resp = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
                sock.write_all(resp.as_bytes()).await?;
                continue;
            };
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await?;
            continue;
        }
        truth.requests.fetch_add(1, Ordering::Relaxed);
        let id = format!("cmpl-{}", next_id.fetch_add(1, Ordering::Relaxed));
        match &mode {
            Mode::Stream {
                ttft,
                itl,
                tokens,
                stagger,
            } => {
                sock.write_all(SSE_HEAD).await?;
                let mut times = Vec::with_capacity(*tokens as usize);
                let n: u64 = id[5..].parse().unwrap_or(0);
                let earliest = arrived + *ttft;
                let first = if *stagger && !itl.is_zero() {
                    let phase = itl.mul_f64((n % 1000) as f64 / 1000.0);
                    let period = itl.as_nanos();
                    let since = earliest.duration_since(epoch).as_nanos();
                    let phase_ns = phase.as_nanos();
                    // The earliest instant ≥ `earliest` at this response's phase of the period.
                    let k = (since + period - phase_ns).div_ceil(period);
                    let at = phase_ns + k * period - period;
                    epoch + Duration::from_nanos(u64::try_from(at).unwrap_or(u64::MAX))
                } else {
                    earliest
                };
                let first = tokio::time::Instant::from_std(first);
                for i in 0..*tokens {
                    tokio::time::sleep_until(first + *itl * i).await;
                    let data = format!(
                        "data: {{\"id\":\"{id}\",\"choices\":[{{\"index\":0,\"text\":\" tok{i}\",\"finish_reason\":null}}]}}\n\n"
                    );
                    let c = chunk(data.as_bytes());
                    times.push(Instant::now());
                    sock.write_all(&c).await?;
                }
                let tail = format!(
                    "data: {{\"id\":\"{id}\",\"choices\":[{{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{tokens}}}}}\n\ndata: [DONE]\n\n"
                );
                // Record the truth before the final chunk: once the client has seen `[DONE]` the
                // test may read it, and on a loaded machine this thread can lag behind.
                truth
                    .writes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, times);
                let mut out = chunk(tail.as_bytes());
                out.extend_from_slice(b"0\r\n\r\n");
                sock.write_all(&out).await?;
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
            Mode::NeverEnds => {
                sock.write_all(SSE_HEAD).await?;
                loop {
                    let data =
                        format!("data: {{\"id\":\"{id}\",\"choices\":[{{\"text\":\"x\"}}]}}\n\n");
                    sock.write_all(&chunk(data.as_bytes())).await?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Mode::Reset => {
                sock.write_all(SSE_HEAD).await?;
                for _ in 0..2 {
                    let data =
                        format!("data: {{\"id\":\"{id}\",\"choices\":[{{\"text\":\"x\"}}]}}\n\n");
                    sock.write_all(&chunk(data.as_bytes())).await?;
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
                let resp = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                sock.write_all(resp.as_bytes()).await?;
            }
            Mode::Silent => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Mode::Pieces(pieces) => {
                sock.write_all(SSE_HEAD).await?;
                for p in pieces {
                    let data = format!(
                        "data: {}\n\n",
                        serde_json::json!({"id": id, "choices": [{"index": 0, "text": p, "finish_reason": null}]})
                    );
                    sock.write_all(&chunk(data.as_bytes())).await?;
                }
                let tail = format!(
                    "data: {}\n\ndata: [DONE]\n\n",
                    serde_json::json!({"id": id, "choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
                );
                let mut out = chunk(tail.as_bytes());
                out.extend_from_slice(b"0\r\n\r\n");
                sock.write_all(&out).await?;
            }
            // Served by `serve_flaky`.
            Mode::Flaky { .. } => return Ok(()),
            Mode::Whole(text) => {
                let body = serde_json::json!({"id": id, "choices": [{"index": 0, "text": text, "finish_reason": "length"}]})
                    .to_string();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                sock.write_all(resp.as_bytes()).await?;
            }
        }
    }
    Ok(())
}

/// splitmix64: the flaky server's per-connection randomness, reproducible per seed.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Serve one connection of [`Mode::Flaky`]. A connection is only ever closed between requests
/// (before reading the next one: the request that raced the close was never processed) or, for
/// a cut, after the response started.
async fn serve_flaky(
    mut sock: TcpStream,
    mode: Mode,
    truth: Arc<Truth>,
    next_id: Arc<AtomicU64>,
    seed: u64,
) -> std::io::Result<()> {
    let Mode::Flaky {
        tokens,
        idle_max,
        max_uses,
        cut_every,
    } = mode
    else {
        return Ok(());
    };
    let mut rng = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x1234_5678;
    let uses = 1 + splitmix(&mut rng) % u64::from(max_uses.max(1));
    let mut buf = Vec::new();
    let mut served = 0u64;
    loop {
        let req = if served == 0 {
            read_request(&mut sock, &mut buf).await?
        } else {
            let idle_ns = u64::try_from(idle_max.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1);
            let idle = Duration::from_nanos(splitmix(&mut rng) % idle_ns);
            tokio::select! {
                r = read_request(&mut sock, &mut buf) => r?,
                () = tokio::time::sleep(idle) => {
                    truth.keepalive_closes.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
        };
        let Some((method, path)) = req else {
            return Ok(());
        };
        if method == "GET" {
            let body = if path == "/v1/models" {
                r#"{"object":"list","data":[{"id":"scripted","object":"model"}]}"#
            } else {
                r#"{"version":"scripted-1.0"}"#
            };
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await?;
            continue;
        }
        let n = truth.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("cmpl-{}", next_id.fetch_add(1, Ordering::Relaxed));
        let token = |i: u32| {
            chunk(format!("data: {{\"id\":\"{id}\",\"choices\":[{{\"index\":0,\"text\":\" tok{i}\",\"finish_reason\":null}}]}}\n\n").as_bytes())
        };
        let mut out = SSE_HEAD.to_vec();
        out.extend(token(0));
        if cut_every > 0 && n.is_multiple_of(cut_every) {
            sock.write_all(&out).await?;
            sock.flush().await?;
            truth.cut.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        for i in 1..tokens {
            out.extend(token(i));
        }
        let tail = format!(
            "data: {{\"id\":\"{id}\",\"choices\":[{{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{tokens}}}}}\n\ndata: [DONE]\n\n"
        );
        out.extend(chunk(tail.as_bytes()));
        out.extend_from_slice(b"0\r\n\r\n");
        sock.write_all(&out).await?;
        served += 1;
        if served >= uses {
            // Its last response ended normally, without `Connection: close`. The close then comes
            // the moment the next request arrives, unread (a reset): the outcome of the client
            // losing the race between the server's idle close and its reuse, forced here instead
            // of waited for. The request was never processed.
            let _ = sock.peek(&mut [0u8; 1]).await;
            truth.keepalive_closes.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    }
}

/// The client's runtime, as the product builds it (one thread): the tests measure what users run.
pub fn runtime() -> tokio::runtime::Runtime {
    inferscope_bench::run::client_runtime().unwrap()
}

/// Completions requests to the scripted server, with these time limits.
pub fn completions(
    stream: bool,
    timeout: Duration,
    idle_timeout: Duration,
) -> inferscope_bench::client::RequestSettings {
    inferscope_bench::client::RequestSettings {
        api: inferscope_bench::client::Api::Completions,
        model: "scripted".into(),
        stream,
        ignore_eos: true,
        temperature: 0.0,
        timeout,
        idle_timeout,
    }
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
