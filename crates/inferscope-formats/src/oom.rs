//! PyTorch (and inference-server) out-of-memory messages, as users paste them.
//!
//! PyTorch's caching allocator has printed its OOM message in several shapes
//! (`c10/cuda/CUDACachingAllocator.cpp`, `format_size`):
//!
//! * 1.0–1.3: `Tried to allocate S (GPU N; S total capacity; S already allocated; S free; S cached)`;
//! * 1.4–2.0: the same with `S reserved in total by PyTorch)`, an optional `S allowed;` clause
//!   (a per-process memory fraction) and, from 1.10, the `max_split_size_mb` hint;
//! * 2.1+: sentences: `GPU N has a total capacity of S of which S is free.` (2.1 misspells
//!   "capacty"), `Including non-PyTorch memory, this process has S memory in use.` or one
//!   `Process P has S memory in use.` per process, `S allowed;`, `Of the allocated memory S is
//!   allocated by PyTorch, [with S allocated in private pools (e.g., CUDA Graphs), ]and S is
//!   reserved by PyTorch but unallocated.`, then a hint naming `max_split_size_mb` or
//!   `expandable_segments` and `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_ALLOC_CONF`;
//! * ROCm builds say `HIP out of memory`.
//!
//! Sizes are `format_size`'s: `N bytes` up to 1 KiB, else two decimals of KiB, MiB or GiB;
//! they are converted back to bytes (rounded), so `8.00 GiB` is 8589934592.
//!
//! The text may be a traceback, a log line with prefixes (vLLM workers, TGI's router), wrapped
//! over lines, or a Python repr / JSON string with `\n` escapes: escapes are undone and all
//! whitespace runs become one space before the clauses are looked for. Numbers that cannot be
//! true (allocated above capacity) are kept as reported, with a note. Framework wrappers that
//! carry no byte counts (TGI's `Not enough memory to handle N prefill tokens`, vLLM's `No
//! available memory for the cache blocks`) are recognised with every size unknown.

use crate::ParseError;

/// Longest input looked at (a pasted log can be long; OOM messages are short).
pub const MAX_INPUT_BYTES: usize = 4 << 20;

/// The accelerator runtime named in the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `CUDA out of memory`.
    Cuda,
    /// `HIP out of memory` (ROCm builds of PyTorch).
    Hip,
}

impl Backend {
    /// `cuda` or `hip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
        }
    }
}

/// Which generation of the message was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OomStyle {
    /// PyTorch ≤ 2.0: one parenthesised clause `(GPU N; ...; ... reserved in total by PyTorch)`.
    Parenthesised,
    /// PyTorch ≥ 2.1: sentences (`GPU N has a total capacity of ...`).
    Sentences,
    /// A framework's own wrapper without allocator figures.
    Wrapper,
}

impl OomStyle {
    /// Stable name for JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            OomStyle::Parenthesised => "parenthesised",
            OomStyle::Sentences => "sentences",
            OomStyle::Wrapper => "wrapper",
        }
    }
}

/// Which tuning hint the message printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocHint {
    /// `try setting max_split_size_mb` (PyTorch 1.10–2.1).
    MaxSplitSizeMb,
    /// `try setting ...=expandable_segments:True` (PyTorch ≥ 2.2).
    ExpandableSegments,
}

/// A `Process P has S memory in use` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessUsage {
    /// The pid as the reporting process saw it (a host pid inside a container).
    pub pid: u32,
    /// Memory in use.
    pub bytes: u64,
}

/// A framework-level OOM that carries no allocator figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrapper {
    /// TGI warmup: `Not enough memory to handle N prefill tokens`.
    TgiPrefillTokens {
        /// Prefill tokens that did not fit.
        tokens: u64,
    },
    /// vLLM: `No available memory for the cache blocks`.
    VllmNoCacheBlocks,
    /// vLLM: `CUDA out of memory occurred when warming up sampler with N dummy requests`.
    VllmSamplerWarmup {
        /// The dummy requests (its `max_num_seqs`), when printed.
        requests: Option<u64>,
    },
    /// `RuntimeError: CUDA error: out of memory` (or HIP): the driver's error, no figures.
    DriverError,
}

/// Most `Process P has` clauses kept from one message.
pub const MAX_PROCESSES: usize = 256;

