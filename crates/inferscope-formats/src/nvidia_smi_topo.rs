//! `nvidia-smi topo -m` (and `topo -mp`) text, as users paste it into issues and chats.
//!
//! # What arrives
//!
//! The real thing is a tab-separated table: a header line (`\tGPU0\tGPU1\tNIC0\t...\tCPU
//! Affinity\tNUMA Affinity\tGPU NUMA ID`), one row per device, then a `Legend:` and, on newer
//! drivers, a `NIC Legend:` (`NIC0: mlx5_0`). What users paste differs: tabs expanded to spaces
//! or compacted by hand, CRLF line ends, a prompt or heading before the table (`$ nvidia-smi
//! topo -m`, `GPU Topology:`), every line indented by the terminal, legend lines hard-wrapped,
//! old drivers that name NICs in the header (`mlx5_0`) and print `SOC` for `SYS`, columns that
//! are absent (`NUMA Affinity`, `GPU NUMA ID`) or empty (affinity hidden by a container), list
//! values (`0,3-9,11-17`), Markdown tables, and pastes that lost a tab so two cells merged
//! (`NODENODE`, `NIC8NIC9`).
//!
//! # How it is read
//!
//! * **Cells are whitespace tokens.** No matrix cell, label or affinity value contains
//!   whitespace, so rows are split on any run of whitespace (tabs, two or more spaces, or the
//!   single space a narrow terminal leaves). Fixed-width slicing is not used: hand-compacted and
//!   terminal-indented pastes do not keep nvidia-smi's widths. The header's column names contain
//!   single spaces, so after the device names the header is matched word by word against
//!   `CPU Affinity`, `NUMA Affinity` and `GPU NUMA ID`.
//! * **Empty affinity cells** (a container hides CPU affinity: only `N/A` under `GPU NUMA ID`
//!   is printed) leave a row with fewer values than affinity columns. Each value is then given
//!   to the header column whose start is nearest on screen (tabs expanded to 8 columns), ties to
//!   the right, because nvidia-smi leaves the leading columns blank and always prints `GPU NUMA
//!   ID`. Values must land in distinct columns in header order, or the row is rejected.
//! * **Repairs only when unambiguous.** A token that is not a link class but splits in exactly
//!   one way into known link codes (`NODEPXB` = `NODE` `PXB`; codes start with a letter and
//!   `NV#` ends at the first non-digit) is split, but only while the row still lacks cells; a
//!   header token made of device names (`NIC8NIC9`) is split the same way. The split must
//!   leave every row with one link cell per header device, `X` exactly on the diagonal and a
//!   symmetric matrix; otherwise the input is rejected. Every repair is written to `notes`.
//!   Anything that would need a guess (cells cut off by a narrow terminal, a missing row) is an
//!   error naming the line, because a wrong matrix is worse than none: placement advice built
//!   on it would be silently wrong.
//! * **Markdown tables** (`| | GPU0 | ... |`) have explicit cells, so their columns are read by
//!   header name, in whatever order the author put them.
//! * **Not a matrix.** Text without a header line starting with `GPU0` is rejected, quoting the
//!   nvidia-smi message when there is one (`The -i command line argument must be used ...`); a
//!   `topo -p2p` matrix (cells `OK`, `NS`, `GNS`, ...) is rejected as such.
//!
//! Memory is bounded: at most [`MAX_DEVICES`] devices, the matrix grows with the rows actually
//! present, NUMA lists are limited to [`MAX_LIST_NODES`] members, and merged-token splitting
//! looks only at tokens up to 64 bytes.

use crate::error::ParseError;
use crate::lex::END_OF_INPUT;
use inferscope_host::topology::{GpuPlacement, LinkClass, NicEntry, TopoMatrix};
use inferscope_host::{CpuSet, NodeSet, NumaNodeId};

/// Most devices (GPUs + NICs) accepted in a header.
pub const MAX_DEVICES: usize = 1024;
/// Most NUMA nodes accepted in one `NUMA Affinity` or `GPU NUMA ID` list.
pub const MAX_LIST_NODES: u64 = 1024;
/// Longest token considered for splitting a merged cell.
const MAX_MERGED_LEN: usize = 64;
/// Cell codes of `nvidia-smi topo -p2p` (peer access status), which is not a link matrix.
const P2P_CODES: &[&str] = &["OK", "CNS", "GNS", "TNS", "NS", "DR", "U"];

/// An affinity column of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Col {
    Cpu = 0,
    Numa = 1,
    GpuNuma = 2,
}

impl Col {
    const ALL: [Col; 3] = [Col::Cpu, Col::Numa, Col::GpuNuma];

    fn name(self) -> &'static str {
        match self {
            Col::Cpu => "CPU Affinity",
            Col::Numa => "NUMA Affinity",
            Col::GpuNuma => "GPU NUMA ID",
        }
    }

    /// This column's entry in a per-column array (indexed like `Col::ALL`).
    fn of<T>(self, a: &[T; 3]) -> &T {
        let [cpu, numa, gpu_numa] = a;
        match self {
            Col::Cpu => cpu,
            Col::Numa => numa,
            Col::GpuNuma => gpu_numa,
        }
    }

    /// This column's entry in a per-column array, mutably.
    fn of_mut<T>(self, a: &mut [T; 3]) -> &mut T {
        let [cpu, numa, gpu_numa] = a;
        match self {
            Col::Cpu => cpu,
            Col::Numa => numa,
            Col::GpuNuma => gpu_numa,
        }
    }

    fn words(self) -> &'static [&'static str] {
        match self {
            Col::Cpu => &["CPU", "Affinity"],
            Col::Numa => &["NUMA", "Affinity"],
            Col::GpuNuma => &["GPU", "NUMA", "ID"],
        }
    }
}

/// A whitespace-separated token with its 1-based character column and its 0-based screen
/// column (tabs expanded to multiples of 8).
#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    text: &'a str,
    col: usize,
    disp: usize,
}

