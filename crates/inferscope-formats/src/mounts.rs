//! `/proc/self/mounts` (and `/etc/mtab`-style) lines plus tmpfs `size=` values.
//!
//! The kernel escapes space, tab, newline and backslash in fields as `\ooo` octal, so
//! fields split on whitespace and are then unescaped (bytes, lossily decoded as UTF-8).
//! Options split on commas outside double quotes, because SELinux `context="…:c1,c2"`
//! values contain raw commas. The dump/pass columns are optional but must be numbers.

use crate::error::ParseError;
use crate::lex::{END_OF_INPUT, END_OF_LINE, end_col, tokens, unsigned};

/// One mounted filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mount {
    /// The mount source (device, `tmpfs`, `overlay`, …), unescaped.
    pub source: String,
    /// Where it is mounted, unescaped (`\040` becomes a space).
    pub mount_point: String,
    /// The filesystem type, e.g. `ext4`, `tmpfs`, `cgroup2`.
    pub fs_type: String,
    /// Mount options in order, unescaped, e.g. `rw`, `size=65536k`.
    pub options: Vec<String>,
}

impl Mount {
    /// The value of a `key=value` option (`size=65536k` gives `Some("65536k")`).
    ///
    /// A bare flag such as `rw` has no value and gives `None`; use [`Mount::has_option`].
    pub fn option_value(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find_map(|o| o.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
    }

    /// Whether a bare flag (`ro`, `nosuid`) or a `key=value` option with this key is present.
    pub fn has_option(&self, key: &str) -> bool {
        self.options
            .iter()
            .any(|o| o == key || o.split_once('=').is_some_and(|(k, _)| k == key))
    }
}

/// A tmpfs `size=` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TmpfsSize {
    /// An absolute size in bytes.
    Bytes(u64),
    /// A percentage of physical RAM (`50%`).
    PercentOfRam(u32),
}

/// Parses `/proc/self/mounts`. Blank lines are skipped; 4 to 6 fields per line.
pub fn parse(text: &str) -> Result<Vec<Mount>, ParseError> {
    const FIELD_NAMES: [&str; 4] = [
        "mount source",
        "mount point",
        "filesystem type",
        "mount options",
    ];
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let toks = tokens(line, 0);
        if toks.is_empty() {
            continue;
        }
        if let Some(missing) = FIELD_NAMES.get(toks.len()) {
            return Err(ParseError::new(
                line_no,
                end_col(line, 0),
                *missing,
                END_OF_LINE,
            ));
        }
        for t in toks.iter().skip(4).take(2) {
            unsigned::<u32>(t.text, line_no, t.col, "dump/pass number")?;
        }
        if let Some(extra) = toks.get(6) {
            return Err(ParseError::new(
                line_no,
                extra.col,
                "end of line",
                extra.text,
            ));
        }
        let field = |i: usize| toks.get(i).map_or(String::new(), |t| unescape(t.text));
        out.push(Mount {
            source: field(0),
            mount_point: field(1),
            fs_type: field(2),
            options: toks
                .get(3)
                .map(|t| split_options(t.text))
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Splits an options field on commas outside double quotes, then unescapes each option.
fn split_options(field: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_quotes = false;
    let mut start = 0;
    for (i, c) in field.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            ',' if !in_quotes => {
                push_option(&mut out, field.get(start..i).unwrap_or(""));
                start = i + 1;
            }
            _ => {}
        }
    }
    push_option(&mut out, field.get(start..).unwrap_or(""));
    out
}

fn push_option(out: &mut Vec<String>, raw: &str) {
    if !raw.is_empty() {
        out.push(unescape(raw));
    }
}

/// Decodes `\ooo` octal escapes (value ≤ 255); any other backslash is kept literally.
fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\'
            && let Some(v) = bytes.get(i + 1..i + 4).and_then(octal3)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn octal3(digits: &[u8]) -> Option<u8> {
    let mut v: u32 = 0;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return None;
        }
        v = v * 8 + u32::from(d - b'0');
    }
    u8::try_from(v).ok()
}

