//! GGUF headers (llama.cpp model files), read as a stream.
//!
//! Layout (little-endian): magic `GGUF`, `u32` version (2 or 3; version 1 used 32-bit
//! counts and is refused), `u64` tensor count, `u64` metadata count, the metadata
//! key/value pairs, the tensor infos (name, `u32` rank, `u64` dims, `u32` ggml type, `u64`
//! offset into the data section), padding to `general.alignment` (default 32), then data.
//!
//! Why hand-written: the GGUF crates either want the whole file as a slice (a mmap of many
//! GiB, v3 only, pulling rayon and friends) or bring CLI dependencies into the library
//! (see docs/decisions.md, "Dependencies"). This reader needs only [`std::io::Read`] and reads the
//! header and nothing else.
//!
//! Memory is bounded by what the file actually contains, never by a count it declares:
//! nothing is pre-allocated from a count, arrays longer than [`MAX_STORED_ARRAY`] elements
//! (such as the 150k-string `tokenizer.ggml.tokens`) are read past and recorded as
//! [`GgufValue::Skipped`], strings are capped at [`MAX_STRING`] bytes, and the tensor and
//! key/value counts are capped ([`MAX_TENSORS`], [`MAX_KVS`]). When the file length is
//! known, every declared length is also checked against the bytes left before reading.
//!
//! Sizes follow ggml: a tensor of type `t` with dims `ne` takes
//! `ne[0] / block_size(t) * type_size(t) * ne[1] * ne[2] * ne[3]` bytes, `ne[0]` must be
//! a multiple of the block size, offsets must be multiples of the alignment, and every
//! tensor must end within the file.
//!
//! Errors use line 1 and column = byte offset + 1, and their text says "byte offset N";
//! a file that ends early gives "unexpected end of file at byte offset N".

use crate::error::ParseError;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};

