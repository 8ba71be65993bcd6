//! Human text output never carries raw control characters (issue 33): a kernel string, a model
//! id from `/v1/models` or a process name can hold `\x1b[2J…`, which a terminal would obey.
//! [`Escape`] wraps the writer every command prints to and rewrites each control character
//! other than newline and tab as `\u00XX` ([`inferscope_host::quote::escape_controls`]). JSON
//! output passes through unchanged: serde already escapes C0 characters, and `\u00XX` is the
//! JSON escape of DEL and C1 characters too, so the document still means the same.

use std::io::{self, Write};

/// A writer that escapes control characters on their way to `inner`.
pub struct Escape<W: Write> {
    inner: W,
    /// The start of a UTF-8 character cut by the end of the last `write` (at most 3 bytes).
    pending: Vec<u8>,
}

impl<W: Write> Escape<W> {
    /// Wrap `inner`.
    pub fn new(inner: W) -> Self {
        Escape {
            inner,
            pending: Vec::new(),
        }
    }

    /// Write any cut character as it is, flush, and return the inner writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        let rest = std::mem::take(&mut self.pending);
        self.inner.write_all(&rest)?;
        self.inner.flush()?;
        let Escape { inner, .. } = self;
        Ok(inner)
    }

    fn put(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        loop {
            match std::str::from_utf8(bytes) {
                Ok(s) => return self.put_str(s),
                Err(e) => {
                    let (good, rest) = bytes.split_at(e.valid_up_to());
                    // cannot fail: `valid_up_to` bytes are valid UTF-8.
                    self.put_str(std::str::from_utf8(good).unwrap_or_default())?;
                    match e.error_len() {
                        // A character cut at the end of this write: keep it for the next.
                        None => {
                            self.pending.extend_from_slice(rest);
                            return Ok(());
                        }
                        // Not UTF-8 (raw bytes): passed through, they are not text.
                        Some(n) => {
                            let (bad, after) = rest.split_at(n);
                            self.inner.write_all(bad)?;
                            bytes = after;
                        }
                    }
                }
            }
        }
    }

    fn put_str(&mut self, s: &str) -> io::Result<()> {
        self.inner
            .write_all(inferscope_host::quote::escape_controls(s).as_bytes())
    }
}

impl<W: Write> Write for Escape<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            self.put(buf)?;
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(buf);
            self.put(&joined)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// One line on stderr with control characters escaped (the crate's `eprintln!`); a closed or
/// failing stderr is ignored, as a note is never worth a panic.
pub fn stderr_line(line: &str) {
    let text = inferscope_host::quote::escape_controls(line);
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(chunks: &[&[u8]]) -> String {
        let mut e = Escape::new(Vec::new());
        for c in chunks {
            e.write_all(c).unwrap();
        }
        String::from_utf8(e.into_inner().unwrap()).unwrap()
    }

    #[test]
    fn controls_become_visible_and_text_stays() {
        assert_eq!(
            through(&[b"kernel 6.8\x1b[2J\n", b"\ttab\r"]),
            "kernel 6.8\\u001b[2J\n\ttab\\u000d"
        );
    }

    #[test]
    fn a_c1_character_cut_between_writes_is_still_escaped() {
        // U+009B (CSI) is C2 9B in UTF-8; `é` is C3 A9.
        assert_eq!(
            through(&[b"a\xc2", b"\x9b31m \xc3", b"\xa9"]),
            "a\\u009b31m é"
        );
    }

    #[test]
    fn json_stays_the_same_document() {
        let v = serde_json::json!({"model": "m\u{1b}[2J\u{9b}\u{7f}"});
        let text = through(&[serde_json::to_string(&v).unwrap().as_bytes()]);
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }
}
