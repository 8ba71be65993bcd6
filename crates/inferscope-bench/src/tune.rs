//! `inferscope tune`'s pure logic: the server command template and its placeholders, the grid
//! of candidates, the successive-halving schedule under a budget, ranking, the Pareto front, and
//! the journal (JSON lines) that lets a run resume. No I/O: the binary starts servers, measures
//! and writes files.
//!
//! Decisions:
//!
//! * **Placeholders** are `{NAME}` inside words of the server command (split like a shell:
//!   quotes and backslashes, no expansion). `{port}` is required (each candidate gets a free
//!   port; a command without it could not be reached), `{gpus}` is filled with `--gpus` and is
//!   an error without it. A placeholder no `--set` defines, or a `--set` the command never uses,
//!   is an error before anything starts: both are typos that would waste a whole tuning run.
//!   `{{` and `}}` are literal braces.
//! * **Grid order**: the first `--set` varies slowest, so the first candidate takes every
//!   `--set`'s first value; it is the baseline unless `--baseline` is given.
//! * **Successive halving** ([`halving`]): round 1 screens every candidate once; each later
//!   round keeps the better half (rounded up) of the previous round's candidates, plus the
//!   baseline, leaders first; ranking counts complete rounds only and compares candidates on
//!   the runs they have in common. Every round restarts each server, so runs of different
//!   candidates interleave in time and slow drifts of a shared machine hit all of them alike.
//! * **Journal**: one JSON object per line; the first is a header with a fingerprint of
//!   everything that makes runs comparable (command template, sets, workload, objective). A
//!   journal with another fingerprint is refused rather than mixed. Runs are keyed by the
//!   candidate's settings, so a resumed run recomputes the same schedule and only runs what is
//!   missing.

use crate::result::BenchResult;
pub use halving::{
    Halving, State, common_means, contender, counted_runs, halving, mean_objective, next_round,
    noise, ranking,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod halving;
pub mod journal;
pub mod keeper;
pub mod ranking;
pub mod report;
pub mod rounds;
pub mod secrets;
pub mod server;
pub mod session;
pub mod verdict;

/// A candidate's settings: `--set` name → value, as given.
pub type Settings = BTreeMap<String, String>;

/// Why a `--server`/`--baseline` template or a `--set` cannot be used. Messages name the option
/// and quote what the user wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// An unterminated quote or a trailing backslash.
    #[error("`{command}`: {problem}")]
    Quoting {
        /// The command as written.
        command: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// Nothing but whitespace.
    #[error("the server command is empty")]
    EmptyCommand,
    /// A malformed `{NAME}` inside one word.
    #[error("`{word}`: {problem}")]
    Placeholder {
        /// The word as written.
        word: String,
        /// What is wrong.
        problem: String,
    },
    /// The template has no `{port}`.
    #[error(
        "{option} `{command}`: no {{port}} placeholder; each candidate is started on a free port, so write e.g. --port {{port}}"
    )]
    NoPort {
        /// `--server` or `--baseline`.
        option: String,
        /// The command as written.
        command: String,
    },
    /// `{gpus}` without `--gpus`.
    #[error("{option} `{command}`: uses {{gpus}} but no --gpus was given")]
    GpusWithoutFlag {
        /// `--server` or `--baseline`.
        option: String,
        /// The command as written.
        command: String,
    },
    /// A placeholder no `--set` fills.
    #[error("{option} `{command}`: placeholder {{{name}}} has no --set {name}=...; known: {known}")]
    UnknownPlaceholder {
        /// `--server` or `--baseline`.
        option: String,
        /// The command as written.
        command: String,
        /// The placeholder.
        name: String,
        /// The names that would be filled, comma-separated.
        known: String,
    },
    /// A `--set` whose placeholder the server command does not use.
    #[error(
        "--set {0}: the server command has no {{{0}}} placeholder, so its values would change nothing"
    )]
    UnusedSet(String),
    /// Filling found no value for a placeholder.
    #[error("no value for {{{0}}}")]
    NoValue(String),
    /// A malformed `--set`.
    #[error("--set `{spec}`: {problem}")]
    Set {
        /// The `--set` value as written.
        spec: String,
        /// What is wrong.
        problem: String,
    },
    /// The same `--set NAME` twice.
    #[error("--set {0} is given twice")]
    SetTwice(String),
    /// The grid is larger than [`MAX_CANDIDATES`].
    #[error("the --set values make more than {0} candidates")]
    TooManyCandidates(usize),
}

