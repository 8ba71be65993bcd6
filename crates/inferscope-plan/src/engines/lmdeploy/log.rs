//! LMDeploy start-up log lines that state the KV cache and memory, as
//! [`inferscope_formats::startup_log::Figure`]s (the keys `mem startup` already knows).
//!
//! Lines and where they are printed:
//! * `[TM][INFO] [BlockManager] block_size = 9.000 MB` / `max_block_count = 863` — TurboMind
//!   0.1–0.14 `src/turbomind/models/llama/BlockManager.cc` `BlockManager::BlockManager`
//!   (`block_size_ >> 20` as an integer up to ~0.6, `%.3f` of bytes / 2^20 later) → `kv_block`
//!   (MiB), `gpu_blocks`; with both, `kv_cache` = blocks × block (GiB, derived);
//! * `[TM][INFO] max cached tokens: N` — v0.12+ `src/turbomind/engine/engine.cc`
//!   `CreateSequenceManager` → `kv_cache_tokens`;
//! * `` `session_len` truncated to N `` — TurboMind `LlamaBatch::LlamaBatch` ("No enough blocks
//!   for `session_len` (S), `session_len` truncated to N.") or `CreateSequenceManager` → `max_model_len`;
//! * `Object cache budget: X MB from free Y MB and ratio R` — v0.15+ `src/turbomind/turbomind.cc`
//!   `TurboMind::Impl::CreateEngine` → `kv_cache` (MiB) and `avail_after_weights` (MiB);
//! * `[LlamaTritonModel] `cache_block_seq_len` is not set, default to 128` (0.0.x) → `block_size` (tokens);
//! * PyTorch: `Initialize cache engine with N gpu blocks and M cpu blocks` (DEBUG,
//!   `pytorch/engine/cache_engine.py` ≤ 0.9) and `CacheConfig(... block_size=B, num_cpu_blocks=M,
//!   num_gpu_blocks=N ...)` (`executor/base.py` "Building CacheEngine with config") →
//!   `gpu_blocks`, `cpu_blocks`, `block_size` (tokens); `minimal free gpu memory: N mb` /
//!   `device<i> free gpu memory: N mb` → `avail_after_weights` (MiB); `estimated max runtime
//!   memory: N mb` → `runtime_reserve` (MiB);
//! * `TurbomindEngineConfig(...)` / `PytorchEngineConfig(...)` (lmdeploy INFO lines
//!   "input backend=…, backend_config=…" / "updated backend_config=…") → the backend and the
//!   engine's settings as `(name, value)` pairs.
//!
//! Reads line by line with bounded memory (lines cut at [`MAX_LINE_BYTES`]). Pure over a
//! `BufRead`.

use super::Backend;
use crate::plan::PlanRequest;
use inferscope_formats::startup_log::{
    Engine, Figure, MAX_ARGS, MAX_LINE_BYTES, StartupLog, StartupLogError,
};
use std::io::{BufRead, Read};

/// What an LMDeploy start-up log says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LmdeployLog {
    /// The engine, from its phrases (`[TM]` lines or an engine-config line).
    pub backend: Option<Backend>,
    /// Figures, first occurrence wins (one start per log; ranks repeat TurboMind's lines).
    pub figures: Vec<Figure>,
    /// `name=value` pairs of the engine-config line (at most [`MAX_ARGS`]).
    pub config: Vec<(String, String)>,
    /// A line only LMDeploy prints was seen (`[TM]`, the `lmdeploy` logger, an engine-config
    /// line): what [`LmdeployLog::is_lmdeploy`] asks.
    pub own_lines: bool,
}