/// Everything one message says. Sizes are as reported: `None` when the message does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OomReport {
    /// CUDA or HIP, when the message names it.
    pub backend: Option<Backend>,
    /// Message generation.
    pub style: Option<OomStyle>,
    /// Device index as the failing process numbered it (relative to `CUDA_VISIBLE_DEVICES`).
    pub device: Option<u32>,
    /// `Tried to allocate`.
    pub requested_bytes: Option<u64>,
    /// Total capacity.
    pub total_bytes: Option<u64>,
    /// Free on the device when the message was built.
    pub free_bytes: Option<u64>,
    /// `S allowed;`: the limit set by `torch.cuda.set_per_process_memory_fraction`.
    pub allowed_bytes: Option<u64>,
    /// `this process has S memory in use` (PyTorch and non-PyTorch memory of this process).
    pub process_in_use_bytes: Option<u64>,
    /// `Process P has S memory in use` clauses (at most [`MAX_PROCESSES`]).
    pub processes: Vec<ProcessUsage>,
    /// `Process P has` clauses beyond [`MAX_PROCESSES`]: counted, not kept.
    pub processes_not_kept: u64,
    /// Allocated by PyTorch (`already allocated`, or `is allocated by PyTorch`, which includes
    /// private pools).
    pub allocated_bytes: Option<u64>,
    /// `allocated in private pools (e.g., CUDA Graphs)`.
    pub private_pools_bytes: Option<u64>,
    /// `reserved in total by PyTorch` / `cached` (parenthesised style only).
    pub reserved_bytes: Option<u64>,
    /// `is reserved by PyTorch but unallocated` (sentence style only).
    pub reserved_unallocated_bytes: Option<u64>,
    /// The tuning hint printed.
    pub hint: Option<AllocHint>,
    /// Allocator configuration variable named (`PYTORCH_CUDA_ALLOC_CONF`, `PYTORCH_ALLOC_CONF`,
    /// `PYTORCH_HIP_ALLOC_CONF`).
    pub alloc_conf_var: Option<String>,
    /// A framework wrapper around (or instead of) the allocator message.
    pub wrapper: Option<Wrapper>,
    /// The start-up phase the message or its pasted context names.
    pub phase: Option<crate::oom_phase::PhaseHit>,
    /// Who printed it, from the line's prefix (`vLLM worker rank=1 pid=194255`, `TGI router`).
    pub context: Vec<String>,
    /// How many OOM messages the text holds (servers echo the same one).
    pub messages_found: usize,
    /// Oddities kept as reported (allocated above capacity, differing repeats, sizes that do not
    /// fit in 64 bits).
    pub notes: Vec<String>,
}

/// Undo Python-repr / JSON escapes and collapse whitespace runs (including line breaks) to one
/// space, so wrapped and escaped pastes read like the original one-line message.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut last_space = true;
    let mut push = |c: char, out: &mut String| {
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
                last_space = true;
            }
        } else {
            out.push(c);
            last_space = false;
        }
    };
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek().copied() {
                Some('n' | 'r' | 't') => {
                    // `\n` inside a Windows path (`D:\AI\nn`) also becomes a space; only the
                    // message's clauses matter here.
                    chars.next();
                    push(' ', &mut out);
                    continue;
                }
                Some('"' | '\'' | '\\') => {
                    let q = chars.next().unwrap_or('"');
                    push(q, &mut out);
                    continue;
                }
                _ => {}
            }
        }
        push(c, &mut out);
    }
    out
}