/// Split a command line like a POSIX shell does words: whitespace separates, single quotes are
/// literal, double quotes allow `\"` and `\\`, a backslash outside quotes escapes the next
/// character. No variables, globs or substitutions.
pub fn split_command(s: &str) -> Result<Vec<String>, TemplateError> {
    let quoting = |problem| TemplateError::Quoting {
        command: s.to_string(),
        problem,
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(quoting("unterminated single quote")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(quoting("unterminated double quote")),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(quoting("unterminated double quote")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => cur.push(x),
                    None => return Err(quoting("ends with a lone backslash")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err(TemplateError::EmptyCommand);
    }
    Ok(words)
}

/// One piece of a template word.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Hole(String),
}

fn pieces(word: &str) -> Result<Vec<Piece>, TemplateError> {
    let bad = |problem: String| TemplateError::Placeholder {
        word: word.to_string(),
        problem,
    };
    let mut out = Vec::new();
    let mut text = String::new();
    let mut it = word.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '{' if it.peek() == Some(&'{') => {
                it.next();
                text.push('{');
            }
            '}' if it.peek() == Some(&'}') => {
                it.next();
                text.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match it.next() {
                        Some('}') => break,
                        Some(x) if x.is_ascii_alphanumeric() || x == '_' || x == '-' => {
                            name.push(x)
                        }
                        Some(x) => {
                            return Err(bad(format!(
                                "`{x}` inside a placeholder (names are letters, digits, _ and -; write {{{{ for a literal brace)"
                            )));
                        }
                        None => {
                            return Err(bad(
                                "`{` without a closing `}` (write {{ for a literal brace)".into(),
                            ));
                        }
                    }
                }
                if name.is_empty() {
                    return Err(bad("empty placeholder `{}`".into()));
                }
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Hole(name));
            }
            '}' => {
                return Err(bad(
                    "`}` without an opening `{` (write }} for a literal brace)".into(),
                ));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// A server command with placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    words: Vec<Vec<Piece>>,
    /// The command as given.
    pub text: String,
}

/// Placeholders filled by tune itself.
pub const BUILTIN: [&str; 2] = ["port", "gpus"];

impl Template {
    /// Parse a command line.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let words = split_command(text)?
            .iter()
            .map(|w| pieces(w))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Template {
            words,
            text: text.to_string(),
        })
    }

    /// Every placeholder name used, in order of first use.
    pub fn placeholders(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for p in self.words.iter().flatten() {
            if let Piece::Hole(n) = p
                && !v.contains(n)
            {
                v.push(n.clone());
            }
        }
        v
    }

    /// Check the template against the `--set` names and whether `--gpus` was given. `what`
    /// names the option for messages (`--server`, `--baseline`).
    pub fn check(
        &self,
        what: &str,
        set_names: &[String],
        have_gpus: bool,
    ) -> Result<(), TemplateError> {
        let used = self.placeholders();
        if !used.iter().any(|n| n == "port") {
            return Err(TemplateError::NoPort {
                option: what.to_string(),
                command: self.text.clone(),
            });
        }
        if used.iter().any(|n| n == "gpus") && !have_gpus {
            return Err(TemplateError::GpusWithoutFlag {
                option: what.to_string(),
                command: self.text.clone(),
            });
        }
        for n in &used {
            if !BUILTIN.contains(&n.as_str()) && !set_names.contains(n) {
                return Err(TemplateError::UnknownPlaceholder {
                    option: what.to_string(),
                    command: self.text.clone(),
                    name: n.clone(),
                    known: set_names
                        .iter()
                        .map(String::as_str)
                        .chain(BUILTIN)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        // A --set whose placeholder the command never uses would multiply the grid for nothing.
        if let Some(n) = set_names.iter().find(|n| !used.contains(n)) {
            return Err(TemplateError::UnusedSet(n.clone()));
        }
        Ok(())
    }

    /// Fill the placeholders. Every placeholder must have a value (see [`Template::check`]).
    pub fn fill(
        &self,
        values: &Settings,
        port: u16,
        gpus: Option<&str>,
    ) -> Result<Vec<String>, TemplateError> {
        let mut out = Vec::with_capacity(self.words.len());
        for w in &self.words {
            let mut s = String::new();
            for p in w {
                match p {
                    Piece::Text(t) => s.push_str(t),
                    Piece::Hole(n) if n == "port" => s.push_str(&port.to_string()),
                    Piece::Hole(n) if n == "gpus" => {
                        s.push_str(gpus.ok_or_else(|| TemplateError::NoValue(n.clone()))?)
                    }
                    Piece::Hole(n) => s.push_str(
                        values
                            .get(n)
                            .ok_or_else(|| TemplateError::NoValue(n.clone()))?,
                    ),
                }
            }
            out.push(s);
        }
        Ok(out)
    }
}

/// One `--set NAME=v1,v2,...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSpec {
    /// Placeholder name.
    pub name: String,
    /// Values, in the order given.
    pub values: Vec<String>,
}

impl std::str::FromStr for SetSpec {
    type Err = TemplateError;
    fn from_str(s: &str) -> Result<Self, TemplateError> {
        let bad = |problem: String| TemplateError::Set {
            spec: s.to_string(),
            problem,
        };
        let (name, vals) = s
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=v1,v2,...".into()))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(
                "the name must be letters, digits, _ or - (it is the {NAME} in --server)".into(),
            ));
        }
        if BUILTIN.contains(&name) {
            return Err(bad(format!(
                "{{{name}}} is filled by tune itself and cannot be set"
            )));
        }
        let values: Vec<String> = vals.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            return Err(bad("an empty value".into()));
        }
        let mut seen = Vec::new();
        for v in &values {
            if seen.contains(&v) {
                return Err(bad(format!("value `{v}` is listed twice")));
            }
            seen.push(v);
        }
        Ok(SetSpec {
            name: name.to_string(),
            values,
        })
    }
}

