//! A GGUF file's header (metadata and tensor infos), then the planner's architecture reader, then
//! a llama-server plan of that architecture (llama.cpp's accounting: any shape must plan without
//! overflow).
#![no_main]
use inferscope_formats::gguf;
use inferscope_plan::engine::Engine;
use inferscope_plan::{GpuSpec, PlanRequest, plan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = gguf::parse_header(&mut &data[..], data.len() as u64) {
        if let Ok(arch) = inferscope_plan::gguf_arch::from_gguf(&h) {
            let mut r = PlanRequest::new(
                arch,
                "fuzz.gguf",
                GpuSpec {
                    name: "fuzz".into(),
                    total_bytes: 24 << 30,
                    count: 1,
                },
            );
            r.engine = Engine::LlamaCpp;
            let p = plan(&r);
            assert!(p.per_gpu.free_after_kv_gib.is_finite());
        }
    }
    let _ = gguf::parse_header_unsized(&mut &data[..]);
});
