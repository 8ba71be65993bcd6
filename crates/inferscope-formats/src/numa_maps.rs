//! `/proc/<pid>/numa_maps`: where a process's pages sit, per NUMA node.
//!
//! One line per mapping (proc(5)): a hex start address, the memory policy, then
//! space-separated items such as `file=/usr/bin/cat`, `heap`, `anon=4`, `N0=2 N1=3` (pages of
//! the mapping resident on each node) and `kernelpagesize_kB=4`. The `N<node>=<pages>` counts
//! are in units of the mapping's own page size, so a hugetlb mapping with
//! `kernelpagesize_kB=2048` counts 2 MiB pages; [`NumaMaps`] keeps the raw page sums and the
//! bytes, which is what `numastat -p` adds up. Lines without `N` items (unpopulated mappings)
//! contribute nothing. A line without `kernelpagesize_kB` (kernels before 2.6.38) is taken as
//! 4 KiB pages. Other items are ignored, since file names may contain spaces and `=`.

use std::collections::BTreeMap;

use crate::error::ParseError;
use crate::lex::{END_OF_LINE, hex, tokens, unsigned};

/// Page size assumed when a line has no `kernelpagesize_kB=` item.
pub const DEFAULT_PAGE_KIB: u64 = 4;

/// Resident memory of a process on one NUMA node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NodeUsage {
    /// Sum of the `N<node>=` counts, each in its own mapping's page size.
    pub pages: u64,
    /// The same pages in bytes (count × `kernelpagesize_kB` × 1024).
    pub bytes: u64,
}

/// A parsed `numa_maps` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaMaps {
    /// Resident memory per node id, for nodes with at least one `N<node>=` item.
    pub nodes: BTreeMap<u32, NodeUsage>,
    /// Mappings (lines) read.
    pub mappings: usize,
}

impl NumaMaps {
    /// Bytes on all nodes together.
    pub fn total_bytes(&self) -> u64 {
        self.nodes
            .values()
            .fold(0u64, |a, u| a.saturating_add(u.bytes))
    }
}

fn overflow(line: usize, col: usize, found: &str) -> ParseError {
    ParseError::new(line, col, "page totals that fit in 64 bits", found)
}

