//! One request to an OpenAI-compatible server, recording what happened.
//!
//! Tolerates the variants of the engines' OpenAI-compatible servers: usage in a final
//! chunk (`stream_options.include_usage`, with `choices: []`), `[DONE]` or none, role-only or
//! empty deltas, several tokens per chunk, keep-alive comments, `reasoning_content` deltas, and
//! in-band errors (`event: error`, llama.cpp's `error:` field, or `{"error": ...}` data).
//!
//! Each network chunk is time-stamped once, as it is taken from the socket, before parsing; every
//! content-bearing event in it gets that time. Request bodies are serialised once per prompt
//! ([`body`]) so the hot path does no JSON encoding. A request is bounded by `timeout` (total),
//! `idle_timeout` (between network chunks), the SSE caps (1 MiB per line and event), a 16 MiB cap
//! on non-streamed and error bodies, and the run's abort signal.

use crate::dataset::Prompt;
use crate::record::{ErrorClass, RequestRecord, truncate};
use crate::sse::{SseError, SseEvent, SseParser};
use crate::tokenizer::{MAX_COUNTED_TEXT, TokenCounter};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest non-streamed (or error) body read.
pub const MAX_BODY: usize = 16 << 20;

/// Which OpenAI endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/completions` with `prompt`.
    Completions,
    /// `/v1/chat/completions` with one user message.
    Chat,
}

/// An `--api` value other than completions or chat.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown api `{0}`: expected completions or chat")]
pub struct UnknownApi(pub String);

impl std::str::FromStr for Api {
    type Err = UnknownApi;
    fn from_str(s: &str) -> Result<Self, UnknownApi> {
        match s {
            "completions" => Ok(Api::Completions),
            "chat" => Ok(Api::Chat),
            o => Err(UnknownApi(o.into())),
        }
    }
}

impl Api {
    /// Path under the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }
}

/// What each request looks like.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSettings {
    /// Endpoint kind.
    pub api: Api,
    /// Model name sent in the body.
    pub model: String,
    /// Stream (SSE) or not.
    pub stream: bool,
    /// Send `ignore_eos: true` and `min_tokens = max_tokens` so outputs are as long as asked
    /// (vLLM, llama.cpp and servers that take vLLM's sampling fields honour these; others ignore
    /// unknown fields).
    pub ignore_eos: bool,
    /// Sampling temperature sent.
    pub temperature: f64,
    /// Total time allowed per request.
    #[serde(with = "crate::record::duration_ms")]
    pub timeout: Duration,
    /// Longest silence allowed between network chunks.
    #[serde(with = "crate::record::duration_ms")]
    pub idle_timeout: Duration,
}

/// The JSON body for one prompt (pure).
pub fn body(s: &RequestSettings, p: &Prompt) -> Bytes {
    match s.api {
        Api::Completions => body_with(s, None, Some(p.text.clone()), p.max_tokens),
        Api::Chat => chat_body(
            s,
            serde_json::json!([{"role": "user", "content": p.text}]),
            p.max_tokens,
        ),
    }
}

/// The chat body for these `messages` (pure), whatever `--api` says.
pub fn chat_body(s: &RequestSettings, messages: serde_json::Value, max_tokens: u32) -> Bytes {
    body_with(s, Some(messages), None, max_tokens)
}

