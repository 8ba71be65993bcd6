//! Raw per-request timings: what the client saw, before any statistics.
//!
//! Following oha's `RequestResult`, the client records facts and nothing else; every figure in a
//! result file is computed later by [`crate::stats`] from these records, and `--trace` writes them
//! as JSON Lines so `inferscope compare` can test significance on per-request samples.
//!
//! All times are integer microseconds from the start of the run (one monotonic clock). Each record
//! keeps the *intended* send time from the schedule next to the *actual* send time: latencies are
//! measured from the intended time, so a client or server that falls behind cannot hide its delay
//! (coordinated omission). Memory per request is bounded: at most [`MAX_CHUNKS`] chunk times are
//! kept (later chunks still count tokens), and error details are cut to [`MAX_DETAIL`] bytes.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Most chunk timestamps kept per request.
pub const MAX_CHUNKS: usize = 1 << 16;
/// Longest error detail kept, in bytes.
pub const MAX_DETAIL: usize = 256;

/// What went wrong with a request, as a stable snake_case class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// TCP connect failed or was refused.
    Connect,
    /// The request exceeded its total timeout (`--timeout`).
    Timeout,
    /// No bytes arrived for `--idle-timeout`.
    IdleTimeout,
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// The connection broke mid-response (reset, EOF inside a chunked body).
    StreamInterrupted,
    /// The stream ended without `[DONE]` or a `finish_reason`.
    Truncated,
    /// The stream is not valid SSE (not UTF-8).
    InvalidSse,
    /// An SSE line exceeded 1 MiB.
    LineTooLong,
    /// An SSE event or a non-streamed body exceeded its size cap.
    TooLarge,
    /// An event's data is not the JSON of a completion chunk.
    InvalidJson,
    /// The server reported an error inside the stream.
    ServerError,
    /// A successful response with no generated text at all.
    EmptyResponse,
    /// The request could not be built or sent (client-side problem).
    Request,
    /// Still running when the run's deadline passed; counted as incomplete, not failed.
    Cancelled,
}

impl ErrorClass {
    /// The stable name used in result files.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::IdleTimeout => "idle_timeout",
            ErrorClass::HttpStatus => "http_status",
            ErrorClass::StreamInterrupted => "stream_interrupted",
            ErrorClass::Truncated => "truncated",
            ErrorClass::InvalidSse => "invalid_sse",
            ErrorClass::LineTooLong => "line_too_long",
            ErrorClass::TooLarge => "too_large",
            ErrorClass::InvalidJson => "invalid_json",
            ErrorClass::ServerError => "server_error",
            ErrorClass::EmptyResponse => "empty_response",
            ErrorClass::Request => "request",
            ErrorClass::Cancelled => "cancelled",
        }
    }
}

/// One content-bearing chunk: arrival time (µs from run start) and tokens it carried (1 unless
/// the server says otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk(pub u64, pub u32);

/// Where a request's output-token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens`.
    Usage,
    /// The generated text counted with the local tokenizer (`--tokenizer`).
    Tokenizer,
    /// One token per content chunk.
    Chunks,
    /// Nothing to count: no usage, no tokenizer and no content chunk (a non-streamed answer
    /// from a server that sends no usage). The count is 0 only as a placeholder.
    Unknown,
}

