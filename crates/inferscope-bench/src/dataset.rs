//! Prompts and output lengths: `random:in=512,out=128[,spread=0.1]`, `jsonl:FILE`,
//! `sharegpt:FILE`; the workloads built per request (`trace:FILE`, `shared-prefix:...`) are in
//! [`crate::workload`], multi-turn `sessions:...` in [`crate::sessions`].
//!
//! * `random:` builds prompts of `in` words drawn from a fixed list of common English words with
//!   the run's seed (a common word is one token in most vocabularies, so `in` approximates prompt
//!   tokens; the server's `usage.prompt_tokens` gives the truth in the result). `spread` draws
//!   each length uniformly in `[(1-spread)·n, (1+spread)·n]`. Each prompt starts with a distinct
//!   number so prefix caches do not turn the benchmark into a cache benchmark.
//! * `jsonl:` reads one object per line: `prompt` (or `text`) and optional `output_tokens` (or
//!   `max_tokens`); the default output length comes from `--max-tokens`.
//! * `sharegpt:` reads the ShareGPT JSON array; the prompt is the first human turn, the output
//!   length the next assistant turn's length (≈ characters / 4, as no tokenizer is loaded),
//!   capped at 4096. Conversations are shuffled with the seed.
//!
//! Inputs are bounded: files over 2 GiB, lines over 1 MiB and more than 1,000,000 entries are
//! refused or cut, with a clear error. Parsing is pure (from a reader); only [`load`] opens files.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Largest dataset file accepted.
pub const MAX_FILE: u64 = 2 << 30;
/// Most entries kept.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Longest JSONL line.
pub const MAX_LINE: usize = 1 << 20;
/// Prompts generated for `random:` (requests cycle through them).
pub const RANDOM_POOL: usize = 1024;

/// Distinct `random:` prompts when they are sized with `--tokenizer`: each costs two encodes
/// (about 2 ms at `in=512` in a release build), so fewer, still each with its own number first.
pub const RANDOM_POOL_TOKENIZED: usize = 256;

/// Where prompts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetSpec {
    /// Synthetic prompts.
    Random {
        /// Prompt words.
        input: u32,
        /// Output tokens asked for.
        output: u32,
        /// Relative spread of both lengths (0–1).
        spread: f64,
    },
    /// JSON Lines file.
    Jsonl(PathBuf),
    /// ShareGPT JSON file.
    ShareGpt(PathBuf),
    /// Timestamped trace (Mooncake or plain JSONL), see [`crate::workload`].
    Trace {
        /// The file.
        path: PathBuf,
        /// Time compression (`--trace-speed`).
        speed: f64,
    },
    /// Groups of requests sharing a prefix, see [`crate::workload`].
    SharedPrefix {
        /// Groups.
        groups: u32,
        /// Shared words.
        prefix: u32,
        /// Own words per request.
        suffix: u32,
        /// Output tokens asked for.
        output: u32,
    },
    /// Multi-turn chat sessions, see [`crate::sessions`].
    Sessions(crate::sessions::Sessions),
}

/// Why a `--dataset` spec cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A `random:` item without `=`.
    #[error("dataset `{0}`: expected KEY=VALUE")]
    NoEquals(String),
    /// A `random:` value that is not a number.
    #[error("dataset `{0}`: bad value")]
    BadValue(String),
    /// `spread` outside 0..=1.
    #[error("dataset `{0}`: spread must be in 0..=1")]
    SpreadRange(String),
    /// A `random:` key other than in, out, spread.
    #[error("dataset `{0}`: unknown key (in, out, spread)")]
    UnknownKey(String),
    /// A key a workload does not know (the key, the known ones).
    #[error("dataset `{0}`: unknown key ({1})")]
    UnknownKeyOf(String, &'static str),
    /// `out=0`.
    #[error("dataset: out must be at least 1")]
    NoOutput,
    /// Not random:, jsonl: or sharegpt:.
    #[error(
        "unknown dataset `{0}`: expected random:in=N,out=N[,spread=F], jsonl:FILE, sharegpt:FILE, trace:FILE, shared-prefix:groups=G,prefix=P,suffix=S[,out=O] or sessions:turns=N,think=D,user=U,out=O[,system=S]"
    )]
    Unknown(String),
}