/// A size as `format_size` prints it, at the start of `s` (after optional spaces): the bytes and
/// the length consumed. `Err(())` when a number is there but does not fit in 64 bits.
fn size_at(s: &str) -> Option<Result<(u64, usize), String>> {
    let trimmed = s.trim_start();
    let lead = s.len() - trimmed.len();
    let num_len = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(trimmed.len());
    let num = &trimmed[..num_len];
    if num.is_empty() || !num.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = &trimmed[num_len..];
    let rest_trim = rest.trim_start();
    let gap = rest.len() - rest_trim.len();
    const UNITS: [(&str, u128); 12] = [
        ("bytes", 1),
        ("byte", 1),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
        ("KB", 1 << 10),
        ("MB", 1 << 20),
        ("GB", 1 << 30),
        ("TB", 1 << 40),
        ("B", 1),
        ("kB", 1 << 10),
    ];
    let (unit, mult) = UNITS.iter().find(|(u, _)| {
        rest_trim.starts_with(u)
            && !rest_trim[u.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
    })?;
    let consumed = lead + num_len + gap + unit.len();
    let clean: String = num.chars().filter(|c| *c != ',').collect();
    let (int_part, frac_part) = match clean.split_once('.') {
        Some((i, f)) => (i, f),
        None => (clean.as_str(), ""),
    };
    if frac_part.contains('.') || frac_part.len() > 9 {
        return Some(Err(format!("{num} {unit}")));
    }
    let digits = format!("{int_part}{frac_part}");
    let Ok(mantissa) = digits.parse::<u128>() else {
        return Some(Err(format!("{num} {unit}")));
    };
    let scale = 10u128.pow(frac_part.len() as u32);
    let bytes = mantissa
        .checked_mul(*mult)
        .map(|v| (v + scale / 2) / scale)
        .and_then(|v| u64::try_from(v).ok());
    match bytes {
        Some(b) => Some(Ok((b, consumed))),
        None => Some(Err(format!("{num} {unit}"))),
    }
}

/// An unsigned integer at the start of `s` (after spaces), and its length including the spaces.
fn uint_at(s: &str) -> Option<(u64, usize)> {
    let t = s.trim_start();
    let lead = s.len() - t.len();
    let n = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    t[..n].parse().ok().map(|v| (v, lead + n))
}

/// The size that directly follows `key` in `s`.
fn size_after(s: &str, key: &str, notes: &mut Vec<String>) -> Option<u64> {
    let i = s.find(key)?;
    match size_at(&s[i + key.len()..])? {
        Ok((b, _)) => Some(b),
        Err(t) => {
            notes.push(format!("size {t:?} does not fit in 64 bits; left unknown"));
            None
        }
    }
}

/// The size that directly precedes `key` in `s` (`... 2.30 GiB is reserved by PyTorch`).
fn size_before(s: &str, key: &str, notes: &mut Vec<String>) -> Option<u64> {
    let i = s.find(key)?;
    let head = s[..i].trim_end();
    // Back over the unit, then the number.
    let unit_start = head.rfind(' ')? + 1;
    let num_start = head[..unit_start]
        .trim_end()
        .rfind(' ')
        .map_or(0, |p| p + 1);
    match size_at(&head[num_start..])? {
        Ok((b, _)) => Some(b),
        Err(t) => {
            notes.push(format!("size {t:?} does not fit in 64 bits; left unknown"));
            None
        }
    }
}

/// Start offsets of each allocator message in the normalised text.
fn message_starts(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("Tried to allocate") {
        let at = from + i;
        // Include a preceding "<X> out of memory." on the same message.
        let start = s[..at]
            .rfind("out of memory")
            .filter(|&p| at - p < 40)
            .and_then(|p| s[..p].trim_end().rfind(' ').map(|q| q + 1).or(Some(0)))
            .unwrap_or(at);
        out.push(start);
        from = at + "Tried to allocate".len();
        if out.len() >= 1000 {
            break;
        }
    }
    out
}

fn parse_one(msg: &str, r: &mut OomReport) {
    let notes = &mut r.notes;
    if let Some(p) = msg.find(" out of memory") {
        let before = msg[..p].rsplit(' ').next().unwrap_or("");
        r.backend = match before {
            "CUDA" => Some(Backend::Cuda),
            "HIP" => Some(Backend::Hip),
            _ => None,
        };
    } else if msg.starts_with("HIP") {
        r.backend = Some(Backend::Hip);
    }
    r.requested_bytes = size_after(msg, "Tried to allocate", notes);
    if let Some(p) = msg.find("(GPU ") {
        // Parenthesised style: `(GPU N; S total capacity; S already allocated; S free;
        // [S allowed; ]S reserved in total by PyTorch)` or `... S cached)`.
        r.style = Some(OomStyle::Parenthesised);
        let inner = &msg[p + 1..];
        let inner = &inner[..inner.find(')').unwrap_or(inner.len())];
        for (k, item) in inner.split(';').enumerate() {
            let item = item.trim();
            if k == 0 {
                r.device = item
                    .strip_prefix("GPU")
                    .and_then(uint_at)
                    .map(|v| v.0 as u32);
                continue;
            }
            let Some(parsed) = size_at(item) else {
                continue;
            };
            let (bytes, used) = match parsed {
                Ok(v) => v,
                Err(t) => {
                    notes.push(format!("size {t:?} does not fit in 64 bits; left unknown"));
                    continue;
                }
            };
            let label = item[used..].trim();
            match label {
                "total capacity" | "total capacty" => r.total_bytes = Some(bytes),
                "already allocated" => r.allocated_bytes = Some(bytes),
                "free" => r.free_bytes = Some(bytes),
                "allowed" => r.allowed_bytes = Some(bytes),
                "cached" => r.reserved_bytes = Some(bytes),
                l if l.starts_with("reserved in total") => r.reserved_bytes = Some(bytes),
                _ => {}
            }
        }
    } else {
        r.style = Some(OomStyle::Sentences);
        if let Some(p) = msg.find(" has a total capac") {
            r.device = msg[..p]
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u32>().ok());
        }
        r.total_bytes = size_after(msg, "total capacity of", notes)
            .or_else(|| size_after(msg, "total capacty of", notes));
        r.free_bytes = size_after(msg, "of which", notes);
        r.process_in_use_bytes = size_after(msg, "this process has", notes);
        r.allowed_bytes = size_before(msg, " allowed;", notes);
        r.allocated_bytes = size_before(msg, " is allocated by PyTorch", notes);
        r.private_pools_bytes = size_before(msg, " allocated in private pools", notes);
        r.reserved_unallocated_bytes =
            size_before(msg, " is reserved by PyTorch but unallocated", notes);
        let mut from = 0;
        while let Some(i) = msg[from..].find("Process ") {
            let at = from + i + "Process ".len();
            from = at;
            let Some((pid, used)) = uint_at(&msg[at..]) else {
                continue;
            };
            let rest = &msg[at + used..];
            let Some(rest) = rest.strip_prefix(" has") else {
                continue;
            };
            if let Some(Ok((bytes, _))) = size_at(rest)
                && let Ok(pid) = u32::try_from(pid)
            {
                if r.processes.len() < MAX_PROCESSES {
                    r.processes.push(ProcessUsage { pid, bytes });
                } else {
                    r.processes_not_kept += 1;
                }
            }
        }
    }
    if msg.contains("expandable_segments") {
        r.hint = Some(AllocHint::ExpandableSegments);
    } else if msg.contains("max_split_size_mb") {
        r.hint = Some(AllocHint::MaxSplitSizeMb);
    }
    for var in [
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_HIP_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
    ] {
        if msg.contains(var) {
            r.alloc_conf_var = Some(var.to_string());
            break;
        }
    }
}

