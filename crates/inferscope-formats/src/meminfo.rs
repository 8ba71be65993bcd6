//! `/proc/meminfo` and `/sys/devices/system/node/nodeN/meminfo`.
//!
//! Both files share one grammar (`Key: amount [kB]`); the per-node file only adds a
//! `Node N ` prefix, which is stripped so callers look up the same keys in either.
//! Unknown keys are kept verbatim; a non-numeric amount or an unknown unit is an error.

use std::collections::BTreeMap;

use crate::error::ParseError;
use crate::lex::{END_OF_LINE, Tok, chars_before, end_col, tokens, unsigned};

/// The unit printed after a meminfo amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeminfoUnit {
    /// `kB` in the file, which the kernel means as KiB (1024 bytes).
    KiB,
    /// No unit: a plain count, e.g. `HugePages_Total`.
    Count,
}

/// One meminfo amount with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeminfoValue {
    /// The number as printed.
    pub amount: u64,
    /// The unit printed after it.
    pub unit: MeminfoUnit,
}

/// A parsed meminfo file: every key (without the `Node N ` prefix) and its value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meminfo {
    /// Entries by key, e.g. `MemTotal`, `HugePages_Total`. A repeated key keeps the last value.
    pub entries: BTreeMap<String, MeminfoValue>,
}

impl Meminfo {
    /// The value of a `kB` entry in bytes; `None` if absent, a count, or overflowing `u64`.
    pub fn bytes(&self, key: &str) -> Option<u64> {
        match self.entries.get(key)? {
            MeminfoValue {
                amount,
                unit: MeminfoUnit::KiB,
            } => amount.checked_mul(1024),
            _ => None,
        }
    }

    /// The value of a unit-less entry (e.g. `HugePages_Total`); `None` if absent or in kB.
    pub fn count(&self, key: &str) -> Option<u64> {
        match self.entries.get(key)? {
            MeminfoValue {
                amount,
                unit: MeminfoUnit::Count,
            } => Some(*amount),
            _ => None,
        }
    }
}

/// Parses `/proc/meminfo` or a per-node `meminfo` file.
///
/// Blank lines are skipped; extra whitespace and a missing trailing newline are fine.
pub fn parse(text: &str) -> Result<Meminfo, ParseError> {
    let mut entries = BTreeMap::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let toks = tokens(line, 0);
        let Some(first) = toks.first() else { continue };
        // Per-node files: `Node <digits> Key: value kB`.
        let body_start = match toks.as_slice() {
            [node, id, key, ..]
                if node.text == "Node"
                    && !id.text.is_empty()
                    && id.text.bytes().all(|b| b.is_ascii_digit()) =>
            {
                *key
            }
            _ => *first,
        };
        let (key, value) = parse_entry(line, line_no, body_start)?;
        entries.insert(key, value);
    }
    Ok(Meminfo { entries })
}

