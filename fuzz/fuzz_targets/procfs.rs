//! Every procfs/sysfs parser on the same input: meminfo, limits, mounts, cgroup, cpuinfo,
//! numa_maps, THP, kernel cmdline, environ and single sysfs values.
#![no_main]
use inferscope_formats::{
    cgroup, cmdline, cpuinfo, environ, limits, meminfo, mounts, numa_maps, sysfs, thp,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = environ::parse(data);
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = meminfo::parse(s).map(|m| (m.bytes("MemTotal"), m.count("HugePages_Total")));
    let _ = limits::parse(s).map(|l| limits::find(&l, "Max locked memory").is_some());
    let _ = mounts::parse(s).map(|v| {
        v.iter()
            .filter_map(|m| m.option_value("size"))
            .map(mounts::parse_tmpfs_size)
            .count()
    });
    let _ = mounts::parse_tmpfs_size(s);
    let _ = cgroup::parse_proc_cgroup(s);
    let _ = cgroup::parse_memory_limit(s);
    let _ = cpuinfo::parse(s);
    let _ = numa_maps::parse(s);
    let _ = thp::parse_selected(s);
    let _ = cmdline::iommu_params(s);
    let _ = sysfs::parse_u64(s);
    let _ = sysfs::parse_u32(s);
    let _ = sysfs::parse_i64(s);
    let _ = sysfs::parse_hex_u16(s);
    let _ = sysfs::parse_hex_u32(s);
    let _ = sysfs::parse_link_speed(s).map(|l| l.generation());
    let _ = sysfs::parse_distances(s);
});
