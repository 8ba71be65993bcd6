//! A user's `--tokenizer` file: loading a hostile tokenizer.json must give an error or a
//! tokenizer, never a panic or unbounded memory, and a loaded one must count any text.
#![no_main]
use inferscope_bench::tokenizer::TokenCounter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = TokenCounter::from_json(data) {
        assert!(t.vocab_size() > 0);
        for text in ["", "Hello world", " x\n\ty", "über 🦙"] {
            let _ = t.count(text);
            let _ = t.count_prompt(text);
            let _ = t.count_generated(text);
        }
    }
});
