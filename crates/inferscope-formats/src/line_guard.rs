//! A reader that stops on input no text log can be (issue 33): `mem startup - < /dev/zero`
//! once read NULs forever, because the parser bounds a line's memory but not its length and
//! only looks for NULs when a line ends. [`LineGuard`] fails the read at the first NUL byte or
//! when one line passes [`MAX_LINE`] bytes, and says which line.

use std::io::{self, Read};

/// Longest line accepted (the parser keeps the first 64 KiB of a line; a pasted blob of a few
/// MiB on one line is still a log, an endless line is not).
pub const MAX_LINE: u64 = 16 << 20;

/// Why the guard stopped the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trip {
    /// A NUL byte on this line (1-based).
    Nul(u64),
    /// This line passed [`MAX_LINE`] bytes without a newline.
    TooLong(u64),
}

impl std::fmt::Display for Trip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trip::Nul(l) => write!(f, "line {l}: binary data, not a start-up log"),
            Trip::TooLong(l) => write!(
                f,
                "line {l}: longer than {} MiB without a newline; not a start-up log",
                MAX_LINE >> 20
            ),
        }
    }
}

/// Wraps a reader; see the module docs.
pub struct LineGuard<R> {
    inner: R,
    line: u64,
    len: u64,
    trip: Option<Trip>,
}

impl<R: Read> LineGuard<R> {
    /// Guard `inner`.
    pub fn new(inner: R) -> Self {
        LineGuard {
            inner,
            line: 1,
            len: 0,
            trip: None,
        }
    }

    /// Why reading stopped, when the guard stopped it.
    pub fn trip(&self) -> Option<Trip> {
        self.trip
    }
}

impl<R: Read> Read for LineGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(t) = self.trip {
            return Err(io::Error::new(io::ErrorKind::InvalidData, t.to_string()));
        }
        let n = self.inner.read(buf)?;
        for b in buf.iter().take(n) {
            match b {
                0 => self.trip = Some(Trip::Nul(self.line)),
                b'\n' => {
                    self.line += 1;
                    self.len = 0;
                }
                _ => {
                    self.len += 1;
                    if self.len > MAX_LINE {
                        self.trip = Some(Trip::TooLong(self.line));
                    }
                }
            }
            if let Some(t) = self.trip {
                return Err(io::Error::new(io::ErrorKind::InvalidData, t.to_string()));
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(r: impl Read) -> (u64, Option<Trip>) {
        let mut g = LineGuard::new(r);
        let n = io::copy(&mut g, &mut io::sink()).unwrap_or(0);
        (n, g.trip())
    }

    #[test]
    fn zeros_stop_at_once_and_endless_lines_at_the_cap() {
        assert_eq!(drain(io::repeat(0)).1, Some(Trip::Nul(1)));
        assert_eq!(drain(&b"ok\nok\n\0"[..]).1, Some(Trip::Nul(3)));
        assert_eq!(drain(io::repeat(b'x')).1, Some(Trip::TooLong(1)));
        let long_but_fine = format!("{}\nnext\n", "x".repeat(1 << 20));
        assert_eq!(
            drain(long_but_fine.as_bytes()),
            (long_but_fine.len() as u64, None)
        );
    }
}
