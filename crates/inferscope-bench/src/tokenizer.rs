//! Token counts from a local Hugging Face `tokenizer.json` (`inferscope bench --tokenizer FILE`).
//!
//! Servers do not always say how many tokens they produced: without `usage` (older TGI, some
//! proxies, `--no-stream` against servers that omit it) the client can only count content
//! chunks, and a chunk may carry several tokens (servers batch them under load,
//! speculative decoding emits several at once). Counting the generated *text* with the model's
//! own tokenizer is then the only exact answer. The tokenizer is Hugging Face's `tokenizers`
//! crate (the implementation the Python `tokenizers` package wraps), built without its C
//! regex engine and without network access.
//!
//! Two counts, as servers count:
//! * **prompt**: the text alone, with the special tokens the tokenizer's post-processor adds
//!   (BOS): what `usage.prompt_tokens` says for a completions request.
//! * **generated**: the text as a *continuation*. SentencePiece-style tokenizers (Llama 2,
//!   Mistral, Gemma: a `Prepend "▁"` normalizer or a `Metaspace` pre-tokenizer) put a word-start
//!   marker before any text they are given, so counting generated text alone adds a token the
//!   model never produced (vLLM's and GuideLLM's clients count it anyway: +1 per request, +6 %
//!   at 16 tokens on the e2e model). For those the text is counted after a newline anchor and
//!   the anchor's own tokens are subtracted; byte-level BPE (GPT-2, Llama 3, Qwen) counts the
//!   text as is.
//!
//! The file comes from the user and may be hostile: its size is capped before parsing and any
//! panic inside `tokenizers` is turned into an error (load) or "no count" (encode). `tokenizers`
//! accepts some broken files and panics only when encoding (a template naming a special token
//! its table lacks, found by the `tokenizer_json` fuzz target: checked before loading), so
//! loading ends with a trial encode of every kind: such a file is refused up front instead of
//! failing on every request.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Largest `tokenizer.json` accepted. Real ones are 1–35 MB (Gemma 3's is the largest common
/// one at ~33 MB); the cap keeps memory bounded whatever a file claims.
pub const MAX_TOKENIZER_BYTES: usize = 128 << 20;

/// Largest generated text kept per request for counting. Beyond it the request falls back to
/// the server's usage or the chunk count (recorded as such).
pub const MAX_COUNTED_TEXT: usize = 4 << 20;

/// The tokenizer models `tokenizers` implements.
const MODEL_TYPES: [&str; 4] = ["BPE", "WordPiece", "WordLevel", "Unigram"];

/// Why a `tokenizer.json` cannot be used. The message says what is wrong, without the file name
/// (the caller adds it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenizerError {
    /// Over [`MAX_TOKENIZER_BYTES`].
    #[error("{size} bytes: larger than the {limit_mib} MiB a tokenizer.json can plausibly be")]
    TooLarge {
        /// The file's size.
        size: usize,
        /// The limit in MiB.
        limit_mib: usize,
    },
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON without a `model` object.
    #[error("no `model` object: not a Hugging Face tokenizer.json")]
    NoModel,
    /// A `model.type` the library does not know.
    #[error("model type `{kind}` is not one of {known}")]
    UnknownModelType {
        /// The type found.
        kind: String,
        /// The known types.
        known: String,
    },
    /// A post-processor template names a special token it does not define.
    #[error(
        "post_processor: the `{template}` template uses special token `{id}`, which its \
         special_tokens table does not define"
    )]
    UndefinedSpecialToken {
        /// `single` or `pair`.
        template: String,
        /// The token id.
        id: String,
    },
    /// `tokenizers` rejected the file.
    #[error("not a tokenizer Hugging Face can load: {0}")]
    Rejected(String),
    /// `tokenizers` panicked while loading it.
    #[error("the tokenizer library failed on this file")]
    LibraryPanicked,
    /// No tokens at all.
    #[error("the vocabulary is empty")]
    EmptyVocabulary,
    /// Encoding a sample text fails.
    #[error("cannot encode a sample text: {0}")]
    CannotEncode(String),
    /// Encoding any text panics inside `tokenizers`.
    #[error("the tokenizer library fails on every text with this file: {0}")]
    FailsOnEveryText(String),
    /// The anchor (a newline) cannot be encoded.
    #[error("the tokenizer cannot encode a newline")]
    NoNewline,
}

