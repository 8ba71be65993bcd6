//! The crate's single error type.
//!
//! Every parser reports the 1-based line and column of the offending text, what it
//! expected there, and what it found, so a probe can prefix the file name and show a
//! precise diagnostic without keeping the input around.

/// Longest `found` text kept verbatim; longer text is cut and ends with "…".
pub const MAX_FOUND_CHARS: usize = 60;

/// A parse failure at a precise position of the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: expected {expected}, found {found}")]
pub struct ParseError {
    /// 1-based line number of the offending text.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// What the parser expected at this position.
    pub expected: String,
    /// The offending text, truncated to [`MAX_FOUND_CHARS`] characters plus "…".
    pub found: String,
}

impl ParseError {
    /// Builds an error, truncating `found` to [`MAX_FOUND_CHARS`] characters.
    pub fn new(line: usize, column: usize, expected: impl Into<String>, found: &str) -> Self {
        let found = if found.chars().count() > MAX_FOUND_CHARS {
            let mut cut: String = found.chars().take(MAX_FOUND_CHARS).collect();
            cut.push('…');
            cut
        } else {
            found.to_owned()
        };
        ParseError {
            line,
            column,
            expected: expected.into(),
            found,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_format() {
        let e = ParseError::new(3, 17, "a number", "abc");
        assert_eq!(
            e.to_string(),
            "line 3, column 17: expected a number, found abc"
        );
    }

    #[test]
    fn found_is_truncated_to_60_chars() {
        let long = "x".repeat(100);
        let e = ParseError::new(1, 1, "a number", &long);
        assert_eq!(e.found.chars().count(), 61);
        assert!(e.found.ends_with('…'));
        let exact = "y".repeat(60);
        assert_eq!(ParseError::new(1, 1, "a number", &exact).found, exact);
    }
}
