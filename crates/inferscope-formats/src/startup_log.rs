//! Inference-server start-up logs (vLLM V0/V1, TGI, llama-server, and the engines whose phrases
//! are registered as data, [`Engine::log_dialect`]), read line by line
//! from a [`BufRead`] with bounded memory: a line longer than [`MAX_LINE_BYTES`] is cut (the rest
//! is skipped unread into memory), and only a fixed set of figures, at most [`MAX_ARGS`]
//! arguments and one failure line are kept, so a 1 GiB log costs no more memory than a 1 KiB one.
//!
//! Lines are matched by the phrases the engines print, found anywhere in the line, so log
//! prefixes (`(Worker_TP0 pid=41699) INFO 10-06 15:57:17 [gpu_model_runner.py:2653]`,
//! `[2025-03-08 12:29:21 TP0]`, TGI's RFC 3339 timestamps), ANSI colours (stripped first) and
//! ranks' interleaved lines do not matter. Where ranks print the same figure, rank 0's value is
//! kept (or the lowest rank seen). The last line of a cut log (no newline) is read, but a number
//! that runs to its end is not trusted (it may be cut mid-digit).
//!
//! Where each phrase comes from (engine source, by file and function):
//! * vLLM 0.6.6 `vllm/worker/worker.py` `Worker.determine_num_available_blocks` ("Memory profiling
//!   takes … the current vLLM instance can use total_gpu_memory (X GiB) x gpu_memory_utilization
//!   (U) = Y GiB / model weights take …; non_torch_memory takes …; PyTorch activation peak memory
//!   takes …; the rest of the memory reserved for KV Cache is …"), `vllm/worker/model_runner.py`
//!   `load_model` ("Loading model weights took X GB", bytes / 2^30), `vllm/executor/
//!   distributed_gpu_executor.py` `initialize_cache` ("# GPU blocks: N, # CPU blocks: M",
//!   "Maximum concurrency for N tokens per request: X.XXx"), `vllm/worker/worker.py`
//!   `raise_if_cache_size_invalid` ("The model's max seq len (N) is larger than the maximum number
//!   of tokens that can be stored in KV cache (M)");
//! * vLLM 0.11.0 `vllm/v1/worker/gpu_model_runner.py` `load_model` ("Model loading took %.4f
//!   GiB"), `capture_model` ("Graph capturing finished in N secs, took X GiB"),
//!   `vllm/v1/worker/gpu_worker.py` `determine_available_memory` ("Available KV cache memory: X
//!   GiB"; "Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is (U, X
//!   GiB). Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch
//!   memory, and C GiB for CUDAGraph memory"), `vllm/v1/core/kv_cache_utils.py`
//!   `get_kv_cache_config` ("GPU KV cache size: N tokens", "Maximum concurrency …") and
//!   `check_enough_kv_cache_memory` ("No available memory for the cache blocks", "To serve at
//!   least one request with the models's max seq len (N), (X GiB KV cache is needed, which is
//!   larger than the available KV cache memory (Y GiB). Based on the available memory, the
//!   estimated maximum model length is E."), `vllm/entrypoints/utils.py` ("non-default args:");
//! * the registered dialects ([`inferscope_host::log_dialect`]): each phrase is cited beside
//!   its table;
//! * TGI `launcher/src/main.rs` ("Args { … }", "Sharding model on N processes", "Default
//!   `max_batch_prefill_tokens` to N"), `server/…/flash_causal_lm.py` `warmup` ("KV-cache
//!   blocks: N, size: S"), `backends/v3/src/lib.rs` ("Setting max batch total tokens to N");
//! * llama.cpp `src/llama-context.cpp` ("n_ctx = N"), `src/llama-kv-cache.cpp` ("llama_kv_cache:
//!   size = X MiB", one per cache), `src/llama-model.cpp` ("model buffer size = X MiB"),
//!   `tools/server/server.cpp` ("n_slots = N").

use inferscope_host::log_dialect::{FigureUnit, LogDialect};
use std::io::BufRead;

/// Longest line kept; the rest of a longer line is skipped (an arguments dump such as
/// a dialect's arguments dump is the longest real line, a few KiB).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// Most engine arguments kept from `non-default args`, a dialect's arguments dump,
/// `Args { ... }`.
pub const MAX_ARGS: usize = 256;

/// The serving engine that wrote the log (the one identity, [`inferscope_host::engine`]).
pub use inferscope_host::engine::Engine;

/// One figure as the engine printed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Stable key (`weights`, `kv_cache`, `kv_cache_tokens`, ...).
    pub key: &'static str,
    /// The number as printed.
    pub value: f64,
    /// The unit as printed (`GiB`, `GB`, `MiB`, `tokens`, `blocks`, `x`, `fraction`).
    pub unit: &'static str,
    /// The value in GiB for memory figures (old vLLM's and the dialects' "GB" are GiB; TGI's
    /// are 10^9 bytes), `None` for counts.
    pub gib: Option<f64>,
    /// 1-based line it was read from.
    pub line: u64,
    /// Rank that printed it, when the line names one.
    pub rank: Option<u32>,
}

/// What a start-up log says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartupLog {
    /// The engine, from its own phrases.
    pub engine: Option<Engine>,
    /// Version as printed.
    pub engine_version: Option<String>,
    /// vLLM: the V1 engine (`Some(true)`), V0 (`Some(false)`), unknown.
    pub vllm_v1: Option<bool>,
    /// vLLM: top-k/top-p sampling by FlashInfer (`Some(true)`: "Using FlashInfer for top-p &
    /// top-k sampling"), by PyTorch (`Some(false)`: "Falling back to the PyTorch-native
    /// implementation of top-p & top-k sampling"), or not said.
    pub vllm_flashinfer_sampler: Option<bool>,
    /// Arguments `(name, value)` from `non-default args`, a dialect's dump, `Args { ... }` or a
    /// command line, names with `-` turned into `_`, values as printed (quotes removed).
    pub args: Vec<(String, String)>,
    /// GPU model, when the log names it (nvidia-smi rows, llama.cpp's device list).
    pub gpu_model: Option<String>,
    /// The device kind when it is not a GPU (`cpu`: vLLM's CPU backend), else `None`.
    pub device: Option<String>,
    /// A line about the device that does not identify one card (an attention backend, the
    /// platform, several kinds of GPU): `(line number, text)`, so the report can say why it
    /// asks for `--gpu` rather than guess.
    pub gpu_unidentified: Option<(u64, String)>,
    /// llama.cpp: the buffer whose allocation failed (`kv_cache`, `compute`, `weights`) and
    /// the device it was for (`CUDA0`, `CPU`).
    pub failed_buffer: Option<(&'static str, String)>,
    /// Every figure recognised, first (lowest rank) per key.
    pub figures: Vec<Figure>,
    /// Distinct ranks seen in line prefixes (bounded to 0..64).
    pub ranks_seen: u64,
    /// The start-up failed.
    pub failed: bool,
    /// The first line saying why, and its line number.
    pub failure: Option<(u64, String)>,
    /// Lines read.
    pub lines: u64,
    /// Lines longer than [`MAX_LINE_BYTES`] (cut).
    pub long_lines: u64,
    /// The input ended without a newline (cut mid-line, or a paste without one).
    pub ends_mid_line: bool,
    /// 1-based line this start-up begins on (1 unless the input holds earlier start-ups).
    pub first_line: u64,
    /// The start-ups before this one in the same input (a failed start then a restart, two
    /// llama-server runs, another engine's log pasted above), oldest first, at most
    /// [`MAX_EARLIER`]: each is its own record, never merged into this one.
    pub earlier: Vec<StartupSummary>,
    /// Earlier start-ups beyond [`MAX_EARLIER`] (counted, not kept).
    pub earlier_dropped: u64,
}

