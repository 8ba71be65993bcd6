//! `/proc/<pid>/environ`.
//!
//! The file is NUL-separated `KEY=VALUE` bytes with no encoding guarantee, so decoding is
//! lossy UTF-8 and the parser cannot fail: entries without '=' (or with an empty key)
//! carry nothing usable and are skipped.

/// Splits environ bytes into `(key, value)` pairs in file order; the value may contain '='.
pub fn parse(bytes: &[u8]) -> Vec<(String, String)> {
    bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            let (key, value) = entry.split_at(eq);
            if key.is_empty() {
                return None;
            }
            let value = value.get(1..).unwrap_or(&[]);
            Some((
                String::from_utf8_lossy(key).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Models a CUDA inference container's environ (the format of `/proc/self/environ`).
    const CONTAINER: &[u8] = b"PATH=/usr/local/nvidia/bin:/usr/bin\0CUDA_VISIBLE_DEVICES=0,1\0NVIDIA_VISIBLE_DEVICES=all\0LD_LIBRARY_PATH=/usr/local/cuda/lib64\0OPTS=a=b\0";

    #[test]
    fn container_environ() {
        let e = parse(CONTAINER);
        assert_eq!(e.len(), 5);
        assert_eq!(e[1], ("CUDA_VISIBLE_DEVICES".into(), "0,1".into()));
        assert_eq!(e[4], ("OPTS".into(), "a=b".into()));
    }

    #[test]
    fn skips_and_lossy() {
        let e = parse(b"NOEQ\0=novalue\0EMPTY=\0BAD=\xff\xfe\0\0");
        assert_eq!(
            e,
            vec![
                ("EMPTY".into(), String::new()),
                ("BAD".into(), "\u{fffd}\u{fffd}".into())
            ]
        );
        assert!(parse(b"").is_empty());
    }
}
