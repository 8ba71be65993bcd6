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
use inferscope_formats::startup_log::{Figure, MAX_ARGS, MAX_LINE_BYTES};
use std::io::BufRead;

/// What an LMDeploy start-up log says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LmdeployLog {
    /// The engine, from its phrases (`[TM]` lines or an engine-config line).
    pub backend: Option<Backend>,
    /// Figures, first occurrence wins (one start per log; ranks repeat TurboMind's lines).
    pub figures: Vec<Figure>,
    /// `name=value` pairs of the engine-config line (at most [`MAX_ARGS`]).
    pub config: Vec<(String, String)>,
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
