//! `--tokenizer FILE`: token counts from a local Hugging Face tokenizer.json (issue 8, point 4).
//!
//! Truth: GPT-2's token ids from Hugging Face `tokenizers` on llama.cpp's tokenizer test corpus
//! (fixtures/tokenizers/gpt-2, see its README), and the tiny llama-style tokenizer of the e2e model
//! counted by Python `tokenizers` 0.23.3.

mod common;

use common::{Mode, completions, runtime, start};
use inferscope_bench::client::{RequestSettings, Target, http_client};
use inferscope_bench::dataset;
use inferscope_bench::exec::{Progress, RunConfig, RunOutput, run};
use inferscope_bench::record::TokenSource;
use inferscope_bench::schedule::{Limits, Schedule, Warmup};
use inferscope_bench::stats::{Slo, compute};
use inferscope_bench::tokenizer::{MAX_COUNTED_TEXT, TokenCounter};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tokenizers")
}

fn gpt2() -> TokenCounter {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(fixtures().join("gpt-2/tokenizer.json.gz")).unwrap(),
    )
    .read_to_end(&mut json)
    .unwrap();
    TokenCounter::from_json(&json).unwrap()
}

fn tiny() -> TokenCounter {
    let json = std::fs::read(fixtures().join("tiny-llama-spm/tokenizer.json")).unwrap();
    TokenCounter::from_json(&json).unwrap()
}

#[test]
fn gpt2_counts_match_hugging_face_on_llama_cpp_test_corpus() {
    let t = gpt2();
    assert_eq!(t.vocab_size(), 50257);
    let dir = fixtures().join("gpt-2");
    let inp = std::fs::read_to_string(dir.join("ggml-vocab-gpt-2.gguf.inp")).unwrap();
    let out = std::fs::read_to_string(dir.join("ggml-vocab-gpt-2.gguf.out")).unwrap();
    let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let ids: Vec<&str> = out.split('\n').collect();
    // 46 texts, each followed by the separator (so a trailing empty part on both sides).
    assert_eq!(texts.len(), 47);
    assert_eq!(ids.len(), texts.len());
    let mut checked = 0;
    // Byte-level BPE marks no text start: generated text counts as is.
    assert!(!t.counts_after_anchor());
    for (text, ids) in texts.iter().zip(&ids).take(46) {
        let expected = ids.split_whitespace().count() as u64;
        assert_eq!(t.count(text), Some(expected), "text {text:?}");
        assert_eq!(t.count_generated(text), Some(expected), "text {text:?}");
        checked += 1;
    }
    assert_eq!(checked, 46);
    // The long multilingual case really is long: the counter does not stop early.
    assert!(
        ids.iter()
            .map(|l| l.split_whitespace().count())
            .max()
            .unwrap()
            > 100
    );
}

#[test]
fn tiny_llama_counts_match_python_tokenizers() {
    let t = tiny();
    assert_eq!(t.vocab_size(), 997);
    // The tokenizer prepends "▁" to any text (SentencePiece style): generated text is counted
    // as a continuation. Expected values from Python `tokenizers` 0.23.3:
    //   alone     = len(encode(text, add_special_tokens=False))
    //   generated = len(encode("\n" + text, add_special_tokens=False)) - len(encode("\n", ...))
    //   prompt    = len(encode(text))   (BOS added by the post-processor)
    assert!(t.counts_after_anchor());
    for (text, alone, generated, prompt) in [
        ("Hello world", 7, 6, 8),
        (" the quick brown fox", 15, 14, 16),
        ("tok0 tok1 tok2", 6, 8, 7),
        ("", 0, 0, 1),
        ("über 🦙\n\tx", 14, 13, 15),
        ("aaaaaaaaaaaaaaaaaaaa", 20, 20, 21),
        ("Hello world tok0 tok1", 11, 10, 12),
    ] {
        assert_eq!(t.count(text), Some(alone), "{text:?}");
        assert_eq!(t.count_generated(text), Some(generated), "{text:?}");
        assert_eq!(t.count_prompt(text), Some(prompt), "{text:?}");
    }
    // Text over the cap is not counted (the request then falls back to usage or chunks).
    assert_eq!(t.count(&"a".repeat(MAX_COUNTED_TEXT + 1)), None);
}

#[test]
fn bad_tokenizer_files_are_clear_errors() {
    // fixtures/bad/tokenizer/EXPECTED.md: | `file` | `inferscope: error: --tokenizer FILE: msg` |
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/bad/tokenizer");
    let table = std::fs::read_to_string(dir.join("EXPECTED.md")).unwrap();
    let mut seen = 0;
    for line in table.lines() {
        let Some((file, rest)) = line.strip_prefix("| `").and_then(|l| l.split_once("` | `"))
        else {
            continue;
        };
        let expected = rest
            .strip_suffix("` |")
            .and_then(|m| m.split_once("--tokenizer FILE: "))
            .unwrap()
            .1;
        let err = TokenCounter::from_json(&std::fs::read(dir.join(file)).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), expected, "{file}");
        seen += 1;
    }
    assert_eq!(seen, 7);
}

