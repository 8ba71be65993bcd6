//! `torch.cuda.memory._snapshot()` / `_dump_snapshot()` pickles, read without executing
//! anything.
//!
//! A pickle is a program for Python's unpickler: `GLOBAL` + `REDUCE` calls any function (the
//! classic `os.system` payload). PyTorch writes its snapshot with `pickle.dump` of plain
//! containers built in C++ (`torch/csrc/cuda/memory_snapshot.cpp`): dicts, lists, tuples,
//! strings, ints, floats, booleans and `None`; it needs **no global at all**. So reading is two
//! passes over the stream:
//!
//! 1. [`scan`]: a streaming opcode walk (constant memory plus one weight per memoised value) that
//!    rejects every opcode that would import or call something (`GLOBAL`, `STACK_GLOBAL`,
//!    `REDUCE`, `BUILD`, `INST`, `OBJ`, `NEWOBJ`, `NEWOBJ_EX`, `EXT*`, persistent ids,
//!    out-of-band buffers), naming the global it would have imported; rejects lengths that
//!    claim more bytes than the file has; and estimates how large the decoded value tree gets
//!    when shared (memoised) values are copied, refusing anything above
//!    [`MAX_EXPANDED_UNITS`] (a "billion laughs" of memo references).
//! 2. [`decode`]: a second walk that builds the values in an arena (shared values stored once,
//!    as Python shares them) and reads the snapshot's keys into typed structs (unknown keys
//!    ignored, missing keys zero/empty), charging the copies it makes into the typed structs
//!    against a budget (16 × the file size, at least 128 MiB): a shared list filled after it was
//!    referenced escapes the scan's estimate but not this.
//!
//! The caller caps the file size ([`MAX_FILE_BYTES`]).

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read};

/// Largest snapshot file read.
pub const MAX_FILE_BYTES: u64 = 2 << 30;
/// Cap on the estimated decoded size: 32 units per value plus string bytes, with memoised
/// values counted once per reference (serde-pickle copies them).
pub const MAX_EXPANDED_UNITS: u64 = 6 << 30;

/// Why a pickle was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// The pickle imports a global: executing it in Python would call code.
    #[error(
        "refusing global {0} at byte {1}: a PyTorch memory snapshot holds only dicts, lists, tuples, strings and numbers, and loading this pickle in Python would import and may call {0}"
    )]
    Global(String, u64),
    /// An opcode that calls or builds objects.
    #[error(
        "refusing opcode {0} at byte {1}: it calls code or builds objects, which a PyTorch memory snapshot never does"
    )]
    Forbidden(&'static str, u64),
    /// Unknown opcode byte.
    #[error("not a pickle (unknown opcode 0x{0:02x} at byte {1})")]
    UnknownOpcode(u8, u64),
    /// Ended before STOP.
    #[error("truncated pickle: the file ends at byte {0} before the pickle's STOP opcode")]
    Truncated(u64),
    /// A length beyond the file.
    #[error(
        "pickle claims a {0}-byte value at byte {1}, but the file has {2} bytes (corrupt or hostile)"
    )]
    LengthBeyondFile(u64, u64, u64),
    /// Too large once shared values are copied.
    #[error(
        "pickle would expand to more than {0} GiB in memory once shared values are copied (a pickle bomb?)"
    )]
    Bomb(u64),
    /// A stack or memo reference that does not exist.
    #[error("malformed pickle at byte {1}: {0}")]
    Malformed(String, u64),
    /// Read failure.
    #[error("read error: {0}")]
    Io(String),
    /// Decoded but not shaped like a snapshot.
    #[error("not a PyTorch memory snapshot: {0}")]
    Shape(String),
}

/// What the scan saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Pickle protocol (0 when no PROTO opcode).
    pub protocol: u8,
    /// Opcodes read.
    pub opcodes: u64,
    /// Estimated decoded size units.
    pub expanded_units: u64,
}