/// What is printed before the message on its line, as context.
fn context_of(original: &str, out: &mut Vec<String>) {
    let mut push = |c: String| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    for line in original.lines().take(100_000) {
        if !(line.contains("out of memory") || line.contains("Not enough memory")) {
            continue;
        }
        if let Some(p) = line.find("(VllmWorker ") {
            let inner = &line[p + 1..];
            let inner = &inner[..inner.find(')').unwrap_or(inner.len())];
            push(format!("vLLM {}", inner.replace("VllmWorker", "worker")));
        }
        if let Some(p) = line.find("(EngineCore") {
            let inner = &line[p + 1..];
            let inner = &inner[..inner.find(')').unwrap_or(inner.len())];
            push(format!("vLLM {inner}"));
        }
        if line.contains("text_generation_client") || line.contains("Server error: ") {
            push("TGI router (echo of the shard's error)".to_string());
        }
        if line.contains("text_generation_launcher") {
            push("TGI launcher".to_string());
        }
    }
    if original.contains("text_generation_server") {
        push("TGI server".to_string());
    }
}

/// Parse the first OOM message in `text` (later ones are counted; a repeat that differs is
/// noted). Errors when the text holds no OOM message at all.
pub fn parse(text: &str) -> Result<OomReport, ParseError> {
    let cut = if text.len() > MAX_INPUT_BYTES {
        let mut end = MAX_INPUT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    } else {
        text
    };
    let s = normalise(cut);
    let mut r = OomReport::default();
    context_of(cut, &mut r.context);
    let starts = message_starts(&s);
    if let Some(&first) = starts.first() {
        let end = starts.get(1).copied().unwrap_or(s.len());
        parse_one(&s[first..end], &mut r);
        r.messages_found = starts.len();
        for (i, &start) in starts.iter().enumerate().skip(1) {
            let end = starts.get(i + 1).copied().unwrap_or(s.len());
            let mut other = OomReport::default();
            parse_one(&s[start..end], &mut other);
            let key = |x: &OomReport| {
                (
                    x.requested_bytes,
                    x.total_bytes,
                    x.free_bytes,
                    x.allocated_bytes,
                )
            };
            if key(&other) != key(&r) {
                r.notes.push(
                    "the text holds several different OOM messages; the first is reported"
                        .to_string(),
                );
                break;
            }
        }
    }
    if let Some(p) = s.find("Not enough memory to handle") {
        let tokens = uint_at(&s[p + "Not enough memory to handle".len()..]).map(|v| v.0);
        if let Some(tokens) = tokens {
            r.wrapper = Some(Wrapper::TgiPrefillTokens { tokens });
        }
    } else if s.contains("No available memory for the cache blocks") {
        r.wrapper = Some(Wrapper::VllmNoCacheBlocks);
    } else if s.contains("out of memory occurred when warming up sampler") {
        let requests = s
            .find("warming up sampler with")
            .and_then(|p| uint_at(s[p + "warming up sampler with".len()..].trim_start()))
            .map(|v| v.0);
        r.wrapper = Some(Wrapper::VllmSamplerWarmup { requests });
    } else if s.contains("CUDA error: out of memory") || s.contains("HIP error: out of memory") {
        r.wrapper = Some(Wrapper::DriverError);
        if r.backend.is_none() {
            r.backend = Some(if s.contains("HIP error") {
                Backend::Hip
            } else {
                Backend::Cuda
            });
        }
    }
    r.phase = crate::oom_phase::detect(cut);
    if r.messages_found == 0 {
        if r.wrapper.is_none() {
            let first = cut.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(ParseError::new(
                1,
                1,
                "a PyTorch out-of-memory message (\"... out of memory. Tried to allocate ...\") \
                 or a known server wrapper of one",
                if first.is_empty() {
                    "empty input"
                } else {
                    first
                },
            ));
        }
        r.style = Some(OomStyle::Wrapper);
        r.messages_found = 1;
    }
    sanity_notes(&mut r);
    Ok(r)
}

