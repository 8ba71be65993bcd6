//! A Hugging Face `config.json` from a downloaded model folder, through the planner's reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(a) = inferscope_plan::from_hf_config(s) {
        let _ = (a.kv_layers(), a.is_hybrid());
    }
});
