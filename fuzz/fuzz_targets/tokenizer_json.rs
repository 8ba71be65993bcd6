//! A user's `--tokenizer` file: loading a hostile tokenizer.json must give an error or a
//! tokenizer, never a panic that escapes or unbounded memory, and a loaded one must count any
//! text.
//!
//! `TokenCounter` deliberately catches panics raised inside the `tokenizers` crate (it turns
//! them into an error or "no count"). libfuzzer-sys's panic hook aborts on *every* panic, caught
//! or not, so this target replaces it with a silent hook: a panic that escapes `TokenCounter`
//! still reaches libfuzzer-sys's own `catch_unwind` and aborts, which is the crash we look for.
#![no_main]
use inferscope_bench::tokenizer::TokenCounter;
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

static SILENCE: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    SILENCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    if let Ok(t) = TokenCounter::from_json(data) {
        assert!(t.vocab_size() > 0);
        for text in ["", "Hello world", " x\n\ty", "über 🦙"] {
            let _ = t.count(text);
            let _ = t.count_prompt(text);
            let _ = t.count_generated(text);
        }
    }
});
