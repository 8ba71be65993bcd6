//! `lstopo --of xml` (hwloc 1.x and 2.x).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = inferscope_formats::hwloc_xml::parse(s);
});