/// Most tensors accepted.
pub const MAX_TENSORS: u64 = 1_000_000;
/// Most metadata key/value pairs accepted.
pub const MAX_KVS: u64 = 100_000;
/// Longest string accepted (1 MiB).
pub const MAX_STRING: u64 = 1024 * 1024;
/// Arrays with more elements are read past and recorded as [`GgufValue::Skipped`].
pub const MAX_STORED_ARRAY: u64 = 4096;
/// Most dimensions of a tensor (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Deepest nesting of arrays of arrays.
const MAX_ARRAY_DEPTH: usize = 4;
/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The type of a metadata value (`gguf_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GgufType {
    /// 0
    U8,
    /// 1
    I8,
    /// 2
    U16,
    /// 3
    I16,
    /// 4
    U32,
    /// 5
    I32,
    /// 6
    F32,
    /// 7
    Bool,
    /// 8
    String,
    /// 9
    Array,
    /// 10
    U64,
    /// 11
    I64,
    /// 12
    F64,
}

impl GgufType {
    /// Maps the on-disk id.
    pub fn from_id(id: u32) -> Option<GgufType> {
        use GgufType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Size of one value on disk, for fixed-size types.
    pub fn fixed_size(self) -> Option<u64> {
        use GgufType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// Lower-case name as in ggml (`"uint32"`, `"string"`, ...).
    pub fn name(self) -> &'static str {
        use GgufType::*;
        match self {
            U8 => "uint8",
            I8 => "int8",
            U16 => "uint16",
            I16 => "int16",
            U32 => "uint32",
            I32 => "int32",
            F32 => "float32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "uint64",
            I64 => "int64",
            F64 => "float64",
        }
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// uint8
    U8(u8),
    /// int8
    I8(i8),
    /// uint16
    U16(u16),
    /// int16
    I16(i16),
    /// uint32
    U32(u32),
    /// int32
    I32(i32),
    /// float32
    F32(f32),
    /// bool
    Bool(bool),
    /// string (invalid UTF-8 replaced by U+FFFD)
    String(String),
    /// uint64
    U64(u64),
    /// int64
    I64(i64),
    /// float64
    F64(f64),
    /// An array of at most [`MAX_STORED_ARRAY`] elements.
    Array(Vec<GgufValue>),
    /// A longer array, read past without storing it.
    Skipped {
        /// Element type.
        elem_type: GgufType,
        /// Number of elements.
        len: u64,
    },
}

impl GgufValue {
    /// The value as an unsigned integer, for any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Number of elements of an array (stored or skipped).
    pub fn array_len(&self) -> Option<u64> {
        match self {
            GgufValue::Array(v) => Some(v.len() as u64),
            GgufValue::Skipped { len, .. } => Some(*len),
            _ => None,
        }
    }
}

/// A ggml tensor type with its block geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// On-disk id (`ggml_type`).
    pub id: u32,
    /// Name as in ggml (`"Q4_K"`).
    pub name: &'static str,
    /// Elements per block.
    pub block_size: u64,
    /// Bytes per block.
    pub type_size: u64,
}

const QK_K: u64 = 256;

const fn t(id: u32, name: &'static str, block_size: u64, type_size: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_size,
        type_size,
    }
}

/// Every ggml type a GGUF tensor can have (from ggml's `type_traits`, as in PyPI `gguf`
/// 0.19.0 `GGML_QUANT_SIZES`). Ids 4, 5, 31–33 and 36–38 were removed from ggml.
pub const GGML_TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 2 + 16),
    t(3, "Q4_1", 32, 2 + 2 + 16),
    t(6, "Q5_0", 32, 2 + 4 + 16),
    t(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    t(8, "Q8_0", 32, 2 + 32),
    t(9, "Q8_1", 32, 4 + 4 + 32),
    t(10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
    t(11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
    t(12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
    t(13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
    t(14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
    t(15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8),
    t(16, "IQ2_XXS", QK_K, 2 + QK_K / 4),
    t(17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32),
    t(18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8),
    t(19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
    t(20, "IQ4_NL", 32, 2 + 16),
    t(21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
    t(22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
    t(23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", QK_K, 2 + 4 * 13),
    t(35, "TQ2_0", QK_K, 2 + 64),
    t(39, "MXFP4", 32, 1 + 16),
    t(40, "NVFP4", 64, 4 + 32),
    t(41, "Q1_0", 128, 2 + 16),
];

impl GgmlType {
    /// Looks up an on-disk id.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().find(|t| t.id == id).copied()
    }
}

/// One tensor info of a GGUF header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensor {
    /// Tensor name.
    pub name: String,
    /// Dimensions, innermost first (ggml `ne`).
    pub dims: Vec<u64>,
    /// ggml type.
    pub ggml_type: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
    /// Size in bytes.
    pub bytes: u64,
}

/// A parsed GGUF header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, GgufValue)>,
    /// Tensor infos in file order.
    pub tensors: Vec<GgufTensor>,
    /// Data alignment (`general.alignment` or 32).
    pub alignment: u64,
    /// File offset where the tensor infos end.
    pub header_end: u64,
    /// File offset of the data section (`header_end` rounded up to the alignment).
    pub data_offset: u64,
    /// Sum of all tensor sizes (without padding).
    pub total_tensor_bytes: u64,
    /// Tensor bytes per ggml type name.
    pub bytes_by_type: BTreeMap<&'static str, u64>,
    /// File offset just past the last byte of tensor data.
    pub data_end: u64,
    /// Number of metadata arrays skipped for being long.
    pub skipped_arrays: usize,
}

impl GgufHeader {
    /// The value of metadata `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(GgufValue::as_str)
    }
}

fn err_at(offset: u64, expected: impl Into<String>, found: &str) -> ParseError {
    let column = usize::try_from(offset).unwrap_or(usize::MAX - 1) + 1;
    ParseError::new(1, column, expected, found)
}

/// Reads a GGUF header from `r`, positioned at the start of a file of `file_len` bytes.
pub fn parse_header(r: &mut impl Read, file_len: u64) -> Result<GgufHeader, ParseError> {
    parse(r, Some(file_len))
}

/// Like [`parse_header`] when the file length is unknown (a pipe): declared lengths are
/// checked only against what can actually be read, and tensors are not checked against
/// the end of the file.
pub fn parse_header_unsized(r: &mut impl Read) -> Result<GgufHeader, ParseError> {
    parse(r, None)
}

struct Src<'r, R> {
    r: &'r mut R,
    pos: u64,
    file_len: Option<u64>,
}