struct Counted<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Counted<R> {
    fn byte(&mut self) -> Result<u8, PickleError> {
        let mut b = [0u8; 1];
        self.exact(&mut b)?;
        Ok(b[0])
    }
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), PickleError> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(PickleError::Truncated(self.pos))
            }
            Err(e) => Err(PickleError::Io(e.to_string())),
        }
    }
    // cannot fail: every caller passes a constant width of 1, 2, 4 or 8
    #[allow(clippy::indexing_slicing)]
    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let mut b = [0u8; 8];
        self.exact(&mut b[..n])?;
        Ok(u64::from_le_bytes(b))
    }
    fn skip(&mut self, n: u64, file_len: u64) -> Result<(), PickleError> {
        if n > file_len.saturating_sub(self.pos) {
            return Err(PickleError::LengthBeyondFile(n, self.pos, file_len));
        }
        let copied = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())
            .map_err(|e| PickleError::Io(e.to_string()))?;
        self.pos += copied;
        if copied < n {
            return Err(PickleError::Truncated(self.pos));
        }
        Ok(())
    }
    fn text(&mut self, n: u64, file_len: u64) -> Result<String, PickleError> {
        if n > 4096 {
            self.skip(n, file_len)?;
            return Ok(String::new());
        }
        let mut b = vec![0u8; n as usize];
        self.exact(&mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
    fn line(&mut self) -> Result<String, PickleError> {
        let mut b = Vec::new();
        let n = (&mut self.inner)
            .take(1 << 16)
            .read_until(b'\n', &mut b)
            .map_err(|e| PickleError::Io(e.to_string()))?;
        self.pos += n as u64;
        if b.last() != Some(&b'\n') {
            return Err(PickleError::Truncated(self.pos));
        }
        b.pop();
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Mark,
    Obj(usize),
}

/// Walk the opcodes of a pickle of `file_len` bytes; see the module docs.
///
/// One piece (issue 21): it is a pickle virtual machine, one `match` over the opcodes whose arms
/// all push and pop the same stack, memo and weight arena; splitting the arms into functions
/// would pass those five structures to each of them and hide the one place that bounds them.
pub fn scan<R: BufRead>(reader: R, file_len: u64) -> Result<ScanReport, PickleError> {
    const UNIT: u64 = 32;
    let mut r = Counted {
        inner: reader,
        pos: 0,
    };
    let mut report = ScanReport::default();
    // Weights of values (arena), the stack of arena ids, and the memo.
    let mut weights: Vec<u64> = Vec::new();
    let mut stack: Vec<Slot> = Vec::new();
    let mut memo: BTreeMap<u64, usize> = BTreeMap::new();
    let mut recent_strings: Vec<String> = Vec::new();
    let mut string_memo: BTreeMap<u64, String> = BTreeMap::new();
    let cap = MAX_EXPANDED_UNITS;
    macro_rules! new_obj {
        ($w:expr) => {{
            weights.push($w);
            stack.push(Slot::Obj(weights.len() - 1));
        }};
    }
    let malformed = |what: &str, pos: u64| PickleError::Malformed(what.to_string(), pos);
    loop {
        let at = r.pos;
        let op = r.byte()?;
        report.opcodes += 1;
        // Strings pushed: remembered for STACK_GLOBAL's error message.
        let mut pushed_string: Option<String> = None;
        match op {
            b'.' => break,
            0x80 => report.protocol = r.byte()?,
            0x95 => {
                r.uint(8)?;
            }
            b'(' => stack.push(Slot::Mark),
            b'0' => {
                stack.pop();
            }
            b'1' => {
                while let Some(s) = stack.pop() {
                    if matches!(s, Slot::Mark) {
                        break;
                    }
                }
            }
            b'2' => {
                let top = *stack
                    .last()
                    .ok_or_else(|| malformed("DUP on an empty stack", at))?;
                stack.push(top);
            }
            b'N' | 0x88 | 0x89 => new_obj!(UNIT),
            b'K' => {
                r.uint(1)?;
                new_obj!(UNIT)
            }
            b'M' => {
                r.uint(2)?;
                new_obj!(UNIT)
            }
            b'J' => {
                r.uint(4)?;
                new_obj!(UNIT)
            }
            b'G' => {
                r.uint(8)?;
                new_obj!(UNIT)
            }
            b'I' | b'L' | b'F' => {
                r.line()?;
                new_obj!(UNIT)
            }
            b'S' | b'V' => {
                let s = r.line()?;
                new_obj!(UNIT + s.len() as u64);
                pushed_string = Some(s);
            }
            0x8a => {
                let n = r.uint(1)?;
                r.skip(n, file_len)?;
                new_obj!(UNIT + n)
            }
            0x8b => {
                let n = r.uint(4)?;
                r.skip(n, file_len)?;
                new_obj!(UNIT + n)
            }
            b'T' | b'X' | b'B' | 0x8c | b'U' | b'C' | 0x8d | 0x8e | 0x96 => {
                let width = match op {
                    b'U' | b'C' | 0x8c => 1,
                    0x8d | 0x8e | 0x96 => 8,
                    _ => 4,
                };
                let n = r.uint(width)?;
                if n > file_len.saturating_sub(r.pos) {
                    return Err(PickleError::LengthBeyondFile(n, at, file_len));
                }
                if matches!(op, b'X' | 0x8c | 0x8d) {
                    let s = r.text(n, file_len)?;
                    pushed_string = Some(s);
                } else {
                    r.skip(n, file_len)?;
                }
                new_obj!(UNIT + n)
            }
            b']' | b'}' | b')' | 0x8f => new_obj!(UNIT),
            b'l' | b't' | b'd' | 0x91 => {
                let mut w = UNIT;
                loop {
                    match stack.pop() {
                        Some(Slot::Mark) => break,
                        Some(Slot::Obj(id)) => w = w.saturating_add(weight(&weights, id)),
                        None => return Err(malformed("container without a MARK", at)),
                    }
                }
                new_obj!(w)
            }
            0x85..=0x87 => {
                let k = usize::from(op - 0x84);
                let mut w = UNIT;
                for _ in 0..k {
                    match stack.pop() {
                        Some(Slot::Obj(id)) => w = w.saturating_add(weight(&weights, id)),
                        _ => return Err(malformed("tuple of missing items", at)),
                    }
                }
                new_obj!(w)
            }
            b'a' | b's' => {
                let n = if op == b'a' { 1 } else { 2 };
                let mut w = 0u64;
                for _ in 0..n {
                    match stack.pop() {
                        Some(Slot::Obj(id)) => w = w.saturating_add(weight(&weights, id)),
                        _ => return Err(malformed("APPEND/SETITEM of missing items", at)),
                    }
                }
                match stack.last() {
                    Some(Slot::Obj(id)) => add_weight(&mut weights, *id, w),
                    _ => return Err(malformed("APPEND/SETITEM without a container", at)),
                }
            }
            b'e' | b'u' | 0x90 => {
                let mut w = 0u64;
                loop {
                    match stack.pop() {
                        Some(Slot::Mark) => break,
                        Some(Slot::Obj(id)) => w = w.saturating_add(weight(&weights, id)),
                        None => return Err(malformed("APPENDS/SETITEMS without a MARK", at)),
                    }
                }
                match stack.last() {
                    Some(Slot::Obj(id)) => add_weight(&mut weights, *id, w),
                    _ => return Err(malformed("APPENDS/SETITEMS without a container", at)),
                }
            }
            b'p' | b'q' | b'r' | 0x94 => {
                let idx = match op {
                    b'p' => r
                        .line()?
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| malformed("PUT with a bad index", at))?,
                    b'q' => r.uint(1)?,
                    b'r' => r.uint(4)?,
                    _ => memo.len() as u64,
                };
                match stack.last() {
                    Some(Slot::Obj(id)) => {
                        memo.insert(idx, *id);
                        if let Some(s) = recent_strings.last()
                            && weight(&weights, *id) == UNIT + s.len() as u64
                            && string_memo.len() < 1 << 16
                        {
                            string_memo.insert(idx, s.clone());
                        }
                    }
                    _ => return Err(malformed("PUT with nothing to remember", at)),
                }
                // Keep the last pushed string as the most recent one.
                continue;
            }
            b'g' | b'h' | b'j' => {
                let idx = match op {
                    b'g' => r
                        .line()?
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| malformed("GET with a bad index", at))?,
                    b'h' => r.uint(1)?,
                    _ => r.uint(4)?,
                };
                let id = *memo.get(&idx).ok_or_else(|| {
                    malformed(&format!("memo entry {idx} used before it was set"), at)
                })?;
                // A reference is copied when decoded: count it again.
                report.expanded_units = report.expanded_units.saturating_add(weight(&weights, id));
                stack.push(Slot::Obj(id));
                pushed_string = string_memo.get(&idx).cloned();
            }
            b'c' | b'i' => {
                let module = r.line()?;
                let name = r.line()?;
                return Err(PickleError::Global(format!("{module}.{name}"), at));
            }
            0x93 => {
                let what = if let [.., module, name] = recent_strings.as_slice() {
                    format!("{module}.{name}")
                } else {
                    "(unnamed)".to_string()
                };
                return Err(PickleError::Global(what, at));
            }
            b'R' => return Err(PickleError::Forbidden("REDUCE", at)),
            b'b' => return Err(PickleError::Forbidden("BUILD", at)),
            b'o' => return Err(PickleError::Forbidden("OBJ", at)),
            0x81 => return Err(PickleError::Forbidden("NEWOBJ", at)),
            0x92 => return Err(PickleError::Forbidden("NEWOBJ_EX", at)),
            0x82..=0x84 => return Err(PickleError::Forbidden("EXT", at)),
            b'P' | b'Q' => return Err(PickleError::Forbidden("PERSID", at)),
            0x97 | 0x98 => return Err(PickleError::Forbidden("NEXT_BUFFER", at)),
            other => return Err(PickleError::UnknownOpcode(other, at)),
        }
        if let Some(s) = pushed_string {
            if recent_strings.len() >= 2 {
                recent_strings.remove(0);
            }
            recent_strings.push(s);
        }
        if let Some(Slot::Obj(id)) = stack.last() {
            let total = report.expanded_units.saturating_add(weight(&weights, *id));
            if total > cap {
                return Err(PickleError::Bomb(cap >> 30));
            }
        }
        if report.expanded_units > cap {
            return Err(PickleError::Bomb(cap >> 30));
        }
    }
    if let Some(Slot::Obj(id)) = stack.last() {
        report.expanded_units = report.expanded_units.saturating_add(weight(&weights, *id));
    }
    if report.expanded_units > cap {
        return Err(PickleError::Bomb(cap >> 30));
    }
    Ok(report)
}

