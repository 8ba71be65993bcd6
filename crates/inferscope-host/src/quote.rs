//! Quoting outside input in messages (issue 33): an error line names the bad value, but a value
//! can be megabytes (a 60 MiB string in a snapshot, a 100 MB `refs/main`), and it can hold
//! terminal control sequences. [`clip`] bounds any quoted text; [`escape_controls`] makes it
//! inert. Every error that quotes input goes through [`clip`]; the binary applies both to every
//! error line and escapes its human text output.

use std::borrow::Cow;

/// Most bytes of one quoted value kept in a message: [`HEAD`] from the start, [`TAIL`] from
/// the end, the rest replaced by a count.
pub const MAX_QUOTE_BYTES: usize = 320;
/// Bytes kept from the start of a clipped value.
pub const HEAD: usize = 240;
/// Bytes kept from the end of a clipped value (where serde puts "at line L column C").
pub const TAIL: usize = 80;

/// `s` unchanged when it has at most [`MAX_QUOTE_BYTES`] bytes, else its first [`HEAD`] and
/// last [`TAIL`] bytes (cut at character boundaries) around `…[N bytes]…`. For a value quoted
/// in a message.
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, HEAD, TAIL)
}

/// Most bytes of a whole message line ([`clip_line`]).
pub const MAX_LINE_BYTES: usize = 4096;

/// A whole message bounded to about [`MAX_LINE_BYTES`]: the last guard where the binary prints
/// an error, for a message that quoted input without [`clip`].
pub fn clip_line(s: &str) -> Cow<'_, str> {
    clip_to(s, MAX_LINE_BYTES - 1024, 1024)
}

fn clip_to(s: &str, head: usize, tail: usize) -> Cow<'_, str> {
    if s.len() <= head + tail {
        return Cow::Borrowed(s);
    }
    let mut head = head;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut from = s.len() - tail;
    while !s.is_char_boundary(from) {
        from += 1;
    }
    let (start, rest) = s.split_at(head);
    let (cut, end) = rest.split_at(from - head);
    Cow::Owned(format!("{start}…[{} bytes]…{end}", cut.len()))
}

/// `s` with every control character other than newline and tab (C0, DEL and the C1 range
/// U+0080–U+009F, which terminals also obey) written as `\u00XX`, so text from the network or
/// a file cannot move the cursor, clear the screen or retitle the terminal. `\u00XX` is also a
/// valid JSON escape of the same character, so escaping serde's output changes nothing.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_escaped(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// True for the characters [`escape_controls`] rewrites.
pub fn is_escaped(c: char) -> bool {
    c != '\n' && c != '\t' && (c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_keeps_both_ends() {
        assert_eq!(clip("abc"), "abc");
        let long = format!(
            "unknown variant `{}` at line 1 column 9",
            "x".repeat(60 << 20)
        );
        let c = clip(&long);
        assert!(c.len() < 400, "{}", c.len());
        assert!(c.starts_with("unknown variant `xxx"));
        assert!(c.ends_with("` at line 1 column 9"));
        assert!(c.contains(&format!("[{} bytes]", long.len() - HEAD - TAIL)));
    }

    #[test]
    fn clip_cuts_at_character_boundaries() {
        let s = "é".repeat(1000);
        let c = clip(&s);
        assert!(c.len() < 400);
        assert!(c.starts_with('é') && c.ends_with('é'));
    }

    #[test]
    fn controls_are_escaped_but_lines_and_tabs_kept() {
        assert_eq!(escape_controls("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            escape_controls("k\x1b[2Jx\r\u{9b}31m\x7f"),
            "k\\u001b[2Jx\\u000d\\u009b31m\\u007f"
        );
        assert_eq!(escape_controls("GPU 0 — H100"), "GPU 0 — H100");
    }
}