fn body_with(
    s: &RequestSettings,
    messages: Option<serde_json::Value>,
    prompt: Option<String>,
    max_tokens: u32,
) -> Bytes {
    let mut v = serde_json::Map::new();
    v.insert("model".into(), s.model.clone().into());
    if let Some(p) = prompt {
        v.insert("prompt".into(), p.into());
    }
    if let Some(m) = messages {
        v.insert("messages".into(), m);
        // Newer servers read max_completion_tokens; older ones only max_tokens.
        v.insert("max_completion_tokens".into(), max_tokens.into());
    }
    v.insert("max_tokens".into(), max_tokens.into());
    v.insert("temperature".into(), s.temperature.into());
    v.insert("stream".into(), s.stream.into());
    if s.stream {
        v.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    if s.ignore_eos {
        v.insert("ignore_eos".into(), true.into());
        v.insert("min_tokens".into(), max_tokens.into());
    }
    Bytes::from(serde_json::Value::Object(v).to_string())
}

/// A configured HTTP client and endpoint.
#[derive(Debug, Clone)]
pub struct Target {
    client: reqwest::Client,
    /// Connections used once and closed, for the one re-send of a request that met a pooled
    /// connection the server had closed (see [`Target::send_keep`]).
    fresh: Option<reqwest::Client>,
    endpoint: String,
    settings: RequestSettings,
    tokenizer: Option<Arc<TokenCounter>>,
    keep_text: bool,
    /// Endpoints after the first (`--url A --url B ...`), and how requests are spread.
    replicas: Vec<String>,
    spread: Option<Arc<crate::replicas::Spread>>,
}

/// The HTTP client could not be built (TLS back-end or system resolver set-up).
#[derive(Debug, thiserror::Error)]
#[error("cannot build HTTP client: {0}")]
pub struct ClientBuildError(#[source] pub reqwest::Error);

/// Longest a pooled connection may sit idle and still be reused: below the servers' own idle
/// close, so a connection the server is closing at that very moment is not taken from the pool.
/// llama-server closes after 5 s (cpp-httplib `CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND`, vendored in
/// llama.cpp's vendor/cpp-httplib/httplib.h, counted from the end of the last response; also its
/// `CPPHTTPLIB_KEEPALIVE_MAX_COUNT` 100, announced with `Connection: close`); vLLM's uvicorn
/// after `VLLM_HTTP_TIMEOUT_KEEP_ALIVE` = 5 s (vllm/envs.py), uvicorn's own default (servers that
/// keep it) 5 s.
/// reqwest's own default is 90 s.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// Build the HTTP client: no proxies (load goes only to the URL given), `TCP_NODELAY`, a pool
/// sized to the concurrency whose idle connections expire after [`POOL_IDLE_TIMEOUT`].
pub fn http_client(
    pool: usize,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ClientBuildError> {
    builder(pool, connect_timeout)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build()
        .map_err(ClientBuildError)
}

fn builder(pool: usize, connect_timeout: Duration) -> reqwest::ClientBuilder {
    #[cfg(feature = "tls")]
    {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .no_proxy()
        // Load goes only to the URL the user gave: a redirect must not send it elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .tcp_nodelay(true)
        .pool_max_idle_per_host(pool)
        .connect_timeout(connect_timeout)
}

/// Strip a trailing `/` and a trailing `/v1` so `http://h:p`, `http://h:p/` and `http://h:p/v1`
/// all work.
pub fn base_url(url: &str) -> String {
    let u = url.trim().trim_end_matches('/');
    u.strip_suffix("/v1").unwrap_or(u).to_string()
}

impl Target {
    /// A target at `base` (see [`base_url`]).
    pub fn new(client: reqwest::Client, base: &str, settings: RequestSettings) -> Self {
        // The same settings without a pool. Should it fail to build (it cannot where `client`
        // was built), the re-send uses the pool as before.
        let fresh = builder(0, settings.timeout).build().ok();
        Target {
            endpoint: format!("{}{}", base_url(base), settings.api.path()),
            client,
            fresh,
            settings,
            tokenizer: None,
            keep_text: false,
            replicas: Vec::new(),
            spread: None,
        }
    }

    /// Spread requests over `bases` besides this target's own base URL (see
    /// [`crate::replicas`]); records then carry their endpoint's index.
    pub fn with_replicas(mut self, bases: &[String], balance: crate::replicas::Balance) -> Self {
        if bases.is_empty() {
            return self;
        }
        self.replicas = bases
            .iter()
            .map(|b| format!("{}{}", base_url(b), self.settings.api.path()))
            .collect();
        self.spread = Some(Arc::new(crate::replicas::Spread::new(
            bases.len() + 1,
            balance,
        )));
        self
    }

    /// Keep every completed response's generated text in the record (multi-turn sessions
    /// re-send it).
    pub fn keeping_text(mut self) -> Self {
        self.keep_text = true;
        self
    }

    /// Keep every completed response's generated text for this tokenizer, which counts it after
    /// the run into [`RequestRecord::tokenizer_output_tokens`] (used when the server reports no
    /// usage).
    pub fn with_tokenizer(mut self, tokenizer: Arc<TokenCounter>) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// The request settings.
    pub fn settings(&self) -> &RequestSettings {
        &self.settings
    }

    /// The tokenizer that counts generated text after the run, if any.
    pub fn tokenizer(&self) -> Option<&Arc<TokenCounter>> {
        self.tokenizer.as_ref()
    }

    /// Send one request and fill `rec` (status, chunks, usage, end, error). Never panics, never
    /// outlives `settings.timeout`. What is left of the body after the response ended (`[DONE]`)
    /// is handed back instead of read: the caller delivers the record first and then calls
    /// [`Leftover::drain`] (short, bounded), so the connection goes back to the pool off the
    /// measured path.
    pub async fn send_keep(
        &self,
        body: Bytes,
        rec: &mut RequestRecord,
        t0: Instant,
    ) -> Option<Leftover> {
        let deadline = tokio::time::Instant::from_std(t0)
            + Duration::from_micros(rec.sent_us)
            + self.settings.timeout;
        // Generated text is kept only for a tokenizer to count it or a session to re-send it.
        let mut text = (self.tokenizer.is_some() || self.keep_text).then(GeneratedText::default);
        let pick = self.spread.as_ref().map(|s| s.pick(rec.seq));
        let endpoint = match pick {
            Some(i) => {
                rec.endpoint = Some(i as u32);
                i.checked_sub(1)
                    .and_then(|j| self.replicas.get(j))
                    .unwrap_or(&self.endpoint)
            }
            None => &self.endpoint,
        };
        let r =
            tokio::time::timeout_at(deadline, self.exchange(endpoint, body, rec, t0, &mut text))
                .await;
        if let (Some(s), Some(i)) = (&self.spread, pick) {
            s.done(i);
        }
        rec.end_us = now_us(t0);
        let (r, rest) = match r {
            Ok(Ok(rest)) => (Ok(Ok(())), rest),
            Ok(Err(e)) => (Ok(Err(e)), None),
            Err(e) => (Err(e), None),
        };
        if let Some(l) = &rest {
            // The response ended at `[DONE]`, not when the chunked terminator was read.
            rec.end_us = l.end_us;
        }
        if let Some(GeneratedText {
            text,
            complete: true,
        }) = text
            && matches!(r, Ok(Ok(())))
        {
            // Counted after the run, not here: on the client's one thread, tokenizing a long
            // answer would delay every other stream's chunks and so their timestamps.
            rec.generated_text = Some(text);
        }
        match r {
            Ok(Ok(())) => {}
            Ok(Err((class, detail))) => rec.fail(class, detail),
            Err(_) => rec.fail(
                ErrorClass::Timeout,
                format!("no complete response within {:?}", self.settings.timeout),
            ),
        }
        rest
    }

    async fn exchange(
        &self,
        endpoint: &str,
        body: Bytes,
        rec: &mut RequestRecord,
        t0: Instant,
        text: &mut Option<GeneratedText>,
    ) -> Result<Option<Leftover>, (ErrorClass, String)> {
        // A pooled keep-alive connection the server closed as it was reused (its idle timeout
        // fired as the request went out) fails before any response byte: the server closed
        // instead of reading the request, so it is sent once more. On a new connection, not the
        // pool: the pool may hold more connections that idled as long and are closing too (it
        // hands out the most recently used first, so old ones sit together at the bottom), and a
        // second stale one failed the request as `stream_interrupted`. The retry's delay still
        // counts in the latency (measured from the intended time) and is recorded.
        let send = |client: &reqwest::Client| {
            client
                .post(endpoint)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
        };
        let resp = match send(&self.client).await {
            Ok(r) => r,
            Err(e) if is_stale_connection(&e) => {
                rec.retries += 1;
                send(self.fresh.as_ref().unwrap_or(&self.client))
                    .await
                    .map_err(classify)?
            }
            Err(e) => return Err(classify(e)),
        };
        let status = resp.status();
        rec.status = Some(status.as_u16());
        if !status.is_success() {
            let mut resp = resp;
            let mut snippet = Vec::new();
            while snippet.len() < 512 {
                match tokio::time::timeout(self.settings.idle_timeout, resp.chunk()).await {
                    Ok(Ok(Some(b))) => snippet.extend_from_slice(&b),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&snippet);
            return Err((
                ErrorClass::HttpStatus,
                format!("HTTP {}: {}", status.as_u16(), truncate(text.trim(), 200)),
            ));
        }
        if self.settings.stream {
            self.read_stream(resp, rec, t0, text).await
        } else {
            self.read_whole(resp, rec, t0, text).await.map(|()| None)
        }
    }

    async fn read_stream(
        &self,
        mut resp: reqwest::Response,
        rec: &mut RequestRecord,
        t0: Instant,
        text: &mut Option<GeneratedText>,
    ) -> Result<Option<Leftover>, (ErrorClass, String)> {
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|s| truncate(s, 64).to_string())
            .unwrap_or_default();
        let mut parser = SseParser::new();
        let mut st = StreamState {
            text: text.take(),
            ..StreamState::default()
        };
        // Idle watchdog: one timer per idle period, not one per chunk. When it fires it looks at
        // when the last chunk came and either fails the request or re-arms from that moment.
        let idle = self.settings.idle_timeout;
        let idle_us = u64::try_from(idle.as_micros()).unwrap_or(u64::MAX);
        let start = tokio::time::Instant::from_std(t0);
        let mut last_us = now_us(t0);
        let watchdog = tokio::time::sleep_until(start + Duration::from_micros(last_us) + idle);
        tokio::pin!(watchdog);
        let mut ended = None;
        loop {
            let next = tokio::select! {
                biased;
                c = resp.chunk() => Some(c),
                () = &mut watchdog => None,
            };
            // The arrival time of everything this chunk carries.
            let now = now_us(t0);
            let Some(next) = next else {
                if now.saturating_sub(last_us) >= idle_us {
                    return Err((ErrorClass::IdleTimeout, format!("no data for {idle:?}")));
                }
                watchdog
                    .as_mut()
                    .reset(start + Duration::from_micros(last_us) + idle);
                continue;
            };
            last_us = now;
            match next {
                Err(e) => return Err((ErrorClass::StreamInterrupted, error_chain(&e))),
                Ok(None) => {
                    parser
                        .finish(&mut |ev| st.on_event(ev, now, rec))
                        .map_err(sse_error)?;
                    break;
                }
                Ok(Some(bytes)) => {
                    parser
                        .feed(&bytes, &mut |ev| st.on_event(ev, now, rec))
                        .map_err(sse_error)?;
                }
            }
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            if st.done {
                ended = Some(now);
                break;
            }
        }
        *text = st.text.take();
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        let (tokens, _) = rec.output_tokens();
        if rec.first_token_us.is_none() && tokens == 0 {
            return Err((
                ErrorClass::EmptyResponse,
                format!(
                    "no generated text ({} SSE events, content-type `{content_type}`)",
                    parser.counters().events
                ),
            ));
        }
        if !st.done && rec.finish_reason.is_none() {
            return Err((
                ErrorClass::Truncated,
                "stream ended without [DONE] or finish_reason".into(),
            ));
        }
        Ok(ended.map(|end_us| Leftover { resp, end_us }))
    }

    async fn read_whole(
        &self,
        mut resp: reqwest::Response,
        rec: &mut RequestRecord,
        t0: Instant,
        text: &mut Option<GeneratedText>,
    ) -> Result<(), (ErrorClass, String)> {
        let mut buf = Vec::new();
        loop {
            match tokio::time::timeout(self.settings.idle_timeout, resp.chunk()).await {
                Err(_) => {
                    return Err((
                        ErrorClass::IdleTimeout,
                        format!("no data for {:?}", self.settings.idle_timeout),
                    ));
                }
                Ok(Err(e)) => return Err((ErrorClass::StreamInterrupted, error_chain(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(b))) => {
                    if buf.len() + b.len() > MAX_BODY {
                        return Err((
                            ErrorClass::TooLarge,
                            format!("response body over {MAX_BODY} bytes"),
                        ));
                    }
                    buf.extend_from_slice(&b);
                }
            }
        }
        let now = now_us(t0);
        let c: Completion<'_> = serde_json::from_slice(&buf)
            .map_err(|e| (ErrorClass::InvalidJson, format!("response body: {e}")))?;
        if let Some(e) = c.error {
            return Err((
                ErrorClass::ServerError,
                truncate(&e.to_string(), 200).into(),
            ));
        }
        let mut has_text = false;
        for ch in &c.choices {
            has_text |= ch.text().is_some_and(|t| !t.is_empty());
            if let (Some(g), Some(t)) = (text.as_mut(), ch.text()) {
                g.push(t);
            }
            if let Some(f) = &ch.finish_reason {
                rec.finish_reason = Some(truncate(f, 32).to_string());
            }
        }
        apply_meta(rec, &c);
        if !has_text && rec.usage_output_tokens.unwrap_or(0) == 0 {
            return Err((ErrorClass::EmptyResponse, "no generated text".into()));
        }
        // The whole answer arrives at once: TTFT and ITL are undefined for non-streamed requests.
        rec.end_us = now;
        Ok(())
    }
}

/// Most bytes read after `[DONE]` to reuse a connection.
const MAX_DRAIN: usize = 64 << 10;
/// Longest wait after `[DONE]` for the end of the body (the chunked terminator).
const DRAIN_WAIT: Duration = Duration::from_millis(200);

/// The unread end of a streamed body whose response already ended (`[DONE]`): usually only the
/// chunked-encoding terminator. Reading it lets the HTTP client reuse the keep-alive connection;
/// dropping it closes the connection (and the next request pays for a new one, which llama.cpp's
/// server answers more slowly, and sometimes with a reset the client must retry).
#[derive(Debug)]
pub struct Leftover {
    resp: reqwest::Response,
    /// When the response ended (µs since the run's `t0`).
    end_us: u64,
}

impl Leftover {
    /// Read the rest of the body, at most 64 KiB within 200 ms; on anything else the
    /// connection is simply closed. Never fails.
    pub async fn drain(mut self) {
        let rest = async {
            let mut n = 0usize;
            while let Ok(Some(b)) = self.resp.chunk().await {
                n += b.len();
                if n > MAX_DRAIN {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, rest).await;
        drop(self);
        // hyper hands the connection back to the pool from a task of its own once the body has
        // ended; let that task run before this slot asks the pool for its next connection, or
        // the pool is empty at that instant and every request opens (and later closes) a fresh
        // connection.
        tokio::task::yield_now().await;
    }
}

fn apply_meta(rec: &mut RequestRecord, c: &Completion<'_>) {
    let (id, usage) = (c.id.as_deref(), c.usage.as_ref());
    if let Some(n) = c.timings.as_ref().and_then(|t| t.cache_n) {
        rec.cached_tokens = Some(n);
    }
    if let Some(n) = usage
        .and_then(|u| u.prompt_tokens_details.as_ref())
        .and_then(|d| d.cached_tokens)
    {
        rec.cached_tokens = Some(n);
    }
    if rec.response_id.is_none()
        && let Some(id) = id
    {
        rec.response_id = Some(truncate(id, 128).to_string());
    }
    if let Some(u) = usage {
        if u.prompt_tokens.is_some() {
            rec.input_tokens = u.prompt_tokens;
        }
        if u.completion_tokens.is_some() {
            rec.usage_output_tokens = u.completion_tokens;
        }
    }
}

/// µs since `t0`.
pub fn now_us(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn sse_error(e: SseError) -> (ErrorClass, String) {
    let class = match e {
        SseError::LineTooLong { .. } => ErrorClass::LineTooLong,
        SseError::EventTooLarge { .. } => ErrorClass::TooLarge,
        SseError::InvalidUtf8 => ErrorClass::InvalidSse,
    };
    (class, e.to_string())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    truncate(&s, 240).to_string()
}

/// A send that failed because a reused connection was already closed by the server, before any
/// response: hyper's "connection closed before message completed" (or a reset while sending).
fn is_stale_connection(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() || e.is_builder() || e.status().is_some() {
        return false;
    }
    let chain = error_chain(e);
    chain.contains("connection closed before message completed")
        || chain.contains("Connection reset by peer")
        || chain.contains("Broken pipe")
}

fn classify(e: reqwest::Error) -> (ErrorClass, String) {
    let class = if e.is_connect() {
        ErrorClass::Connect
    } else if e.is_timeout() {
        ErrorClass::Timeout
    } else if e.is_builder() {
        ErrorClass::Request
    } else {
        ErrorClass::StreamInterrupted
    };
    (class, error_chain(&e))
}

/// The generated text of one response, kept (bounded) for the local tokenizer.
#[derive(Debug)]
struct GeneratedText {
    text: String,
    /// False once the text passed [`MAX_COUNTED_TEXT`]: the count would then be wrong.
    complete: bool,
}

impl Default for GeneratedText {
    fn default() -> Self {
        GeneratedText {
            text: String::new(),
            complete: true,
        }
    }
}

impl GeneratedText {
    fn push(&mut self, t: &str) {
        if !self.complete {
            return;
        }
        if self.text.len() + t.len() > MAX_COUNTED_TEXT {
            self.complete = false;
            self.text = String::new();
            return;
        }
        self.text.push_str(t);
    }
}

#[derive(Default)]
struct StreamState {
    done: bool,
    error: Option<(ErrorClass, String)>,
    /// Some when a tokenizer will count the text.
    text: Option<GeneratedText>,
}

impl StreamState {
    fn on_event(&mut self, ev: SseEvent<'_>, now: u64, rec: &mut RequestRecord) {
        if self.error.is_some() || self.done {
            return;
        }
        match ev {
            SseEvent::Error(e) => {
                self.error = Some((ErrorClass::ServerError, truncate(e, 200).to_string()));
            }
            SseEvent::Data(d) => {
                let d = d.trim();
                if d == "[DONE]" {
                    self.done = true;
                    return;
                }
                if d.is_empty() {
                    return;
                }
                match serde_json::from_str::<Completion<'_>>(d) {
                    Err(e) => {
                        self.error = Some((
                            ErrorClass::InvalidJson,
                            format!("{e} in `{}`", truncate(d, 80)),
                        ));
                    }
                    Ok(c) => {
                        if let Some(e) = c.error {
                            self.error = Some((
                                ErrorClass::ServerError,
                                truncate(&e.to_string(), 200).into(),
                            ));
                            return;
                        }
                        let mut content = false;
                        for ch in &c.choices {
                            content |= ch.text().is_some_and(|t| !t.is_empty());
                            if let (Some(g), Some(t)) = (self.text.as_mut(), ch.text()) {
                                g.push(t);
                            }
                            if let Some(f) = &ch.finish_reason {
                                rec.finish_reason = Some(truncate(f, 32).to_string());
                            }
                        }
                        apply_meta(rec, &c);
                        if content {
                            rec.push_chunk(now, 1);
                        }
                    }
                }
            }
        }
    }
}

/// The parts of a completion (chunk) the client reads; everything else is ignored.
#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    /// llama-server's per-response timings (its prompt cache hits: `cache_n`).
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Timings {
    #[serde(default)]
    cache_n: Option<u64>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Message<'a>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "reasoning")]
    reasoning_content: Option<Cow<'a, str>>,
}

fn nonempty<'s>(s: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    s.as_deref().filter(|t| !t.is_empty())
}

impl Choice<'_> {
    fn text(&self) -> Option<&str> {
        if let Some(t) = nonempty(&self.text) {
            return Some(t);
        }
        for m in [&self.delta, &self.message].into_iter().flatten() {
            if let Some(t) = nonempty(&m.content).or(nonempty(&m.reasoning_content)) {
                return Some(t);
            }
        }
        None
    }
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// What the server says about itself (`/v1/models`, and a version endpoint when present).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Model ids from `/v1/models`.
    pub models: Vec<String>,
    /// Server version, from the first of `/version` (vLLM and other Python servers), `/info` (TGI),
    /// `/api/version` (Ollama) or `/props` (llama.cpp `build_info`) that answers.
    pub version: Option<String>,
    /// Which endpoint the version came from.
    pub version_source: Option<String>,
    /// Why `/v1/models` gave no list (`HTTP 404`, `timed out`, a JSON error), when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_error: Option<String>,
    /// The server's command line, as given with `bench --server-cmd` (no engine serves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The server's start-up memory figures, read from its log with `bench --startup-log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupFigures>,
}

/// What a server's start-up log says about its memory (`mem startup`'s reading), recorded so
/// `compare` can say that two runs' servers sized their KV cache differently.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartupFigures {
    /// The log, as given.
    pub log: String,
    /// The engine's `cli_id` (`vllm`, `tgi`, `llama.cpp`, ..., as `mem startup` names it).
    pub engine: String,
    /// The engine's version, when the log prints it.
    pub engine_version: Option<String>,
    /// The start-up failed.
    pub failed: bool,
    /// Weights per GPU, GiB.
    pub weights_gib: Option<f64>,
    /// KV cache per GPU, GiB.
    pub kv_cache_gib: Option<f64>,
    /// KV cache tokens.
    pub kv_cache_tokens: Option<u64>,
    /// Maximum concurrency at max_model_len, as printed.
    pub max_concurrency: Option<f64>,
    /// max_model_len in force.
    pub max_model_len: Option<u64>,
}

/// Why the server could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach {url}: {detail}")]
pub struct Unreachable {
    /// The URL.
    pub url: String,
    /// Cause.
    pub detail: String,
}

async fn get_json(
    client: &reqwest::Client,
    url: &str,
) -> Result<serde_json::Value, (bool, String)> {
    let fut = async {
        let mut resp = client
            .get(url)
            .send()
            .await
            .map_err(|e| (e.is_connect(), error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err((false, format!("HTTP {}", resp.status().as_u16())));
        }
        let mut buf = Vec::new();
        while let Some(b) = resp.chunk().await.map_err(|e| (false, error_chain(&e)))? {
            if buf.len() + b.len() > 1 << 20 {
                return Err((false, "body over 1 MiB".into()));
            }
            buf.extend_from_slice(&b);
        }
        serde_json::from_slice(&buf).map_err(|e| (false, e.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| Err((false, "timed out".into())))
}

/// Ask the server for its models and version. Fails only when the server cannot be connected
/// to at all; anything else is recorded as unknown.
pub async fn server_info(client: &reqwest::Client, base: &str) -> Result<ServerInfo, Unreachable> {
    let base = base_url(base);
    let mut info = ServerInfo::default();
    match get_json(client, &format!("{base}/v1/models")).await {
        Ok(v) => {
            if let Some(data) = v.get("data").and_then(|d| d.as_array()) {
                info.models = data
                    .iter()
                    .filter_map(|m| m.get("id").and_then(|i| i.as_str()))
                    .take(64)
                    .map(|s| truncate(s, 200).to_string())
                    .collect();
            } else {
                info.models_error = Some("the answer has no `data` list".into());
            }
        }
        Err((true, detail)) => {
            return Err(Unreachable {
                url: format!("{base}/v1/models"),
                detail,
            });
        }
        Err((false, detail)) => info.models_error = Some(detail),
    }
    for (path, key) in [
        ("/version", "version"),
        ("/info", "version"),
        ("/api/version", "version"),
        ("/props", "build_info"),
    ] {
        if let Ok(v) = get_json(client, &format!("{base}{path}")).await
            && let Some(s) = v.get(key).and_then(|s| s.as_str())
        {
            info.version = Some(truncate(s, 200).to_string());
            info.version_source = Some(path.to_string());
            break;
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(api: Api, stream: bool) -> RequestSettings {
        RequestSettings {
            api,
            model: "m".into(),
            stream,
            ignore_eos: true,
            temperature: 0.0,
            timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn bodies() {
        let p = Prompt {
            text: "hi \"there\"".into(),
            max_tokens: 7,
            len: 2,
            tokens: None,
            reusable: None,
        };
        let b: serde_json::Value =
            serde_json::from_slice(&body(&settings(Api::Completions, true), &p)).unwrap();
        assert_eq!(b["prompt"], "hi \"there\"");
        assert_eq!(b["max_tokens"], 7);
        assert_eq!(b["min_tokens"], 7);
        assert_eq!(b["stream_options"]["include_usage"], true);
        let b: serde_json::Value =
            serde_json::from_slice(&body(&settings(Api::Chat, false), &p)).unwrap();
        assert_eq!(b["messages"][0]["content"], "hi \"there\"");
        assert_eq!(b["max_completion_tokens"], 7);
        assert!(b.get("stream_options").is_none());
    }

    #[test]
    fn server_cache_hits_are_read() {
        // llama-server's last chunk carries `timings` (b4000+); vLLM and other servers put OpenAI's
        // `prompt_tokens_details.cached_tokens` in usage.
        let (_, rec) = run_events(&[
            r#"{"id":"c","choices":[{"text":"a","index":0}]}"#,
            r#"{"id":"c","choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":1,"prompt_tokens":600},"timings":{"cache_n":512,"prompt_n":88}}"#,
            "[DONE]",
        ]);
        assert_eq!(rec.cached_tokens, Some(512));
        let (_, rec) = run_events(&[
            r#"{"id":"c","choices":[{"text":"a","index":0}]}"#,
            r#"{"id":"c","choices":[],"usage":{"completion_tokens":1,"prompt_tokens":600,"prompt_tokens_details":{"cached_tokens":256}}}"#,
            "[DONE]",
        ]);
        assert_eq!(rec.cached_tokens, Some(256));
    }

    fn run_events(events: &[&str]) -> (StreamState, RequestRecord) {
        let mut st = StreamState::default();
        let mut rec = RequestRecord::new(0, false, 0, 0);
        for (i, e) in events.iter().enumerate() {
            st.on_event(SseEvent::Data(e), i as u64 * 10, &mut rec);
        }
        (st, rec)
    }

    #[test]
    fn llama_cpp_chat_stream() {
        let (st, rec) = run_events(&[
            r#"{"id":"c1","choices":[{"delta":{"role":"assistant","content":null},"index":0}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":" the"},"index":0}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":" of"},"index":0}]}"#,
            r#"{"id":"c1","choices":[{"delta":{},"finish_reason":"length","index":0}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"completion_tokens":2,"prompt_tokens":9}}"#,
            "[DONE]",
        ]);
        assert!(st.done && st.error.is_none());
        assert_eq!(rec.first_token_us, Some(10));
        assert_eq!(rec.chunks.len(), 2);
        assert_eq!(rec.usage_output_tokens, Some(2));
        assert_eq!(rec.input_tokens, Some(9));
        assert_eq!(rec.cached_tokens, None);
        assert_eq!(rec.finish_reason.as_deref(), Some("length"));
        assert_eq!(rec.response_id.as_deref(), Some("c1"));
    }

    #[test]
    fn completions_and_reasoning_and_errors() {
        let (_, rec) = run_events(&[
            r#"{"choices":[{"text":"a"}]}"#,
            r#"{"choices":[{"text":""}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#,
        ]);
        assert_eq!(rec.chunks.len(), 2);
        let (st, _) = run_events(&["not json"]);
        assert_eq!(st.error.unwrap().0, ErrorClass::InvalidJson);
        let (st, _) = run_events(&[r#"{"error":{"message":"overloaded"}}"#]);
        assert_eq!(st.error.unwrap().0, ErrorClass::ServerError);
    }

    #[test]
    fn urls() {
        assert_eq!(base_url("http://h:1/"), "http://h:1");
        assert_eq!(base_url("http://h:1/v1/"), "http://h:1");
        assert_eq!(base_url("http://h:1"), "http://h:1");
    }
}
