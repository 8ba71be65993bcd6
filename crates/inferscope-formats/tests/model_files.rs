//! Model-file headers: real safetensors and GGUF files written by the reference writers
//! (`scripts/make_model_file_fixtures.py`) against their reviewed `<name>.expected.json`
//! (`UPDATE_EXPECTED=1` rewrites them) and against the totals the Python readers reported
//! in `SOURCE.md`; bad inputs against `<name>.expected-error.txt`; and damaged copies of
//! every good file (cut at many offsets, bytes flipped) that must give Ok or Err, never a
//! panic, with no allocation larger than a few MiB whatever the file declares.

use inferscope_formats::ParseError;
use inferscope_formats::gguf::{self, GgufHeader, GgufValue};
use inferscope_formats::safetensors::{self, MAX_HEADER_LEN, SafetensorsHeader};
use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Records the largest single allocation made by this test binary.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

/// No parse may make a single allocation above this (strings are capped at 1 MiB; the
/// fixtures themselves are under 200 KiB).
const MAX_ALLOCATION: usize = 4 << 20;

fn dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tools")
        .join(kind)
}

fn fixtures(kind: &str, ext: &str, bad: bool) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir(kind))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext) && n.starts_with("bad-") == bad)
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no {ext} fixtures in {kind}");
    v
}

fn read(kind: &str, name: &str) -> Vec<u8> {
    std::fs::read(dir(kind).join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What a caller does: read the 8-byte length, then that many bytes, then parse.
fn load_st(file: &[u8]) -> Result<SafetensorsHeader, ParseError> {
    let n = safetensors::header_len(file)?;
    assert!(n <= MAX_HEADER_LEN);
    let want = (8 + n as usize).min(file.len());
    safetensors::parse_header(&file[..want], file.len() as u64)
}

fn load_gguf(file: &[u8]) -> Result<GgufHeader, ParseError> {
    gguf::parse_header(&mut &file[..], file.len() as u64)
}

fn st_json(h: &SafetensorsHeader) -> Value {
    json!({
        "header_len": h.header_len,
        "data_len": h.data_len,
        "tensor_count": h.tensors.len(),
        "total_bytes": h.total_bytes,
        "unused_bytes": h.unused_bytes,
        "bytes_by_dtype": h.bytes_by_dtype.iter().map(|(d, b)| (d.name().to_owned(), json!(b))).collect::<serde_json::Map<_, _>>(),
        "metadata": h.metadata,
        "tensors": h.tensors.iter().map(|t| json!([t.name, t.dtype.name(), t.shape, t.data_offsets.0, t.bytes])).collect::<Vec<_>>(),
    })
}

fn gguf_value_json(v: &GgufValue) -> Value {
    match v {
        GgufValue::U8(x) => json!(x),
        GgufValue::I8(x) => json!(x),
        GgufValue::U16(x) => json!(x),
        GgufValue::I16(x) => json!(x),
        GgufValue::U32(x) => json!(x),
        GgufValue::I32(x) => json!(x),
        GgufValue::F32(x) => json!(x),
        GgufValue::Bool(x) => json!(x),
        GgufValue::String(x) => {
            if x.len() > 80 {
                json!(format!("<string of {} bytes>", x.len()))
            } else {
                json!(x)
            }
        }
        GgufValue::U64(x) => json!(x),
        GgufValue::I64(x) => json!(x),
        GgufValue::F64(x) => json!(x),
        GgufValue::Array(items) if items.len() > 8 => {
            json!(format!("<array of {} stored elements>", items.len()))
        }
        GgufValue::Array(items) => Value::Array(items.iter().map(gguf_value_json).collect()),
        GgufValue::Skipped { elem_type, len } => {
            json!({"skipped": {"elem_type": elem_type.name(), "len": len}})
        }
    }
}

fn gguf_json(h: &GgufHeader) -> Value {
    json!({
        "version": h.version,
        "tensor_count": h.tensors.len(),
        "total_tensor_bytes": h.total_tensor_bytes,
        "bytes_by_type": h.bytes_by_type,
        "alignment": h.alignment,
        "header_end": h.header_end,
        "data_offset": h.data_offset,
        "data_end": h.data_end,
        "skipped_arrays": h.skipped_arrays,
        "architecture": h.architecture(),
        "metadata": h.metadata.iter().map(|(k, v)| (k.clone(), gguf_value_json(v))).collect::<serde_json::Map<_, _>>(),
        "tensors": h.tensors.iter().map(|t| json!([t.name, t.ggml_type.name, t.dims, t.offset, t.bytes])).collect::<Vec<_>>(),
    })
}

/// Compares with (or, under `UPDATE_EXPECTED=1`, writes) `<stem>.expected.json`.
fn check_expected(kind: &str, stem: &str, got: &Value) {
    let path = dir(kind).join(format!("{stem}.expected.json"));
    if std::env::var_os("UPDATE_EXPECTED").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(got).unwrap() + "\n").unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_EXPECTED=1 writes it)", path.display()));
    let want: Value = serde_json::from_str(&want).unwrap();
    assert!(
        *got == want,
        "{stem} differs from {stem}.expected.json (UPDATE_EXPECTED=1 rewrites it; review the diff)"
    );
}