/// Everything the client saw of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Sequence number in send order (warm-up included), from 0.
    pub seq: u64,
    /// Sends repeated because a pooled connection had been closed by the server (see client).
    #[serde(default)]
    pub retries: u32,
    /// Sweep step (0 for a plain run).
    #[serde(default)]
    pub step: u32,
    /// Run of `bench --repeat K`, from 0 (absent for the first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeat: u32,
    /// Sent during warm-up: excluded from statistics.
    #[serde(default)]
    pub warmup: bool,
    /// When the schedule meant to send it.
    pub intended_us: u64,
    /// When the client actually started sending it.
    pub sent_us: u64,
    /// When the first content chunk arrived (streaming), or the body (non-streaming).
    #[serde(default)]
    pub first_token_us: Option<u64>,
    /// When the response ended (or failed).
    pub end_us: u64,
    /// Content chunks: `[arrival_us, tokens]`.
    #[serde(default)]
    pub chunks: Vec<Chunk>,
    /// Content chunks not kept in `chunks` because of [`MAX_CHUNKS`].
    #[serde(default)]
    pub chunks_dropped: u64,
    /// HTTP status, when a response arrived.
    #[serde(default)]
    pub status: Option<u16>,
    /// Error class; `None` for a completed request.
    #[serde(default)]
    pub error: Option<ErrorClass>,
    /// Short error detail (bounded).
    #[serde(default)]
    pub error_detail: Option<String>,
    /// Prompt tokens per the server's usage.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Completion tokens per the server's usage.
    #[serde(default)]
    pub usage_output_tokens: Option<u64>,
    /// Completion tokens of the generated text per the local tokenizer (`--tokenizer`); `None`
    /// without one, or when the text was over the counting cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_output_tokens: Option<u64>,
    /// The generated text of a completed response, kept (at most
    /// [`MAX_COUNTED_TEXT`](crate::tokenizer::MAX_COUNTED_TEXT)) only while the run goes on and
    /// only with `--tokenizer`: it is counted into `tokenizer_output_tokens` after the run (see
    /// [`count_generated_after_run`](crate::exec::count_generated_after_run)) and dropped. Never
    /// written to the result.
    #[serde(skip)]
    pub generated_text: Option<String>,
    /// Prompt tokens per the local tokenizer (the prompt text alone: a chat server adds its
    /// template's tokens to its own count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_input_tokens: Option<u64>,
    /// Output tokens asked for (`max_tokens`).
    #[serde(default)]
    pub max_tokens: u32,
    /// Prompt length in the dataset's units (words for `random:`), for reference.
    #[serde(default)]
    pub prompt_len: u32,
    /// The completion id the server returned (to match server logs).
    #[serde(default)]
    pub response_id: Option<String>,
    /// The last `finish_reason` seen.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Prompt length (dataset units) an ideal prefix cache could have served, per the workload
    /// (shared blocks or prefixes sent by earlier requests); absent where the workload does not
    /// know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reusable_prefix: Option<u32>,
    /// Prompt tokens the server says it served from its cache (`usage.prompt_tokens_details.
    /// cached_tokens`, or llama-server's `timings.cache_n`); absent when it does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// `sessions:` workloads: the session (from 0, in start order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// `sessions:` workloads: the turn within the session (from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// With several `--url`s: the index of the endpoint the request went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<u32>,
}

impl RequestRecord {
    /// A blank record for request `seq`.
    pub fn new(seq: u64, warmup: bool, intended_us: u64, sent_us: u64) -> Self {
        RequestRecord {
            seq,
            retries: 0,
            step: 0,
            repeat: 0,
            warmup,
            intended_us,
            sent_us,
            first_token_us: None,
            end_us: sent_us,
            chunks: Vec::new(),
            chunks_dropped: 0,
            status: None,
            error: None,
            error_detail: None,
            input_tokens: None,
            usage_output_tokens: None,
            tokenizer_output_tokens: None,
            generated_text: None,
            tokenizer_input_tokens: None,
            max_tokens: 0,
            prompt_len: 0,
            response_id: None,
            finish_reason: None,
            reusable_prefix: None,
            cached_tokens: None,
            session: None,
            turn: None,
            endpoint: None,
        }
    }

    /// Completed without error.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// Cut short by the run's deadline.
    pub fn is_cancelled(&self) -> bool {
        self.error == Some(ErrorClass::Cancelled)
    }

    /// Record a content chunk arriving at `at_us` carrying `tokens` tokens.
    pub fn push_chunk(&mut self, at_us: u64, tokens: u32) {
        if self.first_token_us.is_none() {
            self.first_token_us = Some(at_us);
        }
        if self.chunks.len() < MAX_CHUNKS {
            self.chunks.push(Chunk(at_us, tokens));
        } else {
            self.chunks_dropped += 1;
        }
    }

    /// Set the error class and a bounded detail.
    pub fn fail(&mut self, class: ErrorClass, detail: impl AsRef<str>) {
        self.error = Some(class);
        self.error_detail = Some(truncate(detail.as_ref(), MAX_DETAIL).to_string());
    }

    /// Output tokens and where the count came from: the server's usage when present, else the
    /// local tokenizer's count of the generated text, else one per content chunk, else unknown.
    ///
    /// The tokenizer ranks above chunks (the issue listed them the other way round) because a
    /// chunk may carry several tokens and a non-streamed answer is one "chunk": when the user
    /// gave the model's tokenizer, its count is exact where the chunk count is a lower bound.
    pub fn output_tokens(&self) -> (u64, TokenSource) {
        match (self.usage_output_tokens, self.tokenizer_output_tokens) {
            (Some(n), _) => (n, TokenSource::Usage),
            (None, Some(n)) => (n, TokenSource::Tokenizer),
            (None, None) if self.chunks.is_empty() && self.chunks_dropped == 0 => {
                (0, TokenSource::Unknown)
            }
            (None, None) => {
                let kept: u64 = self.chunks.iter().map(|c| u64::from(c.1)).sum();
                (kept + self.chunks_dropped, TokenSource::Chunks)
            }
        }
    }