/// Most earlier start-ups summarised (a log restarted in a loop stays bounded).
pub const MAX_EARLIER: usize = 32;

/// Why the input was split before a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The engine printed its first start-up line again after figures (a restart).
    Restart,
    /// Another engine's lines follow (logs of two engines pasted together).
    OtherEngine,
}

/// One earlier start-up of the same input, in brief.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupSummary {
    /// Its engine, when recognised.
    pub engine: Option<Engine>,
    /// Its version, as printed.
    pub engine_version: Option<String>,
    /// First and last line.
    pub lines: (u64, u64),
    /// It failed.
    pub failed: bool,
    /// The failure line and its number.
    pub failure: Option<(u64, String)>,
    /// Its KV cache in GiB per GPU, when printed.
    pub kv_cache_gib: Option<f64>,
    /// Why the next record was split from it.
    pub split: Split,
}

impl StartupLog {
    /// The figure for `key`, if printed.
    pub fn figure(&self, key: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.key == key)
    }

    /// The argument `name` (with `_`), if printed.
    pub fn arg(&self, name: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Number of ranks seen in line prefixes.
    pub fn rank_count(&self) -> u32 {
        self.ranks_seen.count_ones()
    }

    /// Whether the start-up has got past its arguments (memory figures or a failure): a start
    /// line after this point begins another start-up.
    fn progressed(&self) -> bool {
        self.failed || self.figures.iter().any(|f| PROGRESS_KEYS.contains(&f.key))
    }

    fn summary(&self, last_line: u64, split: Split) -> StartupSummary {
        StartupSummary {
            engine: self.engine,
            engine_version: self.engine_version.clone(),
            lines: (self.first_line, last_line),
            failed: self.failed,
            failure: self.failure.clone(),
            kv_cache_gib: self.figure("kv_cache").and_then(|f| f.gib),
            split,
        }
    }
}

/// Figures printed only once a start-up is loading or sizing memory (not the argument echoes
/// such as `Using max model len`, which come before the engine's own start line).
const PROGRESS_KEYS: &[&str] = &[
    "weights",
    "kv_cache",
    "kv_cache_tokens",
    "k_size",
    "gpu_blocks",
    "cuda_graph",
    "activation_peak",
    "non_torch",
    "avail_before_weights",
    "avail_after_weights",
    "free_at_start",
    "n_ctx",
    "n_slots",
];

/// The line an engine prints first in every start-up (so a second one is a restart).
fn starts_run(t: &str) -> bool {
    [
        "vLLM API server version ",
        "Initializing a V1 LLM engine (v",
        "Initializing an LLM engine (v",
        "non-default args: {",
        "text_generation_launcher: Args {",
        "llama_server: initializing",
        "main: build = ",
        "common_params_print_info: build ",
        "# command: ",
    ]
    .iter()
    .any(|p| t.contains(p))
        || t.starts_with("build: ")
        || dialects().any(|(_, d)| d.run_starts.iter().any(|p| t.contains(p)))
}

/// The engines whose start-up phrases are registered as data, in [`Engine::ALL`]'s order.
fn dialects() -> impl Iterator<Item = (Engine, &'static LogDialect)> {
    Engine::ALL
        .into_iter()
        .filter_map(|e| e.log_dialect().map(|d| (e, d)))
}

/// The engine a line can only come from (phrases no other engine prints).
fn engine_of_line(t: &str) -> Option<Engine> {
    if t.contains("vLLM API server version")
        || t.contains("LLM engine (v")
        || t.contains("EngineCore")
        || t.contains("[gpu_model_runner.py")
        || t.contains("non-default args: {")
    {
        Some(Engine::Vllm)
    } else if let Some((e, _)) = dialects().find(|(_, d)| d.own_lines.iter().any(|p| t.contains(p)))
    {
        Some(e)
    } else if t.contains("text_generation_launcher") || t.contains("text_generation_router") {
        Some(Engine::Tgi)
    } else if t.contains("llama_context:")
        || t.contains("llama_model_loader:")
        || t.contains("llama_kv_cache")
    {
        Some(Engine::LlamaCpp)
    } else {
        None
    }
}

/// Whether `text` begins a new record after `cur`, and why.
fn split_before(text: &str, cur: &StartupLog) -> Option<Split> {
    if let (Some(new), Some(old)) = (engine_of_line(text), cur.engine)
        && new != old
    {
        return Some(Split::OtherEngine);
    }
    (starts_run(text) && cur.progressed()).then_some(Split::Restart)
}

/// Why the input is not a start-up log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupLogError {
    /// Reading failed.
    #[error("read error after line {line}: {message}")]
    Io {
        /// Lines read before the error.
        line: u64,
        /// The I/O error.
        message: String,
    },
    /// NUL bytes: a binary file.
    #[error("line {line}: binary data, not a start-up log")]
    Binary {
        /// First line with a NUL byte.
        line: u64,
    },
    /// No engine phrase and no memory figure.
    #[error(
        "not a start-up log of {}: none of their start-up lines in {lines} lines",
        engines_read()
    )]
    NotAStartupLog {
        /// Lines read.
        lines: u64,
    },
}

