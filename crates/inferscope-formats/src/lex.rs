//! Crate-private lexing helpers shared by the parsers.
//!
//! Tokens carry their byte offset (for slicing) and 1-based character column (for
//! errors); numbers are parsed digit by digit with checked arithmetic so no input can
//! panic or overflow.

use crate::error::ParseError;

/// Text shown as `found` when a line ends before a required value.
pub(crate) const END_OF_LINE: &str = "end of line";
/// Text shown as `found` when the whole input is empty.
pub(crate) const END_OF_INPUT: &str = "end of input";

/// A whitespace-separated token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tok<'a> {
    /// Byte offset of the token in the string it was cut from.
    pub byte: usize,
    /// 1-based character column, including the caller's offset.
    pub col: usize,
    /// The token text.
    pub text: &'a str,
}

/// Splits `s` on whitespace; `col_offset` is the number of characters before `s` on its line.
pub(crate) fn tokens(s: &str, col_offset: usize) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut col = col_offset;
    for (i, c) in s.char_indices() {
        col += 1;
        if c.is_whitespace() {
            if let Some((b, cl)) = start.take() {
                out.push(Tok {
                    byte: b,
                    col: cl,
                    text: s.get(b..i).unwrap_or(""),
                });
            }
        } else if start.is_none() {
            start = Some((i, col));
        }
    }
    if let Some((b, cl)) = start {
        out.push(Tok {
            byte: b,
            col: cl,
            text: s.get(b..).unwrap_or(""),
        });
    }
    out
}

/// Number of characters in `s` before byte offset `byte` (clamped to the string).
pub(crate) fn chars_before(s: &str, byte: usize) -> usize {
    s.char_indices().take_while(|(i, _)| *i < byte).count()
}

/// Column just after the last non-whitespace character of `line` (for "end of line" errors).
pub(crate) fn end_col(line: &str, col_offset: usize) -> usize {
    col_offset + line.trim_end().chars().count() + 1
}

/// Digits of `digits` in `radix`, accumulated with overflow detection. A bad character is
/// reported at its own column (`first_col` is the column of `digits[0]`).
fn accumulate(
    digits: &str,
    radix: u32,
    line: usize,
    first_col: usize,
    expected: &str,
    tok: &str,
) -> Result<Option<u64>, ParseError> {
    let mut value: u64 = 0;
    let mut overflow = false;
    for (i, c) in digits.chars().enumerate() {
        let Some(d) = c.to_digit(radix) else {
            return Err(ParseError::new(line, first_col + i, expected, tok));
        };
        match value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    Ok((!overflow).then_some(value))
}

fn narrow<T: TryFrom<u64>>(
    value: Option<u64>,
    line: usize,
    col: usize,
    what: &str,
    tok: &str,
) -> Result<T, ParseError> {
    value.and_then(|v| T::try_from(v).ok()).ok_or_else(|| {
        ParseError::new(
            line,
            col,
            format!("{what} that fits in {}", std::any::type_name::<T>()),
            tok,
        )
    })
}

/// Parses an unsigned decimal token into any unsigned integer type.
///
/// Only ASCII digits are accepted (no sign, no separators). A bad character is reported
/// at its own column; an overflow at the token's first column. `found` is the whole token.
pub(crate) fn unsigned<T: TryFrom<u64>>(
    tok: &str,
    line: usize,
    col: usize,
    expected: &str,
) -> Result<T, ParseError> {
    if tok.is_empty() {
        return Err(ParseError::new(line, col, expected, END_OF_LINE));
    }
    let value = accumulate(tok, 10, line, col, expected, tok)?;
    narrow(value, line, col, "a number", tok)
}

/// Parses a hexadecimal token (optional `0x`/`0X` prefix) into an unsigned integer type.
pub(crate) fn hex<T: TryFrom<u64>>(
    tok: &str,
    line: usize,
    col: usize,
    expected: &str,
) -> Result<T, ParseError> {
    let (digits, skipped) = match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        Some(rest) => (rest, 2),
        None => (tok, 0),
    };
    if digits.is_empty() {
        let found = if tok.is_empty() { END_OF_LINE } else { tok };
        return Err(ParseError::new(line, col + skipped, expected, found));
    }
    let value = accumulate(digits, 16, line, col + skipped, expected, tok)?;
    narrow(value, line, col, "a hex number", tok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_columns() {
        let t = tokens("  ab  c\td ", 0);
        let cols: Vec<_> = t.iter().map(|t| (t.col, t.text)).collect();
        assert_eq!(cols, vec![(3, "ab"), (7, "c"), (9, "d")]);
        assert_eq!(tokens("é x", 4)[1].col, 7);
    }

    #[test]
    fn unsigned_reports_bad_char_and_overflow() {
        assert_eq!(unsigned::<u64>("123", 1, 1, "n"), Ok(123));
        let e = unsigned::<u64>("12a4", 2, 5, "a number").unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (2, 7, "12a4"));
        let e = unsigned::<u8>("256", 1, 1, "a number").unwrap_err();
        assert_eq!(e.expected, "a number that fits in u8");
        assert!(unsigned::<u64>("99999999999999999999999", 1, 1, "n").is_err());
        assert!(unsigned::<u64>("+1", 1, 1, "n").is_err());
    }

    #[test]
    fn hex_accepts_prefix_or_not() {
        assert_eq!(hex::<u16>("0x10de", 1, 1, "h"), Ok(0x10de));
        assert_eq!(hex::<u16>("10DE", 1, 1, "h"), Ok(0x10de));
        assert!(hex::<u16>("0x", 1, 1, "h").is_err());
        assert!(hex::<u16>("0x10000", 1, 1, "h").is_err());
    }
}
