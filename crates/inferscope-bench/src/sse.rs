//! Incremental Server-Sent Events parser: bytes in, events out, bounded memory, no I/O.
//!
//! Written here rather than taken from a crate (see the project's crate notes) because the
//! client must time-stamp every network chunk itself and must survive hostile servers:
//!
//! * Feed it whatever the network delivers ([`SseParser::feed`]); events come out through a
//!   callback as borrowed `&str`, so a well-behaved stream costs no allocation per event.
//! * Line endings are LF, CRLF or a lone CR, also when a CRLF pair is split across two network
//!   chunks (WHATWG HTML §9.2.5).
//! * `data:` lines accumulate (joined with `\n`) until a blank line dispatches the event;
//!   comments (`: keep-alive`) are counted, `id:`/`retry:` ignored, unknown fields counted.
//!   `event: error` and llama.cpp's non-standard `error:` field come out as [`SseEvent::Error`].
//! * A line longer than [`MAX_LINE`] bytes or an event larger than [`MAX_EVENT`] bytes is a
//!   classified error, detected *before* the bytes are buffered, so a 10 MB line never costs more
//!   than 1 MiB. After an error the parser stays failed.
//! * Bytes that are not UTF-8 are an error ([`SseError::InvalidUtf8`]), not replaced silently.
//! * At end of stream ([`SseParser::finish`]) a last event without its blank line is still
//!   dispatched: several servers end with `data: [DONE]` and close.

use std::fmt;

/// Longest accepted line, in bytes (1 MiB).
pub const MAX_LINE: usize = 1 << 20;
/// Largest accepted event data, in bytes (1 MiB).
pub const MAX_EVENT: usize = 1 << 20;

/// One dispatched event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// The data of a message event (`data:` lines joined by `\n`).
    Data(&'a str),
    /// An error the server reported in-band (`event: error` or an `error:` field).
    Error(&'a str),
}

/// Why a stream cannot be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line longer than [`MAX_LINE`].
    #[error("SSE line longer than {limit} bytes")]
    LineTooLong {
        /// The limit.
        limit: usize,
    },
    /// An event whose data exceeds [`MAX_EVENT`].
    #[error("SSE event larger than {limit} bytes")]
    EventTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A line that is not UTF-8.
    #[error("SSE stream is not valid UTF-8")]
    InvalidUtf8,
}

/// Counters of what the parser skipped, for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SseCounters {
    /// Comment lines (`:` first), usually keep-alives.
    pub comments: u64,
    /// Lines with a field name SSE does not define.
    pub unknown_fields: u64,
    /// Events dispatched.
    pub events: u64,
}

/// The incremental parser. See the module docs.
#[derive(Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    is_error_event: bool,
    skip_lf: bool,
    failed: Option<SseError>,
    counters: SseCounters,
}

impl fmt::Debug for SseParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseParser")
            .field("buffered_line", &self.line.len())
            .field("buffered_data", &self.data.len())
            .field("failed", &self.failed)
            .field("counters", &self.counters)
            .finish()
    }
}

impl SseParser {
    /// A fresh parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// What was skipped or dispatched so far.
    pub fn counters(&self) -> SseCounters {
        self.counters
    }