/// Why a dataset file's content cannot be used (the caller adds the file name).
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// A JSONL line could not be read.
    #[error("line {line}: {source}")]
    Read {
        /// 1-based line number.
        line: usize,
        /// Cause.
        source: std::io::Error,
    },
    /// A JSONL line over the line cap.
    #[error("line {line}: longer than {limit} bytes")]
    LineTooLong {
        /// 1-based line number.
        line: usize,
        /// The cap.
        limit: usize,
    },
    /// A JSONL line that is not a JSON object of the expected shape.
    #[error("line {line}: {source}")]
    Json {
        /// 1-based line number.
        line: usize,
        /// Cause.
        source: serde_json::Error,
    },
    /// A JSONL line without a prompt.
    #[error("line {0}: no `prompt` (or `text`) string")]
    NoPrompt(usize),
    /// A trace line with a bad value.
    #[error("line {line}: {msg}")]
    Trace {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A JSONL file with no entries.
    #[error("no prompts")]
    NoPrompts,
    /// Not a ShareGPT array.
    #[error("not a ShareGPT JSON array: {0}")]
    NotShareGpt(serde_json::Error),
    /// A ShareGPT file without one usable conversation.
    #[error("no usable conversations (need a human turn followed by a gpt turn)")]
    NoConversations,
}

impl std::str::FromStr for DatasetSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        if let Some(rest) =
            s.strip_prefix("random:")
                .or(if s == "random" { Some("") } else { None })
        {
            let (mut input, mut output, mut spread) = (512u32, 128u32, 0.0f64);
            for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = part
                    .split_once('=')
                    .ok_or_else(|| SpecError::NoEquals(part.into()))?;
                let bad = || SpecError::BadValue(part.into());
                match k {
                    "in" => input = v.parse().map_err(|_| bad())?,
                    "out" => output = v.parse().map_err(|_| bad())?,
                    "spread" => {
                        spread = v.parse().map_err(|_| bad())?;
                        if !(0.0..=1.0).contains(&spread) {
                            return Err(SpecError::SpreadRange(part.into()));
                        }
                    }
                    _ => return Err(SpecError::UnknownKey(part.into())),
                }
            }
            if output == 0 {
                return Err(SpecError::NoOutput);
            }
            return Ok(DatasetSpec::Random {
                input,
                output,
                spread,
            });
        }
        if let Some(p) = s.strip_prefix("jsonl:") {
            return Ok(DatasetSpec::Jsonl(PathBuf::from(p)));
        }
        if let Some(p) = s.strip_prefix("sharegpt:") {
            return Ok(DatasetSpec::ShareGpt(PathBuf::from(p)));
        }
        if let Some(p) = s.strip_prefix("trace:") {
            return Ok(DatasetSpec::Trace {
                path: PathBuf::from(p),
                speed: 1.0,
            });
        }
        if let Some(rest) = s.strip_prefix("sessions:") {
            return crate::sessions::parse(rest).map(DatasetSpec::Sessions);
        }
        if let Some(rest) = s.strip_prefix("shared-prefix:") {
            let (groups, prefix, suffix, output) = crate::workload::parse_shared_prefix(rest)?;
            return Ok(DatasetSpec::SharedPrefix {
                groups,
                prefix,
                suffix,
                output,
            });
        }
        Err(SpecError::Unknown(s.into()))
    }
}

impl std::fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatasetSpec::Random {
                input,
                output,
                spread,
            } => write!(f, "random:in={input},out={output},spread={spread}"),
            DatasetSpec::Jsonl(p) => write!(f, "jsonl:{}", p.display()),
            DatasetSpec::ShareGpt(p) => write!(f, "sharegpt:{}", p.display()),
            DatasetSpec::Trace { path, speed } if *speed == 1.0 => {
                write!(f, "trace:{}", path.display())
            }
            DatasetSpec::Trace { path, speed } => {
                write!(f, "trace:{} (speed {speed})", path.display())
            }
            DatasetSpec::SharedPrefix {
                groups,
                prefix,
                suffix,
                output,
            } => write!(
                f,
                "shared-prefix:groups={groups},prefix={prefix},suffix={suffix},out={output}"
            ),
            DatasetSpec::Sessions(s) => s.fmt(f),
        }
    }
}

/// One prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// Text sent as the prompt (or the user message for chat).
    pub text: String,
    /// `max_tokens` asked for.
    pub max_tokens: u32,
    /// Length in the dataset's unit (words for random, characters/4 otherwise; tokens for
    /// random prompts sized with a tokenizer).
    pub len: u32,
    /// Prompt tokens as a completions server counts them (BOS included), per the local
    /// tokenizer; counted once when the dataset is built. `None` without `--tokenizer`.
    pub tokens: Option<u64>,
    /// Prompt length (dataset units) an ideal prefix cache could serve because earlier requests
    /// of the workload sent it; `None` where the workload does not know (random prompts are
    /// built not to share, but a server may still match a few leading tokens).
    pub reusable: Option<u32>,
}