/// Parse a start-up log from `r`, streaming. Each start-up in the input is its own record: the
/// last one is returned, the ones before it are summarised in [`StartupLog::earlier`].
pub fn parse(mut r: impl BufRead) -> Result<StartupLog, StartupLogError> {
    let mut log = StartupLog {
        first_line: 1,
        ..StartupLog::default()
    };
    let mut earlier: Vec<StartupSummary> = Vec::new();
    let mut earlier_dropped = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    // Lines of a multi-line message (vLLM 0.6.x profiling) that carry no prefix inherit the rank
    // of the line before.
    let mut last_rank: Option<u32> = None;
    loop {
        buf.clear();
        let (read, complete, cut) =
            read_line(&mut r, &mut buf).map_err(|e| StartupLogError::Io {
                line: log.lines,
                message: e.to_string(),
            })?;
        if read == 0 {
            break;
        }
        log.lines += 1;
        if cut {
            log.long_lines += 1;
        }
        if buf.contains(&0) {
            return Err(StartupLogError::Binary { line: log.lines });
        }
        let lossy = String::from_utf8_lossy(&buf);
        // Most lines have no colour codes: skip the char-by-char copy for them.
        let text = if lossy.contains('\u{1b}') {
            std::borrow::Cow::Owned(strip_ansi(&lossy))
        } else {
            lossy
        };
        let text = text.trim_end_matches(['\r', '\n']);
        if let Some(split) = split_before(text, &log) {
            if earlier.len() >= MAX_EARLIER {
                earlier.remove(0);
                earlier_dropped += 1;
            }
            earlier.push(log.summary(log.lines - 1, split));
            log = StartupLog {
                first_line: log.lines,
                lines: log.lines,
                long_lines: log.long_lines,
                ..StartupLog::default()
            };
            last_rank = None;
        }
        if !complete {
            log.ends_mid_line = true;
        }
        let rank = rank_of(text).or(last_rank.filter(|_| !has_prefix(text)));
        if let Some(r) = rank.filter(|r| *r < 64) {
            log.ranks_seen |= 1u64 << r;
        }
        last_rank = rank;
        let mut l = Line {
            text,
            // A number running to the end of a cut line may be cut mid-digit.
            complete: complete && !cut,
            no: log.lines,
            rank,
        };
        scan(&mut l, &mut log);
    }
    if log.engine.is_none() && log.figures.is_empty() && earlier.is_empty() {
        return Err(StartupLogError::NotAStartupLog { lines: log.lines });
    }
    log.earlier = earlier;
    log.earlier_dropped = earlier_dropped;
    Ok(log)
}

/// Read one line into `buf` (at most [`MAX_LINE_BYTES`]); returns (bytes consumed, ended with a
/// newline, was cut).
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<(usize, bool, bool)> {
    let mut consumed = 0;
    let mut cut = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((consumed, false, cut));
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(buf.len());
        if let Some(part) = chunk.get(..take.min(room)) {
            buf.extend_from_slice(part);
        }
        if take > room {
            cut = true;
        }
        r.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, true, cut));
        }
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte (0x40..=0x7e).
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// `TP3`, `Worker_TP3`, `rank=3`, `DP0 TP3` in a line prefix.
fn rank_of(text: &str) -> Option<u32> {
    let head = text.get(..text.len().min(120)).unwrap_or(text);
    for pat in ["Worker_TP", " TP", "[TP", "rank="] {
        if let Some(i) = head.find(pat) {
            let rest = head.get(i + pat.len()..).unwrap_or("");
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() {
                return digits.parse().ok();
            }
        }
    }
    None
}

/// The line starts with a log prefix (so it is not a continuation of a multi-line message).
fn has_prefix(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('(')
        || t.starts_with('[')
        || t.starts_with("INFO")
        || t.starts_with("WARNING")
        || t.starts_with("ERROR")
        || t.starts_with(|c: char| c.is_ascii_digit())
}

struct Line<'a> {
    text: &'a str,
    complete: bool,
    no: u64,
    rank: Option<u32>,
}

impl Line<'_> {
    /// The number right after the first `pat` (commas as thousands separators allowed), and the
    /// text after it. A number that runs to the end of an incomplete line is refused.
    fn num_after(&self, pat: &str) -> Option<(f64, &str)> {
        let i = self.text.find(pat)?;
        let rest = self.text.get(i + pat.len()..)?.trim_start();
        let end = rest
            .char_indices()
            .find(|(j, c)| {
                !(c.is_ascii_digit()
                    || *c == '.'
                    || (*c == '-' && *j == 0)
                    || (*c == ','
                        && rest
                            .get(j + 1..)
                            .is_some_and(|r| r.starts_with(|d: char| d.is_ascii_digit()))))
            })
            .map_or(rest.len(), |(j, _)| j);
        // An exponent (`1e12`, `2.5E-3`) belongs to the number: stopping at the `e` would read 1.
        let end = end + exponent_len(rest.get(end..).unwrap_or(""));
        if end == rest.len() && !self.complete {
            return None;
        }
        let digits: String = rest.get(..end)?.chars().filter(|c| *c != ',').collect();
        let v: f64 = digits.trim_end_matches('.').parse().ok()?;
        v.is_finite().then_some((v, rest.get(end..).unwrap_or("")))
    }
}

/// Length of an exponent (`e12`, `E-3`, `e+5`) at the start of `s`, 0 when there is none.
fn exponent_len(s: &str) -> usize {
    let b = s.as_bytes();
    if !matches!(b.first(), Some(b'e' | b'E')) {
        return 0;
    }
    let sign = usize::from(matches!(b.get(1), Some(b'+' | b'-')));
    let digits = b
        .iter()
        .skip(1 + sign)
        .take_while(|c| c.is_ascii_digit())
        .count();
    if digits == 0 { 0 } else { 1 + sign + digits }
}

/// A memory unit as printed right after a number.
fn unit_of(rest: &str, engine: Option<Engine>) -> Option<(&'static str, f64)> {
    let r = rest.trim_start();
    // (unit as printed, GiB per unit)
    if r.starts_with("GiB") {
        Some(("GiB", 1.0))
    } else if r.starts_with("MiB") {
        Some(("MiB", 1.0 / 1024.0))
    } else if r.starts_with("GB") {
        // TGI divides by 1e9; old vLLM and the dialects print GiB as "GB".
        if engine == Some(Engine::Tgi) {
            Some(("GB", 1e9 / (1u64 << 30) as f64))
        } else {
            Some(("GB", 1.0))
        }
    } else {
        None
    }
}

fn set(
    log: &mut StartupLog,
    l: &Line,
    key: &'static str,
    value: f64,
    unit: &'static str,
    gib: Option<f64>,
) {
    let f = Figure {
        key,
        value,
        unit,
        gib,
        line: l.no,
        rank: l.rank,
    };
    match log.figures.iter_mut().find(|x| x.key == key) {
        // Rank 0 (or the lowest rank) wins; an unranked repeat does not override.
        Some(old) => {
            if let (Some(new), Some(prev)) = (l.rank, old.rank)
                && new < prev
            {
                *old = f;
            }
        }
        None => log.figures.push(f),
    }
}

fn set_mem(log: &mut StartupLog, l: &Line, key: &'static str, pat: &str) -> bool {
    if let Some((v, rest)) = l.num_after(pat)
        && let Some((unit, per)) = unit_of(rest, log.engine)
    {
        set(log, l, key, v, unit, Some(v * per));
        return true;
    }
    false
}

fn set_count(
    log: &mut StartupLog,
    l: &Line,
    key: &'static str,
    pat: &str,
    unit: &'static str,
) -> bool {
    if let Some((v, _)) = l.num_after(pat) {
        set(log, l, key, v, unit, None);
        return true;
    }
    false
}

fn engine(log: &mut StartupLog, e: Engine) {
    if log.engine.is_none() {
        log.engine = Some(e);
    }
}

fn fail(log: &mut StartupLog, l: &Line) {
    log.failed = true;
    if log.failure.is_none() {
        let t: String = l.text.trim().chars().take(400).collect();
        // The failure line is quoted in reports users paste: no secret in it.
        log.failure = Some((l.no, inferscope_host::redact::scrub(&t).into_owned()));
    }
}