/// Largest grid accepted (a typo like `--set n=1,...` times five flags should not plan a week).
pub const MAX_CANDIDATES: usize = 4096;

/// The grid of every combination, the first `--set` varying slowest.
pub fn grid(sets: &[SetSpec]) -> Result<Vec<Settings>, TemplateError> {
    let mut names = Vec::new();
    for s in sets {
        if names.contains(&&s.name) {
            return Err(TemplateError::SetTwice(s.name.clone()));
        }
        names.push(&s.name);
    }
    let mut out = vec![Settings::new()];
    for s in sets {
        let mut next = Vec::with_capacity(out.len().saturating_mul(s.values.len()));
        for base in &out {
            for v in &s.values {
                let mut c = base.clone();
                c.insert(s.name.clone(), v.clone());
                next.push(c);
            }
        }
        if next.len() > MAX_CANDIDATES {
            return Err(TemplateError::TooManyCandidates(MAX_CANDIDATES));
        }
        out = next;
    }
    Ok(out)
}

/// `name=value name=value` in `--set` order, for tables (`default` without any `--set`).
pub fn label(settings: &Settings, sets: &[SetSpec]) -> String {
    let parts: Vec<String> = sets
        .iter()
        .filter_map(|s| settings.get(&s.name).map(|v| format!("{}={v}", s.name)))
        .collect();
    if parts.is_empty() {
        "default".into()
    } else {
        parts.join(" ")
    }
}

