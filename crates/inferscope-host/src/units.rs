//! Human-readable units shared by every renderer, so a figure reads the same in `topo`,
//! `check` and `plan` output; and the one way every command reads a duration (`500ms`, `30s`).

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

/// A duration flag or field that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number where one was expected.
    #[error("`{0}` is not a duration (try 500ms, 30s, 2m)")]
    NotANumber(String),
    /// A unit other than us, ms, s, m, min or h.
    #[error("`{text}`: unknown unit `{unit}` (use us, ms, s, m, h)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// Too large for a `Duration`.
    #[error("`{0}` is out of range")]
    OutOfRange(String),
}

/// Parse a duration: a decimal number and a unit, `us` (or `µs`), `ms`, `s`, `m` (or `min`)
/// or `h`; a bare number is seconds (`500ms`, `1.5s`, `2m`, `30`). Zero is allowed (callers
/// that need a positive duration say so).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, DurationError> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| DurationError::NotANumber(s.to_string()))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => {
            return Err(DurationError::UnknownUnit {
                text: s.to_string(),
                unit: other.to_string(),
            });
        }
    };
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| DurationError::OutOfRange(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(super::human_bytes(85_520_809_984), "79.6 GiB");
        assert_eq!(super::human_bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 1h "), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration("abc").unwrap_err().to_string(),
            "`abc` is not a duration (try 500ms, 30s, 2m)"
        );
        assert_eq!(
            parse_duration("5 parsecs").unwrap_err().to_string(),
            "`5 parsecs`: unknown unit `parsecs` (use us, ms, s, m, h)"
        );
        assert!(parse_duration("").is_err());
        assert!(matches!(
            parse_duration("1e400"),
            Err(DurationError::UnknownUnit { .. })
        ));
        let huge = format!("{}h", "9".repeat(30));
        assert_eq!(
            parse_duration(&huge),
            Err(DurationError::OutOfRange(huge.clone()))
        );
    }
}