fn word_after<'a>(text: &'a str, pat: &str) -> Option<&'a str> {
    let i = text.find(pat)?;
    let rest = text.get(i + pat.len()..)?.trim_start();
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ')' || c == ',' || c == '"')
        .unwrap_or(rest.len());
    let w = rest.get(..end)?;
    (!w.is_empty()).then_some(w)
}

/// Phrases of the lines that fill a long-running server's log (vLLM's periodic stats from
/// `vllm/v1/metrics/loggers.py`, uvicorn access lines, per-request lines): they never carry a
/// start-up figure, and skipping them with a few searches keeps a 1 GiB log fast.
const BULK: &[&str] = &[
    "throughput:",
    "HTTP/1.",
    "Received request",
    "Finished request",
    "Added request",
];

fn scan(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if BULK.iter().any(|b| t.contains(b)) {
        return;
    }
    scan_engine(l, log);
    scan_arguments(l, log);
    scan_gpu(l, log);
    scan_device_hint(l, log);
    scan_vllm(l, log);
    scan_dialects(l, log);
    scan_tgi(l, log);
    scan_llama_cpp(l, log);
    scan_any_engine(l, log);
}

/// One line's engine and version
fn scan_engine(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if let Some(v) = word_after(t, "vLLM API server version ") {
        engine(log, Engine::Vllm);
        log.engine_version.get_or_insert_with(|| v.to_string());
    }
    // 0.8.x names the engine it fell back to: "Initializing a V0 LLM engine (v0.8.5.post1)".
    if t.contains("Initializing a V1 LLM engine (v")
        || t.contains("Initializing a V0 LLM engine (v")
        || t.contains("Initializing an LLM engine (v")
    {
        engine(log, Engine::Vllm);
        if let Some(v) = word_after(t, "LLM engine (v") {
            log.engine_version.get_or_insert_with(|| v.to_string());
        }
        if log.vllm_v1.is_none() {
            log.vllm_v1 = Some(t.contains("V1 LLM engine"));
        }
    }
    if t.contains("Using FlashInfer for top-p & top-k sampling") {
        log.vllm_flashinfer_sampler.get_or_insert(true);
    } else if t.contains("PyTorch-native implementation of top-p & top-k sampling") {
        log.vllm_flashinfer_sampler.get_or_insert(false);
    }
    if t.contains("EngineCore") || t.contains("Worker_TP") || t.contains("[gpu_model_runner.py") {
        engine(log, Engine::Vllm);
        if t.contains("EngineCore") {
            log.vllm_v1.get_or_insert(true);
        }
    }
    for (e, d) in dialects() {
        if d.names.iter().any(|g| g.iter().all(|w| t.contains(w))) {
            engine(log, e);
        }
    }
    if t.contains("text_generation_launcher") || t.contains("text_generation_router") {
        engine(log, Engine::Tgi);
    }
    if t.contains("llama_context:")
        || t.contains("llama_model_loader:")
        || t.contains("llama_kv_cache")
        || t.contains("llama_new_context_with_model:")
    {
        engine(log, Engine::LlamaCpp);
    }
    if t.contains("llama-server") && t.contains("version: ") {
        engine(log, Engine::LlamaCpp);
        if let Some(v) = word_after(t, "version: ") {
            log.engine_version.get_or_insert_with(|| v.to_string());
        }
    }
}

/// One line's arguments
fn scan_arguments(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if let Some(i) = t.find("non-default args: {") {
        engine(log, Engine::Vllm);
        args_python(
            log,
            t.get(i + "non-default args: {".len()..).unwrap_or(""),
            ':',
        );
    }
    for (e, d) in dialects() {
        if let Some((pat, sep)) = d.args
            && let Some(i) = t.find(pat)
        {
            engine(log, e);
            args_python(log, t.get(i + pat.len()..).unwrap_or(""), sep);
        }
    }
    if let Some(i) = t.find("Args {") {
        engine(log, Engine::Tgi);
        args_python(log, t.get(i + "Args {".len()..).unwrap_or(""), ':');
    }
    if let Some(i) = t.find("# command: ") {
        let cmd = t.get(i + "# command: ".len()..).unwrap_or("");
        args_command(log, cmd, true);
        // The detector `run` and `plan` use, so `env X=1 vllm serve` is vLLM here too.
        if let Some(e) = command_engine(cmd) {
            engine(log, e);
        }
        return;
    }
    // A command quoted in a report: `vllm serve MODEL --flag value`. Not inside the engine's
    // own log record (`[factories.py:89] ... Restart vllm serve with --enable-scale-out to
    // enable them.` is advice, not the command: vLLM 0.32 prints it at every start).
    let quoted = dialects().filter_map(|(e, d)| Some((d.command?, e)));
    for (pat, e) in std::iter::once(("vllm serve ", Engine::Vllm)).chain(quoted) {
        if let Some(i) = t.find(pat)
            && !python_record(t.get(..i).unwrap_or(""))
        {
            engine(log, e);
            args_command(log, t.get(i + pat.len()..).unwrap_or(""), false);
        }
    }
}

/// `head` holds a Python logger's source tag (`[factories.py:89]`): the rest of the line is a
/// message the engine logged.
fn python_record(head: &str) -> bool {
    head.find('[').is_some_and(|i| {
        head.get(i..)
            .and_then(|r| r.split_once(']'))
            .is_some_and(|(tag, _)| tag.contains(".py:"))
    })
}

/// One line's GPU
fn scan_gpu(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if log.gpu_model.is_none() {
        // nvidia-smi table row: `|   0  NVIDIA GeForce RTX 5080        Off |`
        if t.starts_with('|')
            && let Some(i) = t.find("NVIDIA ")
            && let Some(name) = t.get(i..).and_then(|r| r.split("  ").next())
        {
            log.gpu_model = Some(name.trim().to_string());
        }
        // the engines' fused-MoE config lookups (vLLM's among them) name the device:
        // `…/configs/E=128,N=192,device_name=NVIDIA_GeForce_RTX_3090.json`.
        if let Some(i) = t.find("device_name=")
            && let Some(name) = t
                .get(i + "device_name=".len()..)
                .and_then(|r| r.split(['.', ',', ']', '\'', '"', ' ']).next())
            && name.len() > 2
        {
            log.gpu_model = Some(name.replace('_', " "));
        }
        // vLLM `platforms/cuda.py` `check_if_supports_dtype`: "… Your Tesla T4 GPU has compute
        // capability 7.5. You can use float16 instead …"
        if let Some(i) = t.find("Your ")
            && let Some(rest) = t.get(i + 5..)
            && let Some(j) = rest.find(" GPU has compute capability")
            && let Some(name) = rest.get(..j)
            && !name.is_empty()
        {
            log.gpu_model = Some(name.trim().to_string());
        }
        // vLLM `config/model.py` `_resolve_auto_dtype`: "Your device 'Tesla V100-SXM2-32GB' (with
        // compute capability 7.0) doesn't support torch.bfloat16. Falling back to …"
        if let Some(i) = t.find("Your device '")
            && let Some(rest) = t.get(i + 13..)
            && let Some(j) = rest.find('\'')
            && let Some(name) = rest.get(..j)
            && !name.is_empty()
        {
            log.gpu_model = Some(name.trim().to_string());
        }
        // TGI launcher `compute_type`: nvidia-smi's gpu_name, spaces as `-`, lower case, printed
        // for a card it has no FLOPS for: "Unkown compute for card nvidia-rtx-a6000".
        if let Some(card) = word_after(t, "Unkown compute for card ")
            .or_else(|| word_after(t, "Unknown compute for card "))
        {
            log.gpu_model = Some(card.replace('-', " "));
        }
        // llama.cpp / ggml: `Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9`
        if let Some(i) = t.find("Device 0: ")
            && let Some(name) = t.get(i + 10..).and_then(|r| r.split(',').next())
        {
            log.gpu_model = Some(name.trim().to_string());
        }
    }
}

