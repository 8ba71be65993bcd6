//! Keeping secrets out of what inferscope writes: snapshots, gather archives, JSON and text that
//! users attach to public bug reports.
//!
//! One policy, used wherever an environment variable or a command line is recorded:
//!
//! * a variable or flag whose **name** looks secret ([`is_secret_name`]: a word of the name —
//!   split at `_`, `-`, `.` — that is or ends in `TOKEN`, `KEY`, `AUTH`, or holds `SECRET`,
//!   `PASSWORD`, `PASSWD`, `CREDENTIAL`, `COOKIE`, `PRIVATE`; this covers `HF_TOKEN`,
//!   `OPENAI_API_KEY`, `GITHUB_APIKEY`, `--api-key`, `--hf-token`, `DB_PASSWORD_FILE`) keeps its
//!   name and loses its value: [`REDACTED`] records that it is set, nothing more. Whole words,
//!   not substrings: `--max-num-batched-tokens`, `--tokenizer`, `TOKENIZERS_PARALLELISM` and
//!   `--author` are serving settings, not secrets;
//! * **credentials in URLs** (`https://user:pass@host`) anywhere in any value: the password, or a
//!   lone user part (often a token: `https://hf_xxx@host`), becomes [`REDACTED`];
//! * **well-known token shapes** anywhere in any value (`hf_…`, `sk-…`, `ghp_…`, `github_pat_…`,
//!   `xoxb-…`, `AKIA…`) become [`REDACTED`], in case a secret sits under an innocent name.
//!
//! Redaction is conservative: a non-secret that matches (`HF_HUB_DISABLE_IMPLICIT_TOKEN=1`) is
//! hidden too.

use std::borrow::Cow;

/// Placeholder written instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// A word of a name that is, or ends in, one of these marks a secret (`APIKEY`, `HFTOKEN`,
/// `OAUTH`); `TOKENS` and `TOKENIZER` do not.
const SECRET_SUFFIXES: &[&str] = &["TOKEN", "KEY", "AUTH"];
/// A word of a name that holds one of these marks a secret (`PASSWORDS`, `CREDENTIALS`).
const SECRET_INFIXES: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "COOKIE",
    "PRIVATE",
];

/// True when a variable or flag of this name must not have its value recorded
/// (`HF_TOKEN`, `OPENAI_API_KEY`, `--api-key`, `db_password`; not `--max-num-batched-tokens`).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| {
            SECRET_SUFFIXES.iter().any(|s| w.ends_with(s))
                || SECRET_INFIXES.iter().any(|s| w.contains(s))
        })
}

/// The value to record for variable `name`: [`REDACTED`] for secret names, otherwise `value`
/// with URL credentials and token-shaped substrings replaced.
pub fn env_value<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if is_secret_name(name) {
        Cow::Borrowed(REDACTED)
    } else {
        scrub(value)
    }
}

/// `value` with credentials in URLs and token-shaped substrings replaced by [`REDACTED`].
pub fn scrub(value: &str) -> Cow<'_, str> {
    let urls = scrub_url_credentials(value);
    match scrub_tokens(&urls) {
        Cow::Borrowed(_) => urls,
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// A command line fit for recording: values of secret-named flags (`--api-key X`,
/// `--hf-token=X`) and secret-named assignments (`HF_TOKEN=x vllm serve …`) replaced, and every
/// word [`scrub`]bed.
pub fn command(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut hide_next = false;
    for w in words {
        if hide_next {
            hide_next = false;
            // A following flag is not the value (`--api-key --port 8000`).
            if !w.starts_with('-') {
                out.push(REDACTED.to_string());
                continue;
            }
        }
        if let Some((name, _)) = w.split_once('=')
            && is_secret_name(name)
        {
            out.push(format!("{name}={REDACTED}"));
            continue;
        }
        if w.starts_with('-') && is_secret_name(w) {
            hide_next = true;
        }
        out.push(scrub(w).into_owned());
    }
    out
}

/// Replace the userinfo password of every `scheme://user:pass@host` (or a lone `user@`).
fn scrub_url_credentials(s: &str) -> Cow<'_, str> {
    if !s.contains("://") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut changed = false;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first of / ? # or whitespace/quote.
        let end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'') || c.is_whitespace())
            .unwrap_or(tail.len());
        let (authority, after) = tail.split_at(end);
        match authority.rfind('@') {
            Some(at) => {
                let (userinfo, host) = authority.split_at(at);
                match userinfo.split_once(':') {
                    Some((user, _password)) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(REDACTED);
                    }
                    None => out.push_str(REDACTED),
                }
                out.push_str(host);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = after;
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(s)
    }
}