    /// Prompt tokens: the server's usage, else the local tokenizer's count.
    pub fn prompt_tokens(&self) -> Option<u64> {
        self.input_tokens.or(self.tokenizer_input_tokens)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Write records as JSON Lines.
pub fn write_trace(records: &[RequestRecord], out: &mut dyn Write) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// I/O.
    #[error("reading trace: {0}")]
    Io(#[from] std::io::Error),
    /// A line that is not a record.
    #[error("trace line {line}: {source}")]
    Json {
        /// 1-based line.
        line: usize,
        /// Parse error.
        source: serde_json::Error,
    },
    /// A line over the size cap.
    #[error("trace line {line}: longer than {limit} bytes")]
    LineTooLong {
        /// 1-based line.
        line: usize,
        /// The cap.
        limit: usize,
    },
}

/// Longest trace line accepted when reading (a record with [`MAX_CHUNKS`] chunks fits).
pub const MAX_TRACE_LINE: usize = 4 << 20;

/// Read a JSON Lines trace, skipping blank lines; lines are capped at [`MAX_TRACE_LINE`].
pub fn read_trace(input: &mut dyn BufRead) -> Result<Vec<RequestRecord>, TraceError> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0usize;
    loop {
        buf.clear();
        line += 1;
        let n = std::io::Read::take(&mut *input, MAX_TRACE_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.len() > MAX_TRACE_LINE {
            return Err(TraceError::LineTooLong {
                line,
                limit: MAX_TRACE_LINE,
            });
        }
        if buf.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let rec =
            serde_json::from_slice(&buf).map_err(|source| TraceError::Json { line, source })?;
        out.push(rec);
    }
    Ok(out)
}

/// Serialise a `Duration` as floating-point milliseconds.
pub mod duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Serialise.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    /// Deserialise (negative or non-finite values are errors).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1000.0).map_err(serde::de::Error::custom)
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_round_trip() {
        let mut r = RequestRecord::new(3, false, 10, 12);
        r.push_chunk(100, 1);
        r.push_chunk(150, 2);
        r.end_us = 200;
        r.usage_output_tokens = None;
        let mut e = RequestRecord::new(4, true, 20, 21);
        e.fail(ErrorClass::LineTooLong, "x".repeat(1000));
        let mut buf = Vec::new();
        write_trace(&[r.clone(), e.clone()], &mut buf).unwrap();
        let back = read_trace(&mut &buf[..]).unwrap();
        assert_eq!(back, vec![r.clone(), e.clone()]);
        assert_eq!(r.output_tokens(), (3, TokenSource::Chunks));
        assert_eq!(e.error_detail.as_ref().map(|d| d.len()), Some(MAX_DETAIL));
        let text = String::from_utf8(buf).unwrap();
        assert!(text.contains("\"chunks\":[[100,1],[150,2]]"));
        assert!(text.contains("\"error\":\"line_too_long\""));
    }

    #[test]
    fn token_count_precedence_is_usage_then_tokenizer_then_chunks() {
        let mut r = RequestRecord::new(0, false, 0, 0);
        r.push_chunk(10, 1);
        r.push_chunk(20, 1);
        assert_eq!(r.output_tokens(), (2, TokenSource::Chunks));
        r.tokenizer_output_tokens = Some(5);
        assert_eq!(r.output_tokens(), (5, TokenSource::Tokenizer));
        r.usage_output_tokens = Some(6);
        assert_eq!(r.output_tokens(), (6, TokenSource::Usage));
        assert_eq!(r.prompt_tokens(), None);
        r.tokenizer_input_tokens = Some(9);
        assert_eq!(r.prompt_tokens(), Some(9));
        r.input_tokens = Some(12);
        assert_eq!(r.prompt_tokens(), Some(12));
    }

    #[test]
    fn chunk_list_is_bounded() {
        let mut r = RequestRecord::new(0, false, 0, 0);
        for i in 0..(MAX_CHUNKS as u64 + 10) {
            r.push_chunk(i, 1);
        }
        assert_eq!(r.chunks.len(), MAX_CHUNKS);
        assert_eq!(r.chunks_dropped, 10);
        assert_eq!(r.output_tokens().0, MAX_CHUNKS as u64 + 10);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("日本語", 4), "日");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn bad_trace_line_names_the_line() {
        let e = read_trace(&mut &b"\n{\"seq\":1}\n"[..]).unwrap_err();
        assert!(e.to_string().starts_with("trace line 2"), "{e}");
    }
}
