//! ENV002: the PyTorch allocator config is malformed or contradicts itself.
//!
//! Also home of the allocator-config parser ENV001 uses. It follows PyTorch's own tokenizer
//! (`c10/core/AllocatorConfig.h` `ConfigTokenizer`): the text splits at `,` `:` `[` `]`, white
//! space is dropped, entries are `key:value`, and `roundup_power2_divisions` may take a
//! bracketed list (`[256:1,512:2,>:8]`). Booleans are exactly `True` or `False`.

use super::support::HOST;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use std::collections::BTreeMap;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "ENV002",
    title: "Allocator config conflicts or is malformed",
    severity: Severity::Warn,
    scope: Scope::Environment,
    why: "PyTorch parses PYTORCH_CUDA_ALLOC_CONF when the first CUDA tensor is allocated and stops the server with 'Unrecognized key' or 'Expected True or False' on a bad entry; options that contradict each other, or two variables with different values (which one wins changed between PyTorch releases), silently give another allocator than the one intended.",
    run,
};

/// The variables PyTorch reads, legacy name first.
pub(crate) const ALLOC_VARS: [&str; 2] = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"];

/// Keys PyTorch's CUDA allocator accepts (2.0 to 2.10, including the HIP spellings).
const KNOWN_KEYS: &[&str] = &[
    "backend",
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
    "expandable_segments",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
];

const BOOL_KEYS: &[&str] = &[
    "expandable_segments",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_use_background_threads",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "graph_capture_record_stream_reuse",
];

/// Options the `cudaMallocAsync` backend ignores.
const NATIVE_ONLY: &[&str] = &[
    "max_split_size_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
    "expandable_segments",
];

/// One `key:value` entry; a bracketed value keeps its brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfEntry {
    pub key: String,
    pub value: String,
}

/// A parsed allocator config: the well-formed entries in order, and what is wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ParsedConf {
    pub entries: Vec<ConfEntry>,
    pub problems: Vec<String>,
}

impl ParsedConf {
    /// The value PyTorch ends up with for `key` (the last entry wins).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Sep(char),
}

fn tokenize(text: &str) -> Vec<Tok<'_>> {
    fn flush<'a>(text: &'a str, out: &mut Vec<Tok<'a>>, start: &mut Option<usize>, end: usize) {
        if let Some(s) = start.take()
            && let Some(w) = text.get(s..end)
        {
            let trimmed = w.trim();
            if !trimmed.is_empty() {
                out.push(Tok::Word(trimmed));
            }
        }
    }
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if matches!(c, ',' | ':' | '[' | ']') {
            flush(text, &mut out, &mut start, i);
            out.push(Tok::Sep(c));
        } else if c.is_whitespace() {
            // PyTorch drops white space (`expandable_segments : True` is fine).
            flush(text, &mut out, &mut start, i);
        } else if start.is_none() {
            start = Some(i);
        }
    }
    flush(text, &mut out, &mut start, text.len());
    out
}

fn show(t: Option<&Tok>) -> String {
    match t {
        Some(Tok::Word(w)) => format!("`{w}`"),
        Some(Tok::Sep(c)) => format!("`{c}`"),
        None => "the end".to_string(),
    }
}

/// Parse an allocator config the way PyTorch does; never fails, collects problems instead.
pub(crate) fn parse_conf(text: &str) -> ParsedConf {
    let toks = tokenize(text);
    let mut out = ParsedConf::default();
    let mut i = 0;
    // Skip to the token after the next top-level `,`.
    let skip_entry = |mut i: usize| {
        while toks.get(i).is_some_and(|t| *t != Tok::Sep(',')) {
            i += 1;
        }
        i + 1
    };
    while let Some(tok) = toks.get(i) {
        let key = match *tok {
            Tok::Word(w) => w,
            Tok::Sep(',') => {
                out.problems
                    .push("an empty entry (`,,` or a leading comma)".into());
                i += 1;
                continue;
            }
            Tok::Sep(c) => {
                out.problems
                    .push(format!("`{c}` where an option name should start"));
                i = skip_entry(i);
                continue;
            }
        };
        if toks.get(i + 1) != Some(&Tok::Sep(':')) {
            out.problems.push(format!(
                "`{key}` is not `key:value` (found {} after it)",
                show(toks.get(i + 1))
            ));
            i = skip_entry(i + 1);
            continue;
        }
        let value = match toks.get(i + 2) {
            Some(Tok::Word(v)) => {
                i += 3;
                v.to_string()
            }
            Some(Tok::Sep('[')) => {
                let mut j = i + 3;
                let mut parts = String::from("[");
                while let Some(t) = toks.get(j).filter(|t| **t != Tok::Sep(']')) {
                    match *t {
                        Tok::Word(w) => parts.push_str(w),
                        Tok::Sep(c) => parts.push(c),
                    }
                    j += 1;
                }
                if j >= toks.len() {
                    out.problems.push(format!("`{key}:[` has no closing `]`"));
                    break;
                }
                parts.push(']');
                i = j + 1;
                parts
            }
            other => {
                out.problems
                    .push(format!("`{key}:` has no value (found {})", show(other)));
                i = skip_entry(i + 2);
                continue;
            }
        };
        match toks.get(i) {
            None | Some(Tok::Sep(',')) => i += 1,
            other => {
                out.problems.push(format!(
                    "`{key}:{value}` is followed by {} instead of `,`",
                    show(other)
                ));
                i = skip_entry(i);
            }
        }
        out.entries.push(ConfEntry {
            key: key.to_string(),
            value,
        });
    }
    out
}