fn sanity_notes(r: &mut OomReport) {
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    if r.processes_not_kept > 0 {
        r.notes.push(format!(
            "the message lists {} processes; the first {MAX_PROCESSES} are kept and the other \
             {} are left out of every sum (what other processes hold is at least the figure shown)",
            r.processes.len() as u64 + r.processes_not_kept,
            r.processes_not_kept
        ));
    }
    if let Some(total) = r.total_bytes {
        for (what, v) in [
            ("allocated", r.allocated_bytes),
            ("reserved", r.reserved_bytes),
            ("free", r.free_bytes),
            ("in use by this process", r.process_in_use_bytes),
        ] {
            if let Some(v) = v
                && v > total
            {
                r.notes.push(format!(
                    "{what} ({}) exceeds the total capacity ({}): kept as reported \
                     (shared system memory on Windows/WSL, or unified memory, can do this)",
                    gib(v),
                    gib(total)
                ));
            }
        }
    }
    if let (Some(a), Some(res)) = (r.allocated_bytes, r.reserved_bytes)
        && a > res
    {
        r.notes.push(format!(
            "allocated ({}) exceeds reserved ({}): kept as reported",
            gib(a),
            gib(res)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_convert_back_to_bytes() {
        assert_eq!(size_at("8.00 GiB").unwrap().unwrap().0, 8 << 30);
        assert_eq!(size_at(" 0 bytes free").unwrap().unwrap().0, 0);
        assert_eq!(size_at("755.50 KiB").unwrap().unwrap().0, 773_632);
        assert_eq!(size_at("1024.00 MiB").unwrap().unwrap().0, 1 << 30);
        assert!(size_at("99999999999999999999999 GiB").unwrap().is_err());
        assert!(size_at("GiB").is_none());
        assert!(size_at("12 apples").is_none());
    }

    #[test]
    fn allowed_and_private_pools_forms() {
        let t = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 \
                 has a total capacity of 79.15 GiB of which 30.00 GiB is free. Including \
                 non-PyTorch memory, this process has 49.00 GiB memory in use. 48.00 GiB \
                 allowed; Of the allocated memory 47.00 GiB is allocated by PyTorch, with 6.00 \
                 GiB allocated in private pools (e.g., CUDA Graphs), and 500.00 MiB is reserved \
                 by PyTorch but unallocated.";
        let r = parse(t).unwrap();
        assert_eq!(r.allowed_bytes, Some(48 << 30));
        assert_eq!(r.private_pools_bytes, Some(6 << 30));
        assert_eq!(r.allocated_bytes, Some(47 << 30));
        assert_eq!(r.reserved_unallocated_bytes, Some(500 << 20));
    }

    #[test]
    fn json_escaped_and_cached_form() {
        let t = r#"{"error": "RuntimeError('CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total capacity;\n 9.27 GiB already allocated; 21.06 MiB free; 9.31 GiB cached)')"}"#;
        let r = parse(t).unwrap();
        assert_eq!(r.requested_bytes, Some(20 << 20));
        assert_eq!(r.reserved_bytes, Some(9_996_536_381));
        assert_eq!(r.style, Some(OomStyle::Parenthesised));
    }

    #[test]
    fn not_an_oom() {
        let e = parse("hello\nworld").unwrap_err();
        assert!(e.to_string().contains("found hello"), "{e}");
        assert!(parse("").is_err());
    }
}