/// Device lines that do not name one card: kept so the report can say why it asks for `--gpu`.
fn scan_device_hint(l: &Line, log: &mut StartupLog) {
    let t = l.text;
    // vLLM `platforms/cuda.py` `log_warnings`: GPUs of several kinds: which one runs is unknown.
    if t.contains("Detected different devices in the system: ") {
        log.gpu_unidentified = Some((l.no, t.trim().to_string()));
        return;
    }
    if log.gpu_unidentified.is_some() {
        return;
    }
    // An attention backend or the platform names a family of cards at most.
    let backend = (t.contains("Using ") && t.contains(" backend"))
        || t.contains("Automatically detected platform ")
        || t.contains("Attention backend not set");
    if backend {
        log.gpu_unidentified = Some((l.no, t.trim().to_string()));
    }
}

/// One line's vLLM figures (memory profiling, KV cache, blocks, CUDA graphs).
fn scan_vllm(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("Loading model weights took") {
        engine(log, Engine::Vllm);
        set_mem(log, l, "weights", "Loading model weights took");
    }
    if t.contains("Model loading took") {
        engine(log, Engine::Vllm);
        set_mem(log, l, "weights", "Model loading took");
    }
    set_mem(log, l, "total_gpu_memory", "total_gpu_memory (");
    if let Some(i) = t.find("gpu_memory_utilization (") {
        let after = t.get(i..).unwrap_or("");
        let sub = Line { text: after, ..*l };
        set_count(
            log,
            &sub,
            "gpu_memory_utilization",
            "gpu_memory_utilization (",
            "fraction",
        );
        set_mem(log, &sub, "usable_memory", ") = ");
    }
    set_mem(log, l, "weights", "model weights take ");
    set_mem(log, l, "non_torch", "non_torch_memory takes ");
    set_mem(
        log,
        l,
        "activation_peak",
        "PyTorch activation peak memory takes ",
    );
    set_mem(
        log,
        l,
        "kv_cache",
        "the rest of the memory reserved for KV Cache is ",
    );
    // 0.6.4: `Memory profiling results: total_gpu_memory=79.15GiB ... kv_cache_size=57.20GiB`
    if t.contains("Memory profiling results:") {
        set_mem(log, l, "total_gpu_memory", "total_gpu_memory=");
        set_mem(log, l, "non_torch", "non_torch_memory=");
        set_mem(log, l, "kv_cache", "kv_cache_size=");
        set_count(
            log,
            l,
            "gpu_memory_utilization",
            "gpu_memory_utilization=",
            "fraction",
        );
    }
    set_mem(log, l, "kv_cache", "Available KV cache memory:");
    set_count(log, l, "kv_cache_tokens", "GPU KV cache size:", "tokens");
    scan_vllm_cpu(l, log);
    if t.contains("Maximum concurrency for") {
        set_count(
            log,
            l,
            "max_concurrency_request_tokens",
            "Maximum concurrency for",
            "tokens",
        );
        set_count(log, l, "max_concurrency", "tokens per request:", "x");
    }
    set_count(log, l, "gpu_blocks", "# GPU blocks:", "blocks");
    set_count(log, l, "gpu_blocks", "# CUDA blocks:", "blocks");
    set_count(log, l, "gpu_blocks", "num_gpu_blocks is:", "blocks");
    set_count(log, l, "cpu_blocks", "# CPU blocks:", "blocks");
    // The "took" after the phrase: a prefix or an earlier clause may hold another one.
    if let Some(i) = t.find("Graph capturing finished in") {
        let sub = Line {
            text: t.get(i..).unwrap_or(""),
            ..*l
        };
        set_mem(log, &sub, "cuda_graph", "took");
    }
    set_count(log, l, "max_model_len", "Using max model len", "tokens");
    set_count(
        log,
        l,
        "chunked_prefill_tokens",
        "Chunked prefill is enabled with max_num_batched_tokens=",
        "tokens",
    );
    if let Some(j) = t.find("Free memory on device (") {
        engine(log, Engine::Vllm);
        // `(F/T GiB)`: the unit follows T only.
        let sub = Line {
            text: t.get(j + "Free memory on device (".len()..).unwrap_or(""),
            ..*l
        };
        if let Some((free, rest)) = sub.num_after("")
            && let Some(rest) = rest.strip_prefix('/')
        {
            let sub = Line { text: rest, ..*l };
            if let Some((total, unit_rest)) = sub.num_after("")
                && unit_rest.trim_start().starts_with("GiB")
            {
                set(log, l, "free_at_start", free, "GiB", Some(free));
                set(log, l, "total_gpu_memory", total, "GiB", Some(total));
            }
        }
        if let Some(i) = t.find("utilization is (") {
            let sub = Line {
                text: t.get(i..).unwrap_or(""),
                ..*l
            };
            set_count(
                log,
                &sub,
                "gpu_memory_utilization",
                "utilization is (",
                "fraction",
            );
            set_mem(log, &sub, "usable_memory", ", ");
        }
        if let Some(i) = t.find("Actual usage is ") {
            let sub = Line {
                text: t.get(i..).unwrap_or(""),
                ..*l
            };
            set_mem(log, &sub, "weights", "Actual usage is ");
            set_mem(log, &sub, "activation_peak", "for weight, ");
            set_mem(log, &sub, "non_torch", "for peak activation, ");
            set_mem(log, &sub, "cuda_graph", "for non-torch memory, and ");
        }
        if t.contains("is less than desired GPU memory utilization") {
            fail(log, l);
        }
    }
    scan_vllm_failures(l, log);
    scan_vllm_block_override(l, log);
}

/// `--num-gpu-blocks-override`: vLLM allocates the override, not what it profiled
/// (`vllm/v1/core/kv_cache_utils.py` `get_num_blocks`, 0.10+: "Overriding num_gpu_blocks=X with
/// num_gpu_blocks_override=Y"); the KV pool is Y/X of the memory the earlier lines print.
fn scan_vllm_block_override(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("Overriding num_gpu_blocks=") && t.contains("num_gpu_blocks_override=") {
        engine(log, Engine::Vllm);
        set_count(
            log,
            l,
            "gpu_blocks_profiled",
            "Overriding num_gpu_blocks=",
            "blocks",
        );
        set_count(
            log,
            l,
            "gpu_blocks_override",
            "num_gpu_blocks_override=",
            "blocks",
        );
    }
}