/// What is wrong with the entries themselves (unknown keys, bad values, contradictions).
fn entry_problems(conf: &ParsedConf) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &conf.entries {
        *seen.entry(e.key.as_str()).or_default() += 1;
        let k = e.key.as_str();
        let v = e.value.as_str();
        if !KNOWN_KEYS.contains(&k) {
            let hint = KNOWN_KEYS
                .iter()
                .find(|known| known.eq_ignore_ascii_case(k) || near(known, k))
                .map(|known| format!(" (did you mean `{known}`?)"))
                .unwrap_or_default();
            problems.push(format!(
                "unknown option `{k}`{hint}: PyTorch stops with \"Unrecognized key\""
            ));
        } else if BOOL_KEYS.contains(&k) && v != "True" && v != "False" {
            problems.push(format!(
                "`{k}:{v}`: PyTorch accepts only `True` or `False` (case-sensitive)"
            ));
        } else if matches!(k, "max_split_size_mb" | "max_non_split_rounding_mb") {
            match v.parse::<u64>() {
                Ok(n) if n >= 20 => {}
                Ok(n) => problems.push(format!(
                    "`{k}:{n}` is below PyTorch's minimum of 20 (MB); it refuses to start"
                )),
                Err(_) => problems.push(format!("`{k}:{v}` is not a whole number of MB")),
            }
        } else if k == "garbage_collection_threshold" {
            match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x < 1.0 => {}
                _ => problems.push(format!(
                    "`{k}:{v}` must be a fraction strictly between 0 and 1"
                )),
            }
        } else if k == "per_process_memory_fraction" {
            match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => {}
                _ => problems.push(format!("`{k}:{v}` must be a fraction from 0 to 1")),
            }
        } else if k == "backend" && v != "native" && v != "cudaMallocAsync" && v != "hipMallocAsync"
        {
            problems.push(format!(
                "`backend:{v}`: the backends are `native` and `cudaMallocAsync`"
            ));
        } else if k == "pinned_num_register_threads" {
            match v.parse::<u64>() {
                Ok(n) if n.is_power_of_two() && n <= 128 => {}
                _ => problems.push(format!("`{k}:{v}` must be a power of 2 up to 128")),
            }
        } else if k == "roundup_power2_divisions" && !v.starts_with('[') {
            match v.parse::<u64>() {
                Ok(n) if n.is_power_of_two() => {}
                _ => problems.push(format!("`{k}:{v}` must be a power of 2")),
            }
        }
    }
    for (k, n) in &seen {
        if *n > 1 {
            problems.push(format!(
                "`{k}` is given {n} times; the last value (`{}`) wins",
                conf.get(k).unwrap_or_default()
            ));
        }
    }
    if conf
        .get("expandable_segments")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        && conf.get("max_split_size_mb").is_some()
    {
        problems.push(
            "`max_split_size_mb` with `expandable_segments:True`: expandable segments split blocks regardless of max_split_size_mb, so it does not do what it is there for".into(),
        );
    }
    if matches!(
        conf.get("backend"),
        Some("cudaMallocAsync" | "hipMallocAsync")
    ) {
        let ignored: Vec<&str> = NATIVE_ONLY
            .iter()
            .copied()
            .filter(|k| conf.get(k).is_some())
            .collect();
        if !ignored.is_empty() {
            problems.push(format!(
                "`backend:cudaMallocAsync` ignores {} (options of the native allocator)",
                ignored.join(", ")
            ));
        }
    }
    problems
}

/// Same length, at most two characters different: a likely typo.
fn near(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).filter(|(x, y)| x != y).count() <= 2
}

