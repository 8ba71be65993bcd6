//! A `torch.cuda.memory._dump_snapshot()` pickle: scan (refuses hostile opcodes), decode, and the
//! analysis and SVG that `mem snapshot` produces.
#![no_main]
use inferscope_formats::torch_memory_snapshot as tms;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    if tms::scan(data, len).is_err() {
        return;
    }
    if let Ok(snap) = tms::decode(data, len) {
        let _ = inferscope_mem::snapshot::analyse(&snap);
        let _ = inferscope_mem::snapshot::svg(&snap);
    }
});