#[test]
fn random_prompts_can_be_sized_in_tokens() {
    for (name, t) in [("tiny", tiny()), ("gpt-2", gpt2())] {
        for input in [16u32, 64, 300] {
            let ds = dataset::random_in_tokens(input, 8, 0.0, 7, 64, &t);
            assert_eq!(ds.prompts.len(), 64);
            let mut exact = 0;
            for p in &ds.prompts {
                let n = t.count(&p.text).unwrap();
                assert_eq!(u64::from(p.len), n, "{name}: len is the real count");
                assert!(
                    n <= u64::from(input).max(1) + 1,
                    "{name}: {n} > {input}: {:?}",
                    p.text
                );
                // Whole words only: at most one word (a few tokens) short of the target.
                assert!(n + 4 >= u64::from(input), "{name}: {n} ≪ {input}");
                exact += usize::from(n == u64::from(input));
                assert_eq!(p.max_tokens, 8);
            }
            // Most prompts hit the target exactly (words are mostly one token).
            assert!(exact >= 32, "{name} in={input}: only {exact} of 64 exact");
            // Same seed, same prompts.
            assert_eq!(ds, dataset::random_in_tokens(input, 8, 0.0, 7, 64, &t));
        }
    }
}

fn settings(stream: bool) -> RequestSettings {
    completions(stream, Duration::from_secs(10), Duration::from_secs(5))
}

fn run_with(mode: Mode, stream: bool, tokenizer: Option<TokenCounter>) -> RunOutput {
    runtime().block_on(async {
        let server = start(mode).await;
        let cfg = RunConfig {
            schedule: Schedule::Closed { concurrency: 2 },
            limits: Limits {
                requests: Some(6),
                duration: None,
            },
            warmup: Warmup::None,
            max_duration: Duration::from_secs(20),
            max_inflight: 2,
            max_send_lag: Duration::from_secs(1),
            max_error_rate: 1.0,
        };
        let client = http_client(2, Duration::from_secs(2)).unwrap();
        let mut target = Target::new(client, &server.url(), settings(stream));
        let mut ds = dataset::parse_jsonl(
            &mut &b"{\"prompt\":\"hello there\",\"output_tokens\":11}\n"[..],
            11,
        )
        .unwrap();
        if let Some(t) = tokenizer {
            // As `dataset::load` does with a tokenizer: prompt tokens counted once, up front.
            for p in &mut ds.prompts {
                p.tokens = t.count_prompt(&p.text);
            }
            target = target.with_tokenizer(Arc::new(t));
        }
        run(&cfg, target, &ds, Arc::new(Progress::default()), None)
            .await
            .unwrap()
    })
}

#[test]
fn streamed_chunks_with_several_tokens_are_counted_by_the_tokenizer() {
    let pieces = || Mode::Pieces(vec!["Hello", " world", " tok0 tok1"]);
    // Without a tokenizer: one token per chunk, 3, an undercount.
    let out = run_with(pieces(), true, None);
    assert!(out.records.iter().all(|r| r.is_ok()));
    for r in &out.records {
        assert_eq!(r.output_tokens(), (3, TokenSource::Chunks));
        assert_eq!(r.tokenizer_input_tokens, None);
    }
    // With it: the generated "Hello world tok0 tok1" is 10 tokens; the prompt "hello there" is
    // 4 plus BOS.
    let out = run_with(pieces(), true, Some(tiny()));
    for r in &out.records {
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(r.output_tokens(), (10, TokenSource::Tokenizer));
        assert_eq!(r.prompt_tokens(), Some(5));
    }
    let (stats, _) = compute(&out.records, &Slo::default());
    assert_eq!(stats.token_count_source, "tokenizer");
    assert_eq!(stats.output_tokens, 6 * 10);
    assert_eq!(stats.input_tokens, 6 * 5);
    assert_eq!(stats.tokenizer_vs_usage, None, "the server sent no usage");
}

#[test]
fn non_streamed_answer_without_usage_is_counted_by_the_tokenizer() {
    let out = run_with(Mode::Whole("Hello world"), false, None);
    assert!(out.records.iter().all(|r| r.is_ok()));
    // Nothing to count without a tokenizer: the answer is not streamed and has no usage. The
    // count is unknown, not zero.
    assert!(
        out.records
            .iter()
            .all(|r| r.output_tokens() == (0, TokenSource::Unknown))
    );
    let (stats, _) = compute(&out.records, &Slo::default());
    assert_eq!(stats.token_count_source, "unknown");
    let out = run_with(Mode::Whole("Hello world"), false, Some(tiny()));
    for r in &out.records {
        assert_eq!(r.output_tokens(), (6, TokenSource::Tokenizer));
    }
}

#[test]
fn usage_wins_and_the_tokenizer_is_checked_against_it() {
    // The scripted stream sends " tok0" … " tok9" (10 tokens by its usage); the tiny tokenizer
    // reads each piece as 2 tokens ("▁tok", "0"): 20. The result says the two disagree, and by
    // how much.
    let out = run_with(
        Mode::Stream {
            ttft: Duration::from_millis(2),
            itl: Duration::from_millis(1),
            tokens: 10,
            stagger: false,
        },
        true,
        Some(tiny()),
    );
    for r in &out.records {
        assert!(r.is_ok());
        assert_eq!(r.output_tokens(), (10, TokenSource::Usage));
        assert_eq!(r.tokenizer_output_tokens, Some(20));
    }
    let (stats, _) = compute(&out.records, &Slo::default());
    assert_eq!(stats.token_count_source, "usage");
    let a = stats.tokenizer_vs_usage.unwrap();
    assert_eq!((a.requests, a.equal, a.max_abs_difference), (6, 0, 10));
    assert!((a.relative_difference - 1.0).abs() < 1e-9);
}