impl<R: Read> Src<'_, R> {
    fn eof(&self, what: &str) -> ParseError {
        err_at(
            self.pos,
            what,
            &format!("unexpected end of file at byte offset {}", self.pos),
        )
    }

    fn io(&self, what: &str, e: &io::Error) -> ParseError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            return self.eof(what);
        }
        err_at(
            self.pos,
            what,
            &format!("read error at byte offset {}: {e}", self.pos),
        )
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ParseError> {
        let mut b = [0u8; N];
        let mut got = 0;
        while got < N {
            match self.r.read(&mut b[got..]) {
                Ok(0) => {
                    self.pos += got as u64;
                    return Err(self.eof(what));
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pos += got as u64;
                    return Err(self.io(what, &e));
                }
            }
        }
        self.pos += N as u64;
        Ok(b)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ParseError> {
        self.bytes::<4>(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, ParseError> {
        self.bytes::<8>(what).map(u64::from_le_bytes)
    }

    /// Checks that `need` more bytes can exist; `at` is where the length was declared.
    fn room(&self, at: u64, need: Option<u64>, what: &str, found: &str) -> Result<(), ParseError> {
        if let Some(len) = self.file_len {
            let left = len.saturating_sub(self.pos);
            if need.is_none_or(|n| n > left) {
                return Err(err_at(
                    at,
                    format!("{what} that fits in the {left} bytes left (byte offset {at})"),
                    found,
                ));
            }
        }
        Ok(())
    }

    /// Reads past `n` bytes.
    fn skip(&mut self, n: u64, what: &str) -> Result<(), ParseError> {
        let got = io::copy(&mut self.r.by_ref().take(n), &mut io::sink());
        match got {
            Ok(k) => {
                self.pos += k;
                if k < n { Err(self.eof(what)) } else { Ok(()) }
            }
            Err(e) => Err(self.io(what, &e)),
        }
    }

    /// A length-prefixed string; `store == false` reads past it.
    fn string(&mut self, what: &str, store: bool) -> Result<String, ParseError> {
        let at = self.pos;
        let len = self.u64(&format!("{what} length (u64)"))?;
        if len > MAX_STRING {
            return Err(err_at(
                at,
                format!("{what} string of at most {MAX_STRING} bytes (1 MiB) at byte offset {at}"),
                &format!("length {len}"),
            ));
        }
        self.room(at, Some(len), what, &format!("length {len}"))?;
        if !store {
            self.skip(len, what)?;
            return Ok(String::new());
        }
        let mut v = Vec::new();
        match self.r.by_ref().take(len).read_to_end(&mut v) {
            Ok(k) => {
                self.pos += k as u64;
                if (k as u64) < len {
                    return Err(self.eof(what));
                }
            }
            Err(e) => return Err(self.io(what, &e)),
        }
        Ok(match String::from_utf8(v) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    fn value_type(&mut self, what: &str) -> Result<GgufType, ParseError> {
        let at = self.pos;
        let id = self.u32(what)?;
        GgufType::from_id(id).ok_or_else(|| {
            err_at(
                at,
                format!("{what} (0..=12) at byte offset {at}"),
                &format!("type {id}"),
            )
        })
    }

    /// One value of type `ty`; `None` when `store` is false (read past).
    fn value(
        &mut self,
        ty: GgufType,
        what: &str,
        store: bool,
        depth: usize,
        skipped: &mut usize,
    ) -> Result<Option<GgufValue>, ParseError> {
        use GgufValue as V;
        Ok(Some(match ty {
            GgufType::U8 => V::U8(self.bytes::<1>(what)?[0]),
            GgufType::I8 => V::I8(i8::from_le_bytes(self.bytes::<1>(what)?)),
            GgufType::U16 => V::U16(u16::from_le_bytes(self.bytes::<2>(what)?)),
            GgufType::I16 => V::I16(i16::from_le_bytes(self.bytes::<2>(what)?)),
            GgufType::U32 => V::U32(self.u32(what)?),
            GgufType::I32 => V::I32(i32::from_le_bytes(self.bytes::<4>(what)?)),
            GgufType::F32 => V::F32(f32::from_le_bytes(self.bytes::<4>(what)?)),
            GgufType::Bool => V::Bool(self.bytes::<1>(what)?[0] != 0),
            GgufType::U64 => V::U64(self.u64(what)?),
            GgufType::I64 => V::I64(i64::from_le_bytes(self.bytes::<8>(what)?)),
            GgufType::F64 => V::F64(f64::from_le_bytes(self.bytes::<8>(what)?)),
            GgufType::String => {
                let s = self.string(what, store)?;
                if !store {
                    return Ok(None);
                }
                V::String(s)
            }
            GgufType::Array => {
                let at = self.pos;
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(err_at(
                        at,
                        format!("arrays nested at most {MAX_ARRAY_DEPTH} deep in {what}"),
                        &format!("deeper nesting at byte offset {at}"),
                    ));
                }
                let elem = self.value_type(&format!("{what} element type"))?;
                let len_at = self.pos;
                let len = self.u64(&format!("{what} length (u64)"))?;
                // Smallest possible encoding of `len` elements.
                let min = match elem {
                    GgufType::String => len.checked_mul(8),
                    GgufType::Array => len.checked_mul(12),
                    t => len.checked_mul(t.fixed_size().unwrap_or(1)),
                };
                self.room(
                    len_at,
                    min,
                    &format!("{what} array length"),
                    &format!("{len} {} elements", elem.name()),
                )?;
                let keep = store && len <= MAX_STORED_ARRAY;
                if !keep && elem.fixed_size().is_some() {
                    // Overflow is impossible when the file length is known (checked above).
                    let Some(n) = min else {
                        return Err(err_at(
                            len_at,
                            format!("{what} array that fits in 64-bit offsets"),
                            &format!("{len} {} elements", elem.name()),
                        ));
                    };
                    self.skip(n, what)?;
                } else {
                    let mut items = Vec::new();
                    for _ in 0..len {
                        if let Some(v) = self.value(elem, what, keep, depth + 1, skipped)? {
                            items.push(v);
                        }
                    }
                    if keep {
                        return Ok(Some(V::Array(items)));
                    }
                }
                if !store {
                    return Ok(None);
                }
                *skipped += 1;
                V::Skipped {
                    elem_type: elem,
                    len,
                }
            }
        }))
    }
}

fn parse(r: &mut impl Read, file_len: Option<u64>) -> Result<GgufHeader, ParseError> {
    let mut s = Src {
        r,
        pos: 0,
        file_len,
    };
    let (version, n_tensors, n_kv) = preamble(&mut s)?;
    let (metadata, skipped_arrays, alignment) = read_metadata(&mut s, n_kv)?;
    let (tensors, info_at) = read_tensor_infos(&mut s, n_tensors, alignment)?;
    let header_end = s.pos;
    let layout = data_layout(&tensors, &info_at, header_end, alignment, file_len)?;
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        alignment,
        header_end,
        data_offset: layout.data_offset,
        total_tensor_bytes: layout.total,
        bytes_by_type: layout.by_type,
        data_end: layout.data_end,
        skipped_arrays,
    })
}

/// Magic, version and the two counts, each within its limit.
fn preamble<R: Read>(s: &mut Src<'_, R>) -> Result<(u32, u64, u64), ParseError> {
    let magic = s.bytes::<4>("magic \"GGUF\"")?;
    if &magic != b"GGUF" {
        return Err(err_at(
            0,
            "magic \"GGUF\" at byte offset 0",
            &format!("{:?}", String::from_utf8_lossy(&magic)),
        ));
    }
    let version = s.u32("version (u32)")?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(err_at(
                4,
                "GGUF version 2 or 3 at byte offset 4",
                "version 1 (unsupported: 32-bit counts, before August 2023)",
            ));
        }
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            return Err(err_at(
                4,
                "GGUF version 2 or 3 at byte offset 4",
                &format!("big-endian version {} (unsupported)", v.swap_bytes()),
            ));
        }
        v => {
            return Err(err_at(
                4,
                "GGUF version 2 or 3 at byte offset 4",
                &format!("version {v}"),
            ));
        }
    }
    let n_tensors = s.u64("tensor count (u64)")?;
    if n_tensors > MAX_TENSORS {
        return Err(err_at(
            8,
            format!("tensor count of at most {MAX_TENSORS} at byte offset 8"),
            &n_tensors.to_string(),
        ));
    }
    let n_kv = s.u64("metadata count (u64)")?;
    if n_kv > MAX_KVS {
        return Err(err_at(
            16,
            format!("metadata count of at most {MAX_KVS} at byte offset 16"),
            &n_kv.to_string(),
        ));
    }
    Ok((version, n_tensors, n_kv))
}