/// One line's vLLM CPU-backend figures (`vllm/v1/worker/cpu_worker.py`
/// `determine_available_memory`, 0.32: "Explicitly set (K/T) GiB for KV cache on node N." or
/// "Auto set (K/T) GiB for KV cache on node N, with R GiB requested memory for the worker. C GiB
/// memory was consumed by non-kv usages."; `vllm/v1/core/kv_cache_utils.py`
/// `update_kv_cache_capacity`: "CPU KV cache size: N tokens, Maximum concurrency for …").
fn scan_vllm_cpu(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("CPU KV cache size:") {
        engine(log, Engine::Vllm);
        log.device.get_or_insert_with(|| "cpu".to_string());
        set_count(log, l, "kv_cache_tokens", "CPU KV cache size:", "tokens");
    }
    for pat in ["Explicitly set (", "Auto set ("] {
        if let Some(i) = t.find(pat)
            && t.contains("GiB for KV cache")
        {
            engine(log, Engine::Vllm);
            log.device.get_or_insert_with(|| "cpu".to_string());
            let sub = Line {
                text: t.get(i + pat.len()..).unwrap_or(""),
                ..*l
            };
            if let Some((kv, rest)) = sub.num_after("")
                && let Some(rest) = rest.strip_prefix('/')
                && let Some((total, unit)) = (Line { text: rest, ..*l }).num_after("")
                && unit.trim_start().starts_with(") GiB")
            {
                set(log, l, "kv_cache", kv, "GiB", Some(kv));
                set(log, l, "cpu_node_memory", total, "GiB", Some(total));
            }
            set_mem(log, l, "non_torch", "requested memory for the worker.");
        }
    }
    if t.contains("on kv cache allocation is less than requested memory for kv") {
        engine(log, Engine::Vllm);
        fail(log, l);
    }
}

/// One line's vLLM failure messages (the figures they quote become the failure's evidence).
fn scan_vllm_failures(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("is larger than the maximum number of tokens that can be stored in KV cache") {
        engine(log, Engine::Vllm);
        if let Some(i) = t.find("stored in KV cache (") {
            let sub = Line {
                text: t.get(i..).unwrap_or(""),
                ..*l
            };
            set_count(
                log,
                &sub,
                "kv_capacity_tokens_in_error",
                "stored in KV cache (",
                "tokens",
            );
        }
        set_count(log, l, "max_model_len", "max seq len (", "tokens");
        set_count(log, l, "max_model_len", "max_model_len (", "tokens");
        fail(log, l);
    }
    if t.contains("To serve at least one request with the model") {
        engine(log, Engine::Vllm);
        set_count(log, l, "max_model_len", "max seq len (", "tokens");
        set_mem(log, l, "kv_cache_needed", "), (");
        if let Some(i) = t.find("available KV cache memory (") {
            let sub = Line {
                text: t.get(i..).unwrap_or(""),
                ..*l
            };
            set_mem(log, &sub, "kv_cache", "available KV cache memory (");
        }
        set_count(
            log,
            l,
            "estimated_max_model_len",
            "estimated maximum model length is",
            "tokens",
        );
        fail(log, l);
    }
    if t.contains("No available memory for the cache blocks")
        || t.contains("EngineCore failed to start")
        || t.contains("Engine core initialization failed")
    {
        fail(log, l);
    }
}

/// One line's figures and failures of the registered dialects
fn scan_dialects(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    for (e, d) in dialects() {
        for line in d.lines {
            if !line.phrases.iter().any(|p| t.contains(p)) {
                continue;
            }
            if line.names_engine {
                engine(log, e);
            }
            for f in line.figures {
                match f.unit {
                    FigureUnit::Memory => set_mem(log, l, f.key, f.after),
                    FigureUnit::Count(unit) => set_count(log, l, f.key, f.after, unit),
                };
            }
            if line.fails {
                fail(log, l);
            }
        }
    }
}

/// The engines whose start-up logs are read, in users' words: vLLM, the registered dialects'
/// engines (by [`Engine::name`]), then `TGI or llama-server`.
pub fn engines_read() -> String {
    let dialects: String = dialects().map(|(e, _)| format!("{}, ", e.name())).collect();
    format!("vLLM, {dialects}TGI or llama-server")
}

/// One line's TGI figures
fn scan_tgi(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("KV-cache blocks:") {
        engine(log, Engine::Tgi);
        set_count(log, l, "gpu_blocks", "KV-cache blocks:", "blocks");
        set_count(log, l, "block_size", ", size:", "tokens");
    }
    if t.contains("Setting max batch total tokens to") {
        engine(log, Engine::Tgi);
        set_count(
            log,
            l,
            "kv_cache_tokens",
            "Setting max batch total tokens to",
            "tokens",
        );
    }
    set_count(
        log,
        l,
        "max_batch_prefill_tokens",
        "Default `max_batch_prefill_tokens` to",
        "tokens",
    );
    set_count(log, l, "num_shard", "Sharding model on", "processes");
    set_count(
        log,
        l,
        "max_model_len",
        "Maximum total tokens defaulted to",
        "tokens",
    );
    if t.contains("Not enough memory to handle") {
        engine(log, Engine::Tgi);
        set_count(
            log,
            l,
            "prefill_tokens_in_error",
            "Not enough memory to handle",
            "tokens",
        );
        fail(log, l);
    }
    if log.engine == Some(Engine::Tgi) && t.contains("Shard") && t.contains("failed to start") {
        fail(log, l);
    }
}

/// One line's llama.cpp figures (MiB)
fn scan_llama_cpp(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if let Some((v, rest)) = l.num_after("llama_kv_cache: size = ")
        && rest.trim_start().starts_with("MiB")
    {
        // One line per cache (a sliding-window model prints two): the figure is their sum.
        let prev = log.figure("kv_cache").map_or(0.0, |f| f.value);
        log.figures.retain(|f| f.key != "kv_cache");
        let sum = prev + v;
        set(log, l, "kv_cache", sum, "MiB", Some(sum / 1024.0));
    }
    if t.contains("llama_context: n_ctx ") {
        set_count(log, l, "n_ctx", "= ", "tokens");
    }
    if t.contains("n_slots = ") && t.contains("n_ctx_slot = ") {
        set_count(log, l, "n_slots", "n_slots = ", "slots");
        set_count(log, l, "max_model_len", "n_ctx_slot = ", "tokens");
    }
    if t.contains("model buffer size =") {
        set_mem(log, l, "weights", "model buffer size =");
    }
    if t.contains("compute buffer size =") {
        set_mem(log, l, "activation_peak", "compute buffer size =");
    }
    scan_llama_cpp_failure(l, log);
    if log.engine == Some(Engine::LlamaCpp)
        && (t.contains("failed to allocate") || t.contains("failed to load model"))
    {
        fail(log, l);
    }
}