/// Parses a tmpfs `size=` value: `65536k`, `64m`, `2g`, `1t`, `1073741824` or `50%`.
///
/// Suffixes `k`/`m`/`g`/`t`/`p`/`e` (binary multiples, case-insensitive) as the kernel's
/// `memparse` accepts; the product is checked for overflow. Errors are on line 1 with the
/// column inside `value`.
pub fn parse_tmpfs_size(value: &str) -> Result<TmpfsSize, ParseError> {
    const EXPECTED: &str = "a size like 65536k, 64m, 2g, 1073741824 or 50%";
    let lead = value.chars().take_while(|c| c.is_whitespace()).count();
    let v = value.trim();
    let col = lead + 1;
    if v.is_empty() {
        return Err(ParseError::new(1, col, EXPECTED, END_OF_INPUT));
    }
    if let Some(pct) = v.strip_suffix('%') {
        if pct.is_empty() {
            return Err(ParseError::new(1, col, EXPECTED, v));
        }
        return unsigned::<u32>(pct, 1, col, EXPECTED)
            .map_err(|e| ParseError {
                found: v.to_owned(),
                ..e
            })
            .map(TmpfsSize::PercentOfRam);
    }
    let shift = v.chars().last().and_then(|c| match c.to_ascii_lowercase() {
        'k' => Some(10),
        'm' => Some(20),
        'g' => Some(30),
        't' => Some(40),
        'p' => Some(50),
        'e' => Some(60),
        _ => None,
    });
    let (digits, shift) = match shift {
        // The suffix is one ASCII byte, so this slice is on a char boundary.
        Some(s) => (v.get(..v.len() - 1).unwrap_or(""), s),
        None => (v, 0),
    };
    if digits.is_empty() {
        return Err(ParseError::new(1, col, EXPECTED, v));
    }
    let n: u64 = unsigned(digits, 1, col, EXPECTED).map_err(|e| ParseError {
        found: v.to_owned(),
        ..e
    })?;
    n.checked_mul(1u64 << shift)
        .map(TmpfsSize::Bytes)
        .ok_or_else(|| ParseError::new(1, col, "a size that fits in u64 bytes", v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `/proc/self/mounts` from this machine (a Firecracker VM with cgroup v1 + v2).
    const SELF_MOUNTS: &str = "\
proc /proc proc rw,relatime 0 0
sysfs /sys sysfs rw,relatime 0 0
devtmpfs /dev devtmpfs rw,relatime,size=12334096k,nr_inodes=3083524,mode=755 0 0
tmpfs /dev/shm tmpfs rw,relatime,size=24683568k 0 0
devpts /dev/pts devpts rw,relatime,mode=600,ptmxmode=000 0 0
/dev/vda / ext4 rw,relatime,discard,resv_strict,resuid=65534,resgid=65534 0 0
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    /// Models a docker container on an SELinux host (podman/RHEL): overlay root with a
    /// quoted context containing commas, the default 64 MiB /dev/shm, and a bind mount
    /// whose path contains a space (escaped `\040`).
    const CONTAINER_MOUNTS: &str = "\
overlay / overlay rw,context=\"system_u:object_r:container_file_t:s0:c123,c456\",relatime,lowerdir=/var/lib/containers/l/A:/var/lib/containers/l/B,upperdir=/var/lib/containers/u,workdir=/var/lib/containers/w 0 0
shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,context=\"system_u:object_r:container_file_t:s0:c123,c456\",size=65536k 0 0
/dev/nvme0n1p1 /data/my\\040models ext4 ro,relatime 0 0
cgroup /sys/fs/cgroup cgroup2 ro,nosuid,nodev,noexec,relatime";

    #[test]
    fn real_self_mounts() {
        let m = parse(SELF_MOUNTS).unwrap();
        assert_eq!(m.len(), 11);
        let shm = m.iter().find(|m| m.mount_point == "/dev/shm").unwrap();
        assert_eq!(shm.fs_type, "tmpfs");
        assert_eq!(shm.option_value("size"), Some("24683568k"));
        assert_eq!(
            parse_tmpfs_size(shm.option_value("size").unwrap()),
            Ok(TmpfsSize::Bytes(24683568 * 1024))
        );
        assert!(shm.has_option("rw"));
        assert_eq!(shm.option_value("rw"), None);
        assert_eq!(m[9].option_value("name"), Some("systemd"));
        assert_eq!(m[10].fs_type, "cgroup2");
    }

    #[test]
    fn container_mounts() {
        let m = parse(CONTAINER_MOUNTS).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[0].option_value("context"),
            Some("\"system_u:object_r:container_file_t:s0:c123,c456\"")
        );
        assert_eq!(m[0].option_value("upperdir"), Some("/var/lib/containers/u"));
        assert_eq!(m[1].option_value("size"), Some("65536k"));
        assert!(m[1].has_option("noexec"));
        assert_eq!(m[2].mount_point, "/data/my models");
        assert!(m[3].has_option("ro"));
    }

    #[test]
    fn unescape_cases() {
        assert_eq!(unescape(r"a\040b\011c\134d\012"), "a b\tc\\d\n");
        assert_eq!(unescape(r"bad\9xx\777\04"), r"bad\9xx\777\04");
        assert_eq!(unescape(r"\303\251"), "é");
        assert_eq!(unescape(r"\377"), "\u{fffd}");
    }

    #[test]
    fn bad_lines() {
        let e = parse("proc /proc proc rw 0 0\ntmpfs /dev/shm\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 15: expected filesystem type, found end of line"
        );
        let e = parse("proc /proc proc rw x 0").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (20, "x"));
        let e = parse("proc /proc proc rw 0 0 extra").unwrap_err();
        assert_eq!((e.column, e.found.as_str()), (24, "extra"));
    }

    #[test]
    fn tmpfs_sizes() {
        assert_eq!(parse_tmpfs_size("65536k"), Ok(TmpfsSize::Bytes(64 << 20)));
        assert_eq!(parse_tmpfs_size("64m"), Ok(TmpfsSize::Bytes(64 << 20)));
        assert_eq!(parse_tmpfs_size("64M"), Ok(TmpfsSize::Bytes(64 << 20)));
        assert_eq!(parse_tmpfs_size("2g"), Ok(TmpfsSize::Bytes(2 << 30)));
        assert_eq!(parse_tmpfs_size("1T"), Ok(TmpfsSize::Bytes(1 << 40)));
        assert_eq!(
            parse_tmpfs_size("1073741824"),
            Ok(TmpfsSize::Bytes(1 << 30))
        );
        assert_eq!(parse_tmpfs_size("50%"), Ok(TmpfsSize::PercentOfRam(50)));
        assert_eq!(parse_tmpfs_size("0"), Ok(TmpfsSize::Bytes(0)));
    }

    #[test]
    fn tmpfs_size_errors() {
        let e = parse_tmpfs_size("64x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 3: expected a size like 65536k, 64m, 2g, 1073741824 or 50%, found 64x"
        );
        assert_eq!(parse_tmpfs_size("").unwrap_err().found, "end of input");
        assert_eq!(parse_tmpfs_size("%").unwrap_err().column, 1);
        assert_eq!(parse_tmpfs_size("k").unwrap_err().column, 1);
        assert_eq!(parse_tmpfs_size("5.5g").unwrap_err().column, 2);
        let e = parse_tmpfs_size("99999999999e").unwrap_err();
        assert_eq!(e.expected, "a size that fits in u64 bytes");
        assert!(parse_tmpfs_size("99999999999%").is_err());
        assert!(parse_tmpfs_size("ék").is_err());
    }
}