/// The key-value pairs, how many arrays were skipped, and the alignment.
type Metadata = (Vec<(String, GgufValue)>, usize, u64);

/// The metadata key-value pairs (keys unique), the arrays skipped, and `general.alignment`.
fn read_metadata<R: Read>(s: &mut Src<'_, R>, n_kv: u64) -> Result<Metadata, ParseError> {
    let mut metadata: Vec<(String, GgufValue)> = Vec::new();
    let mut keys: BTreeSet<String> = BTreeSet::new();
    let mut skipped_arrays = 0usize;
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..n_kv {
        let key_at = s.pos;
        let key = s.string(&format!("metadata key {i}"), true)?;
        let what = format!("metadata {}", quote(&key));
        let ty = s.value_type(&format!("{what} type"))?;
        let value_at = s.pos;
        let value = s
            .value(ty, &what, true, 0, &mut skipped_arrays)?
            .unwrap_or(GgufValue::Bool(false));
        if key == "general.alignment" {
            match value {
                GgufValue::U32(a) if a != 0 && a.is_power_of_two() => alignment = a.into(),
                ref v => {
                    return Err(err_at(
                        value_at,
                        format!(
                            "general.alignment as a power-of-two uint32 at byte offset {value_at}"
                        ),
                        &describe(v),
                    ));
                }
            }
        }
        if !keys.insert(key.clone()) {
            return Err(err_at(
                key_at,
                format!("unique metadata keys at byte offset {key_at}"),
                &format!("{} again", quote(&key)),
            ));
        }
        metadata.push((key, value));
    }
    Ok((metadata, skipped_arrays, alignment))
}