/// Which points are on the Pareto front of (throughput ↑, latency ↓): none other is at least as
/// good on both and better on one. Points with an unknown value are never on it.
pub fn pareto_front(points: &[(Option<f64>, Option<f64>)]) -> Vec<bool> {
    points
        .iter()
        .map(|&(t, l)| {
            let (Some(t), Some(l)) = (t, l) else {
                return false;
            };
            !points.iter().any(|&(t2, l2)| match (t2, l2) {
                (Some(t2), Some(l2)) => t2 >= t && l2 <= l && (t2 > t || l2 < l),
                _ => false,
            })
        })
        .collect()
}

/// Whether another run fits in the budget: `elapsed + estimate ≤ budget`.
pub fn fits_budget(elapsed_s: f64, estimate_s: f64, budget_s: Option<f64>) -> bool {
    budget_s.is_none_or(|b| elapsed_s + estimate_s <= b)
}

/// Journal format version.
pub const JOURNAL_VERSION: u32 = 1;

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JournalLine {
    /// First line: what the runs measure.
    Header {
        /// [`JOURNAL_VERSION`].
        version: u32,
        /// Everything that makes runs comparable, as text.
        fingerprint: String,
    },
    /// A measured run of a candidate.
    Run {
        /// The candidate.
        settings: Settings,
        /// The command that ran (port included).
        command: Vec<String>,
        /// The result of the run.
        result: Box<BenchResult>,
        /// The per-request trace file, relative to the journal's directory.
        trace: String,
        /// Capacity search, for `--objective capacity`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capacity: Option<crate::capacity::Capacity>,
    },
    /// A candidate that failed (not retried on resume).
    Failed {
        /// The candidate.
        settings: Settings,
        /// The command that ran.
        command: Vec<String>,
        /// Why.
        reason: String,
        /// The server log's last lines.
        log_tail: String,
    },
    /// A candidate the planner says does not fit.
    Skipped {
        /// The candidate.
        settings: Settings,
        /// Why.
        reason: String,
    },
}

/// Why a tuning journal cannot be resumed; `file` names it and `line` is 1-based.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A line that is not a journal record (other than a last line cut short).
    #[error("{file}: line {line}: {source}")]
    Line {
        /// The journal.
        file: String,
        /// The line.
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// Written by a build with another journal format.
    #[error("{file}: line {line}: journal version {found}, this build writes {JOURNAL_VERSION}")]
    Version {
        /// The journal.
        file: String,
        /// The line.
        line: usize,
        /// Its version.
        found: u32,
    },
    /// Written for another tuning run.
    #[error(
        "{file}: written for another tuning run (server command, --set values, workload or objective differ); use another --journal\n  journal: {found}\n  now:     {expected}"
    )]
    Fingerprint {
        /// The journal.
        file: String,
        /// Its fingerprint.
        found: String,
        /// This run's.
        expected: String,
    },
    /// The first record is not the header.
    #[error("{file}: line {line}: expected the header line")]
    NoHeader {
        /// The journal.
        file: String,
        /// The line.
        line: usize,
    },
    /// A header after the first line.
    #[error("{file}: line {line}: a second header")]
    SecondHeader {
        /// The journal.
        file: String,
        /// The line.
        line: usize,
    },
}