/// A corrected config: known keys only, booleans capitalised, contradictions dropped.
fn corrected(conf: &ParsedConf) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for e in &conf.entries {
        if KNOWN_KEYS.contains(&e.key.as_str()) && !keys.contains(&e.key.as_str()) {
            keys.push(&e.key);
        }
    }
    let expandable = conf
        .get("expandable_segments")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    keys.iter()
        .filter(|k| !(expandable && **k == "max_split_size_mb"))
        .filter_map(|k| {
            let v = conf.get(k)?;
            let v = if BOOL_KEYS.contains(k) {
                if v.eq_ignore_ascii_case("true") {
                    "True"
                } else if v.eq_ignore_ascii_case("false") {
                    "False"
                } else {
                    return None;
                }
            } else {
                v
            };
            Some(format!("{k}:{v}"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn run(input: &CheckInput) -> Vec<Outcome> {
    let env = &input.snapshot.env;
    let set: Vec<(&str, &str)> = ALLOC_VARS
        .iter()
        .filter_map(|n| env.get(*n).map(|v| (*n, v.as_str())))
        .collect();
    if set.is_empty() {
        return vec![Outcome::pass(
            HOST,
            "neither PYTORCH_CUDA_ALLOC_CONF nor PYTORCH_ALLOC_CONF is set in the captured environment: nothing to parse",
        )];
    }
    let mut problems: Vec<String> = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    for (name, value) in &set {
        let conf = parse_conf(value);
        let mut own: Vec<String> = conf.problems.clone();
        own.extend(entry_problems(&conf));
        if !own.is_empty() {
            problems.push(format!("{name}={value:?}: {}", own.join("; ")));
            fixes.push(format!("export {name}={}", corrected(&conf)));
        }
    }
    if let [(a, va), (b, vb)] = set.as_slice() {
        let norm = |v: &str| v.split_whitespace().collect::<String>();
        if norm(va) != norm(vb) {
            problems.push(format!(
                "{a}={va:?} and {b}={vb:?} differ: PyTorch reads only one of them, and which one has changed between releases; vLLM's own checks read only {a}"
            ));
            fixes.push(format!(
                "unset {b} and keep one value in {a} (or set both to the same value)"
            ));
        }
    }
    let evidence_ok = set
        .iter()
        .map(|(n, v)| format!("{n}={v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if problems.is_empty() {
        vec![Outcome::pass(
            HOST,
            format!("{evidence_ok}: well-formed, known options, no contradictions"),
        )]
    } else {
        fixes.dedup();
        vec![Outcome::fail(
            HOST,
            problems.join(" | "),
            format!(
                "{} (valid options: https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf).",
                fixes.join("; ")
            ),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::Status;

    fn with_env(pairs: &[(&str, &str)]) -> inferscope_host::Snapshot {
        let mut s = fixture("h100");
        for (k, v) in pairs {
            s.env.insert(k.to_string(), v.to_string());
        }
        s
    }

    #[test]
    fn parser_follows_pytorch_tokenizer() {
        let c = parse_conf(
            " expandable_segments : True ,roundup_power2_divisions:[256:1,512:2,>:8],backend:native,",
        );
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.get("expandable_segments"), Some("True"));
        assert_eq!(c.get("roundup_power2_divisions"), Some("[256:1,512:2,>:8]"));
        let c = parse_conf("expandable_segments,max_split_size_mb:,a:b:c,,x:[1");
        assert_eq!(c.problems.len(), 5, "{:?}", c.problems);
        assert!(c.problems[0].contains("not `key:value`"));
        assert!(parse_conf("").entries.is_empty());
    }

    #[test]
    fn unset_and_well_formed_pass() {
        assert_eq!(statuses(&check(&CHECK, &fixture("h100"))), [Status::Pass]);
        let s = with_env(&[(
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True,garbage_collection_threshold:0.6",
        )]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
        // The same value under both names is no conflict.
        let s = with_env(&[
            ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
            ("PYTORCH_ALLOC_CONF", "expandable_segments: True"),
        ]);
        assert_eq!(statuses(&check(&CHECK, &s)), [Status::Pass]);
    }

    #[test]
    fn lowercase_bool_unknown_key_and_contradiction_fail() {
        // GPTQModel's CI exported `expandable_segments:true` (lowercase), which PyTorch rejects.
        let s = with_env(&[(
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:true,max_split_size_mb:128,max_split_mb:64",
        )]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        let e = &out[0].evidence;
        assert!(e.contains("only `True` or `False`"), "{e}");
        assert!(e.contains("unknown option `max_split_mb`"), "{e}");
        assert!(e.contains("does not do what it is there for"), "{e}");
        assert_eq!(
            out[0].remedy.as_deref().unwrap().split(" (valid").next(),
            Some("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        );
    }

    #[test]
    fn two_variables_with_different_values_fail() {
        let s = with_env(&[
            ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512"),
            ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
        ]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(out[0].evidence.contains("differ"), "{}", out[0].evidence);
        assert!(
            out[0]
                .remedy
                .as_deref()
                .unwrap()
                .contains("unset PYTORCH_ALLOC_CONF")
        );
    }

    #[test]
    fn async_backend_ignoring_native_options_fails() {
        let s = with_env(&[(
            "PYTORCH_CUDA_ALLOC_CONF",
            "backend:cudaMallocAsync,garbage_collection_threshold:0.8",
        )]);
        let out = check(&CHECK, &s);
        assert_eq!(statuses(&out), [Status::Fail]);
        assert!(
            out[0]
                .evidence
                .contains("ignores garbage_collection_threshold")
        );
    }
}
