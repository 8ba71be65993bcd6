//! A pasted out-of-memory message, then the diagnosis.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(r) = inferscope_formats::oom::parse(&s) {
        let _ = inferscope_mem::oom::diagnose(&r);
    }
});