/// One stack frame recorded with an allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// Source file.
    pub filename: String,
    /// Line.
    pub line: i64,
    /// Function.
    pub name: String,
}

/// A block inside a segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Block {
    /// Address.
    pub address: u64,
    /// Size in bytes (rounded by the allocator).
    pub size: u64,
    /// Size the caller asked for.
    pub requested_size: u64,
    /// `active_allocated`, `active_pending_free` or `inactive`.
    pub state: String,
    /// Where it was allocated (innermost first), when history was recorded.
    pub frames: Vec<Frame>,
}

/// One segment (one cudaMalloc, or one expandable mapping).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segment {
    /// Device index.
    pub device: i64,
    /// Address.
    pub address: u64,
    /// Bytes reserved.
    pub total_size: u64,
    /// Bytes allocated.
    pub allocated_size: u64,
    /// Bytes active (allocated or pending free).
    pub active_size: u64,
    /// Bytes requested.
    pub requested_size: u64,
    /// CUDA stream.
    pub stream: u64,
    /// `small` (≤ 1 MiB allocations, 2 MiB segments) or `large`.
    pub segment_type: String,
    /// Memory pool: `(0, 0)` is the default pool, anything else a private pool (CUDA Graphs).
    pub segment_pool_id: Option<(i64, i64)>,
    /// Allocated with expandable segments.
    pub is_expandable: bool,
    /// Blocks, in address order.
    pub blocks: Vec<Block>,
}