fn check_expected_error(kind: &str, stem: &str, got: &ParseError) {
    let path = dir(kind).join(format!("{stem}.expected-error.txt"));
    if std::env::var_os("UPDATE_EXPECTED").is_some() {
        std::fs::write(&path, format!("{got}\n")).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_EXPECTED=1 writes it)", path.display()));
    assert_eq!(got.to_string(), want.trim_end(), "{stem}");
}

/// The SOURCE.md row for `name`: `| `name` | bytes | count | total | by type |`, as written
/// by the Python reference readers.
fn source_row(kind: &str, name: &str) -> (u64, usize, u64, Vec<(String, u64)>) {
    let text = std::fs::read_to_string(dir(kind).join("SOURCE.md")).unwrap();
    let prefix = format!("| `{name}` |");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{name} has no row in {kind}/SOURCE.md"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let by = cells[5]
        .split(", ")
        .map(|p| {
            let (k, v) = p.split_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    (
        cells[2].parse().unwrap(),
        cells[3].parse().unwrap(),
        cells[4].parse().unwrap(),
        by,
    )
}

#[test]
fn safetensors_good_files() {
    for name in fixtures("safetensors", ".safetensors", false) {
        let file = read("safetensors", &name);
        let h = load_st(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Header-only input is enough.
        let n = h.header_len as usize;
        assert_eq!(
            safetensors::parse_header(&file[..8 + n], file.len() as u64).as_ref(),
            Ok(&h)
        );
        let (bytes, count, total, by) = source_row("safetensors", &name);
        assert_eq!(bytes, file.len() as u64, "{name}");
        assert_eq!(count, h.tensors.len(), "{name}");
        assert_eq!(total, h.total_bytes, "{name}");
        let mut ours: Vec<(String, u64)> = h
            .bytes_by_dtype
            .iter()
            .map(|(d, b)| (d.name().to_owned(), *b))
            .collect();
        ours.sort();
        let mut by = by;
        by.sort();
        assert_eq!(by, ours, "{name}");
        // The reference writer leaves no gaps.
        assert_eq!(h.unused_bytes, 0, "{name}");
        check_expected(
            "safetensors",
            name.trim_end_matches(".safetensors"),
            &st_json(&h),
        );
    }
}

#[test]
fn safetensors_index_matches_shards() {
    let text = String::from_utf8(read("safetensors", "model.safetensors.index.json")).unwrap();
    let idx = safetensors::parse_index(&text).unwrap();
    let shards: Vec<&str> = idx.shards().into_iter().collect();
    assert_eq!(
        shards,
        [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors"
        ]
    );
    let mut total = 0;
    let mut names = 0;
    for shard in &shards {
        let h = load_st(&read("safetensors", shard)).unwrap();
        total += h.total_bytes;
        names += h.tensors.len();
        for t in &h.tensors {
            assert_eq!(
                idx.weight_map.get(&t.name).map(String::as_str),
                Some(*shard)
            );
        }
    }
    assert_eq!(idx.total_size, Some(total));
    assert_eq!(idx.weight_map.len(), names);
    let got = json!({
        "total_size": idx.total_size,
        "tensor_count": idx.weight_map.len(),
        "shards": shards,
    });
    check_expected("safetensors", "model.safetensors.index", &got);

    let e = safetensors::parse_index("{\"metadata\": {\"total_size\": -1}, \"weight_map\": {}}")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 29: expected an integer metadata.total_size (a non-negative integer), found -1"
    );
}

#[test]
fn safetensors_bad_files() {
    for name in fixtures("safetensors", ".safetensors", true) {
        let file = read("safetensors", &name);
        let e = match load_st(&file) {
            Ok(_) => panic!("{name} parsed"),
            Err(e) => e,
        };
        assert_eq!(e.line, 1, "{name}");
        assert!(e.to_string().contains("byte offset"), "{name}: {e}");
        check_expected_error("safetensors", name.trim_end_matches(".safetensors"), &e);
    }
}

#[test]
fn gguf_good_files() {
    for name in fixtures("gguf", ".gguf", false) {
        let file = read("gguf", &name);
        let h = load_gguf(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Streaming from a file gives the same; so does the unsized variant.
        let mut f = std::io::BufReader::new(std::fs::File::open(dir("gguf").join(&name)).unwrap());
        assert_eq!(
            gguf::parse_header(&mut f, file.len() as u64).as_ref(),
            Ok(&h)
        );
        assert_eq!(gguf::parse_header_unsized(&mut &file[..]).as_ref(), Ok(&h));
        let (bytes, count, total, by) = source_row("gguf", &name);
        assert_eq!(bytes, file.len() as u64, "{name}");
        assert_eq!(count, h.tensors.len(), "{name}");
        assert_eq!(total, h.total_tensor_bytes, "{name}");
        let mut by = by;
        by.sort();
        let ours: Vec<(String, u64)> = h
            .bytes_by_type
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        assert_eq!(by, ours, "{name}");
        // The writer pads the last tensor to the alignment.
        let len = file.len() as u64;
        assert!(
            h.data_end <= len && len - h.data_end < h.alignment,
            "{name}"
        );
        check_expected("gguf", name.trim_end_matches(".gguf"), &gguf_json(&h));
    }
}

#[test]
fn gguf_long_tokens_array_is_skipped() {
    let file = read("gguf", "tiny-llama-v3-f32-f16-q8_0-q4_k.gguf");
    let h = load_gguf(&file).unwrap();
    assert_eq!(
        h.get("tokenizer.ggml.tokens"),
        Some(&GgufValue::Skipped {
            elem_type: gguf::GgufType::String,
            len: 5000
        })
    );
    assert_eq!(
        h.get("tokenizer.ggml.tokens").unwrap().array_len(),
        Some(5000)
    );
    assert_eq!(
        h.get("llama.context_length").and_then(GgufValue::as_u64),
        Some(256)
    );
    assert_eq!(h.skipped_arrays, 2);
}

#[test]
fn gguf_bad_files() {
    for name in fixtures("gguf", ".gguf", true) {
        let file = read("gguf", &name);
        let e = match load_gguf(&file) {
            Ok(_) => panic!("{name} parsed"),
            Err(e) => e,
        };
        assert_eq!(e.line, 1, "{name}");
        assert!(e.to_string().contains("byte offset"), "{name}: {e}");
        check_expected_error("gguf", name.trim_end_matches(".gguf"), &e);
    }
}

#[test]
fn gguf_truncation_reports_the_offset() {
    let file = read("gguf", "tiny-llama-v3-f32-f16-q8_0-q4_k.gguf");
    let e = gguf::parse_header_unsized(&mut &file[..100]).unwrap_err();
    assert!(
        e.found == "unexpected end of file at byte offset 100",
        "{e}"
    );
    assert_eq!(e.column, 101, "{e}");
}

fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// Cut points: every offset in the first 512 bytes, then 400 spread over the file.
fn cuts(len: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..len.min(512)).collect();
    v.extend((0..400).map(|k| k * len / 400));
    v
}

fn damaged_copies(file: &[u8], seed: u64, mut f: impl FnMut(&[u8])) {
    for cut in cuts(file.len()) {
        f(&file[..cut]);
    }
    let mut state = seed;
    // Damage concentrated in the header, where the parsers look.
    let span = file.len().min(8192);
    for _ in 0..600 {
        let mut copy = file.to_vec();
        let flips = 1 + (xorshift(&mut state) % 4) as usize;
        for _ in 0..flips {
            let at = (xorshift(&mut state) as usize) % span;
            let v = xorshift(&mut state);
            copy[at] = match v % 4 {
                0 => 0xff,
                1 => 0,
                _ => copy[at] ^ (1 << ((v >> 8) % 8)),
            };
        }
        f(&copy);
    }
}

#[test]
fn damaged_files_never_panic_and_stay_bounded() {
    for name in fixtures("safetensors", ".safetensors", false) {
        let file = read("safetensors", &name);
        damaged_copies(&file, 0x5EED_0001, |b| {
            let _ = load_st(b).map(|h| h.total_bytes);
            if b.len() >= 8 {
                // A caller that read only part of the header.
                let _ = safetensors::parse_header(&b[..b.len() / 2], b.len() as u64);
            }
        });
    }
    let index = read("safetensors", "model.safetensors.index.json");
    damaged_copies(&index, 0x5EED_0002, |b| {
        let _ = safetensors::parse_index(&String::from_utf8_lossy(b));
    });
    for name in fixtures("gguf", ".gguf", false) {
        let file = read("gguf", &name);
        damaged_copies(&file, 0x5EED_0003, |b| {
            let _ = load_gguf(b).map(|h| h.total_tensor_bytes);
            let _ = gguf::parse_header_unsized(&mut &b[..]).map(|h| h.tensors.len());
        });
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= MAX_ALLOCATION,
        "largest allocation {largest} bytes"
    );
}

#[test]
fn declared_counts_do_not_allocate() {
    // 2^60 tensors and 2^50-element arrays with a huge declared file length: errors or
    // end-of-file, never an allocation by the declared count.
    let mut f = b"GGUF".to_vec();
    f.extend(3u32.to_le_bytes());
    f.extend(0u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    f.extend(3u64.to_le_bytes());
    f.extend(b"arr");
    f.extend(9u32.to_le_bytes());
    f.extend(8u32.to_le_bytes());
    f.extend((1u64 << 50).to_le_bytes());
    let e = gguf::parse_header(&mut &f[..], u64::MAX).unwrap_err();
    assert_eq!(e.found, "unexpected end of file at byte offset 51", "{e}");
    let e = gguf::parse_header(&mut &f[..], f.len() as u64).unwrap_err();
    assert!(e.expected.contains("0 bytes left"), "{e}");
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest <= MAX_ALLOCATION, "largest allocation {largest}");
}
