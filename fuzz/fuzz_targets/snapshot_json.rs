//! A snapshot file handed to `--snapshot` (what `inferscope::load::parse_snapshot` does: JSON,
//! then `validate()`), and what loads is written back byte-identically.
#![no_main]
use inferscope_host::Snapshot;
use libfuzzer_sys::fuzz_target;

fn load(s: &str) -> Option<Snapshot> {
    let snap: Snapshot = serde_json::from_str(s).ok()?;
    snap.validate().ok()?;
    Some(snap)
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Some(snap) = load(s) {
        let json = serde_json::to_string_pretty(&snap).expect("snapshot serialises");
        let again = load(&json).expect("a written snapshot loads");
        let json2 = serde_json::to_string_pretty(&again).expect("snapshot serialises");
        assert_eq!(json, json2);
    }
});
