//! Single-value sysfs files (`numa_node`, `vendor`, `class`, `current_link_speed`, …).
//!
//! sysfs prints one value and a newline, so every parser trims surrounding whitespace
//! and then insists on the whole value: errors are on line 1 at the column of the first
//! bad character, which pinpoints truncated or corrupted files.

use crate::error::ParseError;
use crate::lex::{END_OF_INPUT, hex, tokens, unsigned};

/// A PCIe link speed from `current_link_speed` / `max_link_speed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkSpeed {
    /// A rate in tenths of GT/s (`16.0 GT/s` is 160, `2.5 GT/s` is 25).
    GigaTransfers {
        /// Transfer rate in units of 0.1 GT/s.
        tenths: u32,
    },
    /// `Unknown` or `Unknown speed` (no link trained, or a virtual function).
    Unknown,
}

impl LinkSpeed {
    /// The PCIe generation for a standard rate (2.5 GT/s is 1 … 128 GT/s is 7).
    pub fn generation(&self) -> Option<u8> {
        match self {
            LinkSpeed::GigaTransfers { tenths } => {
                inferscope_host::snapshot::generation_of_tenths(*tenths)
            }
            LinkSpeed::Unknown => None,
        }
    }
}

/// Trims the value and returns it with its 1-based starting column.
fn value<'a>(text: &'a str, expected: &str) -> Result<(&'a str, usize), ParseError> {
    let lead = text.chars().take_while(|c| c.is_whitespace()).count();
    let v = text.trim();
    if v.is_empty() {
        return Err(ParseError::new(1, lead + 1, expected, END_OF_INPUT));
    }
    Ok((v, lead + 1))
}

/// Parses an unsigned decimal, e.g. `/sys/class/net/eth0/speed` style values.
pub fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let (v, col) = value(text, "an unsigned number")?;
    unsigned(v, 1, col, "an unsigned number")
}

/// Parses an unsigned decimal that must fit in `u32`.
pub fn parse_u32(text: &str) -> Result<u32, ParseError> {
    let (v, col) = value(text, "an unsigned number")?;
    unsigned(v, 1, col, "an unsigned number")
}

/// Parses a signed decimal, e.g. `numa_node` which is `-1` when the device has no node.
pub fn parse_i64(text: &str) -> Result<i64, ParseError> {
    const EXPECTED: &str = "a number";
    let (v, col) = value(text, EXPECTED)?;
    let (negative, digits, dcol) = match v.strip_prefix('-') {
        Some(rest) => (true, rest, col + 1),
        None => (false, v, col),
    };
    let magnitude = match unsigned::<u64>(digits, 1, dcol, EXPECTED) {
        Ok(m) => Some(m),
        Err(e) if e.expected == EXPECTED => {
            return Err(ParseError {
                found: v.to_owned(),
                ..e
            });
        }
        Err(_) => None, // overflowed u64: reported below as out of i64 range
    };
    let out = magnitude.and_then(|m| {
        if negative {
            0i64.checked_sub_unsigned(m)
        } else {
            i64::try_from(m).ok()
        }
    });
    out.ok_or_else(|| ParseError::new(1, col, "a number that fits in i64", v))
}

/// Parses a hex `u16` such as a PCI vendor or device ID (`0x10de`); the `0x` is optional.
pub fn parse_hex_u16(text: &str) -> Result<u16, ParseError> {
    let (v, col) = value(text, "a hex number like 0x10de")?;
    hex(v, 1, col, "a hex number like 0x10de")
}

/// Parses a hex `u32` such as a PCI class (`0x030200`); the `0x` is optional.
pub fn parse_hex_u32(text: &str) -> Result<u32, ParseError> {
    let (v, col) = value(text, "a hex number like 0x030200")?;
    hex(v, 1, col, "a hex number like 0x030200")
}