fn tokenize(line: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize, usize)> = None;
    let mut col = 0;
    let mut disp = 0;
    for (i, c) in line.char_indices() {
        col += 1;
        if c.is_whitespace() {
            if let Some((b, cl, d)) = start.take() {
                out.push(Tok {
                    text: line.get(b..i).unwrap_or(""),
                    col: cl,
                    disp: d,
                });
            }
        } else if start.is_none() {
            start = Some((i, col, disp));
        }
        disp = if c == '\t' {
            (disp / 8 + 1) * 8
        } else {
            disp + 1
        };
    }
    if let Some((b, cl, d)) = start {
        out.push(Tok {
            text: line.get(b..).unwrap_or(""),
            col: cl,
            disp: d,
        });
    }
    out
}

/// A line's text for error messages: trimmed, whitespace runs shown as one space.
fn shown(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 1-based column just after the last non-blank character.
fn end_col(line: &str) -> usize {
    line.trim_end().chars().count() + 1
}

/// 1-based column of the first non-blank character.
fn first_col(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count() + 1
}

/// `GPU12` → `("GPU", 12)`; `NIC0` → `("NIC", 0)`.
fn numbered(s: &str) -> Option<(&'static str, usize)> {
    let (kind, digits) = if let Some(d) = s.strip_prefix("GPU") {
        ("GPU", d)
    } else if let Some(d) = s.strip_prefix("NIC") {
        ("NIC", d)
    } else {
        return None;
    };
    if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(|n| (kind, n))
}

/// Splits a token made of one or more `GPU#`/`NIC#` names (`NIC8NIC9`).
fn split_devices(tok: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut rest = tok;
    while !rest.is_empty() {
        if !(rest.starts_with("GPU") || rest.starts_with("NIC")) {
            return None;
        }
        let digits = rest
            .get(3..)?
            .bytes()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let (piece, tail) = rest.split_at_checked(3 + digits)?;
        numbered(piece)?;
        out.push(piece);
        rest = tail;
        if out.len() > MAX_DEVICES {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A NIC named directly in the header by older drivers (`mlx5_0`).
fn is_named_nic(tok: &str) -> bool {
    tok.len() <= 64
        && tok.starts_with(|c: char| c.is_ascii_alphabetic())
        && tok
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
        && !matches!(tok, "CPU" | "NUMA" | "GPU" | "Affinity" | "ID")
        && LinkClass::parse_cell(tok).is_none()
        && !P2P_CODES.contains(&tok)
        && split_devices(tok).is_none()
}

/// The unique split of a merged token into link codes (`NODEPXB` → `NODE`, `PXB`), if it has
/// exactly one and at least two parts.
fn split_links(tok: &str) -> Option<Vec<LinkClass>> {
    if tok.len() > MAX_MERGED_LEN || !tok.is_ascii() {
        return None;
    }
    let b = tok.as_bytes();
    let n = b.len();
    // Code lengths that can start at byte i.
    let starts = |i: usize| -> Vec<usize> {
        let rest = b.get(i..).unwrap_or_default();
        let mut v = Vec::new();
        for code in ["X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"] {
            if rest.starts_with(code.as_bytes()) {
                v.push(code.len());
            }
        }
        if let Some(after) = rest.strip_prefix(b"NV") {
            let digits = after.iter().take_while(|c| c.is_ascii_digit()).count();
            for d in 1..=digits.min(9) {
                v.push(2 + d);
            }
        }
        v
    };
    // ways[i]: number of splits of tok[i..], capped at 2.
    let mut ways = vec![0u8; n + 1];
    if let Some(end) = ways.last_mut() {
        *end = 1;
    }
    for i in (0..n).rev() {
        let total: u32 = starts(i)
            .into_iter()
            .map(|len| u32::from(ways.get(i + len).copied().unwrap_or(0)))
            .sum();
        if let Some(w) = ways.get_mut(i) {
            *w = total.min(2) as u8;
        }
    }
    if ways.first() != Some(&1) {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let len = starts(i)
            .into_iter()
            .find(|&len| ways.get(i + len) == Some(&1))?;
        out.push(LinkClass::parse_cell(tok.get(i..i + len)?)?);
        i += len;
    }
    (out.len() >= 2).then_some(out)
}

fn link_codes(parts: &[LinkClass]) -> String {
    parts
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The header as found: device names in order (with their 1-based columns) and the affinity
/// columns present (with their screen columns).
struct Header {
    line: usize,
    devices: Vec<(String, usize)>,
    cols: Vec<(Col, usize)>,
}

/// A link cell and the 1-based column of the token it came from.
type Cell = (LinkClass, usize);

/// One row as read, before checks that need the whole matrix.
struct Row {
    line: usize,
    text: String,
    links: Vec<Cell>,
    /// Affinity values by column (`None`: column absent or cell empty), with their columns.
    values: [Option<(String, usize)>; 3],
}

/// A line of the input: 1-based number and text without the line end.
type Line<'a> = (usize, &'a str);

fn is_p2p_cell(t: &str) -> bool {
    P2P_CODES.contains(&t)
}

fn is_markdown(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// Cells of a Markdown table line with their 1-based columns (cell text trimmed).
fn md_cells(line: &str) -> Vec<(&str, usize)> {
    let lead = line.len() - line.trim_start().len();
    let body = line.trim();
    let body_off = lead + 1; // after the leading '|'
    let Some(inner) = body.strip_prefix('|') else {
        return Vec::new();
    };
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut off = body_off;
    for cell in inner.split('|') {
        let t = cell.trim();
        let pad = if t.is_empty() {
            0
        } else {
            cell.len() - cell.trim_start().len()
        };
        let col = line
            .get(..off + pad)
            .map_or(off + pad, |s| s.chars().count())
            + 1;
        out.push((t, col));
        off += cell.len() + 1;
    }
    out
}

fn is_md_separator(line: &str) -> bool {
    let cells = md_cells(line);
    !cells.is_empty()
        && cells.iter().any(|(c, _)| c.contains('-'))
        && cells
            .iter()
            .all(|(c, _)| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// True for a `topo` header line: its first token names `GPU0` and the next one is not a cell.
fn is_header(line: &str) -> bool {
    if is_markdown(line) {
        return md_cells(line).iter().any(|(c, _)| *c == "GPU0");
    }
    let toks = tokenize(line);
    let Some(first) = toks.first() else {
        return false;
    };
    let Some(devs) = split_devices(first.text) else {
        return false;
    };
    if devs.first() != Some(&"GPU0") {
        return false;
    }
    match toks.get(1) {
        None => true,
        Some(t) => {
            LinkClass::parse_cell(t.text).is_none()
                && !is_p2p_cell(t.text)
                && split_links(t.text).is_none()
        }
    }
}

/// True when `text` holds the header row of a real `nvidia-smi topo -m` matrix: a line that
/// starts with `GPU0` and either reads completely as device names and affinity columns (plain or
/// Markdown), or is followed by GPU0's own row (`GPU0  X  NV18 ...`: a matrix whose header has a
/// column this parser does not know yet). A line that merely mentions GPU0 (`GPU0 fell off the
/// bus`) is not one.
pub fn has_matrix_header(text: &str) -> bool {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    lines.iter().enumerate().any(|(i, l)| {
        if !is_header(l) {
            return false;
        }
        let header = if is_markdown(l) {
            md_header(i + 1, l).map(|(h, _)| h)
        } else {
            plain_header(i + 1, l, &mut Vec::new())
        };
        // A lone `GPU0` is a word, not a table: even one GPU has affinity columns. The parser
        // takes any word as an old driver's NIC name; real ones end in a number (`mlx5_0`).
        let whole = header.is_ok_and(|h| {
            h.devices.len() + h.cols.len() >= 2
                && h.devices
                    .iter()
                    .all(|(d, _)| d.ends_with(|c: char| c.is_ascii_digit()))
        });
        let next = lines
            .iter()
            .skip(i + 1)
            .find(|l| !l.trim().is_empty())
            .map(|l| tokenize(l));
        let gpu0_row = next.is_some_and(|t| {
            matches!(
                (t.first(), t.get(1)),
                (Some(a), Some(b)) if a.text == "GPU0" && b.text == "X"
            )
        });
        whole || gpu0_row
    })
}

/// Parse `nvidia-smi topo -m` (or `-mp`) text as users paste it.
///
/// Text before the header (prompts, headings) and after the legend is skipped. The result's
/// `notes` list every repair made and every column that was absent or empty.
pub fn parse(text: &str) -> Result<TopoMatrix, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<Line<'_>> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
        .collect();
    let Some(h) = lines.iter().position(|(_, l)| is_header(l)) else {
        return Err(not_a_matrix(&lines));
    };
    let (preamble, from_header) = lines.split_at_checked(h).unwrap_or((&lines, &[]));
    let Some((&(header_line, header_text), rest)) = from_header.split_first() else {
        return Err(not_a_matrix(&lines));
    };
    let mut notes = Vec::new();
    let markdown = is_markdown(header_text);
    let (header, rows, after) = if markdown {
        notes.push("Markdown table: cells read by their column names".to_string());
        let (header, label_idx) = md_header(header_line, header_text)?;
        let (rows, after) = md_rows(&header, label_idx, rest)?;
        (header, rows, after)
    } else {
        let header = plain_header(header_line, header_text, &mut notes)?;
        let (rows, after) = plain_rows(&header, rest, &mut notes)?;
        (header, rows, after)
    };
    build(header, rows, preamble, after, notes)
}

/// The error for text with no header line.
fn not_a_matrix(lines: &[Line<'_>]) -> ParseError {
    let content = lines.iter().find(|(_, l)| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#') && !t.contains("nvidia-smi") && !t.ends_with(':')
    });
    let Some(&(n, l)) = content else {
        let last = lines.len().max(1);
        return ParseError::new(
            last,
            1,
            "a `nvidia-smi topo -m` matrix (a header line starting with GPU0)",
            END_OF_INPUT,
        );
    };
    let lower = l.to_ascii_lowercase();
    let message = [
        "must be used",
        "argument",
        "failed",
        "error",
        "unable",
        "invalid",
        "no devices",
        "not supported",
        "not found",
        "couldn't",
    ]
    .iter()
    .any(|m| lower.contains(m));
    let expected = if message {
        "a `nvidia-smi topo -m` matrix (a header line starting with GPU0), not an nvidia-smi error message"
    } else {
        "a `nvidia-smi topo -m` matrix (a header line starting with GPU0)"
    };
    ParseError::new(n, first_col(l), expected, l.trim())
}

/// Matches an affinity column name at `toks[i..]`; returns the column and its word count.
fn column_at(toks: &[Tok<'_>], i: usize) -> Option<(Col, usize)> {
    Col::ALL.into_iter().find_map(|c| {
        let words = c.words();
        let ok = words
            .iter()
            .enumerate()
            .all(|(k, w)| toks.get(i + k).is_some_and(|t| t.text == *w));
        ok.then_some((c, words.len()))
    })
}

const HEADER_ITEM: &str = "a device name (GPU0, NIC0, mlx5_0) or an affinity column (CPU Affinity, NUMA Affinity, GPU NUMA ID) in the header";

fn push_col(
    cols: &mut Vec<(Col, usize)>,
    c: Col,
    disp: usize,
    line: usize,
    col: usize,
    found: &str,
) -> Result<(), ParseError> {
    if cols.last().is_some_and(|(last, _)| *last >= c) {
        return Err(ParseError::new(
            line,
            col,
            "affinity columns once each, in the order CPU Affinity, NUMA Affinity, GPU NUMA ID",
            found,
        ));
    }
    cols.push((c, disp));
    Ok(())
}

fn push_device(
    devices: &mut Vec<(String, usize)>,
    name: &str,
    line: usize,
    col: usize,
) -> Result<(), ParseError> {
    if devices.len() >= MAX_DEVICES {
        return Err(ParseError::new(
            line,
            col,
            format!("at most {MAX_DEVICES} devices in the header"),
            name,
        ));
    }
    if devices.iter().any(|(d, _)| d == name) {
        return Err(ParseError::new(
            line,
            col,
            "each device once in the header",
            name,
        ));
    }
    devices.push((name.to_string(), col));
    Ok(())
}

fn plain_header(line: usize, text: &str, notes: &mut Vec<String>) -> Result<Header, ParseError> {
    let toks = tokenize(text);
    let mut devices = Vec::new();
    let mut cols: Vec<(Col, usize)> = Vec::new();
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        if let Some((c, len)) = column_at(&toks, i) {
            push_col(&mut cols, c, t.disp, line, t.col, t.text)?;
            i += len;
            continue;
        }
        if !cols.is_empty() {
            return Err(ParseError::new(
                line,
                t.col,
                "an affinity column name (CPU Affinity, NUMA Affinity, GPU NUMA ID) after the devices",
                t.text,
            ));
        }
        if let Some(parts) = split_devices(t.text) {
            if parts.len() > 1 {
                notes.push(format!(
                    "header: repaired merged cell '{}' into '{}'",
                    t.text,
                    parts.join(" ")
                ));
            }
            for p in parts {
                push_device(&mut devices, p, line, t.col)?;
            }
        } else if is_named_nic(t.text) {
            push_device(&mut devices, t.text, line, t.col)?;
        } else {
            return Err(ParseError::new(line, t.col, HEADER_ITEM, t.text));
        }
        i += 1;
    }
    Ok(Header {
        line,
        devices,
        cols,
    })
}

/// Index of a row label among the header devices; `Ok(None)` when the token is no label at
/// all (the table has ended); an error for a device name the header lacks.
fn row_index(
    header: &Header,
    label: &str,
    line: usize,
    col: usize,
    text: &str,
) -> Result<Option<usize>, ParseError> {
    if let Some(i) = header.devices.iter().position(|(d, _)| d == label) {
        return Ok(Some(i));
    }
    if numbered(label).is_some() {
        let first = header.devices.first().map_or("", |(d, _)| d.as_str());
        let last = header.devices.last().map_or("", |(d, _)| d.as_str());
        return Err(ParseError::new(
            line,
            col,
            format!(
                "a row for a device of the header ({first} .. {last}); {label} has no column, so columns were cut off (a terminal too narrow?) or the header is damaged"
            ),
            &shown(text),
        ));
    }
    Ok(None)
}

fn cells_expected(n: usize, label: &str) -> String {
    format!("{n} link cells for {label} (one per device in the header)")
}

/// Rows after a plain header; returns them by device index and the first line after the table.
#[allow(clippy::type_complexity)]
fn plain_rows<'a>(
    header: &Header,
    lines: &'a [Line<'a>],
    notes: &mut Vec<String>,
) -> Result<(Vec<Option<Row>>, &'a [Line<'a>]), ParseError> {
    let n = header.devices.len();
    let mut rows: Vec<Option<Row>> = (0..n).map(|_| None).collect();
    let mut seen_any = false;
    for (k, &(line, text)) in lines.iter().enumerate() {
        let toks = tokenize(text);
        let Some(first) = toks.first() else {
            if seen_any {
                return Ok((rows, lines.get(k..).unwrap_or_default()));
            }
            continue;
        };
        let Some(idx) = row_index(header, first.text, line, first.col, text)? else {
            return Ok((rows, lines.get(k..).unwrap_or_default()));
        };
        let label = first.text;
        if rows.get(idx).is_some_and(Option::is_some) {
            return Err(ParseError::new(
                line,
                first.col,
                format!("one row per device ({label} appears twice)"),
                &shown(text),
            ));
        }
        seen_any = true;
        let mut links: Vec<Cell> = Vec::new();
        let mut it = toks.iter().skip(1).peekable();
        while links.len() < n {
            let Some(t) = it.next() else {
                return Err(ParseError::new(
                    line,
                    end_col(text),
                    cells_expected(n, label),
                    &shown(text),
                ));
            };
            if let Some(c) = LinkClass::parse_cell(t.text) {
                links.push((c, t.col));
            } else if is_p2p_cell(t.text) {
                return Err(ParseError::new(
                    line,
                    t.col,
                    "a `nvidia-smi topo -m` link matrix, not a `topo -p2p` matrix of peer access status (OK, NS, GNS, ...)",
                    &shown(text),
                ));
            } else if let Some(parts) = split_links(t.text).filter(|p| links.len() + p.len() <= n) {
                notes.push(format!(
                    "{label} row: repaired merged cell '{}' into '{}'",
                    t.text,
                    link_codes(&parts)
                ));
                links.extend(parts.into_iter().map(|p| (p, t.col)));
            } else {
                return Err(ParseError::new(
                    line,
                    t.col,
                    cells_expected(n, label),
                    &shown(text),
                ));
            }
        }
        let values: Vec<&Tok<'_>> = it.collect();
        if let Some(t) = values.first()
            && (LinkClass::parse_cell(t.text).is_some() || split_links(t.text).is_some())
        {
            return Err(ParseError::new(
                line,
                t.col,
                cells_expected(n, label),
                &shown(text),
            ));
        }
        let is_gpu = label.starts_with("GPU");
        let values = if is_gpu {
            assign_values(header, &values, line, label, text)?
        } else if let Some(t) = values.first() {
            return Err(ParseError::new(
                line,
                t.col,
                format!("the end of the {label} row (NICs have no affinity columns)"),
                &shown(text),
            ));
        } else {
            [None, None, None]
        };
        if let Some(slot) = rows.get_mut(idx) {
            *slot = Some(Row {
                line,
                text: shown(text),
                links,
                values,
            });
        }
    }
    Ok((rows, &[]))
}

/// Gives each affinity value of a GPU row its column (see the module docs for empty cells).
fn assign_values(
    header: &Header,
    values: &[&Tok<'_>],
    line: usize,
    label: &str,
    text: &str,
) -> Result<[Option<(String, usize)>; 3], ParseError> {
    let k = header.cols.len();
    let mut out: [Option<(String, usize)>; 3] = [None, None, None];
    if let Some(t) = values.get(k) {
        let expected = if k == 0 {
            format!("the end of the {label} row (the header has no affinity columns)")
        } else {
            let names: Vec<_> = header.cols.iter().map(|(c, _)| c.name()).collect();
            format!(
                "at most {k} affinity values for {label} ({})",
                names.join(", ")
            )
        };
        return Err(ParseError::new(line, t.col, expected, &shown(text)));
    }
    if values.len() == k {
        for (v, (c, _)) in values.iter().zip(&header.cols) {
            *c.of_mut(&mut out) = Some((v.text.to_string(), v.col));
        }
        return Ok(out);
    }
    let mut last: Option<usize> = None;
    for v in values {
        let best = header
            .cols
            .iter()
            .enumerate()
            .min_by_key(|(j, (_, start))| (start.abs_diff(v.disp), usize::MAX - j))
            .map(|(j, _)| j);
        let Some(j) = best else { break };
        if last.is_some_and(|l| j <= l) {
            return Err(ParseError::new(
                line,
                v.col,
                format!("affinity values of {label} that line up with the header's columns"),
                &shown(text),
            ));
        }
        last = Some(j);
        if let Some((c, _)) = header.cols.get(j) {
            *c.of_mut(&mut out) = Some((v.text.to_string(), v.col));
        }
    }
    Ok(out)
}

fn md_header(line: usize, text: &str) -> Result<(Header, usize), ParseError> {
    let cells = md_cells(text);
    let mut devices = Vec::new();
    let mut cols = Vec::new();
    let mut label_idx = None;
    for (j, (c, col)) in cells.iter().enumerate() {
        if c.is_empty() {
            if label_idx.is_some() {
                return Err(ParseError::new(
                    line,
                    *col,
                    "one empty header cell (above the row labels)",
                    &shown(text),
                ));
            }
            label_idx = Some(j);
        } else if let Some(col_kind) = Col::ALL.into_iter().find(|k| k.name() == *c) {
            push_col(&mut cols, col_kind, j, line, *col, c)?;
        } else if numbered(c).is_some() || is_named_nic(c) {
            push_device(&mut devices, c, line, *col)?;
        } else {
            return Err(ParseError::new(line, *col, HEADER_ITEM, c));
        }
    }
    let Some(label_idx) = label_idx else {
        return Err(ParseError::new(
            line,
            first_col(text),
            "an empty header cell above the row labels",
            &shown(text),
        ));
    };
    Ok((
        Header {
            line,
            devices,
            cols,
        },
        label_idx,
    ))
}

/// Rows of a Markdown table; affinity columns are found by their header cell index (kept in
/// `Header::cols` in place of a screen column).
#[allow(clippy::type_complexity)]
fn md_rows<'a>(
    header: &Header,
    label_idx: usize,
    lines: &'a [Line<'a>],
) -> Result<(Vec<Option<Row>>, &'a [Line<'a>]), ParseError> {
    let n = header.devices.len();
    let mut rows: Vec<Option<Row>> = (0..n).map(|_| None).collect();
    let mut seen_any = false;
    for (k, &(line, text)) in lines.iter().enumerate() {
        if !is_markdown(text) {
            if text.trim().is_empty() && !seen_any {
                continue;
            }
            return Ok((rows, lines.get(k..).unwrap_or_default()));
        }
        if is_md_separator(text) {
            continue;
        }
        let cells = md_cells(text);
        let width = n + header.cols.len() + 1;
        if cells.len() != width {
            return Err(ParseError::new(
                line,
                first_col(text),
                format!("{width} cells in each table row, as in the header"),
                &shown(text),
            ));
        }
        let Some(&(label, label_col)) = cells.get(label_idx) else {
            return Ok((rows, lines.get(k..).unwrap_or_default()));
        };
        let Some(idx) = row_index(header, label, line, label_col, text)? else {
            return Err(ParseError::new(
                line,
                label_col,
                "a device of the header as the row label",
                &shown(text),
            ));
        };
        if rows.get(idx).is_some_and(Option::is_some) {
            return Err(ParseError::new(
                line,
                label_col,
                format!("one row per device ({label} appears twice)"),
                &shown(text),
            ));
        }
        seen_any = true;
        let mut links = Vec::new();
        let mut values: [Option<(String, usize)>; 3] = [None, None, None];
        let mut dev_j = 0;
        for (j, &(cell, col)) in cells.iter().enumerate() {
            if j == label_idx {
                continue;
            }
            if let Some((c, _)) = header.cols.iter().find(|(_, hj)| *hj == j) {
                if !cell.is_empty() {
                    *c.of_mut(&mut values) = Some((cell.to_string(), col));
                }
                continue;
            }
            let dev = header.devices.get(dev_j).map_or("", |(d, _)| d.as_str());
            dev_j += 1;
            match LinkClass::parse_cell(cell) {
                Some(l) => links.push((l, col)),
                None if is_p2p_cell(cell) => {
                    return Err(ParseError::new(
                        line,
                        col,
                        "a `nvidia-smi topo -m` link matrix, not a `topo -p2p` matrix of peer access status (OK, NS, GNS, ...)",
                        &shown(text),
                    ));
                }
                None => {
                    return Err(ParseError::new(
                        line,
                        col,
                        format!(
                            "a link class (X, NV#, PIX, PXB, PHB, NODE, SYS) for {label}-{dev}"
                        ),
                        &shown(text),
                    ));
                }
            }
        }
        if !label.starts_with("GPU")
            && let Some((_, col)) = values.iter().flatten().next()
        {
            return Err(ParseError::new(
                line,
                *col,
                format!("empty affinity cells for {label} (NICs have no affinity)"),
                &shown(text),
            ));
        }
        if let Some(slot) = rows.get_mut(idx) {
            *slot = Some(Row {
                line,
                text: shown(text),
                links,
                values,
            });
        }
    }
    Ok((rows, &[]))
}

/// Parses a NUMA list cell into node ids (bounded).
fn node_list(v: &str, line: usize, col: usize, what: &str) -> Result<Vec<NumaNodeId>, ParseError> {
    let set: NodeSet = v.parse().map_err(|e: inferscope_host::ListError| {
        ParseError::new(
            line,
            col + e.column.saturating_sub(1),
            format!("a NUMA node list or N/A ({what})"),
            v,
        )
    })?;
    if set.len() > MAX_LIST_NODES {
        return Err(ParseError::new(
            line,
            col,
            format!("at most {MAX_LIST_NODES} NUMA nodes ({what})"),
            v,
        ));
    }
    Ok(set.iter().map(NumaNodeId).collect())
}

fn who(names: &[String], total: usize) -> String {
    if names.len() == total && total > 1 {
        "every GPU".to_string()
    } else {
        names.join(", ")
    }
}

/// Checks and assembles the matrix from the header and rows.
fn build(
    header: Header,
    rows: Vec<Option<Row>>,
    preamble: &[Line<'_>],
    after: &[Line<'_>],
    mut notes: Vec<String>,
) -> Result<TopoMatrix, ParseError> {
    let (gpus, nic_names, numbered_nics) = device_names(&header)?;
    let named_in_header = numbered_nics == 0 && !nic_names.is_empty();
    let devices: Vec<String> = (0..gpus)
        .map(|i| format!("GPU{i}"))
        .chain((0..nic_names.len()).map(|i| format!("NIC{i}")))
        .collect();
    let rows = square(&header, rows, after)?;
    check_links(&rows, &devices)?;
    let matrix: Vec<Vec<LinkClass>> = rows
        .iter()
        .map(|r| r.links.iter().map(|x| x.0).collect())
        .collect();
    if rows
        .iter()
        .any(|r| r.text.split(' ').skip(1).any(|t| t.contains("SOC")))
    {
        notes.push("SOC cells (older drivers' name for SYS) read as SYS".to_string());
    }
    let placements = placements(&header, &rows, &devices, gpus, &mut notes)?;
    let legend = Legend::read(after, nic_names.len(), named_in_header, &mut notes);
    pcie_only_notes(&legend, &matrix, preamble, &mut notes);
    legend.nic_notes(&nic_names, named_in_header, &mut notes);
    let nics = nic_names
        .iter()
        .enumerate()
        .map(|(i, raw)| NicEntry {
            name: format!("NIC{i}"),
            device: if named_in_header {
                raw.clone()
            } else {
                legend.names.get(i).cloned().flatten().unwrap_or_default()
            },
            pci_bus_id: None,
        })
        .collect();
    Ok(TopoMatrix {
        devices,
        matrix,
        gpus: placements,
        nics,
        notes,
    })
}

/// Device naming: GPU0.. in order, then NICs (NIC0.. or names from old drivers). Returns the
/// GPU count, the NICs' header names and how many of those are numbered `NICn`.
fn device_names(header: &Header) -> Result<(usize, Vec<String>, usize), ParseError> {
    let mut gpus = 0usize;
    let mut nic_names: Vec<String> = Vec::new();
    let mut numbered_nics = 0usize;
    for (name, col) in &header.devices {
        match numbered(name) {
            Some(("GPU", i)) => {
                if !nic_names.is_empty() || i != gpus {
                    return Err(ParseError::new(
                        header.line,
                        *col,
                        format!("GPU{gpus} (GPUs numbered in order, before the NICs)"),
                        name,
                    ));
                }
                gpus += 1;
            }
            Some((_, i)) => {
                if i != numbered_nics || nic_names.len() != numbered_nics {
                    return Err(ParseError::new(
                        header.line,
                        *col,
                        format!("NIC{} (NICs numbered in order)", nic_names.len()),
                        name,
                    ));
                }
                numbered_nics += 1;
                nic_names.push(name.clone());
            }
            None => {
                if numbered_nics > 0 {
                    return Err(ParseError::new(
                        header.line,
                        *col,
                        format!("NIC{numbered_nics} (NICs numbered in order)"),
                        name,
                    ));
                }
                nic_names.push(name.clone());
            }
        }
    }
    Ok((gpus, nic_names, numbered_nics))
}

/// Square: one row per header device.
fn square(
    header: &Header,
    rows: Vec<Option<Row>>,
    after: &[Line<'_>],
) -> Result<Vec<Row>, ParseError> {
    let n = header.devices.len();
    if let Some(missing) = rows.iter().position(Option::is_none) {
        let found = rows.iter().flatten().count();
        let name = header.devices.get(missing).map_or("", |(d, _)| d.as_str());
        let expected = format!(
            "a row for {name}: the matrix must be square ({n} devices in the header, rows for {found})"
        );
        let (line, col, text) = match after.iter().find(|(_, l)| !l.trim().is_empty()) {
            Some(&(l, t)) => (l, first_col(t), shown(t)),
            None => {
                let last = rows.iter().flatten().map(|r| r.line).max();
                (
                    last.map_or(header.line, |l| l) + 1,
                    1,
                    END_OF_INPUT.to_string(),
                )
            }
        };
        return Err(ParseError::new(line, col, expected, &text));
    }
    Ok(rows.into_iter().flatten().collect())
}

/// `X` exactly on the diagonal, and the matrix symmetric.
fn check_links(rows: &[Row], devices: &[String]) -> Result<(), ParseError> {
    let dev = |i: usize| devices.get(i).map_or("", String::as_str);
    for (i, r) in rows.iter().enumerate() {
        for (j, &(c, col)) in r.links.iter().enumerate() {
            let diag = i == j;
            if diag != (c == LinkClass::SelfLink) {
                let expected = if diag {
                    format!("X where {} meets itself", dev(i))
                } else {
                    format!(
                        "a link class for {}-{} (X only on the diagonal)",
                        dev(i),
                        dev(j)
                    )
                };
                return Err(ParseError::new(r.line, col, expected, &r.text));
            }
            if j < i {
                let other = rows.get(j).and_then(|o| o.links.get(i)).map(|x| x.0);
                if other != Some(c) {
                    return Err(ParseError::new(
                        r.line,
                        col,
                        format!(
                            "{} for {}-{}, as in the {} row (the matrix is symmetric)",
                            other.map_or("?".to_string(), |o| o.to_string()),
                            dev(i),
                            dev(j),
                            dev(j)
                        ),
                        &r.text,
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The affinity columns of each GPU row, with notes on absent, empty and N/A columns.
fn placements(
    header: &Header,
    rows: &[Row],
    devices: &[String],
    gpus: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<GpuPlacement>, ParseError> {
    for c in Col::ALL {
        if !header.cols.iter().any(|(k, _)| *k == c) {
            notes.push(format!("{} column absent", c.name()));
        }
    }
    let mut empty: [Vec<String>; 3] = Default::default();
    let mut na: [Vec<String>; 3] = Default::default();
    let mut placements = Vec::new();
    for (r, name) in rows.iter().zip(devices).take(gpus) {
        let name = name.clone();
        let mut g = GpuPlacement {
            name: name.clone(),
            pci_bus_id: None,
            cpu_affinity: None,
            numa_affinity: None,
            gpu_numa_id: None,
            usable_cpus: None,
        };
        for c in Col::ALL {
            if !header.cols.iter().any(|(k, _)| *k == c) {
                continue;
            }
            let Some((v, col)) = c.of(&r.values) else {
                c.of_mut(&mut empty).push(name.clone());
                continue;
            };
            if v == "N/A" {
                c.of_mut(&mut na).push(name.clone());
                continue;
            }
            match c {
                Col::Cpu => {
                    let set: CpuSet = v.parse().map_err(|e: inferscope_host::ListError| {
                        ParseError::new(
                            r.line,
                            col + e.column.saturating_sub(1),
                            format!("a CPU list or N/A (CPU Affinity of {name})"),
                            v,
                        )
                    })?;
                    g.cpu_affinity = Some(set);
                }
                Col::Numa => {
                    g.numa_affinity = Some(node_list(
                        v,
                        r.line,
                        *col,
                        &format!("NUMA Affinity of {name}"),
                    )?);
                }
                Col::GpuNuma => {
                    g.gpu_numa_id = Some(node_list(
                        v,
                        r.line,
                        *col,
                        &format!("GPU NUMA ID of {name}"),
                    )?);
                }
            }
        }
        placements.push(g);
    }
    for c in Col::ALL {
        let e = c.of(&empty);
        if !e.is_empty() {
            notes.push(format!("{} empty for {}", c.name(), who(e, gpus)));
        }
        let a = c.of(&na);
        if !a.is_empty() {
            notes.push(format!("{} is N/A for {}", c.name(), who(a, gpus)));
        }
    }

    Ok(placements)
}

/// What the text after the matrix says: the legend lines seen and the NIC legend's names.
struct Legend {
    /// Device name per NIC from the NIC legend (`NIC0: mlx5_0`).
    names: Vec<Option<String>>,
    /// A `NIC Legend:` line was seen.
    nic_legend: bool,
    has_pix_line: bool,
    has_nv_line: bool,
    /// NICs the legend names beyond the matrix's.
    extra: Vec<String>,
}

impl Legend {
    fn read(
        after: &[Line<'_>],
        nics: usize,
        named_in_header: bool,
        notes: &mut Vec<String>,
    ) -> Legend {
        let mut legend_names: Vec<Option<String>> = vec![None; nics];
        let mut nic_legend = false;
        let mut has_pix_line = false;
        let mut has_nv_line = false;
        let mut extra_legend: Vec<String> = Vec::new();
        for &(line, text) in after {
            if is_header(text) {
                notes.push(format!(
                    "text from line {line} on (another matrix, e.g. `topo -p2p`) ignored"
                ));
                break;
            }
            let t = text.trim();
            let bare = t.trim_start_matches(['-', '*', ' ']).replace('*', "");
            if t.starts_with("NIC Legend") {
                nic_legend = true;
            } else if bare.starts_with("PIX") && bare.contains('=') {
                has_pix_line = true;
            } else if bare.starts_with("NV#") {
                has_nv_line = true;
            } else if let Some(rest) = t.strip_prefix("NIC")
                && let Some((num, name)) = rest.split_once(':')
                && let Some((_, i)) = numbered(&format!("NIC{num}"))
            {
                let name = name.split_whitespace().next().unwrap_or("");
                match legend_names.get_mut(i) {
                    Some(slot) => {
                        if slot.is_none() && !named_in_header {
                            *slot = Some(name.to_string());
                        }
                    }
                    None => extra_legend.push(format!("NIC{i}")),
                }
            }
        }
        Legend {
            names: legend_names,
            nic_legend,
            has_pix_line,
            has_nv_line,
            extra: extra_legend,
        }
    }

    /// Notes on NIC names the legend lacks or adds.
    fn nic_notes(&self, nic_names: &[String], named_in_header: bool, notes: &mut Vec<String>) {
        let (legend_names, nic_legend, extra_legend) = (&self.names, self.nic_legend, &self.extra);
        if named_in_header {
            notes.push(format!(
            "NICs named in the header as older drivers print them ({}), without a NIC legend: numbered NIC0.. in header order",
            nic_names.join(", ")
        ));
        } else if !nic_names.is_empty() {
            let missing: Vec<String> = legend_names
                .iter()
                .enumerate()
                .filter(|(_, n)| n.is_none())
                .map(|(i, _)| format!("NIC{i}"))
                .collect();
            if missing.len() == nic_names.len() && !nic_legend {
                notes.push(format!(
                    "NIC legend absent: device names of {} unknown",
                    missing.join(", ")
                ));
            } else if !missing.is_empty() {
                notes.push(format!(
                    "NIC legend lacks {}: their device names are unknown",
                    missing.join(", ")
                ));
            }
        }
        if !extra_legend.is_empty() {
            notes.push(format!(
                "NIC legend names {} that the matrix lacks (ignored)",
                extra_legend.join(", ")
            ));
        }
    }
}

/// `topo -mp` output (PCIe paths only) said so by its command line or its legend.
fn pcie_only_notes(
    legend: &Legend,
    matrix: &[Vec<LinkClass>],
    preamble: &[Line<'_>],
    notes: &mut Vec<String>,
) {
    let (has_pix_line, has_nv_line) = (legend.has_pix_line, legend.has_nv_line);
    let nv_cells = matrix
        .iter()
        .flatten()
        .any(|c| matches!(c, LinkClass::NvLink(_)));
    let mp_command = preamble.iter().any(|(_, l)| {
        l.contains("nvidia-smi")
            && l.split_whitespace()
                .any(|w| w == "-mp" || w == "--matrix_pci")
    });
    if mp_command {
        notes.push(
            "`nvidia-smi topo -mp` output: PCIe paths only, NVLink connections (NV#) are not shown"
                .to_string(),
        );
    } else if has_pix_line && !has_nv_line && !nv_cells {
        notes.push(
            "legend has no NV# line and no cell is NV#: looks like `nvidia-smi topo -mp` (PCIe paths only, NVLinks not shown)"
                .to_string(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_link_tokens_split_only_one_way() {
        let s = |t: &str| split_links(t).map(|v| link_codes(&v));
        assert_eq!(s("NODEPXB").as_deref(), Some("NODE PXB"));
        assert_eq!(s("NV18NV18").as_deref(), Some("NV18 NV18"));
        assert_eq!(s("SYSX").as_deref(), Some("SYS X"));
        assert_eq!(s("NODE"), None); // one cell is not a merge
        assert_eq!(s("NODEPX"), None);
        assert_eq!(s("0-7"), None);
        assert_eq!(s(&"SYS".repeat(30)), None); // longer than considered
    }

    #[test]
    fn merged_device_names_split() {
        assert_eq!(split_devices("NIC8NIC9"), Some(vec!["NIC8", "NIC9"]));
        assert_eq!(split_devices("GPU7NIC0"), Some(vec!["GPU7", "NIC0"]));
        assert_eq!(split_devices("GPU"), None);
        assert_eq!(split_devices("mlx5_0"), None);
        assert!(is_named_nic("mlx5_bond_0") && !is_named_nic("CPU") && !is_named_nic("SYS"));
    }

    #[test]
    fn tokens_know_their_screen_columns() {
        let t = tokenize("GPU0\t X \tNV4  0-7");
        let v: Vec<_> = t.iter().map(|t| (t.text, t.col, t.disp)).collect();
        assert_eq!(
            v,
            [
                ("GPU0", 1, 0),
                ("X", 7, 9),
                ("NV4", 10, 16),
                ("0-7", 15, 21)
            ]
        );
    }

    #[test]
    fn markdown_cells_have_columns() {
        let c = md_cells("| a | GPU0 |  |");
        assert_eq!(c, [("a", 3), ("GPU0", 7), ("", 13)]);
        assert!(is_md_separator("|---|:--:|"));
    }

    #[test]
    fn one_gpu_old_soc_output() {
        let m = parse("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n")
            .unwrap();
        assert_eq!(m.matrix[0][1], LinkClass::Sys);
        assert!(m.notes.iter().any(|n| n.starts_with("SOC cells")));
        let m =
            parse("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-7\t0\t\tN/A\n")
                .unwrap();
        assert_eq!(m.devices, ["GPU0"]);
        assert_eq!(m.gpus[0].numa_affinity, Some(vec![NumaNodeId(0)]));
        assert_eq!(m.notes, ["GPU NUMA ID is N/A for GPU0"]);
    }

    #[test]
    fn matrix_header_is_recognised_only_as_a_whole_row() {
        assert!(has_matrix_header(
            "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\n"
        ));
        assert!(has_matrix_header(
            "| | GPU0 | GPU1 | CPU Affinity |\n|---|---|---|---|\n"
        ));
        assert!(has_matrix_header("\tGPU0\tCPU Affinity\tNUMA Affinity\n"));
        // Near misses: logs and notes that mention GPU0.
        assert!(!has_matrix_header("GPU0 fell off the bus (Xid 79)\n"));
        assert!(!has_matrix_header("GPU0 fell off the bus\n"));
        assert!(has_matrix_header("\tGPU0\tmlx5_0\tCPU Affinity\n"));
        assert!(!has_matrix_header("GPU0\n"));
        assert!(!has_matrix_header("[rank0] GPU0 GPU1 link is slow\n"));
        assert!(!has_matrix_header(
            "GPU0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n"
        ));
        assert!(!has_matrix_header("GPU0 X NV18\n"));
        // A header with a column from a newer driver still heads a matrix: GPU0's row follows.
        assert!(has_matrix_header(
            "\tGPU0\tGPU1\tC2C Links\nGPU0\t X \tNV18\n"
        ));
        assert!(!has_matrix_header(
            "\tGPU0\tGPU1\tC2C Links\nsome other line\n"
        ));
    }

    fn header(names: &[&str]) -> Header {
        Header {
            line: 3,
            devices: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), 8 * i + 9))
                .collect(),
            cols: Vec::new(),
        }
    }

    #[test]
    fn devices_are_gpus_in_order_then_nics() {
        assert_eq!(
            device_names(&header(&["GPU0", "GPU1", "NIC0", "NIC1"])).unwrap(),
            (2, vec!["NIC0".to_string(), "NIC1".to_string()], 2)
        );
        // Old drivers name NICs in the header.
        assert_eq!(
            device_names(&header(&["GPU0", "mlx5_0"])).unwrap(),
            (1, vec!["mlx5_0".to_string()], 0)
        );
        let e = device_names(&header(&["GPU0", "GPU2"])).unwrap_err();
        assert_eq!((e.line, e.column), (3, 17));
        assert!(
            e.to_string().contains("GPU1 (GPUs numbered in order"),
            "{e}"
        );
        let e = device_names(&header(&["GPU0", "NIC0", "GPU1"])).unwrap_err();
        assert!(e.to_string().contains("before the NICs"), "{e}");
        let e = device_names(&header(&["GPU0", "NIC0", "mlx5_1"])).unwrap_err();
        assert!(
            e.to_string().contains("NIC1 (NICs numbered in order)"),
            "{e}"
        );
    }

    #[test]
    fn the_legend_names_nics_and_stops_at_the_next_matrix() {
        let after: Vec<Line<'_>> = vec![
            (10, "Legend:"),
            (
                11,
                "  PIX  = Connection traversing at most a single PCIe bridge",
            ),
            (12, "NIC Legend:"),
            (13, "  NIC0: mlx5_0"),
            (14, "  NIC2: mlx5_2"),
            (15, "\tGPU0\tGPU1"),
            (16, "  NIC1: never read"),
        ];
        let mut notes = Vec::new();
        let l = Legend::read(&after, 2, false, &mut notes);
        assert_eq!(l.names, [Some("mlx5_0".to_string()), None]);
        assert!(l.nic_legend && l.has_pix_line && !l.has_nv_line);
        assert_eq!(l.extra, ["NIC2"]);
        assert!(
            notes.iter().any(|n| n.contains("from line 15 on")),
            "{notes:?}"
        );
        let mut notes = Vec::new();
        l.nic_notes(&["NIC0".into(), "NIC1".into()], false, &mut notes);
        assert_eq!(
            notes,
            [
                "NIC legend lacks NIC1: their device names are unknown",
                "NIC legend names NIC2 that the matrix lacks (ignored)"
            ]
        );
    }
}
