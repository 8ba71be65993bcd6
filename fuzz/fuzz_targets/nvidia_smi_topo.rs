//! Pasted `nvidia-smi topo -m` / `-mp` text (mangled pastes are repaired where unambiguous).
//! The render → parse round trip is a property test (crates/inferscope/tests/properties.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = inferscope_formats::nvidia_smi_topo::parse(s);
});
