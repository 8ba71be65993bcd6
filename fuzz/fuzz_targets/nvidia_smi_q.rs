//! `nvidia-smi -q` text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = inferscope_formats::nvidia_smi_q::parse(s);
});