/// Parses a PCIe link speed: `16.0 GT/s PCIe`, `8.0 GT/s`, `8 GT/s`, `Unknown`, `Unknown speed`.
pub fn parse_link_speed(text: &str) -> Result<LinkSpeed, ParseError> {
    const EXPECTED: &str = "a link speed like 16.0 GT/s PCIe";
    let (v, col) = value(text, EXPECTED)?;
    if v.eq_ignore_ascii_case("unknown") || v.eq_ignore_ascii_case("unknown speed") {
        return Ok(LinkSpeed::Unknown);
    }
    let toks = tokens(v, col - 1);
    let Some(num) = toks.first() else {
        return Err(ParseError::new(1, col, EXPECTED, END_OF_INPUT));
    };
    let (int_part, frac) = match num.text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (num.text, None),
    };
    let whole: u32 = unsigned(int_part, 1, num.col, EXPECTED).map_err(|e| ParseError {
        found: num.text.to_owned(),
        expected: EXPECTED.to_owned(),
        ..e
    })?;
    let tenth = match frac {
        None => 0,
        Some(f) => {
            let fcol = num.col + int_part.chars().count() + 1;
            let mut chars = f.chars();
            match (chars.next().and_then(|c| c.to_digit(10)), chars.next()) {
                (Some(d), None) => d,
                (None, _) => return Err(ParseError::new(1, fcol, EXPECTED, num.text)),
                (Some(_), Some(_)) => return Err(ParseError::new(1, fcol + 1, EXPECTED, num.text)),
            }
        }
    };
    let tenths = whole
        .checked_mul(10)
        .and_then(|w| w.checked_add(tenth))
        .ok_or_else(|| ParseError::new(1, num.col, EXPECTED, num.text))?;
    match toks.get(1) {
        Some(t) if t.text == "GT/s" => {}
        Some(t) => return Err(ParseError::new(1, t.col, "GT/s", t.text)),
        None => {
            let end = num.col + num.text.chars().count();
            return Err(ParseError::new(1, end, "GT/s", END_OF_INPUT));
        }
    }
    match toks.get(2) {
        None => {}
        Some(t) if t.text == "PCIe" => {}
        Some(t) => return Err(ParseError::new(1, t.col, "PCIe or end of input", t.text)),
    }
    if let Some(t) = toks.get(3) {
        return Err(ParseError::new(1, t.col, "end of input", t.text));
    }
    Ok(LinkSpeed::GigaTransfers { tenths })
}