/// Parses `/proc/<pid>/numa_maps`. Blank lines are skipped.
pub fn parse(text: &str) -> Result<NumaMaps, ParseError> {
    let mut out = NumaMaps::default();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let toks = tokens(line, 0);
        let Some(addr) = toks.first() else { continue };
        hex::<u64>(addr.text, line_no, addr.col, "a hex mapping address")?;
        if toks.len() < 2 {
            return Err(ParseError::new(
                line_no,
                crate::lex::end_col(line, 0),
                "a memory policy after the address",
                END_OF_LINE,
            ));
        }
        out.mappings += 1;
        let mut page_kib = DEFAULT_PAGE_KIB;
        // (node, pages, column, token) for this line; converted once the page size is known.
        let mut counts: Vec<(u32, u64, usize, &str)> = Vec::new();
        for t in toks.iter().skip(2) {
            if let Some(v) = t.text.strip_prefix("kernelpagesize_kB=") {
                let col = t.col + "kernelpagesize_kB=".len();
                page_kib = unsigned::<u64>(v, line_no, col, "a page size in KiB")?;
                if page_kib == 0 {
                    return Err(ParseError::new(
                        line_no,
                        col,
                        "a page size above 0 KiB",
                        t.text,
                    ));
                }
                continue;
            }
            let Some(rest) = t.text.strip_prefix('N') else {
                continue;
            };
            let Some((node, pages)) = rest.split_once('=') else {
                continue;
            };
            if node.is_empty() || !node.bytes().all(|b| b.is_ascii_digit()) {
                continue; // not an N<node>= item (e.g. part of a file name)
            }
            let node_id = unsigned::<u32>(node, line_no, t.col + 1, "a NUMA node number")?;
            let pages_col = t.col + 1 + node.len() + 1;
            let n = unsigned::<u64>(pages, line_no, pages_col, "a page count")?;
            counts.push((node_id, n, t.col, t.text));
        }
        for (node, pages, col, text) in counts {
            let bytes = pages
                .checked_mul(page_kib)
                .and_then(|k| k.checked_mul(1024))
                .ok_or_else(|| overflow(line_no, col, text))?;
            let entry = out.nodes.entry(node).or_default();
            entry.pages = entry
                .pages
                .checked_add(pages)
                .ok_or_else(|| overflow(line_no, col, text))?;
            entry.bytes = entry
                .bytes
                .checked_add(bytes)
                .ok_or_else(|| overflow(line_no, col, text))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Head of `cat /proc/self/numa_maps` on the development VM (one node), plus an
    /// unpopulated mapping and the stack.
    const SELF: &str = "\
557f4be9b000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=4
557f4be9d000 default file=/usr/bin/cat mapped=5 N0=5 kernelpagesize_kB=4
557f4bea5000 default file=/usr/bin/cat anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
557f4fed0000 default heap anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7fca516c0000 default file=/usr/lib/locale/C.utf8/LC_CTYPE mapped=32 mapmax=8 N0=32 kernelpagesize_kB=4
7fca51749000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=214 mapmax=9 N0=214 kernelpagesize_kB=4
7fca51910000 default
7ffd2b6a4000 default stack anon=3 dirty=3 active=0 N0=3 kernelpagesize_kB=4
";

    #[test]
    fn real_self_numa_maps() {
        let m = parse(SELF).unwrap();
        assert_eq!(m.mappings, 8);
        assert_eq!(m.nodes.len(), 1);
        let n0 = m.nodes[&0];
        assert_eq!(n0.pages, 2 + 5 + 1 + 4 + 32 + 214 + 3);
        assert_eq!(n0.bytes, n0.pages * 4096);
        assert_eq!(m.total_bytes(), n0.bytes);
    }

    #[test]
    fn two_nodes_and_huge_pages_count_by_size() {
        let text = "\
7f0000000000 interleave:0-1 anon=300 dirty=300 N0=100 N1=200 kernelpagesize_kB=4
7f2000000000 bind:1 file=/dev/hugepages/buf huge dirty=4 N1=4 kernelpagesize_kB=2048
7f4000000000 default file=/data/My N1=notes.txt mapped=1 N0=1 kernelpagesize_kB=4
";
        let m = parse(text).unwrap_err();
        // A file name item that looks like a node count is reported, not guessed at.
        assert_eq!((m.line, m.column), (3, 39));
        let text = text.lines().take(2).collect::<Vec<_>>().join("\n");
        let m = parse(&text).unwrap();
        assert_eq!(m.nodes[&0].pages, 100);
        assert_eq!(m.nodes[&1].pages, 204);
        assert_eq!(m.nodes[&1].bytes, 200 * 4096 + 4 * 2048 * 1024);
    }

    #[test]
    fn missing_page_size_means_4_kib_and_file_name_words_are_ignored() {
        let m = parse("00400000 default file=/opt/Nvidia\\040app Nx=1 N=2 N0=7\n").unwrap();
        assert_eq!(
            m.nodes[&0],
            NodeUsage {
                pages: 7,
                bytes: 7 * 4096
            }
        );
    }

    #[test]
    fn bad_input_names_line_and_column() {
        let e = parse("zz00 default N0=1\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        assert_eq!(e.expected, "a hex mapping address");
        let e = parse("\n00400000 default N0=1x kernelpagesize_kB=4\n").unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (2, 22, "1x"));
        let e = parse("00400000 default N0=1 kernelpagesize_kB=big\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 41));
        let e = parse("00400000 default N0=1 kernelpagesize_kB=0\n").unwrap_err();
        assert_eq!(e.expected, "a page size above 0 KiB");
        let e = parse("00400000\n").unwrap_err();
        assert_eq!(e.expected, "a memory policy after the address");
        let e = parse("00400000 default N99999999999=1\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 19));
        let big = format!(
            "00400000 default N0={} kernelpagesize_kB=2048\n",
            u64::MAX / 2
        );
        assert!(parse(&big).is_err());
        assert_eq!(parse("").unwrap(), NumaMaps::default());
    }
}