/// The tensor infos (names unique, types known, sizes checked, offsets aligned), and where each
/// info starts.
fn read_tensor_infos<R: Read>(
    s: &mut Src<'_, R>,
    n_tensors: u64,
    alignment: u64,
) -> Result<(Vec<GgufTensor>, Vec<u64>), ParseError> {
    let mut tensors: Vec<GgufTensor> = Vec::new();
    let mut info_at: Vec<u64> = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for i in 0..n_tensors {
        let name_at = s.pos;
        let name = s.string(&format!("tensor {i} name"), true)?;
        let what = format!("tensor {}", quote(&name));
        let dims_at = s.pos;
        let n_dims = s.u32(&format!("{what} dimension count (u32)"))?;
        if n_dims > MAX_DIMS {
            return Err(err_at(
                dims_at,
                format!("at most {MAX_DIMS} dimensions for {what} at byte offset {dims_at}"),
                &n_dims.to_string(),
            ));
        }
        let mut dims = Vec::new();
        for _ in 0..n_dims {
            dims.push(s.u64(&format!("{what} dimension (u64)"))?);
        }
        let type_at = s.pos;
        let type_id = s.u32(&format!("{what} type (u32)"))?;
        let offset_at = s.pos;
        let offset = s.u64(&format!("{what} offset (u64)"))?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| {
            err_at(
                type_at,
                format!("a known ggml type for {what} at byte offset {type_at}"),
                &format!("type {type_id}"),
            )
        })?;
        let bytes = tensor_bytes(&dims, ggml_type).map_err(|why| {
            err_at(
                dims_at,
                format!(
                    "dimensions of {what} ({}) {why} at byte offset {dims_at}",
                    ggml_type.name
                ),
                &format!("{dims:?}"),
            )
        })?;
        if offset % alignment != 0 {
            return Err(err_at(
                offset_at,
                format!(
                    "an offset of {what} that is a multiple of {alignment} at byte offset {offset_at}"
                ),
                &offset.to_string(),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err_at(
                name_at,
                format!("unique tensor names at byte offset {name_at}"),
                &format!("{} again", quote(&name)),
            ));
        }
        info_at.push(name_at);
        tensors.push(GgufTensor {
            name,
            dims,
            ggml_type,
            offset,
            bytes,
        });
    }
    Ok((tensors, info_at))
}

/// Where the data section starts and ends, and bytes per type.
struct Layout {
    data_offset: u64,
    total: u64,
    by_type: BTreeMap<&'static str, u64>,
    data_end: u64,
}

/// Every tensor's data within the file; totals by type.
fn data_layout(
    tensors: &[GgufTensor],
    info_at: &[u64],
    header_end: u64,
    alignment: u64,
    file_len: Option<u64>,
) -> Result<Layout, ParseError> {
    let data_offset = header_end.div_ceil(alignment).saturating_mul(alignment);
    let mut total = 0u64;
    let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut data_end = data_offset;
    for (t, &at) in tensors.iter().zip(info_at) {
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|b| b.checked_add(t.bytes));
        match (end, file_len) {
            (Some(e), Some(len)) if e <= len => data_end = data_end.max(e),
            (Some(e), None) => data_end = data_end.max(e),
            _ => {
                let len = file_len.map_or("the file".to_owned(), |l| format!("{l} bytes"));
                return Err(err_at(
                    at,
                    format!(
                        "tensor {} (info at byte offset {at}; {} bytes at data offset {}) to end within the file ({len}; data section at byte offset {data_offset})",
                        quote(&t.name),
                        t.bytes,
                        t.offset
                    ),
                    &format!(
                        "end at byte offset {}",
                        end.map_or("beyond 2^64".to_owned(), |e| e.to_string())
                    ),
                ));
            }
        }
        total = total.saturating_add(t.bytes);
        let e = by_type.entry(t.ggml_type.name).or_insert(0);
        *e = e.saturating_add(t.bytes);
    }
    Ok(Layout {
        data_offset,
        total,
        by_type,
        data_end,
    })
}