/// Prefixes of well-known API token formats and the shortest body that counts as a token.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("hf_", 20),
    ("sk-", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("xoxb-", 16),
    ("xoxp-", 16),
    ("AKIA", 16),
];

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Replace substrings shaped like well-known API tokens.
fn scrub_tokens(s: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0; // bytes of `s` already in `out`
    let mut i = 0;
    while i < s.len() {
        let at_word_start = s[..i].chars().next_back().is_none_or(|c| !token_char(c));
        let hit = if at_word_start {
            TOKEN_PREFIXES.iter().find_map(|(p, min)| {
                let body = s[i..].strip_prefix(p)?;
                let n = body.find(|c: char| !token_char(c)).unwrap_or(body.len());
                (n >= *min).then_some(p.len() + n)
            })
        } else {
            None
        };
        match hit {
            Some(len) => {
                out.push_str(&s[copied..i]);
                out.push_str(REDACTED);
                i += len;
                copied = i;
            }
            None => {
                // Next char boundary.
                i += s[i..].chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    if copied == 0 {
        Cow::Borrowed(s)
    } else {
        out.push_str(&s[copied..]);
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn secret_names() {
        for n in [
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "OPENAI_API_KEY",
            "VLLM_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "my_passwd",
            "--api-key",
            "--hf-token",
            "WANDB_AUTH",
            "GITHUB_APIKEY",
            "DB_PASSWORD_FILE",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        // Serving settings whose names merely contain a secret word.
        for n in [
            "CUDA_VISIBLE_DEVICES",
            "HF_HOME",
            "NCCL_DEBUG",
            "--port",
            "--max-num-batched-tokens",
            "--max-total-tokens",
            "--tokenizer",
            "--tokenizer-mode",
            "TOKENIZERS_PARALLELISM",
            "--author",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn url_credentials() {
        assert_eq!(
            scrub("https://alice:s3cr3t@proxy.corp:8080/path?x=1"),
            "https://alice:<redacted>@proxy.corp:8080/path?x=1"
        );
        assert_eq!(
            scrub("http://hf_tok@host/ and ftp://bob:pw@h"),
            "http://<redacted>@host/ and ftp://bob:<redacted>@h"
        );
        assert_eq!(
            scrub("https://huggingface.co/x@y"),
            "https://huggingface.co/x@y"
        );
        assert!(matches!(scrub("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn token_shapes() {
        assert_eq!(
            scrub("Bearer hf_abcdefghijklmnopqrstuvwxyz0123"),
            "Bearer <redacted>"
        );
        assert_eq!(
            scrub("x=sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX,y"),
            "x=<redacted>,y"
        );
        // Too short, or inside a word: not a token.
        assert_eq!(scrub("hf_transfer"), "hf_transfer");
        assert_eq!(
            scrub("task-abcdefghijklmnopqrstuvwxyz"),
            "task-abcdefghijklmnopqrstuvwxyz"
        );
        assert_eq!(scrub("é hf_ü"), "é hf_ü");
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            command(&w(
                "HF_TOKEN=hf_x vllm serve m --api-key k1 --hf-token=t2 --token --port 8000 --proxy http://u:p@h"
            )),
            w(
                "HF_TOKEN=<redacted> vllm serve m --api-key <redacted> --hf-token=<redacted> --token --port 8000 --proxy http://u:<redacted>@h"
            )
        );
        assert_eq!(env_value("OPENAI_API_KEY", "sk-1"), REDACTED);
        assert_eq!(
            env_value("HF_ENDPOINT", "https://u:pw@mirror"),
            "https://u:<redacted>@mirror"
        );
    }
}
