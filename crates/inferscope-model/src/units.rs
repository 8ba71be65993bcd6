//! Human-readable units shared by every renderer, so a figure reads the same in `topo`,
//! `check` and `plan` output.

/// Bytes in binary units with one decimal (`64.0 MiB`); plain bytes below 1 KiB.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS.get(i).unwrap_or(&"PiB"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn binary_units() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(super::human_bytes(85_520_809_984), "79.6 GiB");
        assert_eq!(super::human_bytes(u64::MAX), "16384.0 PiB");
    }
}