/// One allocator event (`device_traces`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceEntry {
    /// `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`,
    /// `segment_map`, `segment_unmap`, `snapshot`, `oom`.
    pub action: String,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Stream.
    pub stream: u64,
    /// Free device memory (on `oom`); `None` when the entry does not say.
    pub device_free: Option<u64>,
    /// Where.
    pub frames: Vec<Frame>,
}

/// A decoded snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySnapshot {
    /// Segments of every device.
    pub segments: Vec<Segment>,
    /// One trace list per device.
    pub device_traces: Vec<Vec<TraceEntry>>,
}

/// A decoded pickle value; containers hold arena ids, so shared (memoised) values are stored
/// once, as in Python.
#[derive(Debug, Clone)]
enum Val {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
    Other,
    List(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

#[derive(Clone, Copy)]
enum DSlot {
    Mark,
    Obj(usize),
}

/// The weight of arena object `id`; ids on the stack and in the memo all come from `weights`.
fn weight(weights: &[u64], id: usize) -> u64 {
    weights.get(id).copied().unwrap_or(0)
}

/// Adds `w` to the weight of arena object `id`.
fn add_weight(weights: &mut [u64], id: usize, w: u64) {
    if let Some(x) = weights.get_mut(id) {
        *x = x.saturating_add(w);
    }
}

/// Consecutive `(key, value)` pairs of a SETITEMS item list (an odd last item is dropped).
fn pairs(items: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    items.chunks_exact(2).filter_map(|c| match *c {
        [k, v] => Some((k, v)),
        _ => None,
    })
}

fn small_int(bytes: &[u8]) -> i64 {
    // Little-endian two's complement, as LONG1/LONG4 store it.
    if bytes.is_empty() || bytes.len() > 8 {
        return if bytes.is_empty() { 0 } else { i64::MAX };
    }
    let mut b = [0u8; 8];
    let fill = if bytes.last().is_some_and(|&last| last & 0x80 != 0) {
        0xff
    } else {
        0
    };
    b.fill(fill);
    for (dst, &src) in b.iter_mut().zip(bytes) {
        *dst = src;
    }
    i64::from_le_bytes(b)
}

/// Decode a pickle that [`scan`] accepted into typed snapshot structs.
///
/// serde-pickle 1.2 loses memoised values nested in a shared container (a frame dict inside a
/// frame list referenced by two blocks decodes as "recursive structure"), and PyTorch shares
/// frame lists, so this small decoder keeps values in an arena and shares them by id.
///
/// One piece for the reason [`scan`] is. It walks the opcodes a second time rather than sharing
/// `scan`'s walker: `scan` bounds memory by weights before anything is built, `decode` builds
/// values only after `scan` accepted the file; one walker generic over both would need a trait
/// with an associated value type per opcode (left for later, see issue 21's note).
pub fn decode<R: BufRead>(reader: R, file_len: u64) -> Result<MemorySnapshot, PickleError> {
    let mut r = Counted {
        inner: reader,
        pos: 0,
    };
    let mut arena: Vec<Val> = Vec::new();
    let mut stack: Vec<DSlot> = Vec::new();
    let mut memo: BTreeMap<u64, usize> = BTreeMap::new();
    let malformed = |what: &str, pos: u64| PickleError::Malformed(what.to_string(), pos);
    macro_rules! push {
        ($v:expr) => {{
            arena.push($v);
            stack.push(DSlot::Obj(arena.len() - 1));
        }};
    }
    macro_rules! pop_obj {
        ($at:expr) => {
            match stack.pop() {
                Some(DSlot::Obj(id)) => id,
                _ => return Err(malformed("missing item", $at)),
            }
        };
    }
    let root = loop {
        let at = r.pos;
        let op = r.byte()?;
        match op {
            b'.' => break pop_obj!(at),
            0x80 => {
                r.byte()?;
            }
            0x95 => {
                r.uint(8)?;
            }
            b'(' => stack.push(DSlot::Mark),
            b'0' => {
                stack.pop();
            }
            b'1' => while let Some(DSlot::Obj(_)) = stack.pop() {},
            b'2' => {
                let top = *stack
                    .last()
                    .ok_or_else(|| malformed("DUP on an empty stack", at))?;
                stack.push(top);
            }
            b'N' => push!(Val::None),
            0x88 => push!(Val::Bool(true)),
            0x89 => push!(Val::Bool(false)),
            b'K' => push!(Val::Int(r.uint(1)? as i64)),
            b'M' => push!(Val::Int(r.uint(2)? as i64)),
            b'J' => push!(Val::Int(i64::from(r.uint(4)? as u32 as i32))),
            b'G' => {
                r.uint(8)?;
                push!(Val::Other)
            }
            b'I' | b'L' => {
                let l = r.line()?;
                let t = l.trim().trim_end_matches('L');
                push!(match t {
                    "00" => Val::Bool(false),
                    "01" => Val::Bool(true),
                    _ => t.parse().map(Val::Int).unwrap_or(Val::Other),
                })
            }
            b'F' => {
                r.line()?;
                push!(Val::Other)
            }
            b'S' | b'V' => {
                let l = r.line()?;
                push!(Val::Str(l.trim_matches(['\'', '"']).to_string()))
            }
            0x8a | 0x8b => {
                let n = r.uint(if op == 0x8a { 1 } else { 4 })?;
                if n > 8 {
                    r.skip(n, file_len)?;
                    push!(Val::Other)
                } else {
                    let mut b = vec![0u8; n as usize];
                    r.exact(&mut b)?;
                    push!(Val::Int(small_int(&b)))
                }
            }
            b'T' | b'X' | b'B' | 0x8c | b'U' | b'C' | 0x8d | 0x8e | 0x96 => {
                let width = match op {
                    b'U' | b'C' | 0x8c => 1,
                    0x8d | 0x8e | 0x96 => 8,
                    _ => 4,
                };
                let n = r.uint(width)?;
                if n > file_len.saturating_sub(r.pos) {
                    return Err(PickleError::LengthBeyondFile(n, at, file_len));
                }
                if matches!(op, b'X' | 0x8c | 0x8d | b'T' | b'U') {
                    let mut b = vec![0u8; n as usize];
                    r.exact(&mut b)?;
                    push!(Val::Str(String::from_utf8_lossy(&b).into_owned()))
                } else {
                    r.skip(n, file_len)?;
                    push!(Val::Other)
                }
            }
            b']' | b')' => push!(Val::List(Vec::new())),
            b'}' => push!(Val::Dict(Vec::new())),
            0x8f => push!(Val::Other),
            b'l' | b't' | b'd' | 0x91 => {
                let mut items = Vec::new();
                loop {
                    match stack.pop() {
                        Some(DSlot::Mark) => break,
                        Some(DSlot::Obj(id)) => items.push(id),
                        None => return Err(malformed("container without a MARK", at)),
                    }
                }
                items.reverse();
                push!(match op {
                    b'd' => Val::Dict(pairs(&items).collect()),
                    0x91 => Val::Other,
                    _ => Val::List(items),
                })
            }
            0x85..=0x87 => {
                let k = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(k);
                for _ in 0..k {
                    items.push(pop_obj!(at));
                }
                items.reverse();
                push!(Val::List(items))
            }
            b'a' | b's' | b'e' | b'u' | 0x90 => {
                let mut items = Vec::new();
                if op == b'a' {
                    items.push(pop_obj!(at));
                } else if op == b's' {
                    let v = pop_obj!(at);
                    let k = pop_obj!(at);
                    items.extend([k, v]);
                } else {
                    loop {
                        match stack.pop() {
                            Some(DSlot::Mark) => break,
                            Some(DSlot::Obj(id)) => items.push(id),
                            None => return Err(malformed("APPENDS/SETITEMS without a MARK", at)),
                        }
                    }
                    items.reverse();
                }
                let Some(DSlot::Obj(target)) = stack.last().copied() else {
                    return Err(malformed("APPEND/SETITEM without a container", at));
                };
                match arena.get_mut(target) {
                    Some(Val::List(v)) => v.extend(items),
                    Some(Val::Dict(d)) => d.extend(pairs(&items)),
                    Some(Val::Other) => {}
                    _ => return Err(malformed("APPEND/SETITEM to a scalar", at)),
                }
            }
            b'p' | b'q' | b'r' | 0x94 => {
                let idx = match op {
                    b'p' => r
                        .line()?
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| malformed("PUT with a bad index", at))?,
                    b'q' => r.uint(1)?,
                    b'r' => r.uint(4)?,
                    _ => memo.len() as u64,
                };
                let Some(DSlot::Obj(id)) = stack.last().copied() else {
                    return Err(malformed("PUT with nothing to remember", at));
                };
                memo.insert(idx, id);
            }
            b'g' | b'h' | b'j' => {
                let idx = match op {
                    b'g' => r
                        .line()?
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| malformed("GET with a bad index", at))?,
                    b'h' => r.uint(1)?,
                    _ => r.uint(4)?,
                };
                let id = *memo.get(&idx).ok_or_else(|| {
                    malformed(&format!("memo entry {idx} used before it was set"), at)
                })?;
                stack.push(DSlot::Obj(id));
            }
            _ => return Err(PickleError::Forbidden("(not accepted by scan)", at)),
        }
    };
    // What the typed structs may hold once shared values are copied into them: the scan's
    // estimate is taken when a value is referenced, so a shared list filled in later (memo GET,
    // then APPENDS) escapes it; this budget is charged where the copies are made.
    let budget = file_len
        .saturating_mul(16)
        .clamp(MIN_DECODED_BYTES, MAX_EXPANDED_UNITS);
    Conv {
        arena: &arena,
        left: std::cell::Cell::new(budget),
        budget,
    }
    .snapshot(root)
}