/// Parses a NUMA `distance` row (`10 21` gives `[10, 21]`); at least one value is required.
pub fn parse_distances(text: &str) -> Result<Vec<u32>, ParseError> {
    const EXPECTED: &str = "a NUMA distance number";
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        for t in tokens(line, 0) {
            out.push(unsigned(t.text, idx + 1, t.col, EXPECTED)?);
        }
    }
    if out.is_empty() {
        let (_, col) = value(text, EXPECTED)?;
        return Err(ParseError::new(1, col, EXPECTED, END_OF_INPUT));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64("24683568\n"), Ok(24683568));
        assert_eq!(parse_u32(" 42 \n"), Ok(42));
        // `numa_node` of a device on a single-node VM, and of a device on node 1.
        assert_eq!(parse_i64("-1\n"), Ok(-1));
        assert_eq!(parse_i64("1\n"), Ok(1));
        assert_eq!(parse_i64("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_i64("9223372036854775807"), Ok(i64::MAX));
    }

    #[test]
    fn integer_errors() {
        assert_eq!(
            parse_u64("12a4\n").unwrap_err().to_string(),
            "line 1, column 3: expected an unsigned number, found 12a4"
        );
        assert_eq!(parse_u64("\n").unwrap_err().found, "end of input");
        assert_eq!(
            parse_u32("4294967296").unwrap_err().expected,
            "a number that fits in u32"
        );
        assert_eq!(parse_u64("-1").unwrap_err().column, 1);
        let e = parse_i64("-x").unwrap_err();
        assert_eq!(
            (e.column, e.found.as_str(), e.expected.as_str()),
            (2, "-x", "a number")
        );
        let e = parse_i64("-").unwrap_err();
        assert_eq!(e.column, 2);
        let e = parse_i64("9223372036854775808").unwrap_err();
        assert_eq!(
            (e.column, e.expected.as_str()),
            (1, "a number that fits in i64")
        );
        let e = parse_i64("-9223372036854775809").unwrap_err();
        assert_eq!(e.expected, "a number that fits in i64");
        let e = parse_i64("99999999999999999999999").unwrap_err();
        assert_eq!(e.expected, "a number that fits in i64");
        assert_eq!(parse_i64("1 2").unwrap_err().column, 2);
    }

    #[test]
    fn hex_ids() {
        // Real PCI `vendor`, `device` and `class` values (NVIDIA H100 SXM, 3D controller).
        assert_eq!(parse_hex_u16("0x10de\n"), Ok(0x10de));
        assert_eq!(parse_hex_u16("0x2330\n"), Ok(0x2330));
        assert_eq!(parse_hex_u32("0x030200\n"), Ok(0x030200));
        let e = parse_hex_u16("0x10zz\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 5: expected a hex number like 0x10de, found 0x10zz"
        );
        assert!(parse_hex_u16("0x123456").is_err());
        assert_eq!(parse_hex_u32("0x").unwrap_err().column, 3);
    }

    #[test]
    fn link_speeds() {
        let t = |s: &str| parse_link_speed(s).map(|l| (l, l.generation()));
        let gt = |tenths| LinkSpeed::GigaTransfers { tenths };
        assert_eq!(t("2.5 GT/s PCIe\n"), Ok((gt(25), Some(1))));
        assert_eq!(t("5.0 GT/s\n"), Ok((gt(50), Some(2))));
        assert_eq!(t("8.0 GT/s\n"), Ok((gt(80), Some(3))));
        assert_eq!(t("8 GT/s\n"), Ok((gt(80), Some(3))));
        assert_eq!(t("16.0 GT/s PCIe\n"), Ok((gt(160), Some(4))));
        assert_eq!(t("32.0 GT/s PCIe\n"), Ok((gt(320), Some(5))));
        assert_eq!(t("64.0 GT/s PCIe\n"), Ok((gt(640), Some(6))));
        assert_eq!(t("Unknown\n"), Ok((LinkSpeed::Unknown, None)));
        assert_eq!(t("Unknown speed\n"), Ok((LinkSpeed::Unknown, None)));
        assert_eq!(t("2.7 GT/s"), Ok((gt(27), None)));
    }

    #[test]
    fn link_speed_errors() {
        let e = parse_link_speed("fast\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 1: expected a link speed like 16.0 GT/s PCIe, found fast"
        );
        assert_eq!(parse_link_speed("16.0 Gb/s").unwrap_err().column, 6);
        assert_eq!(parse_link_speed("16.0").unwrap_err().column, 5);
        assert_eq!(parse_link_speed("16. GT/s").unwrap_err().column, 4);
        assert_eq!(parse_link_speed("16.05 GT/s").unwrap_err().column, 5);
        assert_eq!(parse_link_speed("16.0 GT/s PCI").unwrap_err().column, 11);
        assert_eq!(parse_link_speed("16.0 GT/s PCIe x").unwrap_err().column, 16);
        assert!(parse_link_speed("999999999 GT/s").is_err());
        assert!(parse_link_speed("").is_err());
    }

    #[test]
    fn distances() {
        // Real node0 `distance` from this single-node VM, and a two-socket host's row.
        assert_eq!(parse_distances("10\n"), Ok(vec![10]));
        assert_eq!(parse_distances("10 21\n"), Ok(vec![10, 21]));
        // Models a 4-node AMD EPYC NPS4 layout with the same-socket 12 and cross-socket 32.
        assert_eq!(
            parse_distances("10 12 12 12 32 32 32 32"),
            Ok(vec![10, 12, 12, 12, 32, 32, 32, 32])
        );
        let e = parse_distances("10 2l\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 5: expected a NUMA distance number, found 2l"
        );
        assert_eq!(parse_distances("\n").unwrap_err().found, "end of input");
    }
}
