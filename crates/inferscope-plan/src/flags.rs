//! Which flags an engine's own parser accepts, so a typo in a pasted command is the error the
//! engine would give (exit 2, "did you mean --max-model-len?") instead of a plan made with the
//! default. Each room's [`CommandOptions`] says how its parser reads a word (`_` as `-`,
//! abbreviations, `--no-x`, dotted options) and lists what it accepts (data/flags/*.txt, the
//! union over many releases, each file saying which, so a flag of any release is known).

use crate::engine::Engine;
use crate::engines::CommandOptions;
use std::collections::BTreeSet;

/// What an engine's parser makes of one option word (the part before any `=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagCheck {
    /// The engine knows it; the canonical spelling (an abbreviation resolved, `_` as `-`).
    Known(String),
    /// An abbreviation of several options (argparse refuses it in the release where that is
    /// so; across releases the union cannot tell): the candidates.
    Ambiguous(Vec<String>),
    /// The engine refuses it; the closest known option, if one is close.
    Unknown(Option<String>),
}

/// The engine's parser name and its words for a refused option, for the error.
pub fn parser_of(engine: Engine) -> &'static str {
    crate::engines::room(engine)
        .options()
        .map_or("its options are not read by inferscope", |o| o.parser)
}

/// Check one option word (no `=value`) against the engine's parser; an engine whose options
/// are not modelled knows none.
pub fn check(engine: Engine, word: &str) -> FlagCheck {
    match crate::engines::room(engine).options() {
        Ok(o) => check_with(o, word),
        Err(_) => FlagCheck::Unknown(None),
    }
}

/// Check one option word against a parser's [`CommandOptions`].
pub fn check_with(o: &CommandOptions, word: &str) -> FlagCheck {
    let set = (o.known)();
    let dashes_for_underscores = o.underscores_as_dashes;
    let mut flag = word.to_string();
    if o.dotted_options {
        // `-O3`, `-O.level=3`: the optimization level; `--json-arg.key`: the JSON argument
        if flag.starts_with("-O") && !flag.starts_with("--") {
            return FlagCheck::Known("-O".into());
        }
        if let Some((base, _)) = flag.split_once('.') {
            flag = base.to_string();
        }
    }
    if dashes_for_underscores && flag.starts_with("--") {
        flag = flag.replace('_', "-");
    }
    if set.contains(flag.as_str()) {
        return FlagCheck::Known(flag);
    }
    // argparse's BooleanOptionalAction pairs `--x` with `--no-x` (vLLM's bool fields)
    if o.negations
        && let Some(rest) = flag.strip_prefix("--no-")
        && set.contains(format!("--{rest}").as_str())
    {
        return FlagCheck::Known(flag);
    }
    // argparse: an unambiguous prefix of a long option is that option
    if o.abbreviations && flag.starts_with("--") && flag.len() > 2 {
        let hits: Vec<String> = set
            .range(flag.as_str()..)
            .take_while(|k| k.starts_with(flag.as_str()))
            .map(|k| k.to_string())
            .collect();
        match hits.len() {
            0 => {}
            1 => return FlagCheck::Known(hits.into_iter().next().unwrap_or_default()),
            _ => return FlagCheck::Ambiguous(hits),
        }
    }
    FlagCheck::Unknown(closest(set, &flag))
}

/// The known option nearest by edit distance, when near enough to be the one meant.
fn closest(set: &BTreeSet<&'static str>, flag: &str) -> Option<String> {
    let f = flag.replace('_', "-");
    let (d, best) = set
        .iter()
        .map(|k| (distance(&f, k), *k))
        .min_by_key(|(d, k)| (*d, k.len()))?;
    (d <= (f.len() / 4).max(2)).then(|| best.to_string())
}

/// Levenshtein distance, with a swap of two neighbours counting one (the usual typo); two rows
/// kept at a time.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let at = |row: &[usize], k: usize| row.get(k).copied().unwrap_or(usize::MAX / 2);
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let mut v = (at(&prev, j + 1) + 1)
                .min(at(&cur, j) + 1)
                .min(at(&prev, j) + usize::from(ca != cb));
            if i > 0 && j > 0 && a.get(i - 1) == Some(cb) && b.get(j - 1) == Some(ca) {
                v = v.min(at(&before, j - 1) + 1);
            }
            cur.push(v);
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance() {
        assert_eq!(distance("--max-modle-len", "--max-model-len"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