/// The journal's lines (after the header) checked against the expected fingerprint. `name` is
/// the file, for messages. An empty journal is a fresh start.
pub fn read_journal(
    name: &str,
    text: &str,
    fingerprint: &str,
) -> Result<Vec<JournalLine>, JournalError> {
    let file = || name.to_string();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: JournalLine = match serde_json::from_str(line) {
            Ok(l) => l,
            // A line cut short by an interruption at the end of the file is dropped, not fatal.
            Err(_) if i + 1 == text.lines().count() && !text.ends_with('\n') => break,
            Err(source) => {
                return Err(JournalError::Line {
                    file: file(),
                    line: i + 1,
                    source,
                });
            }
        };
        match (&parsed, out.is_empty() && i == first_line(text)) {
            (
                JournalLine::Header {
                    version,
                    fingerprint: f,
                },
                true,
            ) => {
                if *version != JOURNAL_VERSION {
                    return Err(JournalError::Version {
                        file: file(),
                        line: i + 1,
                        found: *version,
                    });
                }
                if f != fingerprint {
                    return Err(JournalError::Fingerprint {
                        file: file(),
                        found: f.clone(),
                        expected: fingerprint.to_string(),
                    });
                }
                out.push(parsed);
            }
            (_, true) => {
                return Err(JournalError::NoHeader {
                    file: file(),
                    line: i + 1,
                });
            }
            (JournalLine::Header { .. }, false) => {
                return Err(JournalError::SecondHeader {
                    file: file(),
                    line: i + 1,
                });
            }
            (_, false) => out.push(parsed),
        }
    }
    // Drop the header.
    if !out.is_empty() {
        out.remove(0);
    }
    Ok(out)
}

