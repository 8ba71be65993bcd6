//! `/proc/<pid>/cgroup` and cgroup memory limit files.
//!
//! Each cgroup line is `hierarchy-ID:controller-list:path`; the path may itself contain
//! ':' so only the first two colons split. v1 `memory.limit_in_bytes` has no literal
//! "unlimited": the kernel prints `LONG_MAX` rounded down to the page size, so any value
//! at or above [`V1_UNLIMITED_THRESHOLD`] is treated as unlimited.

use crate::error::ParseError;
use crate::lex::{END_OF_INPUT, END_OF_LINE, chars_before, end_col, unsigned};

/// v1 values at or above this mean "no limit".
///
/// `LONG_MAX` rounded down to a 64 KiB page (`0x7FFF_FFFF_FFFF_0000`), so it covers 4 KiB
/// (`0x7FFF_FFFF_FFFF_F000`), 16 KiB and 64 KiB page kernels (aarch64).
pub const V1_UNLIMITED_THRESHOLD: u64 = 0x7FFF_FFFF_FFFF_0000;

/// One line of `/proc/<pid>/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CgroupEntry {
    /// Hierarchy ID; `0` for the cgroup v2 unified hierarchy.
    pub hierarchy_id: u32,
    /// Controllers bound to the hierarchy (`cpu`, `cpuacct`, `name=systemd`); empty for v2.
    pub controllers: Vec<String>,
    /// Cgroup path relative to the hierarchy root, e.g. `/docker/abc` or `/`.
    pub path: String,
}

/// A cgroup memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryLimit {
    /// No limit (`max`, or a v1 value at or above [`V1_UNLIMITED_THRESHOLD`]).
    Unlimited,
    /// A limit in bytes.
    Bytes(u64),
}

/// Parses `/proc/<pid>/cgroup` (v1, v2 or hybrid). Blank lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Result<Vec<CgroupEntry>, ParseError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        if line.trim().is_empty() {
            continue;
        }
        let Some((id_raw, rest)) = line.split_once(':') else {
            return Err(ParseError::new(
                line_no,
                end_col(line, 0),
                "':' after the hierarchy ID",
                END_OF_LINE,
            ));
        };
        let Some((controllers_raw, path)) = rest.split_once(':') else {
            return Err(ParseError::new(
                line_no,
                end_col(line, 0),
                "':' after the controller list",
                END_OF_LINE,
            ));
        };
        let lead = id_raw.chars().take_while(|c| c.is_whitespace()).count();
        let id_text = id_raw.trim();
        if id_text.is_empty() {
            return Err(ParseError::new(
                line_no,
                lead + 1,
                "hierarchy ID number",
                ":",
            ));
        }
        let hierarchy_id: u32 = unsigned(id_text, line_no, lead + 1, "hierarchy ID number")?;
        let controllers = controllers_raw
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        if path.is_empty() {
            let col = chars_before(line, line.len()) + 1;
            return Err(ParseError::new(line_no, col, "cgroup path", END_OF_LINE));
        }
        out.push(CgroupEntry {
            hierarchy_id,
            controllers,
            path: path.to_owned(),
        });
    }
    Ok(out)
}

