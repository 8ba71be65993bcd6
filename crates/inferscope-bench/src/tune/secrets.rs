//! Secrets in what `tune` writes and prints (issue 33 item 5): the servers run with the real
//! command, but stdout, stderr, report.txt, report.json, winner.sh, plan.json and the journal
//! get the snapshot's redaction rules ([`inferscope_host::redact`]): values of secret-named flags
//! and `--set` names, credentials in URLs and token-shaped words become `<redacted>`.
//!
//! Two layers: what tune renders itself (labels, settings, commands) is redacted structurally,
//! and every text and JSON string written then goes through [`Secrets::hide`], which replaces
//! each secret value seen in a real command or `--set` value wherever it still appears (a server
//! log's tail, a planner's error quoting the command). Values shorter than [`MIN_HIDDEN`] are
//! only redacted structurally: replacing `1` everywhere would mangle every number.

use super::{Settings, split_command};
use inferscope_host::redact::{self, REDACTED};
use inferscope_launch::emit::shell_command_line;

/// Shortest secret replaced wherever it appears in written text.
pub const MIN_HIDDEN: usize = 4;

/// The secret values of one tuning run.
#[derive(Debug, Default, Clone)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// Learn the secrets of a command line (words as run).
    pub fn learn_command(&mut self, words: &[String]) {
        let shown = redact::command(words);
        for (real, shown) in words.iter().zip(&shown) {
            if real == shown {
                continue;
            }
            match (real.split_once('='), shown.split_once('=')) {
                // `--api-key=sk-…`, `HF_TOKEN=…`: the value
                (Some((n, v)), Some((m, _))) if n == m => self.add(v),
                _ => self.add(real),
            }
        }
    }

    /// Learn every secret of a `tune` command line before anything is printed: the templates as
    /// written, every `--set` value, and each candidate's filled command (a secret flag's
    /// value can come from a `--set`: `--api-key {key}`).
    pub fn learn_tune(
        &mut self,
        server: &str,
        baseline: Option<&str>,
        sets: &[super::SetSpec],
        port: u16,
        gpus: Option<&str>,
    ) {
        use super::{Template, grid};
        for line in std::iter::once(server).chain(baseline) {
            if let Ok(words) = split_command(line) {
                self.learn_command(&words);
            }
        }
        for set in sets {
            for v in &set.values {
                self.learn_settings(&[(set.name.clone(), v.clone())].into());
            }
        }
        if let (Ok(t), Ok(g)) = (Template::parse(server), grid(sets)) {
            for settings in g {
                if let Ok(words) = t.fill(&settings, port, gpus) {
                    self.learn_command(&words);
                }
            }
        }
    }

    /// Learn the secrets among a candidate's `--set` values.
    pub fn learn_settings(&mut self, settings: &Settings) {
        for (k, v) in settings {
            if shown_value(k, v) != *v {
                self.add(v);
            }
        }
    }

    fn add(&mut self, v: &str) {
        // A template's own placeholder (`--api-key {key}`) is not a secret; its values are.
        let placeholder = v.starts_with('{') && v.ends_with('}') && !v.contains(' ');
        if !v.is_empty() && !placeholder && !self.0.iter().any(|s| s == v) {
            self.0.push(v.to_string());
            // Longest first, so a secret containing another is replaced whole.
            self.0.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// `text` with every known secret (of at least [`MIN_HIDDEN`] characters) replaced.
    pub fn hide(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.0.iter().filter(|s| s.chars().count() >= MIN_HIDDEN) {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }

    /// A JSON value with [`Secrets::hide`] applied to every string (keys included).
    pub fn hide_json(&self, v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(self.hide(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| self.hide_json(x)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, x)| (self.hide(&k), self.hide_json(x)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// A `--set` value as shown: redacted when its name is secret-looking, else scrubbed.
pub fn shown_value(name: &str, value: &str) -> String {
    if name == "@baseline" {
        shown_line(value)
    } else {
        redact::env_value(name, value).into_owned()
    }
}

/// A candidate's settings as shown in reports and the journal.
pub fn shown_settings(settings: &Settings) -> Settings {
    settings
        .iter()
        .map(|(k, v)| (k.clone(), shown_value(k, v)))
        .collect()
}

/// A command line as shown (unchanged when it holds no secret, so fingerprints of journals
/// written before redaction still match).
pub fn shown_line(line: &str) -> String {
    match split_command(line) {
        Ok(words) => {
            let shown = redact::command(&words);
            if shown == words {
                line.to_string()
            } else {
                shell_command_line(&shown)
            }
        }
        Err(_) => redact::scrub(line).into_owned(),
    }
}

/// A command's words as shown.
pub fn shown_words(words: &[String]) -> Vec<String> {
    redact::command(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn learns_and_hides() {
        let mut s = Secrets::default();
        s.learn_command(&w(&[
            "srv",
            "--api-key",
            "pw-1234",
            "--hf-token=abcdef",
            "--port",
            "8000",
        ]));
        let set: Settings = [("api_key".into(), "zz".into()), ("n".into(), "1".into())].into();
        s.learn_settings(&set);
        assert_eq!(
            s.hide("key pw-1234, token abcdef, port 8000"),
            "key <redacted>, token <redacted>, port 8000"
        );
        // short secrets are left to structural redaction
        assert_eq!(s.hide("zz 1"), "zz 1");
        assert_eq!(
            shown_settings(&set).get("api_key").map(String::as_str),
            Some(REDACTED)
        );
        assert_eq!(
            shown_line("srv --api-key pw-1234 --port {port}"),
            "srv --api-key '<redacted>' --port '{port}'"
        );
        assert_eq!(shown_line("srv --port {port}"), "srv --port {port}");
        let j = s.hide_json(serde_json::json!({"a": ["x pw-1234"], "pw-1234": 1}));
        assert_eq!(
            j,
            serde_json::json!({"a": ["x <redacted>"], "<redacted>": 1})
        );
    }
}