/// llama.cpp's older context lines and its allocation failures (ggml-cuda.cu
/// `ggml_backend_cuda_buffer_type_alloc_buffer`, ggml-backend.cpp's CPU buffer, ggml-alloc.c
/// `ggml_gallocr_reserve_n`), and the free memory newer builds print per device.
fn scan_llama_cpp_failure(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    // ≤ b3xxx: "llama_new_context_with_model: n_ctx      = 1048576", "KV self size  = 5120.00 MiB"
    if t.contains("llama_context: n_seq_max ") {
        set_count(log, l, "n_seq_max", "= ", "seqs");
    }
    if t.contains("llama_new_context_with_model: n_ctx ") {
        set_count(log, l, "n_ctx", "= ", "tokens");
    }
    if t.contains("KV self size") && log.figure("kv_cache").is_none() {
        set_mem(log, l, "kv_cache", "=");
    }
    // "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) - 23008 MiB free"
    if t.contains("using device ") && t.contains(" MiB free") {
        if let Some(i) = t.rfind(") - ") {
            let rest = l.text.get(i + 4..).unwrap_or("");
            if let Some(v) = rest
                .split_whitespace()
                .next()
                .and_then(|w| w.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
            {
                set(log, l, "free_at_start", v, "MiB", Some(v / 1024.0));
            }
        }
        if let (Some(a), Some(b)) = (t.find(" ("), t.rfind(") - "))
            && a + 2 < b
            && log.gpu_model.is_none()
        {
            log.gpu_model = t.get(a + 2..b).map(|n| n.trim().to_string());
        }
    }
    // The first GPU's own buffers ("CUDA0 model buffer size = …", "CUDA0 compute buffer size = …").
    if t.contains("CUDA") || t.contains("ROCm") {
        if t.contains("model buffer size =") {
            set_mem(log, l, "device_weights", "model buffer size =");
        }
        if t.contains("compute buffer size =") {
            set_mem(log, l, "device_compute", "compute buffer size =");
        }
    }
    // common/arg.cpp device list: "- CPU     : AMD EPYC (24105 MiB, 24105 MiB free)",
    // "- CUDA0   : NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)".
    if t.contains("common_param:")
        && t.contains(" MiB free)")
        && let Some(i) = t.find("- ")
        && let Some(rest) = t.get(i + 2..)
        && let Some((dev, desc)) = rest.split_once(':')
        && let Some(j) = desc.rfind('(')
    {
        let dev = dev.trim();
        let inside = desc.get(j + 1..).unwrap_or("");
        let free = inside
            .split(',')
            .nth(1)
            .and_then(|f| f.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0);
        if let Some(v) = free {
            let key = if dev == "CPU" {
                "host_free"
            } else {
                "free_at_start"
            };
            set(log, l, key, v, "MiB", Some(v / 1024.0));
        }
        if dev != "CPU" && log.gpu_model.is_none() {
            log.gpu_model = desc.get(..j).map(|n| n.trim().to_string());
        }
    }
    // common.cpp `common_params_fit_impl`, llama.cpp's own fit (b7xxx+): "projected to use 98308
    // MiB of host memory vs. 24105 MiB of total host memory", "cannot meet free memory target of
    // 1024 MiB, need to reduce device memory by 75227 MiB", and the breakdown row
    // "|   - Host   |   98308 =     2 +   65536 +   32770   |" (self = model + context + compute).
    if t.contains("common_params_fit_impl:") {
        set_mem(log, l, "fit_projected", "projected to use ");
        set_mem(log, l, "fit_total", " vs. ");
        set_mem(log, l, "fit_target", "free memory target of ");
        set_mem(log, l, "fit_shortfall", "reduce device memory by ");
    }
    if t.contains("common_memory_breakdown_print:")
        && let Some(eq) = t.find('=')
    {
        let parts: Vec<f64> = t
            .get(eq + 1..)
            .unwrap_or("")
            .split(['+', '|'])
            .filter_map(|p| p.trim().parse::<f64>().ok())
            .collect();
        if let [model, context, compute, ..] = parts.as_slice()
            && log.figure("fit_context").is_none()
        {
            set(log, l, "fit_model", *model, "MiB", Some(model / 1024.0));
            set(
                log,
                l,
                "fit_context",
                *context,
                "MiB",
                Some(context / 1024.0),
            );
            set(
                log,
                l,
                "fit_compute",
                *compute,
                "MiB",
                Some(compute / 1024.0),
            );
        }
    }
    // "offloaded 62/62 layers to GPU"
    if let Some(i) = t.find("offloaded ")
        && t.contains(" layers to GPU")
        && let Some((on, total)) = t
            .get(i + 10..)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|w| w.split_once('/'))
        && let (Ok(on), Ok(total)) = (on.parse::<u32>(), total.parse::<u32>())
    {
        set(log, l, "layers_offloaded", f64::from(on), "layers", None);
        set(log, l, "layers_total", f64::from(total), "layers", None);
    }
    // "allocating 204800.00 MiB on device 0: cudaMalloc failed: out of memory"
    if (t.contains("cudaMalloc failed") || t.contains("hipMalloc failed"))
        && set_mem(log, l, "failed_alloc", "allocating ")
    {
        let dev = word_after(t, "on device ").map(|d| d.trim_end_matches(':'));
        log.failed_buffer
            .get_or_insert(("unknown", format!("CUDA{}", dev.unwrap_or("?"))));
    }
    // "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953504"
    // and ggml-alloc's "failed to allocate CUDA0 buffer of size 9332334592" (bytes).
    if let Some(i) = t.find("failed to allocate ")
        && t.contains("buffer of size ")
        && log.figure("failed_alloc").is_none()
        && let Some((v, _)) = l.num_after("buffer of size ")
    {
        set(
            log,
            l,
            "failed_alloc",
            v,
            "B",
            Some(v / (1u64 << 30) as f64),
        );
        let dev = t
            .get(i + 19..)
            .and_then(|r| r.split_whitespace().next())
            .filter(|d| *d != "buffer")
            .unwrap_or(if t.contains("_cpu_") { "CPU" } else { "?" });
        log.failed_buffer
            .get_or_insert(("unknown", dev.to_string()));
    }
    let kind = if t.contains("failed to allocate buffer for kv cache")
        || t.contains("llama_kv_cache_init() failed")
    {
        Some("kv_cache")
    } else if t.contains("failed to allocate compute buffers") {
        Some("compute")
    } else if t.contains("unable to allocate") && t.contains("buffer") {
        Some("weights")
    } else {
        None
    };
    if let Some(k) = kind {
        match log.failed_buffer.as_mut() {
            Some(fb) if fb.0 == "unknown" => fb.0 = k,
            Some(_) => {}
            None => log.failed_buffer = Some((k, "?".to_string())),
        }
    }
}

/// One line's any engine
fn scan_any_engine(l: &mut Line, log: &mut StartupLog) {
    let t = l.text;
    if t.contains("CUDA out of memory")
        || t.contains("OutOfMemoryError")
        || t.contains("HIP out of memory")
    {
        fail(log, l);
    }
}

