//! A pasted serving command (`vllm serve ...`, `python -m sglang.launch_server ...`,
//! `text-generation-launcher ...`, `llama-server ...`), split into words as a shell would roughly.
//! A parsed command is then planned (every engine, llama.cpp's own accounting included) on a
//! small and a huge model, so absurd values (`-c 4294967296 -np 4096`) must not overflow.
#![no_main]
use inferscope_plan::engine::{EngineSettings, parse_command};
use inferscope_plan::{GpuSpec, PlanRequest, catalog, plan};
use libfuzzer_sys::fuzz_target;

fn plan_with(s: &EngineSettings, model: &str) {
    let Ok(arch) = catalog::lookup(model) else { return };
    let mut r = PlanRequest::new(
        arch,
        model,
        GpuSpec {
            name: "fuzz".into(),
            total_bytes: 80 << 30,
            count: 8,
        },
    );
    r.apply_engine(s);
    let p = plan(&r);
    assert!(p.per_gpu.kv_cache_gib.is_finite());
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    if let Ok(s) = parse_command(&words) {
        plan_with(&s, "Qwen/Qwen2.5-0.5B-Instruct");
        plan_with(&s, "google/gemma-3-27b-it");
        plan_with(&s, "deepseek-ai/DeepSeek-V3");
    }
    // Words may hold spaces too (quoted arguments): split on newlines as well.
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let _ = parse_command(&lines);
});
