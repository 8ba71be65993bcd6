//! Checks and set-up that turn `bench`'s flags into what a run needs: the server URLs, the
//! `/metrics` scrape, and a local tokenizer. Errors are the one line the binary prints.

use crate::result::TokenizerSetting;
use crate::run::{LocalTokenizer, MetricsScrape};
use crate::tokenizer::{MAX_TOKENIZER_BYTES, TokenCounter};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Every `--url` is http(s), and https only when this build speaks TLS.
pub fn check_urls(urls: &[String]) -> Result<(), String> {
    for url in urls {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("--url {url}: expected http://HOST:PORT"));
        }
        if url.starts_with("https://") && !crate::TLS_ENABLED {
            return Err(format!(
                "--url {url}: this build has no TLS (built with --no-default-features; rebuild with the default `tls` feature)"
            ));
        }
    }
    Ok(())
}

/// `--server-metrics`/`--no-server-metrics`/`--server-metrics-interval`: by default the
/// server's own `/metrics` (`server` is the first `--url`).
pub fn metrics_scrape(
    off: bool,
    interval: Duration,
    url: Option<&str>,
    server: &str,
) -> Result<Option<MetricsScrape>, String> {
    if off {
        return Ok(None);
    }
    if interval < Duration::from_millis(100) {
        return Err(format!(
            "--server-metrics-interval {interval:?}: at least 100ms (scrapes cost the server time)"
        ));
    }
    let url = match url {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => u.to_string(),
        Some(u) => {
            return Err(format!(
                "--server-metrics {u}: expected http://HOST:PORT/PATH"
            ));
        }
        None => format!("{}/metrics", crate::client::base_url(server)),
    };
    Ok(Some(MetricsScrape { url, interval }))
}

/// Read and load `--tokenizer FILE` (bounded: the size is checked before reading).
pub fn load_tokenizer(path: &Path) -> Result<LocalTokenizer, String> {
    let name = path.display();
    let cannot = |e: std::io::Error| format!("--tokenizer {name}: cannot read: {e}");
    let len = std::fs::metadata(path).map_err(cannot)?.len();
    if len > MAX_TOKENIZER_BYTES as u64 {
        return Err(format!(
            "--tokenizer {name}: {len} bytes, larger than the {} MiB a tokenizer.json can plausibly be",
            MAX_TOKENIZER_BYTES >> 20
        ));
    }
    let bytes = std::fs::read(path).map_err(cannot)?;
    let counter =
        TokenCounter::from_json(&bytes).map_err(|e| format!("--tokenizer {name}: {e}"))?;
    Ok(LocalTokenizer {
        setting: TokenizerSetting {
            path: name.to_string(),
            vocab_size: counter.vocab_size(),
        },
        counter: Arc::new(counter),
    })
}

/// Why NVML on this machine cannot measure the server, if it cannot: a `--server-snapshot` of
/// another host (`server_host`), or a `--url` that is neither loopback nor this host (`here`).
pub fn energy_not_here(
    urls: &[String],
    here: Option<&str>,
    server_host: Option<&str>,
) -> Option<String> {
    if let Some(h) = server_host
        && here != Some(h)
    {
        return Some(format!(
            "the server's snapshot is of {h}, not this machine: NVML here cannot measure it"
        ));
    }
    urls.iter()
        .find(|u| !crate::energy::url_is_local(u, here))
        .map(|u| {
            format!(
                "the server at {} is not on this machine (bench reads NVML where it runs)",
                inferscope_host::redact::scrub(u)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_is_measured_only_for_a_server_here() {
        let local = vec!["http://127.0.0.1:8000".to_string()];
        assert_eq!(energy_not_here(&local, Some("box"), None), None);
        assert!(
            energy_not_here(&local, Some("box"), Some("other"))
                .unwrap()
                .contains("of other")
        );
        let far = vec!["http://10.9.8.7:8000".to_string()];
        assert!(
            energy_not_here(&far, Some("box"), None)
                .unwrap()
                .contains("not on this machine")
        );
    }

    #[test]
    fn urls_must_be_http() {
        assert!(check_urls(&["http://a:1".into()]).is_ok());
        let e = check_urls(&["http://a:1".into(), "ftp://b".into()]).unwrap_err();
        assert_eq!(e, "--url ftp://b: expected http://HOST:PORT");
    }

    #[test]
    fn metrics_default_to_the_server_and_refuse_fast_scrapes() {
        let ms = Duration::from_millis;
        assert_eq!(
            metrics_scrape(true, ms(1), None, "http://h:8000").unwrap(),
            None
        );
        let m = metrics_scrape(false, ms(500), None, "http://h:8000")
            .unwrap()
            .unwrap();
        assert_eq!(m.url, "http://h:8000/metrics");
        assert!(
            metrics_scrape(false, ms(99), None, "http://h:8000")
                .unwrap_err()
                .contains("at least 100ms")
        );
        assert!(metrics_scrape(false, ms(500), Some("h:9/m"), "http://h:8000").is_err());
    }

    #[test]
    fn a_tokenizer_that_is_not_there_is_named() {
        let e = load_tokenizer(Path::new("/nonexistent/tokenizer.json"))
            .err()
            .unwrap();
        assert!(
            e.starts_with("--tokenizer /nonexistent/tokenizer.json: cannot read"),
            "{e}"
        );
    }
}