/// A `TemplateProcessing` post-processor (possibly inside a `Sequence`) must define every special
/// token its templates name: `tokenizers` loads such a file and then panics on every encode.
fn check_template(pp: &serde_json::Value) -> Result<(), TokenizerError> {
    match pp.get("type").and_then(|t| t.as_str()) {
        Some("Sequence") => pp
            .get("processors")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
            .try_for_each(check_template),
        Some("TemplateProcessing") => {
            let defined = pp.get("special_tokens").and_then(|t| t.as_object());
            for template in ["single", "pair"] {
                let pieces = pp.get(template).and_then(|t| t.as_array());
                for piece in pieces.into_iter().flatten() {
                    let Some(id) = piece
                        .get("SpecialToken")
                        .and_then(|t| t.get("id"))
                        .and_then(|id| id.as_str())
                    else {
                        continue;
                    };
                    if !defined.is_some_and(|d| d.contains_key(id)) {
                        return Err(TokenizerError::UndefinedSpecialToken {
                            template: template.into(),
                            id: id.into(),
                        });
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Encode a sample with and without special tokens, turning a panic inside `tokenizers` into an
/// error. (The default panic hook still prints the panic; the process-wide hook is left alone,
/// since tokenizers may be loaded on several threads.)
fn trial_encode(t: &tokenizers::Tokenizer) -> Result<(), TokenizerError> {
    let r = catch_unwind(AssertUnwindSafe(|| {
        for special in [true, false] {
            t.encode_fast(TRIAL_TEXT, special)
                .map_err(|e| TokenizerError::CannotEncode(e.to_string()))?;
        }
        Ok(())
    }));
    match r {
        Ok(r) => r,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(TokenizerError::FailsOnEveryText(why))
        }
    }
}

/// Text for [`trial_encode`]: words, a newline (the anchor), non-ASCII, an emoji.
const TRIAL_TEXT: &str = "Hello world,\n über 🦙 123";

/// A loaded tokenizer that counts tokens.
pub struct TokenCounter {
    inner: tokenizers::Tokenizer,
    vocab_size: usize,
    /// Tokens of [`ANCHOR`] alone, when the tokenizer marks the start of any text it is given
    /// (see the module doc); `None` for tokenizers that count a continuation as is.
    anchor_tokens: Option<usize>,
}

/// What generated text is counted after, for tokenizers that mark the start of a text: a
/// newline is one byte token in SentencePiece vocabularies and never merges with what follows.
const ANCHOR: &str = "\n";

/// Whether a tokenizer.json component (normalizer or pre-tokenizer, possibly a `Sequence`)
/// inserts a word-start marker before the text.
fn marks_text_start(component: &serde_json::Value) -> bool {
    match component.get("type").and_then(|t| t.as_str()) {
        Some("Prepend") => true,
        Some("Metaspace") => {
            // tokenizers >= 0.19 writes prepend_scheme (always/first/never); older files wrote
            // add_prefix_space.
            match component.get("prepend_scheme").and_then(|p| p.as_str()) {
                Some(scheme) => scheme != "never",
                None => component
                    .get("add_prefix_space")
                    .and_then(|a| a.as_bool())
                    .unwrap_or(true),
            }
        }
        Some("Sequence") => ["normalizers", "pretokenizers"]
            .iter()
            .filter_map(|k| component.get(*k).and_then(|v| v.as_array()))
            .flatten()
            .any(marks_text_start),
        _ => false,
    }
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("vocab_size", &self.vocab_size)
            .finish()
    }
}

impl TokenCounter {
    /// Parse the bytes of a `tokenizer.json`. The error says what is wrong, without the file
    /// name (the caller adds it).
    pub fn from_json(bytes: &[u8]) -> Result<TokenCounter, TokenizerError> {
        if bytes.len() > MAX_TOKENIZER_BYTES {
            return Err(TokenizerError::TooLarge {
                size: bytes.len(),
                limit_mib: MAX_TOKENIZER_BYTES >> 20,
            });
        }
        // Check it is JSON first: `tokenizers` reports syntax errors without a position.
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| TokenizerError::NotJson(e.to_string()))?;
        let Some(model) = value.get("model") else {
            return Err(TokenizerError::NoModel);
        };
        // `tokenizers` would say "did not match any variant of untagged enum ModelUntagged".
        if let Some(kind) = model.get("type").and_then(|t| t.as_str())
            && !MODEL_TYPES.contains(&kind)
        {
            return Err(TokenizerError::UnknownModelType {
                kind: kind.into(),
                known: MODEL_TYPES.join(", "),
            });
        }
        if let Some(pp) = value.get("post_processor") {
            check_template(pp)?;
        }
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            tokenizers::Tokenizer::from_bytes(bytes)
        }));
        let inner = match parsed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(TokenizerError::Rejected(e.to_string())),
            Err(_) => return Err(TokenizerError::LibraryPanicked),
        };
        let vocab_size = inner.get_vocab_size(true);
        if vocab_size == 0 {
            return Err(TokenizerError::EmptyVocabulary);
        }
        trial_encode(&inner)?;
        let marks = ["normalizer", "pre_tokenizer"]
            .iter()
            .filter_map(|k| value.get(*k))
            .any(marks_text_start);
        let mut counter = TokenCounter {
            inner,
            vocab_size,
            anchor_tokens: None,
        };
        if marks {
            let n = counter
                .encode_len(ANCHOR, false)
                .ok_or(TokenizerError::NoNewline)?;
            counter.anchor_tokens = Some(n);
        }
        Ok(counter)
    }

    fn encode_len(&self, text: &str, special: bool) -> Option<usize> {
        let enc = catch_unwind(AssertUnwindSafe(|| {
            self.inner.encode_fast(text, special).map(|e| e.len())
        }));
        match enc {
            Ok(Ok(n)) => Some(n),
            _ => None,
        }
    }

    /// Vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Whether generated text is counted after an anchor (SentencePiece-style start marker).
    pub fn counts_after_anchor(&self) -> bool {
        self.anchor_tokens.is_some()
    }

    /// Tokens of `text` on its own, special tokens excluded.
    /// `None` when the text is over [`MAX_COUNTED_TEXT`] or the tokenizer fails on it.
    pub fn count(&self, text: &str) -> Option<u64> {
        if text.len() > MAX_COUNTED_TEXT {
            return None;
        }
        u64::try_from(self.encode_len(text, false)?).ok()
    }

    /// The longest prefix of `text` that ends before a space (or is all of it) and holds at most
    /// `n` tokens (special tokens excluded), as a byte length. One encode finds where token `n`
    /// starts; a few more check the cut, since re-tokenizing a prefix can merge differently.
    pub fn prefix_within(&self, text: &str, n: u64) -> Option<usize> {
        if text.len() > MAX_COUNTED_TEXT {
            return None;
        }
        // `encode` (not `encode_fast`) tracks byte offsets.
        let starts: Vec<usize> = catch_unwind(AssertUnwindSafe(|| {
            self.inner
                .encode(text, false)
                .map(|e| e.get_offsets().iter().map(|o| o.0).collect())
        }))
        .ok()?
        .ok()?;
        let Some(first_excluded) = usize::try_from(n).ok().and_then(|n| starts.get(n).copied())
        else {
            return Some(text.len());
        };
        // A word's token may start at the space before it (SentencePiece's "▁word").
        let mut cut = if text.get(first_excluded..)?.starts_with(' ') {
            first_excluded
        } else {
            text.get(..first_excluded)?.rfind(' ').unwrap_or(0)
        };
        for _ in 0..64 {
            if cut == 0 || self.count(text.get(..cut)?)? <= n {
                return Some(cut);
            }
            cut = text.get(..cut)?.rfind(' ').unwrap_or(0);
        }
        Some(0)
    }

    /// Tokens of a prompt as a server counts it: the text on its own plus the special tokens
    /// the post-processor adds (BOS).
    pub fn count_prompt(&self, text: &str) -> Option<u64> {
        if text.len() > MAX_COUNTED_TEXT {
            return None;
        }
        u64::try_from(self.encode_len(text, true)?).ok()
    }

    /// Tokens of generated text: `text` as a continuation (see the module doc), what a server
    /// reports as completion tokens. `None` over [`MAX_COUNTED_TEXT`] or on a tokenizer failure.
    pub fn count_generated(&self, text: &str) -> Option<u64> {
        let Some(anchor) = self.anchor_tokens else {
            return self.count(text);
        };
        if text.len() > MAX_COUNTED_TEXT {
            return None;
        }
        let with_anchor = self.encode_len(&format!("{ANCHOR}{text}"), false)?;
        u64::try_from(with_anchor.saturating_sub(anchor)).ok()
    }
}