/// Parses v2 `memory.max` (`max` or bytes) or v1 `memory.limit_in_bytes` (bytes).
pub fn parse_memory_limit(text: &str) -> Result<MemoryLimit, ParseError> {
    const EXPECTED: &str = "'max' or a number of bytes";
    let lead = text.chars().take_while(|c| c.is_whitespace()).count();
    let v = text.trim();
    if v.is_empty() {
        return Err(ParseError::new(1, lead + 1, EXPECTED, END_OF_INPUT));
    }
    if v == "max" {
        return Ok(MemoryLimit::Unlimited);
    }
    let n: u64 = unsigned(v, 1, lead + 1, EXPECTED)?;
    Ok(if n >= V1_UNLIMITED_THRESHOLD {
        MemoryLimit::Unlimited
    } else {
        MemoryLimit::Bytes(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/proc/self/cgroup` from this machine (hybrid v1 + v2).
    const HYBRID: &str = "\
9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/09a534c17e9afa77494fb9c4933f3cb3
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

    /// Models a pure cgroup v2 host running a systemd service (Ubuntu 22.04+).
    const V2_HOST: &str = "0::/system.slice/ollama.service\n";

    /// Models a cgroup v1 docker container with joined controllers and no trailing newline.
    const V1_DOCKER: &str =
        "12:cpu,cpuacct:/docker/3f1c9a\n4:cpuset:/docker/3f1c9a\n1:name=systemd:/docker/3f1c9a";

    /// Models a kubelet path on v2 containing ':' (CRI-O scope names do this).
    const V2_COLON_PATH: &str = "0::/kubepods.slice/kubepods-pod1.slice/crio-conmon:abc:def.scope";

    #[test]
    fn real_hybrid() {
        let c = parse_proc_cgroup(HYBRID).unwrap();
        assert_eq!(c.len(), 10);
        assert_eq!(c[0].controllers, vec!["name=systemd"]);
        assert_eq!(c[5].path, "/process_api/09a534c17e9afa77494fb9c4933f3cb3");
        assert_eq!(c[9].hierarchy_id, 0);
        assert!(c[9].controllers.is_empty());
        assert_eq!(c[9].path, "/");
    }

    #[test]
    fn v2_and_v1_variants() {
        let c = parse_proc_cgroup(V2_HOST).unwrap();
        assert_eq!(
            c,
            vec![CgroupEntry {
                hierarchy_id: 0,
                controllers: vec![],
                path: "/system.slice/ollama.service".into()
            }]
        );
        let c = parse_proc_cgroup(V1_DOCKER).unwrap();
        assert_eq!(c[0].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(c[2].path, "/docker/3f1c9a");
        let c = parse_proc_cgroup(V2_COLON_PATH).unwrap();
        assert_eq!(
            c[0].path,
            "/kubepods.slice/kubepods-pod1.slice/crio-conmon:abc:def.scope"
        );
    }

    #[test]
    fn bad_cgroup_lines() {
        let e = parse_proc_cgroup("0::/\nx4:memory:/\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 1: expected hierarchy ID number, found x4"
        );
        let e = parse_proc_cgroup("4:memory").unwrap_err();
        assert_eq!(
            (e.column, e.expected.as_str()),
            (9, "':' after the controller list")
        );
        let e = parse_proc_cgroup("/docker/abc").unwrap_err();
        assert_eq!(e.column, 12);
        let e = parse_proc_cgroup(":memory:/").unwrap_err();
        assert_eq!(e.column, 1);
        let e = parse_proc_cgroup("4:memory:").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 10: expected cgroup path, found end of line"
        );
    }

    #[test]
    fn memory_limits() {
        assert_eq!(parse_memory_limit("max\n"), Ok(MemoryLimit::Unlimited));
        assert_eq!(
            parse_memory_limit("8589934592\n"),
            Ok(MemoryLimit::Bytes(8 << 30))
        );
        // v1 unlimited on 4 KiB pages (x86_64) and 64 KiB pages (aarch64 RHEL).
        assert_eq!(
            parse_memory_limit("9223372036854771712\n"),
            Ok(MemoryLimit::Unlimited)
        );
        assert_eq!(
            parse_memory_limit("9223372036854710272\n"),
            Ok(MemoryLimit::Unlimited)
        );
        assert_eq!(parse_memory_limit("0"), Ok(MemoryLimit::Bytes(0)));
    }

    #[test]
    fn bad_memory_limits() {
        let e = parse_memory_limit("8G\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 2: expected 'max' or a number of bytes, found 8G"
        );
        assert_eq!(parse_memory_limit("\n").unwrap_err().found, "end of input");
        assert!(parse_memory_limit("-1").is_err());
        assert!(parse_memory_limit("max max").is_err());
    }
}
