//! A safetensors file's header (the 8-byte length and the JSON), and a shard index.
#![no_main]
use inferscope_formats::safetensors;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes of input choose the claimed file length, the rest is the file.
    let (claim, file) = match data.split_first_chunk::<8>() {
        Some((c, f)) => (u64::from_le_bytes(*c), f),
        None => (0, data),
    };
    let _ = safetensors::header_len(file);
    let _ = safetensors::parse_header(file, file.len() as u64);
    let _ = safetensors::parse_header(file, claim);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = safetensors::parse_index(s);
    }
});