    /// Bytes currently buffered (partial line plus pending event data); never above
    /// [`MAX_LINE`] + [`MAX_EVENT`].
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// Parse the next network chunk, calling `sink` for every complete event.
    pub fn feed(
        &mut self,
        mut chunk: &[u8],
        sink: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.skip_lf && !chunk.is_empty() {
            self.skip_lf = false;
            if let [b'\n', rest @ ..] = chunk {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            // (line, (terminator, rest)) when the chunk holds a line terminator.
            let split = chunk
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .and_then(|i| chunk.split_at_checked(i))
                .and_then(|(head, tail)| Some((head, tail.split_first()?)));
            match split {
                None => {
                    if self.line.len() + chunk.len() > MAX_LINE {
                        return Err(self.fail(SseError::LineTooLong { limit: MAX_LINE }));
                    }
                    self.line.extend_from_slice(chunk);
                    return Ok(());
                }
                Some((head, (&term, rest))) => {
                    let i = head.len();
                    let r = if self.line.is_empty() {
                        if i > MAX_LINE {
                            return Err(self.fail(SseError::LineTooLong { limit: MAX_LINE }));
                        }
                        self.process_line(head, sink)
                    } else {
                        if self.line.len() + i > MAX_LINE {
                            return Err(self.fail(SseError::LineTooLong { limit: MAX_LINE }));
                        }
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(head);
                        let r = self.process_line(&line, sink);
                        line.clear();
                        self.line = line;
                        r
                    };
                    if let Err(e) = r {
                        return Err(self.fail(e));
                    }
                    chunk = rest;
                    if term == b'\r' {
                        match chunk {
                            [b'\n', rest @ ..] => chunk = rest,
                            [_, ..] => {}
                            [] => self.skip_lf = true,
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// End of stream: process a last unterminated line and dispatch a pending event.
    pub fn finish(&mut self, sink: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if let Err(e) = self.process_line(&line, sink) {
                return Err(self.fail(e));
            }
        }
        self.dispatch(sink);
        Ok(())
    }

    fn fail(&mut self, e: SseError) -> SseError {
        self.failed = Some(e);
        self.line = Vec::new();
        self.data = String::new();
        e
    }

    fn dispatch(&mut self, sink: &mut dyn FnMut(SseEvent<'_>)) {
        if self.has_data {
            self.counters.events += 1;
            if self.is_error_event {
                sink(SseEvent::Error(&self.data));
            } else {
                sink(SseEvent::Data(&self.data));
            }
        }
        self.data.clear();
        self.has_data = false;
        self.is_error_event = false;
    }

    fn process_line(
        &mut self,
        line: &[u8],
        sink: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(sink);
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8)?;
        if line.starts_with(':') {
            self.counters.comments += 1;
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > MAX_EVENT {
                    return Err(SseError::EventTooLarge { limit: MAX_EVENT });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.is_error_event = value == "error",
            "error" => {
                self.counters.events += 1;
                sink(SseEvent::Error(value));
            }
            "id" | "retry" => {}
            _ => self.counters.unknown_fields += 1,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Owned {
        Data(String),
        Error(String),
    }

    fn parse_split(input: &[u8], cuts: &[usize]) -> (Result<(), SseError>, Vec<Owned>) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut sink = |e: SseEvent<'_>| {
            out.push(match e {
                SseEvent::Data(d) => Owned::Data(d.to_string()),
                SseEvent::Error(d) => Owned::Error(d.to_string()),
            })
        };
        let mut start = 0;
        let mut r = Ok(());
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort_unstable();
        points.push(input.len());
        for end in points {
            if end < start {
                continue;
            }
            r = p.feed(&input[start..end], &mut sink);
            start = end;
            if r.is_err() {
                break;
            }
        }
        if r.is_ok() {
            r = p.finish(&mut sink);
        }
        (r, out)
    }

    fn data(s: &str) -> Owned {
        Owned::Data(s.to_string())
    }

    #[test]
    fn vllm_like_stream() {
        let s = b"data: {\"a\":1}\n\ndata: {\"a\":2}\n\n: keep-alive\n\ndata: [DONE]\n\n";
        let (r, ev) = parse_split(s, &[]);
        assert_eq!(r, Ok(()));
        assert_eq!(
            ev,
            vec![data("{\"a\":1}"), data("{\"a\":2}"), data("[DONE]")]
        );
    }

    #[test]
    fn crlf_cr_multiline_and_fields() {
        let s = b"event: message\r\nid: 3\r\ndata: one\r\ndata:two\r\n\r\nretry: 5\rdata: x\r\rfoo: bar\n\n";
        let (r, ev) = parse_split(s, &[]);
        assert_eq!(r, Ok(()));
        assert_eq!(ev, vec![data("one\ntwo"), data("x")]);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_terminator() {
        let s = b"data: a\r\n\r\ndata: b\r\n\r\n";
        for cut in 0..s.len() {
            let (r, ev) = parse_split(s, &[cut]);
            assert_eq!(r, Ok(()));
            assert_eq!(ev, vec![data("a"), data("b")], "cut at {cut}");
        }
    }

    #[test]
    fn error_events_and_llamacpp_error_field() {
        let s = b"event: error\ndata: {\"e\":1}\n\nerror: {\"code\":500}\n\n";
        let (_, ev) = parse_split(s, &[]);
        assert_eq!(
            ev,
            vec![
                Owned::Error("{\"e\":1}".into()),
                Owned::Error("{\"code\":500}".into())
            ]
        );
    }

    #[test]
    fn last_event_without_blank_line_is_dispatched() {
        let (r, ev) = parse_split(b"data: [DONE]", &[]);
        assert_eq!(r, Ok(()));
        assert_eq!(ev, vec![data("[DONE]")]);
    }

    #[test]
    fn ten_megabyte_line_is_classified_and_bounded() {
        let mut p = SseParser::new();
        let mut n = 0;
        let mut sink = |_: SseEvent<'_>| n += 1;
        p.feed(b"data: ", &mut sink).unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        let mut err = None;
        for _ in 0..160 {
            match p.feed(&chunk, &mut sink) {
                Ok(()) => assert!(p.buffered() <= MAX_LINE + MAX_EVENT),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert_eq!(err, Some(SseError::LineTooLong { limit: MAX_LINE }));
        assert_eq!(p.buffered(), 0);
        // It stays failed.
        assert!(p.feed(b"\n\n", &mut sink).is_err());
        assert!(p.finish(&mut sink).is_err());
    }

    #[test]
    fn huge_multiline_event_is_classified() {
        let line = format!("data: {}\n", "y".repeat(1000));
        let s = line.repeat(2000);
        let (r, _) = parse_split(s.as_bytes(), &[]);
        assert_eq!(r, Err(SseError::EventTooLarge { limit: MAX_EVENT }));
    }

    #[test]
    fn invalid_utf8_is_classified() {
        let (r, _) = parse_split(b"data: \xff\xfe\n\n", &[]);
        assert_eq!(r, Err(SseError::InvalidUtf8));
    }

    #[test]
    fn garbage_is_counted_not_dispatched() {
        let mut p = SseParser::new();
        let mut n = 0;
        p.feed(b"<html>\n<body>oops</body>\n\n", &mut |_| n += 1)
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(p.counters().unknown_fields, 2);
    }

    fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            "[a-z{}\":, ]{0,20}".prop_map(|s| format!("data: {s}")),
            "[a-z ]{0,10}".prop_map(|s| format!(": {s}")),
            Just(String::new()),
            Just("data: [DONE]".to_string()),
            Just("event: error".to_string()),
            Just("id: 1".to_string()),
            "[a-zé日]{0,5}".prop_map(|s| format!("data:{s}")),
        ];
        let term = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        proptest::collection::vec((line, term), 0..40).prop_map(|v| {
            let mut s = String::new();
            for (l, t) in v {
                s.push_str(&l);
                s.push_str(t);
            }
            s.into_bytes()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        /// However the network splits the bytes, the events are the same.
        #[test]
        fn chunking_does_not_change_events(
            input in stream_strategy(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let whole = parse_split(&input, &[]);
            let split = parse_split(&input, &cuts);
            prop_assert_eq!(whole, split);
        }

        /// Arbitrary bytes never panic and never buffer past the caps.
        #[test]
        fn arbitrary_bytes_are_safe(
            input in proptest::collection::vec(any::<u8>(), 0..2000),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let _ = parse_split(&input, &cuts);
        }
    }
}