/// Prompts to cycle through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    /// Never empty, unless `lazy` builds the prompts.
    pub prompts: Vec<Prompt>,
    /// A workload whose prompts are built as they are sent (traces, shared prefixes).
    pub lazy: Option<std::sync::Arc<crate::workload::Lazy>>,
    /// Multi-turn sessions (their bodies depend on the server's replies).
    pub sessions: Option<crate::sessions::Sessions>,
}

impl Dataset {
    /// Pooled prompts (cycled through by request number).
    pub fn pool(prompts: Vec<Prompt>) -> Self {
        Dataset {
            prompts,
            lazy: None,
            sessions: None,
        }
    }

    /// The pooled prompt for request `seq` (cycling); `None` for an empty pool.
    pub fn get(&self, seq: u64) -> Option<&Prompt> {
        let len = self.prompts.len().max(1) as u64;
        self.prompts.get((seq % len) as usize)
    }
}

/// Why a dataset cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// Opening or reading.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Content.
    #[error("{path}: {msg}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// What was wrong.
        msg: String,
    },
}

pub(crate) const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "it",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "get",
    "through",
    "back",
    "much",
    "before",
    "go",
    "good",
    "new",
    "write",
    "our",
    "used",
    "me",
    "man",
    "too",
    "any",
    "day",
    "same",
    "right",
    "look",
    "think",
    "also",
    "around",
    "another",
    "came",
    "come",
    "work",
    "three",
    "word",
    "must",
    "because",
    "does",
    "part",
    "even",
    "place",
    "well",
    "such",
    "here",
    "take",
    "why",
    "things",
    "help",
    "put",
    "years",
    "different",
    "away",
    "again",
    "off",
    "went",
    "old",
];

/// Generate `random:` prompts (pure).
pub fn random(input: u32, output: u32, spread: f64, seed: u64, pool: usize) -> Dataset {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_da7a);
    let spread = spread.clamp(0.0, 1.0);
    let draw = |n: u32, rng: &mut Xoshiro256PlusPlus| -> u32 {
        if spread == 0.0 || n == 0 {
            return n;
        }
        let lo = (f64::from(n) * (1.0 - spread)).round();
        let hi = (f64::from(n) * (1.0 + spread)).round();
        let x: f64 = rng.random();
        (lo + x * (hi - lo)).round().clamp(0.0, f64::from(u32::MAX)) as u32
    };
    let prompts = (0..pool.max(1))
        .map(|i| {
            let n = draw(input, &mut rng);
            let out = draw(output, &mut rng).max(1);
            let mut text = format!("{i}");
            for _ in 1..n {
                text.push(' ');
                text.push_str(WORDS.get(rng.random_range(0..WORDS.len())).unwrap_or(&""));
            }
            Prompt {
                text,
                max_tokens: out,
                len: n,
                tokens: None,
                reusable: None,
            }
        })
        .collect();
    Dataset::pool(prompts)
}

/// `random:` prompts whose `in=` is counted in tokens of `counter` rather than in words (pure):
/// each prompt is drawn with twice the words it needs (every word is at least one token), then
/// cut at the longest whole-word prefix of at most the target tokens (the prompt alone, without
/// the BOS a server adds). `len` is the prompt's real token count. Same seed, same prompts.
pub fn random_in_tokens(
    input: u32,
    output: u32,
    spread: f64,
    seed: u64,
    pool: usize,
    counter: &crate::tokenizer::TokenCounter,
) -> Dataset {
    let mut ds = random(input.saturating_mul(2), output, spread, seed, pool);
    for p in &mut ds.prompts {
        let target = u64::from(p.len / 2);
        let first_word = p.text.find(' ').unwrap_or(p.text.len());
        // A first word longer than the target is kept rather than sending nothing.
        let cut = counter
            .prefix_within(&p.text, target)
            .unwrap_or(p.text.len())
            .max(first_word);
        p.text.truncate(cut);
        p.len = counter
            .count(&p.text)
            .map_or(p.len / 2, |c| u32::try_from(c).unwrap_or(u32::MAX));
    }
    ds
}

#[derive(Deserialize)]
struct JsonlEntry {
    #[serde(alias = "text")]
    prompt: Option<String>,
    #[serde(alias = "max_tokens")]
    output_tokens: Option<u32>,
}

