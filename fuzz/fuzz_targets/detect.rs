//! Any file handed to `snapshot --import` or `--snapshot`: format detection reads only the head
//! and must not panic on any bytes (lossy UTF-8, as `import::read_input` decodes them). When it
//! says `nvidia-smi topo -m`, the topo parser gets the same text, as `topo` would.
#![no_main]
use inferscope_formats::detect::{Format, detect};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if detect(&s) == Some(Format::NvidiaSmiTopo) {
        let _ = inferscope_formats::nvidia_smi_topo::parse(&s);
    }
    let _ = inferscope_formats::nvidia_smi_topo::has_matrix_header(&s);
});