fn parse_entry(
    line: &str,
    line_no: usize,
    start: Tok<'_>,
) -> Result<(String, MeminfoValue), ParseError> {
    let body = line.get(start.byte..).unwrap_or("");
    let Some(colon) = body.find(':') else {
        return Err(ParseError::new(
            line_no,
            start.col,
            "':' after the key",
            body.trim_end(),
        ));
    };
    let raw_key = body.get(..colon).unwrap_or("");
    let key = raw_key.trim_end();
    if key.is_empty() {
        return Err(ParseError::new(line_no, start.col, "a key before ':'", ":"));
    }
    if let Some(bad) = tokens(key, start.col - 1).get(1) {
        return Err(ParseError::new(
            line_no,
            bad.col,
            "':' after a key without spaces",
            bad.text,
        ));
    }
    let rest = body.get(colon + 1..).unwrap_or("");
    let rest_offset = start.col - 1 + chars_before(body, colon) + 1;
    let vals = tokens(rest, rest_offset);
    let Some(amount_tok) = vals.first() else {
        return Err(ParseError::new(
            line_no,
            end_col(line, 0),
            "a number",
            END_OF_LINE,
        ));
    };
    let amount: u64 = unsigned(amount_tok.text, line_no, amount_tok.col, "a number")?;
    let unit = match vals.get(1) {
        None => MeminfoUnit::Count,
        Some(u) if u.text.eq_ignore_ascii_case("kB") => MeminfoUnit::KiB,
        Some(u) => {
            return Err(ParseError::new(
                line_no,
                u.col,
                "unit kB or end of line",
                u.text,
            ));
        }
    };
    if let Some(extra) = vals.get(2) {
        return Err(ParseError::new(
            line_no,
            extra.col,
            "end of line",
            extra.text,
        ));
    }
    Ok((key.to_owned(), MeminfoValue { amount, unit }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/proc/meminfo` from an x86_64 Firecracker VM (kernel 6.x), trimmed.
    const PROC_MEMINFO: &str = "\
MemTotal:       24683568 kB
MemFree:        24224696 kB
MemAvailable:   24388280 kB
Buffers:            6720 kB
Cached:           359528 kB
Active(anon):       1520 kB
Inactive(file):   291776 kB
Mlocked:           10612 kB
SwapTotal:             0 kB
Shmem:              9508 kB
Committed_AS:      58312 kB
VmallocTotal:   34359738367 kB
Percpu:              744 kB
AnonHugePages:         0 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:               0 kB
DirectMap4k:       30720 kB
DirectMap2M:     2066432 kB
DirectMap1G:    25165824 kB
";

    /// Real `/sys/devices/system/node/node0/meminfo` from the same VM, trimmed.
    const NODE0_MEMINFO: &str = "\
Node 0 MemTotal:        3892968 kB
Node 0 MemFree:         3433944 kB
Node 0 MemUsed:          459024 kB
Node 0 Active(anon):       1520 kB
Node 0 FilePages:        366248 kB
Node 0 FileHugePages:      4096 kB
Node 0 HugePages_Total:     0
Node 0 HugePages_Free:      0
Node 0 HugePages_Surp:      0
";

    /// Models a two-socket host's node 1 with 1 GiB huge pages reserved and no trailing
    /// newline (the shape of a file read with a truncated buffer or hand-written fixture).
    const NODE1_MEMINFO_NO_NEWLINE: &str = "Node 1 MemTotal:       263842212 kB\nNode 1 HugePages_Total:    64\nNode 1 HugePages_Free:     64";

    #[test]
    fn proc_meminfo() {
        let m = parse(PROC_MEMINFO).unwrap();
        assert_eq!(m.entries.len(), 23);
        assert_eq!(m.bytes("MemTotal"), Some(24683568 * 1024));
        assert_eq!(m.bytes("Hugepagesize"), Some(2 * 1024 * 1024));
        assert_eq!(m.bytes("VmallocTotal"), Some(34359738367 * 1024));
        assert_eq!(m.bytes("Active(anon)"), Some(1520 * 1024));
        assert_eq!(m.count("HugePages_Total"), Some(0));
        assert_eq!(m.count("MemTotal"), None);
        assert_eq!(m.bytes("HugePages_Total"), None);
        assert_eq!(m.bytes("NoSuchKey"), None);
    }

    #[test]
    fn node_meminfo_strips_prefix() {
        let m = parse(NODE0_MEMINFO).unwrap();
        assert_eq!(m.bytes("MemTotal"), Some(3892968 * 1024));
        assert_eq!(m.bytes("MemUsed"), Some(459024 * 1024));
        assert_eq!(m.count("HugePages_Free"), Some(0));
        assert!(m.entries.keys().all(|k| !k.starts_with("Node")));

        let m = parse(NODE1_MEMINFO_NO_NEWLINE).unwrap();
        assert_eq!(m.bytes("MemTotal"), Some(263842212 * 1024));
        assert_eq!(m.count("HugePages_Free"), Some(64));
    }

    #[test]
    fn lenient_whitespace_and_blank_lines() {
        let m = parse("\n  MemTotal:16 kB  \r\n\nMemFree:\t8\tkB").unwrap();
        assert_eq!(m.bytes("MemTotal"), Some(16 * 1024));
        assert_eq!(m.bytes("MemFree"), Some(8 * 1024));
        assert_eq!(parse("").unwrap(), Meminfo::default());
    }

    #[test]
    fn bytes_overflow_is_none() {
        let m = parse(&format!("Huge: {} kB", u64::MAX)).unwrap();
        assert_eq!(m.bytes("Huge"), None);
    }

    #[test]
    fn non_numeric_amount() {
        let e = parse("MemTotal:       16384 kB\nMemFree:        12x4 kB\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 19: expected a number, found 12x4"
        );
    }

    #[test]
    fn bad_unit_extra_token_and_missing_parts() {
        let e = parse("MemTotal: 16 MB").unwrap_err();
        assert_eq!((e.line, e.column), (1, 14));
        assert_eq!(e.expected, "unit kB or end of line");
        let e = parse("MemTotal: 16 kB extra").unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (1, 17, "extra"));
        let e = parse("MemTotal:").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 10: expected a number, found end of line"
        );
        let e = parse("Node 0 MemTotal 5 kB").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8));
        let e = parse("Mem Total: 5 kB").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (5, "Total"));
        let e = parse("Node 0 : 5").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 8: expected a key before ':', found :"
        );
    }

    #[test]
    fn overflowing_amount() {
        let e = parse("MemTotal: 99999999999999999999 kB").unwrap_err();
        assert_eq!(e.column, 11);
        assert_eq!(e.expected, "a number that fits in u64");
    }
}