impl LmdeployLog {
    /// The figure with this key.
    pub fn figure(&self, key: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.key == key)
    }

    /// The engine-config value of `name`.
    pub fn config(&self, name: &str) -> Option<&str> {
        self.config
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

const MIB_PER_GIB: f64 = 1024.0;

fn push(log: &mut LmdeployLog, line: u64, key: &'static str, value: f64, unit: &'static str) {
    if log.figures.iter().any(|f| f.key == key) {
        return;
    }
    let gib = match unit {
        "MiB" => Some(value / MIB_PER_GIB),
        "GiB" => Some(value),
        _ => None,
    };
    log.figures.push(Figure {
        key,
        value,
        unit,
        gib,
        line,
        rank: None,
    });
}

/// The number right after `pat` in `s` (digits, `.`), if any.
fn num_after(s: &str, pat: &str) -> Option<f64> {
    let at = s.find(pat)? + pat.len();
    let rest = s.get(at..)?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest.get(..end)?.parse().ok()
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            if it.peek() == Some(&'[') {
                for d in it.by_ref() {
                    if d.is_ascii_alphabetic() {
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

fn read_config(log: &mut LmdeployLog, s: &str, open: usize) {
    let body = s.get(open..).unwrap_or_default();
    let body = body.split_once(')').map_or(body, |(b, _)| b);
    for part in body.split(", ") {
        if log.config.len() >= MAX_ARGS {
            break;
        }
        if let Some((k, v)) = part.split_once('=') {
            let v = v.trim().trim_matches('\'').to_string();
            log.config.push((k.trim().to_string(), v));
        }
    }
}

fn read_line(log: &mut LmdeployLog, no: u64, raw: &str) {
    let s = strip_ansi(raw);
    if [
        "[TM]",
        " - lmdeploy - ",
        "TurbomindEngineConfig(",
        "PytorchEngineConfig(",
    ]
    .iter()
    .any(|p| s.contains(p))
    {
        log.own_lines = true;
    }
    if s.contains("[TM]") && log.backend.is_none() {
        log.backend = Some(Backend::Turbomind);
    }
    if let Some(i) = s.find("TurbomindEngineConfig(") {
        log.backend = Some(Backend::Turbomind);
        if log.config.is_empty() {
            read_config(log, &s, i + "TurbomindEngineConfig(".len());
        }
    }
    if let Some(i) = s.find("PytorchEngineConfig(") {
        log.backend = Some(Backend::Pytorch);
        if log.config.is_empty() {
            read_config(log, &s, i + "PytorchEngineConfig(".len());
        }
    }
    if let Some(v) = num_after(&s, "[BlockManager] block_size =") {
        push(log, no, "kv_block", v, "MiB");
    }
    if let Some(v) = num_after(&s, "[BlockManager] max_block_count =") {
        push(log, no, "gpu_blocks", v, "blocks");
    }
    if let Some(v) = num_after(&s, "max cached tokens:") {
        push(log, no, "kv_cache_tokens", v, "tokens");
    }
    if let Some(v) = num_after(&s, "`session_len` truncated to") {
        push(log, no, "max_model_len", v, "tokens");
    }
    if let Some(v) = num_after(&s, "Object cache budget:") {
        push(log, no, "kv_cache", v, "MiB");
        if let Some(free) = num_after(&s, "MB from free") {
            push(log, no, "avail_after_weights", free, "MiB");
        }
    }
    if let Some(v) = num_after(&s, "`cache_block_seq_len` is not set, default to") {
        push(log, no, "block_size", v, "tokens");
    }
    if let Some(v) = num_after(&s, "Initialize cache engine with") {
        log.backend.get_or_insert(Backend::Pytorch);
        push(log, no, "gpu_blocks", v, "blocks");
        if let Some(c) = num_after(&s, "gpu blocks and") {
            push(log, no, "cpu_blocks", c, "blocks");
        }
    }
    if s.contains("CacheConfig(") {
        log.backend.get_or_insert(Backend::Pytorch);
        for (pat, key) in [
            ("num_gpu_blocks=", "gpu_blocks"),
            ("num_cpu_blocks=", "cpu_blocks"),
        ] {
            if let Some(v) = num_after(&s, pat) {
                push(log, no, key, v, "blocks");
            }
        }
        if let Some(v) = num_after(&s, " block_size=") {
            push(log, no, "block_size", v, "tokens");
        }
    }
    for pat in ["minimal free gpu memory:", "free gpu memory:"] {
        if let Some(v) = num_after(&s, pat) {
            push(log, no, "avail_after_weights", v, "MiB");
        }
    }
    if let Some(v) = num_after(&s, "estimated max runtime memory:") {
        push(log, no, "runtime_reserve", v, "MiB");
    }
}

/// Read an LMDeploy start-up log. Lines longer than [`MAX_LINE_BYTES`] are cut; invalid UTF-8
/// is replaced. Only I/O errors of the reader fail.
pub fn read<R: BufRead>(mut r: R) -> std::io::Result<LmdeployLog> {
    let mut log = LmdeployLog::default();
    let mut buf = Vec::new();
    let mut no = 0u64;
    loop {
        buf.clear();
        let n = std::io::Read::take(&mut r, MAX_LINE_BYTES as u64).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        no += 1;
        if buf.last() != Some(&b'\n') && n == MAX_LINE_BYTES {
            // skip the rest of an over-long line without keeping it
            let mut sink = Vec::new();
            loop {
                sink.clear();
                let m = std::io::Read::take(&mut r, 64 * 1024).read_until(b'\n', &mut sink)?;
                if m == 0 || sink.last() == Some(&b'\n') {
                    break;
                }
            }
        }
        read_line(&mut log, no, &String::from_utf8_lossy(&buf));
    }
    derive_kv(&mut log);
    Ok(log)
}

/// TurboMind ≤ 0.14 prints the block and the count, not the total: derive it.
fn derive_kv(log: &mut LmdeployLog) {
    // tokens per block from the engine-config line when no other line said
    let from_config = log
        .config("cache_block_seq_len")
        .or_else(|| log.config("block_size"))
        .and_then(|v| v.parse::<f64>().ok());
    if let Some(b) = from_config {
        push(log, 0, "block_size", b, "tokens");
    }
    if log.figure("kv_cache").is_some() {
        return;
    }
    if let (Some(block), Some(count)) = (log.figure("kv_block"), log.figure("gpu_blocks")) {
        let (mib, line) = (block.value * count.value, count.line);
        push(log, line, "kv_cache", mib, "MiB");
    }
}

/// A reader that passes its input through unchanged and reads LMDeploy's lines on the way, so
/// `mem startup` streams a log once for both parsers (the shared one and this room's). Memory
/// stays bounded: a line is kept up to [`MAX_LINE_BYTES`], the rest of it dropped.
pub struct Tee<R> {
    inner: R,
    line: Vec<u8>,
    cut: bool,
    no: u64,
    log: LmdeployLog,
}

impl<R: Read> Tee<R> {
    /// Wrap `inner`.
    pub fn new(inner: R) -> Tee<R> {
        Tee {
            inner,
            line: Vec::new(),
            cut: false,
            no: 0,
            log: LmdeployLog::default(),
        }
    }

    /// The wrapped reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    fn end_line(&mut self) {
        self.no += 1;
        let text = String::from_utf8_lossy(&self.line).into_owned();
        read_line(&mut self.log, self.no, &text);
        self.line.clear();
        self.cut = false;
    }

    /// What the LMDeploy lines seen said (a last line without a newline included).
    pub fn finish(mut self) -> LmdeployLog {
        if !self.line.is_empty() || self.cut {
            self.end_line();
        }
        derive_kv(&mut self.log);
        self.log
    }
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in buf.get(..n).unwrap_or_default() {
            if b == b'\n' {
                self.end_line();
            } else if self.line.len() < MAX_LINE_BYTES {
                self.line.push(b);
            } else {
                self.cut = true;
            }
        }
        Ok(n)
    }
}

impl LmdeployLog {
    /// The log has lines only LMDeploy prints (`[TM]`, its `lmdeploy` logger, an engine-config
    /// line); the cache lines alone (`CacheConfig(`, `free gpu memory:`) are not enough.
    pub fn is_lmdeploy(&self) -> bool {
        self.own_lines
    }
}

/// `mem startup`'s record of an LMDeploy start-up: the shared parser's result with this room's
/// figures and engine-config settings added. A log the shared parser did not recognise
/// (LMDeploy's lines are none of the other engines') becomes a record of LMDeploy; a log of
/// another engine is left as it is; a log with no LMDeploy line keeps the shared parser's answer.
pub fn merge(
    parsed: Result<StartupLog, StartupLogError>,
    lm: &LmdeployLog,
) -> Result<StartupLog, StartupLogError> {
    if !lm.is_lmdeploy() {
        return parsed;
    }
    let mut log = match parsed {
        Ok(l) if l.engine.is_none() || l.engine == Some(Engine::Lmdeploy) => l,
        Ok(l) => return Ok(l),
        Err(StartupLogError::NotAStartupLog { lines }) => StartupLog {
            lines,
            first_line: 1,
            ..StartupLog::default()
        },
        Err(e) => return Err(e),
    };
    log.engine = Some(Engine::Lmdeploy);
    for f in &lm.figures {
        if log.figure(f.key).is_none() {
            log.figures.push(f.clone());
        }
    }
    // the engine-config names, as the shared report reads arguments
    for (k, v) in &lm.config {
        let name = match k.as_str() {
            "session_len" => "max_model_len",
            "max_batch_size" => "max_num_seqs",
            other => other,
        };
        if log.arg(name).is_none() && log.args.len() < MAX_ARGS && v != "None" {
            log.args.push((name.to_string(), v.clone()));
        }
    }
    if let Some(b) = lm.backend
        && log.arg("backend").is_none()
    {
        log.args.push(("backend".into(), b.as_str().into()));
    }
    Ok(log)
}

/// The plan request of an LMDeploy start-up log (`mem startup`): the engine-config settings the
/// shared request does not read (`--cache-max-entry-count`, `--quant-policy`, the block, the
/// backend), and, when the log prints no release, the release its lines date it to — TurboMind's
/// `[BlockManager]` lines are 0.1–0.14, whose fraction rule is the same from 0.2.2 to 0.14
/// (`free × F`), so 0.14.0's rules stand in. Leaves other engines' requests alone.
pub fn apply(req: &mut PlanRequest, log: &StartupLog) {
    if req.engine != Engine::Lmdeploy {
        return;
    }
    let s = &mut req.lmdeploy;
    for (name, flag) in [
        ("backend", "--backend"),
        ("cache_max_entry_count", "--cache-max-entry-count"),
        ("quant_policy", "--quant-policy"),
        ("num_gpu_blocks", "--num-gpu-blocks"),
    ] {
        if let Some(v) = log.arg(name) {
            // a value the engine printed and this room cannot read stays the default
            let _ = s.set(flag, v);
        }
    }
    if let Some(b) = ["cache_block_seq_len", "block_size"]
        .iter()
        .find_map(|n| log.arg(n).and_then(|v| v.parse::<u32>().ok()))
        .filter(|b| *b > 0)
    {
        req.block_size = Some(b);
    }
    let block_manager = log.figure("kv_block").is_some() && log.figure("gpu_blocks").is_some();
    if req.engine_version.is_none() && block_manager && s.backend.as_deref() != Some("pytorch") {
        req.engine_version = Some(BLOCK_MANAGER_RULES.into());
    }
}

/// The release whose rules stand in for a TurboMind log with `[BlockManager]` lines and no
/// version ([`apply`]).
pub const BLOCK_MANAGER_RULES: &str = "0.14.0";
