//! Deterministic smoke fuzzing: every parser must return (not panic) on arbitrary text
//! built from the characters these formats use, plus truncations of real samples.

use inferscope_formats::{cgroup, cmdline, cpuinfo, environ, limits, meminfo, mounts, sysfs, thp};

const ALPHABET: &[char] = &[
    '0', '1', '7', '9', 'x', 'k', 'K', 'm', 'g', 'T', '%', '.', ':', ',', '=', '[', ']', '"', '\\',
    '-', '/', ' ', ' ', '\t', '\n', '\r', '\0', 'é', 'N', 'o', 'd', 'e', 'G', 's', 'P',
];

const SAMPLES: &[&str] = &[
    "MemTotal:       24683568 kB\nHugePages_Total:       0\n",
    "Node 0 MemTotal:        3892968 kB\n",
    "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         8388608              8388608              bytes     \n",
    "tmpfs /dev/shm tmpfs rw,relatime,size=24683568k,context=\"a:b,c\" 0 0\n/x\\040y / ext4 rw 0 0\n",
    "4:memory:/process_api/0a\n0::/\n",
    "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n",
    "always defer defer+madvise [madvise] never\n",
    "16.0 GT/s PCIe\n",
    "10 21\n",
];

fn run_all(s: &str) {
    let _ = meminfo::parse(s).map(|m| (m.bytes("MemTotal"), m.count("HugePages_Total")));
    let _ = thp::parse_selected(s);
    let _ = limits::parse(s);
    let _ = mounts::parse(s).map(|v| {
        v.iter()
            .filter_map(|m| m.option_value("size"))
            .map(str::len)
            .sum::<usize>()
    });
    let _ = mounts::parse_tmpfs_size(s);
    let _ = cgroup::parse_proc_cgroup(s);
    let _ = cgroup::parse_memory_limit(s);
    let _ = cpuinfo::parse(s);
    let _ = cmdline::iommu_params(s);
    let _ = environ::parse(s.as_bytes());
    let _ = sysfs::parse_u64(s);
    let _ = sysfs::parse_u32(s);
    let _ = sysfs::parse_i64(s);
    let _ = sysfs::parse_hex_u16(s);
    let _ = sysfs::parse_hex_u32(s);
    let _ = sysfs::parse_link_speed(s).map(|l| l.generation());
    let _ = sysfs::parse_distances(s);
}

#[test]
fn random_text_never_panics() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    for _ in 0..20_000 {
        let len = next() % 48;
        let s: String = (0..len)
            .map(|_| ALPHABET[next() % ALPHABET.len()])
            .collect();
        run_all(&s);
    }
}

#[test]
fn truncated_and_mutated_samples_never_panic() {
    for sample in SAMPLES {
        for (i, _) in sample.char_indices() {
            run_all(&sample[..i]);
            run_all(&sample[i..]);
            for c in ['x', ':', ' ', '\n', '9', '\\', '['] {
                let mut m = sample.to_string();
                m.insert(i, c);
                run_all(&m);
            }
        }
    }
    run_all(&"9".repeat(10_000));
    run_all(&"[".repeat(1000));
}
