//! `/proc/<pid>/limits`.
//!
//! The kernel prints a fixed-width table (`%-25s %-20s %-20s %-10s`) whose limit names
//! contain single spaces, so the name ends at the first run of two or more spaces (or a
//! tab); the rest is split on whitespace, because a 20-digit value leaves only one space
//! before the next column. Values must be `unlimited` or an integer; units may be empty.

use crate::error::ParseError;
use crate::lex::{END_OF_LINE, Tok, end_col, tokens, unsigned};

/// A soft or hard limit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitValue {
    /// `unlimited` (RLIM_INFINITY).
    Unlimited,
    /// A finite value in the row's unit.
    Value(u64),
}

/// One row of the limits table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limit {
    /// The limit name, e.g. `Max locked memory`.
    pub name: String,
    /// The soft limit.
    pub soft: LimitValue,
    /// The hard limit.
    pub hard: LimitValue,
    /// The unit, e.g. `bytes`; `None` when the column is empty (`Max nice priority`).
    pub unit: Option<String>,
}

/// Finds a limit by name (ASCII case-insensitive), e.g. `find(&l, "Max locked memory")`.
pub fn find<'a>(limits: &'a [Limit], name: &str) -> Option<&'a Limit> {
    limits.iter().find(|l| l.name.eq_ignore_ascii_case(name))
}

/// Parses `/proc/<pid>/limits`. The header row (first word `Limit`) and blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<Limit>, ParseError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let all = tokens(line, 0);
        let Some(first) = all.first() else { continue };
        if first.text == "Limit" {
            continue;
        }
        let (name, values) = split_name(line, &all);
        let soft_tok = values.first();
        let hard_tok = values.get(1);
        let soft = value(
            soft_tok,
            line,
            line_no,
            "soft limit ('unlimited' or a number)",
        )?;
        let hard = value(
            hard_tok,
            line,
            line_no,
            "hard limit ('unlimited' or a number)",
        )?;
        let unit = values.get(2).map(|t| t.text.to_owned());
        if let Some(extra) = values.get(3) {
            return Err(ParseError::new(
                line_no,
                extra.col,
                "end of line",
                extra.text,
            ));
        }
        out.push(Limit {
            name,
            soft,
            hard,
            unit,
        });
    }
    Ok(out)
}

/// Splits a row into the (possibly multi-word) name and the value tokens after it.
fn split_name<'a>(line: &'a str, all: &[Tok<'a>]) -> (String, Vec<Tok<'a>>) {
    // Preferred: the name ends at the first gap of 2+ whitespace chars or a tab.
    let mut prev_ws = false;
    let mut gap_start = None;
    let mut started = false;
    for (i, c) in line.char_indices() {
        if !c.is_whitespace() {
            started = true;
            prev_ws = false;
            continue;
        }
        if started && (c == '\t' || prev_ws) {
            gap_start = Some(i);
            break;
        }
        prev_ws = true;
    }
    if let Some(gap) = gap_start {
        let name = line.get(..gap).unwrap_or("").trim().to_owned();
        let values = all.iter().copied().filter(|t| t.byte > gap).collect();
        return (name, values);
    }
    // Fallback for single-spaced text: the name ends before the first value-like word.
    let split = all
        .iter()
        .position(|t| t.text == "unlimited" || t.text.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(all.len());
    let (name, values) = all.split_at(split);
    let name = name.iter().map(|t| t.text).collect::<Vec<_>>().join(" ");
    (name, values.to_vec())
}

fn value(
    tok: Option<&Tok<'_>>,
    line: &str,
    line_no: usize,
    expected: &str,
) -> Result<LimitValue, ParseError> {
    match tok {
        None => Err(ParseError::new(
            line_no,
            end_col(line, 0),
            expected,
            END_OF_LINE,
        )),
        Some(t) if t.text == "unlimited" => Ok(LimitValue::Unlimited),
        Some(t) => unsigned(t.text, line_no, t.col, expected).map(LimitValue::Value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/proc/self/limits` from this machine (trailing spaces as the kernel prints them).
    const SELF_LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             96362                96362                processes 
Max open files            20000                20000                files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96362                96362                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
";

    /// Models a container (docker default `--ulimit memlock=-1` style, huge nofile) where
    /// a 20-digit value fills its column and leaves a single space; no trailing newline.
    const CONTAINER_LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units     
Max locked memory         18446744073709551614 18446744073709551614 bytes     
Max open files            1048576              1048576              files     
Max nice priority         0                    0";

    #[test]
    fn real_self_limits() {
        let l = parse(SELF_LIMITS).unwrap();
        assert_eq!(l.len(), 16);
        let mem = find(&l, "Max locked memory").unwrap();
        assert_eq!(mem.soft, LimitValue::Value(8388608));
        assert_eq!(mem.hard, LimitValue::Value(8388608));
        assert_eq!(mem.unit.as_deref(), Some("bytes"));
        let stack = find(&l, "max stack size").unwrap();
        assert_eq!(
            (stack.soft, stack.hard),
            (LimitValue::Value(8388608), LimitValue::Unlimited)
        );
        let nice = find(&l, "Max nice priority").unwrap();
        assert_eq!(nice.unit, None);
        assert_eq!(
            find(&l, "Max realtime timeout").unwrap().unit.as_deref(),
            Some("us")
        );
        assert!(find(&l, "Max nothing").is_none());
    }

    #[test]
    fn container_limits_full_width_values() {
        let l = parse(CONTAINER_LIMITS).unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].soft, LimitValue::Value(18446744073709551614));
        assert_eq!(l[0].unit.as_deref(), Some("bytes"));
        assert_eq!(
            find(&l, "Max open files").unwrap().hard,
            LimitValue::Value(1048576)
        );
    }

    #[test]
    fn single_spaced_fallback() {
        let l = parse("Max open files 1024 4096 files").unwrap();
        assert_eq!(l[0].name, "Max open files");
        assert_eq!(l[0].soft, LimitValue::Value(1024));
    }

    #[test]
    fn truncated_row() {
        let e = parse("Max open files            20000\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 32: expected hard limit ('unlimited' or a number), found end of line"
        );
        let e = parse("Limit  Soft Limit\nMax cpu time").unwrap_err();
        assert_eq!((e.line, e.column), (2, 13));
        assert!(e.expected.starts_with("soft limit"));
    }

    #[test]
    fn non_numeric_and_extra() {
        let e = parse("Max open files            20k                  20000                files")
            .unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (1, 29, "20k"));
        let e = parse("Max open files            1  2  files  more").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (40, "more"));
        assert!(parse("Max open files            -1  2  files").is_err());
    }
}
