//! Transparent huge page selector files (`/sys/kernel/mm/transparent_hugepage/*`).
//!
//! These files list every choice and bracket the active one (`always [madvise] never`);
//! only the bracketed word matters, so that is all we return. Exactly one bracketed word
//! is required: none, an empty `[]`, an unclosed `[`, or a second selection is an error.

use crate::error::ParseError;
use crate::lex::{END_OF_INPUT, tokens};

/// What a THP selector error expects.
const EXPECTED: &str = "exactly one bracketed selection like [madvise]";

/// Returns the bracketed (selected) word, e.g. `madvise` from `always [madvise] never`.
///
/// Works for `enabled`, `defrag` (`always defer defer+madvise [madvise] never`) and
/// `shmem_enabled`.
pub fn parse_selected(text: &str) -> Result<String, ParseError> {
    let mut selected: Option<String> = None;
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        for tok in tokens(line, 0) {
            let opens = tok.text.starts_with('[');
            let closes = tok.text.ends_with(']');
            if !opens && !closes && !tok.text.contains(['[', ']']) {
                continue;
            }
            let inner = tok
                .text
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .filter(|w| !w.is_empty() && !w.contains(['[', ']']));
            match (inner, &selected) {
                (Some(word), None) => selected = Some(word.to_owned()),
                _ => return Err(ParseError::new(line_no, tok.col, EXPECTED, tok.text)),
            }
        }
    }
    selected.ok_or_else(|| {
        let trimmed = text.trim();
        let found = if trimmed.is_empty() {
            END_OF_INPUT
        } else {
            trimmed
        };
        let column = text.lines().next().map_or(1, |l| {
            l.chars().take_while(|c| c.is_whitespace()).count() + 1
        });
        ParseError::new(1, column, EXPECTED, found)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/sys/kernel/mm/transparent_hugepage/enabled` from this machine.
    const ENABLED: &str = "always [madvise] never\n";
    /// Real `/sys/kernel/mm/transparent_hugepage/defrag` from this machine.
    const DEFRAG: &str = "always defer defer+madvise [madvise] never\n";
    /// Models `shmem_enabled` on a 6.x kernel with THP for tmpfs off (more choices).
    const SHMEM_ENABLED: &str = "always within_size advise [never] deny force\n";
    /// Models RHEL/Ubuntu defaults where THP is always on, without trailing newline.
    const ENABLED_ALWAYS: &str = "[always] madvise never";

    #[test]
    fn real_samples() {
        assert_eq!(parse_selected(ENABLED).unwrap(), "madvise");
        assert_eq!(parse_selected(DEFRAG).unwrap(), "madvise");
        assert_eq!(parse_selected(SHMEM_ENABLED).unwrap(), "never");
        assert_eq!(parse_selected(ENABLED_ALWAYS).unwrap(), "always");
        assert_eq!(
            parse_selected("always defer [defer+madvise] madvise never").unwrap(),
            "defer+madvise"
        );
    }

    #[test]
    fn no_selection() {
        let e = parse_selected("always madvise never\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 1: expected exactly one bracketed selection like [madvise], found always madvise never"
        );
        let e = parse_selected("  \n").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (3, "end of input"));
    }

    #[test]
    fn malformed_brackets() {
        let e = parse_selected("always [madvise never").unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (1, 8, "[madvise"));
        let e = parse_selected("always [] never").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (8, "[]"));
        let e = parse_selected("[always] [never]").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (10, "[never]"));
        let e = parse_selected("always madvise]").unwrap_err();
        assert_eq!(e.column, 8);
    }
}
