//! Every file in `fixtures/bad/procfs/` must fail with exactly the message listed in
//! `fixtures/bad/procfs/EXPECTED.md`, and that table must list every case here.

use inferscope_formats::{
    cgroup, cpuinfo, limits, meminfo, mounts, nvidia_numa_status, sysfs, thp,
};

type Parser = fn(&str) -> Option<String>;

fn err<T, E: ToString>(r: Result<T, E>) -> Option<String> {
    r.err().map(|e| e.to_string())
}

macro_rules! case {
    ($file:literal, $parser:literal, $f:expr, $msg:literal) => {
        (
            $file,
            $parser,
            include_str!(concat!("../../../fixtures/bad/procfs/", $file)),
            $f as Parser,
            $msg,
        )
    };
}

const EXPECTED_MD: &str = include_str!("../../../fixtures/bad/procfs/EXPECTED.md");

#[allow(clippy::type_complexity)]
fn cases() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    Parser,
    &'static str,
)> {
    vec![
        case!(
            "meminfo-non-numeric.txt",
            "meminfo::parse",
            |t| err(meminfo::parse(t)),
            "line 3, column 24: expected a number, found 2438828O"
        ),
        case!(
            "meminfo-bad-unit.txt",
            "meminfo::parse",
            |t| err(meminfo::parse(t)),
            "line 2, column 26: expected unit kB or end of line, found MB"
        ),
        case!(
            "node-meminfo-missing-colon.txt",
            "meminfo::parse",
            |t| err(meminfo::parse(t)),
            "line 2, column 8: expected ':' after the key, found MemFree          3433944 kB"
        ),
        case!(
            "limits-truncated.txt",
            "limits::parse",
            |t| err(limits::parse(t)),
            "line 3, column 32: expected hard limit ('unlimited' or a number), found end of line"
        ),
        case!(
            "limits-non-numeric.txt",
            "limits::parse",
            |t| err(limits::parse(t)),
            "line 2, column 28: expected soft limit ('unlimited' or a number), found 8M"
        ),
        case!(
            "mounts-too-few-fields.txt",
            "mounts::parse",
            |t| err(mounts::parse(t)),
            "line 2, column 15: expected filesystem type, found end of line"
        ),
        case!(
            "mounts-bad-dump.txt",
            "mounts::parse",
            |t| err(mounts::parse(t)),
            "line 2, column 37: expected dump/pass number, found zero"
        ),
        case!(
            "cgroup-bad-hierarchy.txt",
            "cgroup::parse_proc_cgroup",
            |t| err(cgroup::parse_proc_cgroup(t)),
            "line 2, column 1: expected hierarchy ID number, found x4"
        ),
        case!(
            "cgroup-missing-colon.txt",
            "cgroup::parse_proc_cgroup",
            |t| err(cgroup::parse_proc_cgroup(t)),
            "line 2, column 21: expected ':' after the hierarchy ID, found end of line"
        ),
        case!(
            "memory-max-garbage.txt",
            "cgroup::parse_memory_limit",
            |t| err(cgroup::parse_memory_limit(t)),
            "line 1, column 2: expected 'max' or a number of bytes, found 8G"
        ),
        case!(
            "thp-no-selection.txt",
            "thp::parse_selected",
            |t| err(thp::parse_selected(t)),
            "line 1, column 1: expected exactly one bracketed selection like [madvise], found always madvise never"
        ),
        case!(
            "thp-unclosed-bracket.txt",
            "thp::parse_selected",
            |t| err(thp::parse_selected(t)),
            "line 1, column 8: expected exactly one bracketed selection like [madvise], found [madvise"
        ),
        case!(
            "cpuinfo-bad-processor.txt",
            "cpuinfo::parse",
            |t| err(cpuinfo::parse(t)),
            "line 4, column 13: expected a processor number, found one"
        ),
        case!(
            "distance-garbage.txt",
            "sysfs::parse_distances",
            |t| err(sysfs::parse_distances(t)),
            "line 1, column 5: expected a NUMA distance number, found 2l"
        ),
        case!(
            "link-speed-garbage.txt",
            "sysfs::parse_link_speed",
            |t| err(sysfs::parse_link_speed(t)),
            "line 1, column 6: expected GT/s, found GB/s"
        ),
        case!(
            "pci-vendor-garbage.txt",
            "sysfs::parse_hex_u16",
            |t| err(sysfs::parse_hex_u16(t)),
            "line 1, column 5: expected a hex number like 0x10de, found 0x10zz"
        ),
        case!(
            "numa-node-garbage.txt",
            "sysfs::parse_i64",
            |t| err(sysfs::parse_i64(t)),
            "line 1, column 1: expected a number, found minus one"
        ),
        case!(
            "nvidia-numa-status-garbage.txt",
            "nvidia_numa_status::parse",
            |t| err(nvidia_numa_status::parse(t)),
            "line 1, column 12: expected a node number, found 2S5"
        ),
    ]
}

#[test]
fn each_bad_input_fails_with_the_listed_message() {
    for (file, parser, text, f, msg) in cases() {
        assert_eq!(f(text).as_deref(), Some(msg), "{file} via {parser}");
    }
}

#[test]
fn expected_md_lists_every_case() {
    for (file, parser, _, _, msg) in cases() {
        let row = format!("| `{file}` | `inferscope_formats::{parser}` | `{msg}` |");
        assert!(EXPECTED_MD.contains(&row), "EXPECTED.md lacks row:\n{row}");
    }
    let rows = EXPECTED_MD.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(
        rows,
        cases().len(),
        "EXPECTED.md has rows with no test case"
    );
}
