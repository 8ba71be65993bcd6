//! A GGUF file's header (metadata and tensor infos), then the planner's architecture reader.
#![no_main]
use inferscope_formats::gguf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = gguf::parse_header(&mut &data[..], data.len() as u64) {
        let _ = inferscope_plan::gguf_arch::from_gguf(&h);
    }
    let _ = gguf::parse_header_unsized(&mut &data[..]);
});