/// ggml's `ggml_nbytes` for a contiguous tensor, with checked arithmetic.
fn tensor_bytes(dims: &[u64], t: GgmlType) -> Result<u64, &'static str> {
    let ne0 = dims.first().copied().unwrap_or(1);
    if ne0 % t.block_size != 0 {
        return Err("with the first dimension a multiple of the block size");
    }
    // ggml keeps element counts in int64_t.
    dims.iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or("whose element count fits in int64")?;
    (ne0 / t.block_size)
        .checked_mul(t.type_size)
        .and_then(|row| dims.iter().skip(1).try_fold(row, |a, &d| a.checked_mul(d)))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or("whose size fits in int64")
}

/// `s` in quotes for a message, cut to 40 characters so a huge name cannot make a huge
/// allocation.
fn quote(s: &str) -> String {
    let mut q: String = s.chars().take(40).collect();
    if q.len() < s.len() {
        q.push('…');
    }
    format!("{q:?}")
}

/// A short description of a value for a message.
fn describe(v: &GgufValue) -> String {
    match v {
        GgufValue::String(s) => format!("string {}", quote(s)),
        GgufValue::Array(a) => format!("array of {} elements", a.len()),
        GgufValue::Skipped { elem_type, len } => format!("array of {len} {}", elem_type.name()),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &mut Vec<u8>, x: &str) {
        v.extend((x.len() as u64).to_le_bytes());
        v.extend(x.as_bytes());
    }

    fn tiny() -> Vec<u8> {
        let mut v = b"GGUF".to_vec();
        v.extend(3u32.to_le_bytes());
        v.extend(1u64.to_le_bytes());
        v.extend(2u64.to_le_bytes());
        s(&mut v, "general.architecture");
        v.extend(8u32.to_le_bytes());
        s(&mut v, "llama");
        s(&mut v, "big");
        v.extend(9u32.to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v.extend(5000u64.to_le_bytes());
        v.extend(std::iter::repeat_n(7u8, 5000));
        s(&mut v, "w");
        v.extend(2u32.to_le_bytes());
        v.extend(32u64.to_le_bytes());
        v.extend(2u64.to_le_bytes());
        v.extend(8u32.to_le_bytes()); // Q8_0
        v.extend(0u64.to_le_bytes());
        while !v.len().is_multiple_of(32) {
            v.push(0);
        }
        v.extend(std::iter::repeat_n(0u8, 68));
        v
    }

    #[test]
    fn tiny_file() {
        let f = tiny();
        let h = parse_header(&mut &f[..], f.len() as u64).unwrap();
        assert_eq!(h.architecture(), Some("llama"));
        assert_eq!(
            h.get("big"),
            Some(&GgufValue::Skipped {
                elem_type: GgufType::U8,
                len: 5000
            })
        );
        assert_eq!(h.tensors[0].bytes, 68);
        assert_eq!(h.data_end, f.len() as u64);
        let e = parse_header(&mut &f[..], f.len() as u64 - 1).unwrap_err();
        assert!(e.expected.contains("within the file"), "{e}");
        for cut in 0..f.len() - 68 {
            assert!(parse_header(&mut &f[..cut], cut as u64).is_err());
        }
        for cut in 0..h.header_end as usize {
            assert!(parse_header_unsized(&mut &f[..cut]).is_err());
        }
    }

    #[test]
    fn table_matches_ggml_sizes() {
        let q4k = GgmlType::from_id(12).unwrap();
        assert_eq!((q4k.block_size, q4k.type_size), (256, 144));
        assert_eq!(GgmlType::from_id(14).unwrap().type_size, 210);
        assert_eq!(GgmlType::from_id(39).unwrap().type_size, 17);
        assert!(GgmlType::from_id(4).is_none());
    }
}
