//! A pasted serving command (`vllm serve ...`, `python -m sglang.launch_server ...`,
//! `text-generation-launcher ...`, `llama-server ...`), split into words as a shell would roughly.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let words: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    let _ = inferscope_plan::engine::parse_command(&words);
    // Words may hold spaces too (quoted arguments): split on newlines as well.
    let lines: Vec<String> = s.lines().map(str::to_string).collect();
    let _ = inferscope_plan::engine::parse_command(&lines);
});