/// `'key': value, 'key2': [..]` (vLLM dict), `key=value, ...` (a dataclass repr), or
/// `key: value, ...` (TGI Debug): split on top-level commas, keep quotes' content.
fn args_python(log: &mut StartupLog, s: &str, sep: char) {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth -= 1;
                if depth < 0 {
                    parts.push(s.get(start..i).unwrap_or(""));
                    break;
                }
            }
            (None, ',') if depth == 0 => {
                parts.push(s.get(start..i).unwrap_or(""));
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth >= 0 {
        parts.push(s.get(start..).unwrap_or(""));
    }
    for p in parts {
        if log.args.len() >= MAX_ARGS {
            return;
        }
        let Some((k, v)) = p.split_once(sep) else {
            continue;
        };
        // `... dtype='auto'`: a paste's elision mark before the key.
        let k = k
            .trim()
            .trim_start_matches(['.', '…', ' '])
            .trim_matches(['\'', '"'])
            .replace('-', "_");
        if k.is_empty() || k == "..." || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let mut v = v.trim();
        // TGI: `Some(2)`.
        if let Some(inner) = v.strip_prefix("Some(").and_then(|x| x.strip_suffix(')')) {
            v = inner;
        }
        let v = v.trim_matches(['\'', '"']);
        push_arg(log, k, v);
    }
}

/// Keep argument `k` (first wins), its value redacted by the snapshot's rules
/// ([`inferscope_host::redact`]): `--api-key`, `hf_token` and credentials in URLs never reach a
/// report.
fn push_arg(log: &mut StartupLog, k: String, v: &str) {
    if log.args.len() < MAX_ARGS && !log.args.iter().any(|(x, _)| *x == k) {
        let v = inferscope_host::redact::env_value(&k, v).into_owned();
        log.args.push((k, v));
    }
}

/// The engine a command line starts, through its wrappers (`env X=1`, `nohup`, `python -m`).
pub fn command_engine(cmd: &str) -> Option<Engine> {
    use inferscope_host::engine_command::{Found, find};
    let words: Vec<&str> = cmd.split_whitespace().collect();
    match find(&words) {
        // Ollama writes no start-up log this parser reads.
        Found::Engine {
            kind: Engine::Ollama,
            ..
        } => None,
        Found::Engine { kind, .. } => Some(kind),
        _ => None,
    }
}

/// A command line (`vllm serve M --max-model-len 8192`, `HF_TOKEN=x vllm serve M`,
/// `python -m vllm.entrypoints.openai.api_server --model M`, `llama-server -m x.gguf -c 8192`).
/// With `program_first` the words start with environment assignments and the program (and its
/// `serve` subcommand or `-m module`), which are skipped; the first positional word after them is
/// the model.
fn args_command(log: &mut StartupLog, s: &str, program_first: bool) {
    let mut words: Vec<&str> = s
        .split_whitespace()
        // shell quoting as pasted (`--model-path 'Qwen/Qwen3.5-9B'`) is not part of the value
        .map(|w| {
            w.trim_start_matches(['`', '\'', '"'])
                .trim_end_matches(['`', ')', '\'', '"', ','])
        })
        .filter(|w| !w.is_empty())
        .collect();
    if program_first {
        // `HF_TOKEN=x CUDA_VISIBLE_DEVICES=0 env -u X exec vllm serve M`: the wrappers `run` and
        // `plan` look through too.
        let skip = inferscope_host::engine_command::skip_wrappers(&words);
        words.drain(..skip.min(words.len()));
        let program = words
            .first()
            .map_or("", |w| w.rsplit('/').next().unwrap_or(w));
        let mut skip = usize::from(!words.is_empty());
        if program.starts_with("python") && words.get(1) == Some(&"-m") {
            skip = 3;
        }
        if words.get(skip) == Some(&"serve") {
            skip += 1;
        }
        words.drain(..skip.min(words.len()));
    }
    // The first positional word is the model (`vllm serve MODEL`).
    if let Some(m) = words.first().filter(|w| !w.starts_with('-')) {
        push_arg(log, "model".to_string(), m);
    }
    let mut i = 0;
    while let Some(w) = words.get(i) {
        i += 1;
        let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) else {
            continue;
        };
        let (k, v) = match flag.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match words.get(i) {
                Some(n) if !n.starts_with('-') || n.parse::<f64>().is_ok() => {
                    i += 1;
                    (flag.to_string(), (*n).to_string())
                }
                _ => (flag.to_string(), "true".to_string()),
            },
        };
        push_arg(log, k.replace('-', "_"), &v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> StartupLog {
        parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn vllm_v1_lines_with_prefixes_and_colours() {
        let log = p(
            "\u{1b}[1;36m(EngineCore_DP0 pid=6880)\u{1b}[0;0m INFO 10-31 15:07:49 [gpu_worker.py:298] Available KV cache memory: 1.71 GiB\n\
             (EngineCore_DP0 pid=164) INFO 01-23 15:50:06 [kv_cache_utils.py:1087] GPU KV cache size: 840,160 tokens\n\
             (EngineCore_DP0 pid=164) INFO 01-23 15:50:06 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 25.64x\n",
        );
        assert_eq!(log.engine, Some(Engine::Vllm));
        assert_eq!(log.figure("kv_cache").unwrap().gib, Some(1.71));
        assert_eq!(log.figure("kv_cache_tokens").unwrap().value, 840160.0);
        assert_eq!(log.figure("max_concurrency").unwrap().value, 25.64);
        assert_eq!(
            log.figure("max_concurrency_request_tokens").unwrap().value,
            32768.0
        );
    }

    /// vLLM 0.8.5–0.11 says once which top-k/top-p sampler it uses (topk_topp_sampler.py).
    #[test]
    fn vllm_sampler_lines() {
        let with = p(
            "(EngineCore_DP0 pid=1) INFO 04-30 10:00:00 [topk_topp_sampler.py:44] Using FlashInfer for top-p & top-k sampling.\n",
        );
        assert_eq!(with.vllm_flashinfer_sampler, Some(true));
        let without = p(
            "(EngineCore_DP0 pid=1) WARNING 04-30 10:00:00 [topk_topp_sampler.py:63] FlashInfer is not available. Falling back to the PyTorch-native implementation of top-p & top-k sampling. For the best performance, please install FlashInfer.\n",
        );
        assert_eq!(without.vllm_flashinfer_sampler, Some(false));
        assert_eq!(
            p("INFO vLLM API server version 0.11.0\n").vllm_flashinfer_sampler,
            None
        );
    }

    #[test]
    fn a_number_cut_at_the_end_is_not_trusted() {
        let log = p(
            "INFO vLLM API server version 0.11.0\nINFO [kv_cache_utils.py:1087] GPU KV cache size: 100,7",
        );
        assert!(log.figure("kv_cache_tokens").is_none());
        assert!(log.ends_mid_line);
    }

    #[test]
    fn not_a_log() {
        assert_eq!(
            parse("hello\nworld\n".as_bytes()),
            Err(StartupLogError::NotAStartupLog { lines: 2 })
        );
    }
}