/// The next non-blank line of a JSONL input into `buf` (`line` counts every line read), at
/// most [`MAX_LINE`] bytes whatever the input holds; `false` at the end. Every JSONL reader of
/// bench (datasets, traces) reads through this one bound.
pub(crate) fn next_jsonl_line(
    input: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    line: &mut usize,
) -> Result<bool, ContentError> {
    loop {
        buf.clear();
        *line += 1;
        let n = Read::take(&mut *input, MAX_LINE as u64 + 1)
            .read_until(b'\n', buf)
            .map_err(|source| ContentError::Read {
                line: *line,
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        if buf.len() > MAX_LINE {
            return Err(ContentError::LineTooLong {
                line: *line,
                limit: MAX_LINE,
            });
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            return Ok(true);
        }
    }
}

/// Parse a JSONL dataset from a reader (pure).
pub fn parse_jsonl(input: &mut dyn BufRead, default_out: u32) -> Result<Dataset, ContentError> {
    let mut prompts = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0usize;
    while next_jsonl_line(input, &mut buf, &mut line)? {
        let e: JsonlEntry =
            serde_json::from_slice(&buf).map_err(|source| ContentError::Json { line, source })?;
        let text = e.prompt.ok_or(ContentError::NoPrompt(line))?;
        let len = (text.chars().count() / 4).min(u32::MAX as usize) as u32;
        prompts.push(Prompt {
            text,
            max_tokens: e.output_tokens.unwrap_or(default_out).max(1),
            len,
            tokens: None,
            reusable: None,
        });
        if prompts.len() >= MAX_ENTRIES {
            break;
        }
    }
    if prompts.is_empty() {
        return Err(ContentError::NoPrompts);
    }
    Ok(Dataset::pool(prompts))
}

#[derive(Deserialize)]
struct ShareGptConv {
    #[serde(default)]
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    #[serde(default)]
    from: String,
    #[serde(default)]
    value: String,
}

/// Parse a ShareGPT dataset from a reader (pure); shuffled with `seed`.
pub fn parse_sharegpt(input: &mut dyn Read, seed: u64) -> Result<Dataset, ContentError> {
    let convs: Vec<ShareGptConv> =
        serde_json::from_reader(input).map_err(ContentError::NotShareGpt)?;
    let mut prompts: Vec<Prompt> = convs
        .into_iter()
        .filter_map(|c| {
            let mut it = c.conversations.into_iter();
            let human = it.find(|t| t.from == "human" || t.from == "user")?;
            let reply = it.find(|t| t.from == "gpt" || t.from == "assistant")?;
            if human.value.trim().len() < 4 || reply.value.trim().is_empty() {
                return None;
            }
            let out = (reply.value.chars().count().div_ceil(4)).clamp(1, 4096) as u32;
            let len = (human.value.chars().count() / 4).min(u32::MAX as usize) as u32;
            Some(Prompt {
                text: human.value,
                max_tokens: out,
                len,
                tokens: None,
                reusable: None,
            })
        })
        .take(MAX_ENTRIES)
        .collect();
    if prompts.is_empty() {
        return Err(ContentError::NoConversations);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for i in (1..prompts.len()).rev() {
        let j = rng.random_range(0..=i);
        prompts.swap(i, j);
    }
    Ok(Dataset::pool(prompts))
}

/// Build the dataset: generate, or open the file (the one place that touches the filesystem).
/// With a tokenizer, `random:` prompts are sized in tokens and every prompt's token count is
/// recorded.
pub fn load(
    spec: &DatasetSpec,
    seed: u64,
    default_out: u32,
    tokenizer: Option<&crate::tokenizer::TokenCounter>,
) -> Result<Dataset, DatasetError> {
    let open = |path: &Path| -> Result<std::io::BufReader<std::fs::File>, DatasetError> {
        let io = |source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        };
        let f = std::fs::File::open(path).map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        if len > MAX_FILE {
            return Err(DatasetError::Invalid {
                path: path.to_path_buf(),
                msg: format!("{len} bytes is more than the {MAX_FILE}-byte limit"),
            });
        }
        Ok(std::io::BufReader::new(f))
    };
    let invalid = |path: &Path| {
        let path = path.to_path_buf();
        move |e: ContentError| DatasetError::Invalid {
            path,
            msg: e.to_string(),
        }
    };
    match spec {
        DatasetSpec::Random {
            input,
            output,
            spread,
        } => Ok(match tokenizer {
            // With the model's tokenizer, `random:in=N` means N tokens, as in `vllm bench serve`.
            Some(t) => random_in_tokens(*input, *output, *spread, seed, RANDOM_POOL_TOKENIZED, t),
            None => random(*input, *output, *spread, seed, RANDOM_POOL),
        }),
        DatasetSpec::Jsonl(p) => parse_jsonl(&mut open(p)?, default_out).map_err(invalid(p)),
        DatasetSpec::ShareGpt(p) => parse_sharegpt(&mut open(p)?, seed).map_err(invalid(p)),
        DatasetSpec::Trace { path, speed } => {
            if !crate::workload::SPEED_RANGE.contains(speed) {
                return Err(DatasetError::Invalid {
                    path: path.clone(),
                    msg: format!("--trace-speed {speed}: expected a number from 0.001 to 1000000"),
                });
            }
            crate::workload::parse_trace(&mut open(path)?, *speed, seed, default_out)
                .map(|l| Dataset {
                    prompts: Vec::new(),
                    lazy: Some(std::sync::Arc::new(l)),
                    sessions: None,
                })
                .map_err(invalid(path))
        }
        DatasetSpec::SharedPrefix {
            groups,
            prefix,
            suffix,
            output,
        } => Ok(Dataset {
            prompts: Vec::new(),
            lazy: Some(std::sync::Arc::new(crate::workload::Lazy::SharedPrefix {
                groups: *groups,
                prefix: *prefix,
                suffix: *suffix,
                output: *output,
                seed,
            })),
            sessions: None,
        }),
        DatasetSpec::Sessions(s) => Ok(Dataset {
            prompts: Vec::new(),
            lazy: None,
            sessions: Some(crate::sessions::Sessions { seed, ..s.clone() }),
        }),
    }
    .map(|mut ds| {
        if let Some(t) = tokenizer {
            for p in &mut ds.prompts {
                p.tokens = t.count_prompt(&p.text);
            }
        }
        ds
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        assert_eq!(
            "random:in=8,out=4".parse::<DatasetSpec>(),
            Ok(DatasetSpec::Random {
                input: 8,
                output: 4,
                spread: 0.0
            })
        );
        assert!("random:in=x".parse::<DatasetSpec>().is_err());
        assert!("random:spread=2".parse::<DatasetSpec>().is_err());
        assert!("random:out=0".parse::<DatasetSpec>().is_err());
        assert!("csv:x".parse::<DatasetSpec>().is_err());
        assert_eq!(
            "jsonl:a.jsonl".parse::<DatasetSpec>(),
            Ok(DatasetSpec::Jsonl("a.jsonl".into()))
        );
    }

    #[test]
    fn random_is_seeded_and_sized() {
        let a = random(16, 8, 0.5, 1, 50);
        let b = random(16, 8, 0.5, 1, 50);
        assert_eq!(a, b);
        assert_ne!(a, random(16, 8, 0.5, 2, 50));
        for p in &a.prompts {
            assert!((8..=24).contains(&p.len), "{}", p.len);
            assert_eq!(p.text.split(' ').count() as u32, p.len.max(1));
            assert!((4..=12).contains(&p.max_tokens));
        }
        let fixed = random(5, 3, 0.0, 1, 3);
        assert!(
            fixed
                .prompts
                .iter()
                .all(|p| p.len == 5 && p.max_tokens == 3)
        );
    }

    #[test]
    fn jsonl() {
        let d = parse_jsonl(
            &mut &b"{\"prompt\":\"hello there\",\"output_tokens\":7}\n\n{\"text\":\"x\"}\n"[..],
            32,
        )
        .unwrap();
        assert_eq!(d.prompts.len(), 2);
        assert_eq!(d.prompts[0].max_tokens, 7);
        assert_eq!(d.prompts[1].max_tokens, 32);
        assert!(
            parse_jsonl(&mut &b"{\"x\":1}\n"[..], 1)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
        assert!(parse_jsonl(&mut &b""[..], 1).is_err());
    }

    #[test]
    fn sharegpt() {
        let j = br#"[{"conversations":[{"from":"human","value":"tell me a story"},{"from":"gpt","value":"once upon a time"}]},
                    {"conversations":[{"from":"gpt","value":"orphan"}]}]"#;
        let d = parse_sharegpt(&mut &j[..], 0).unwrap();
        assert_eq!(d.prompts.len(), 1);
        assert_eq!(d.prompts[0].max_tokens, 4);
        assert!(parse_sharegpt(&mut &b"{}"[..], 0).is_err());
    }
}