fn first_line(text: &str) -> usize {
    text.lines().position(|l| !l.trim().is_empty()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(spec: &[&str]) -> Vec<SetSpec> {
        spec.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_command(r#"llama-server -m "/a b/m.gguf" --alias 'x y' a\ b"#).unwrap(),
            vec!["llama-server", "-m", "/a b/m.gguf", "--alias", "x y", "a b"]
        );
        assert_eq!(split_command("a ''").unwrap(), vec!["a", ""]);
        assert!(
            split_command("a 'b")
                .unwrap_err()
                .to_string()
                .contains("single quote")
        );
        assert!(
            split_command("a \"b")
                .unwrap_err()
                .to_string()
                .contains("double quote")
        );
        assert!(
            split_command("  ")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
    }

    #[test]
    fn placeholders_fill_and_check() {
        let t =
            Template::parse("srv --port {port} -np {np} -t {threads} --x={np}x {{lit}}").unwrap();
        assert_eq!(t.placeholders(), vec!["port", "np", "threads"]);
        let names = vec!["np".to_string(), "threads".to_string()];
        t.check("--server", &names, false).unwrap();
        // a --set the command never uses
        let extra = vec!["np".to_string(), "threads".to_string(), "ctx".to_string()];
        let e = t.check("--server", &extra, false).unwrap_err().to_string();
        assert!(
            e.starts_with("--set ctx: the server command has no {ctx}"),
            "{e}"
        );
        let v: Settings = [("np".into(), "4".into()), ("threads".into(), "2".into())].into();
        assert_eq!(
            t.fill(&v, 8080, None).unwrap(),
            vec![
                "srv", "--port", "8080", "-np", "4", "-t", "2", "--x=4x", "{lit}"
            ]
        );
        // unknown placeholder
        let e = t
            .check("--server", &["np".to_string()], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("{threads} has no --set threads"), "{e}");
        // no port
        let e = Template::parse("srv -np {np}")
            .unwrap()
            .check("--server", &names, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no {port}"), "{e}");
        // gpus without --gpus
        let g = Template::parse("srv --port {port} --gpus {gpus}").unwrap();
        assert!(
            g.check("--server", &[], false)
                .unwrap_err()
                .to_string()
                .contains("--gpus")
        );
        assert_eq!(g.fill(&Settings::new(), 1, Some("0,1")).unwrap()[4], "0,1");
        // malformed
        assert!(
            Template::parse("srv {port")
                .unwrap_err()
                .to_string()
                .contains("closing")
        );
        assert!(
            Template::parse("srv port}")
                .unwrap_err()
                .to_string()
                .contains("opening")
        );
        assert!(
            Template::parse("srv {}")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        // unquoted, `{a b}` is two words, each with a lone brace
        assert!(
            Template::parse("srv {a b}")
                .unwrap_err()
                .to_string()
                .contains("closing")
        );
        assert!(
            Template::parse("srv '{a b}'")
                .unwrap_err()
                .to_string()
                .contains("inside a placeholder")
        );
    }

    #[test]
    fn set_specs() {
        let s: SetSpec = "np=1, 4".parse().unwrap();
        assert_eq!(s.values, vec!["1", "4"]);
        for (bad, says) in [
            ("np", "NAME=v1"),
            ("np=1,,2", "empty"),
            ("np=1,1", "twice"),
            ("port=1", "filled by tune"),
            ("a b=1", "letters"),
        ] {
            let e = bad.parse::<SetSpec>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn grid_first_set_slowest_and_unused_sets() {
        let s = sets(&["np=1,4", "t=1,2"]);
        let g = grid(&s).unwrap();
        let labels: Vec<String> = g.iter().map(|c| label(c, &s)).collect();
        assert_eq!(labels, vec!["np=1 t=1", "np=1 t=2", "np=4 t=1", "np=4 t=2"]);
        assert!(
            grid(&sets(&["a=1", "a=2"]))
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let big: Vec<SetSpec> = (0..13)
            .map(|i| format!("s{i}=1,2").parse().unwrap())
            .collect();
        assert!(grid(&big).unwrap_err().to_string().contains("4096"));
        assert_eq!(grid(&[]).unwrap(), vec![Settings::new()]);
        assert_eq!(label(&Settings::new(), &[]), "default");
    }

    #[test]
    fn pareto() {
        let p = [
            (Some(100.0), Some(50.0)),
            (Some(200.0), Some(80.0)),
            (Some(150.0), Some(90.0)), // dominated by 200/80
            (Some(100.0), Some(60.0)), // dominated by 100/50
            (None, Some(1.0)),
        ];
        assert_eq!(pareto_front(&p), vec![true, true, false, false, false]);
    }

    #[test]
    fn budget() {
        assert!(fits_budget(10.0, 5.0, None));
        assert!(fits_budget(10.0, 5.0, Some(15.0)));
        assert!(!fits_budget(10.0, 5.1, Some(15.0)));
    }

    #[test]
    fn journal_round_trip_and_refusals() {
        let h = serde_json::to_string(&JournalLine::Header {
            version: JOURNAL_VERSION,
            fingerprint: "fp".into(),
        })
        .unwrap();
        let f = serde_json::to_string(&JournalLine::Failed {
            settings: [("np".into(), "1".into())].into(),
            command: vec!["x".into()],
            reason: "exited".into(),
            log_tail: String::new(),
        })
        .unwrap();
        let text = format!("{h}\n{f}\n");
        let lines = read_journal("j", &text, "fp").unwrap();
        assert_eq!(lines.len(), 1);
        assert!(matches!(lines[0], JournalLine::Failed { .. }));
        assert!(
            read_journal("j", &text, "other")
                .unwrap_err()
                .to_string()
                .contains("another tuning run")
        );
        assert!(
            read_journal("j", &format!("{f}\n"), "fp")
                .unwrap_err()
                .to_string()
                .contains("line 1: expected the header")
        );
        assert!(
            read_journal("j", &format!("{h}\n{h}\n"), "fp")
                .unwrap_err()
                .to_string()
                .contains("second header")
        );
        assert!(
            read_journal("j", &format!("{h}\nnot json\n{f}\n"), "fp")
                .unwrap_err()
                .to_string()
                .starts_with("j: line 2:")
        );
        // a torn last line (interrupted write) is dropped
        assert_eq!(
            read_journal("j", &format!("{h}\n{f}\n{{\"kind\":\"fa"), "fp")
                .unwrap()
                .len(),
            1
        );
        assert!(read_journal("j", "", "fp").unwrap().is_empty());
    }
}