/// Smallest budget for the decoded structs (small files may still hold real shared frames).
const MIN_DECODED_BYTES: u64 = 128 << 20;

struct Conv<'a> {
    arena: &'a [Val],
    /// Bytes the decoded structs may still take.
    left: std::cell::Cell<u64>,
    budget: u64,
}

impl Conv<'_> {
    /// Charge `bytes` of decoded structs; a bomb once the budget is spent.
    fn spend(&self, bytes: u64) -> Result<(), PickleError> {
        match self.left.get().checked_sub(bytes) {
            Some(rest) => {
                self.left.set(rest);
                Ok(())
            }
            None => Err(PickleError::Bomb(self.budget >> 30)),
        }
    }
    fn get(&self, id: usize) -> &Val {
        self.arena.get(id).unwrap_or(&Val::None)
    }
    fn dict(&self, id: usize) -> Option<&[(usize, usize)]> {
        match self.get(id) {
            Val::Dict(d) => Some(d),
            _ => None,
        }
    }
    fn list(&self, id: usize) -> &[usize] {
        match self.get(id) {
            Val::List(v) => v,
            _ => &[],
        }
    }
    fn field(&self, d: &[(usize, usize)], key: &str) -> Option<usize> {
        d.iter()
            .find(|(k, _)| matches!(self.get(*k), Val::Str(s) if s == key))
            .map(|(_, v)| *v)
    }
    fn int(&self, d: &[(usize, usize)], key: &str) -> i64 {
        match self.field(d, key).map(|v| self.get(v)) {
            Some(Val::Int(i)) => *i,
            Some(Val::Bool(b)) => i64::from(*b),
            _ => 0,
        }
    }
    /// A non-negative integer field, `None` when missing or of another type.
    fn opt_uint(&self, d: &[(usize, usize)], key: &str) -> Option<u64> {
        match self.field(d, key).map(|v| self.get(v)) {
            Some(Val::Int(i)) => u64::try_from(*i).ok(),
            _ => None,
        }
    }
    fn uint(&self, d: &[(usize, usize)], key: &str) -> u64 {
        u64::try_from(self.int(d, key)).unwrap_or(0)
    }
    fn string(&self, d: &[(usize, usize)], key: &str) -> String {
        match self.field(d, key).map(|v| self.get(v)) {
            Some(Val::Str(s)) => s.clone(),
            _ => String::new(),
        }
    }
    fn frames(&self, d: &[(usize, usize)]) -> Result<Vec<Frame>, PickleError> {
        let Some(f) = self.field(d, "frames") else {
            return Ok(Vec::new());
        };
        self.list(f)
            .iter()
            .filter_map(|x| self.dict(*x))
            .map(|fd| {
                let frame = Frame {
                    filename: self.string(fd, "filename"),
                    line: self.int(fd, "line"),
                    name: self.string(fd, "name"),
                };
                self.spend(96 + (frame.filename.len() + frame.name.len()) as u64)?;
                Ok(frame)
            })
            .collect()
    }
    fn snapshot(&self, root: usize) -> Result<MemorySnapshot, PickleError> {
        let top = self.dict(root).ok_or_else(|| {
            PickleError::Shape(
                "the pickle holds no dict (expected keys segments and device_traces)".into(),
            )
        })?;
        let Some(segs) = self.field(top, "segments") else {
            return Err(PickleError::Shape("no \"segments\" key".into()));
        };
        let mut out = MemorySnapshot::default();
        for s in self.list(segs) {
            let Some(sd) = self.dict(*s) else { continue };
            let pool = self
                .field(sd, "segment_pool_id")
                .and_then(|p| match self.list(p) {
                    [a, b] => match (self.get(*a), self.get(*b)) {
                        (Val::Int(a), Val::Int(b)) => Some((*a, *b)),
                        _ => None,
                    },
                    _ => None,
                });
            let blocks = self
                .field(sd, "blocks")
                .map(|b| self.list(b))
                .unwrap_or(&[])
                .iter()
                .filter_map(|b| self.dict(*b))
                .map(|bd| {
                    self.spend(96)?;
                    Ok(Block {
                        address: self.uint(bd, "address"),
                        size: self.uint(bd, "size"),
                        requested_size: self.uint(bd, "requested_size"),
                        state: self.string(bd, "state"),
                        frames: self.frames(bd)?,
                    })
                })
                .collect::<Result<_, PickleError>>()?;
            out.segments.push(Segment {
                device: self.int(sd, "device"),
                address: self.uint(sd, "address"),
                total_size: self.uint(sd, "total_size"),
                allocated_size: self.uint(sd, "allocated_size"),
                active_size: self.uint(sd, "active_size"),
                requested_size: self.uint(sd, "requested_size"),
                stream: self.uint(sd, "stream"),
                segment_type: self.string(sd, "segment_type"),
                segment_pool_id: pool,
                is_expandable: self.int(sd, "is_expandable") != 0,
                blocks,
            });
        }
        if let Some(t) = self.field(top, "device_traces") {
            for dev in self.list(t) {
                out.device_traces.push(
                    self.list(*dev)
                        .iter()
                        .filter_map(|e| self.dict(*e))
                        .map(|ed| {
                            self.spend(96)?;
                            Ok(TraceEntry {
                                action: self.string(ed, "action"),
                                addr: self.uint(ed, "addr"),
                                size: self.uint(ed, "size"),
                                stream: self.uint(ed, "stream"),
                                device_free: self.opt_uint(ed, "device_free"),
                                frames: self.frames(ed)?,
                            })
                        })
                        .collect::<Result<_, PickleError>>()?,
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(bytes: &[u8]) -> Result<MemorySnapshot, PickleError> {
        scan(bytes, bytes.len() as u64)?;
        decode(bytes, bytes.len() as u64)
    }

    #[test]
    fn no_panic_on_any_cut_or_flipped_byte() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/tools/torch-snapshots"
        );
        let good = std::fs::read(format!("{dir}/vllm-like-protocol4.pickle")).unwrap();
        assert_eq!(load(&good).unwrap().segments.len(), 6);
        for end in 0..good.len() {
            assert!(load(&good[..end]).is_err(), "cut at {end} accepted");
        }
        for i in 0..good.len() {
            for x in [0x00u8, 0xff, 0x80, b'(', 0x93] {
                let mut b = good.clone();
                b[i] = x;
                let _ = load(&b);
            }
        }
    }

    #[test]
    fn protocol_0_text_opcodes() {
        // pickle.dumps({'segments': [], 'device_traces': [[]]}, protocol=0)
        let p0 = b"(dp0\nVsegments\np1\n(lp2\nsVdevice_traces\np3\n(lp4\n(lp5\nas.";
        let s = load(p0).unwrap();
        assert!(s.segments.is_empty());
        assert_eq!(s.device_traces.len(), 1);
    }
}
