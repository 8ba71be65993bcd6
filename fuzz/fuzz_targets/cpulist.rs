//! Linux CPU/node lists (`0-3,8-11`): parse never panics, and what parses prints and reparses
//! to the same set.
#![no_main]
use inferscope_host::{CpuSet, NodeSet};
use libfuzzer_sys::fuzz_target;
use std::str::FromStr;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(set) = CpuSet::from_str(s) {
        let printed = set.to_string();
        let again = CpuSet::from_str(&printed).expect("printed cpulist reparses");
        assert_eq!(set, again, "round trip of {printed:?}");
        let _ = set.iter().take(4).count();
    }
    if let Ok(set) = NodeSet::from_str(s) {
        let again = NodeSet::from_str(&set.to_string()).expect("printed nodelist reparses");
        assert_eq!(set, again);
    }
    let _ = inferscope_formats::hwloc_xml::decode_cpuset(s);
});
