//! The engine-metrics scraper (I/O): a thread of its own with its own one-thread runtime, so a
//! slow or dead `/metrics` never delays a chunk the bench's runtime is timing. It scrapes once
//! at start, then every interval, and once more when the run ends (so counters such as
//! preemptions have their final value). Failures are recorded, never raised.

use crate::run::MetricsScrape;
use crate::server_metrics::{MAX_BODY_BYTES, ServerMetrics};
use std::time::{Duration, Instant};

/// A running scraper; [`Scraper::finish`] stops it and returns what it recorded.
#[derive(Debug)]
pub struct Scraper {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<ServerMetrics>>,
    source: String,
    interval_s: f64,
}

impl Scraper {
    /// Start scraping `s.url` every `s.interval`.
    pub fn start(s: &MetricsScrape) -> Scraper {
        let source = inferscope_host::redact::scrub(&s.url).into_owned();
        let interval_s = s.interval.as_secs_f64();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (url, interval, src) = (s.url.clone(), s.interval, source.clone());
        let thread = std::thread::Builder::new()
            .name("server-metrics".into())
            .spawn(move || scrape_loop(&url, &src, interval, rx))
            .ok();
        Scraper {
            stop: Some(tx),
            thread,
            source,
            interval_s,
        }
    }

    /// Stop (after one last scrape) and return the record.
    pub fn finish(mut self) -> ServerMetrics {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let mut fallback = ServerMetrics::new(&self.source, self.interval_s);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(m)) => m,
            _ => {
                fallback.add_failure("the scraper thread could not run".into());
                fallback
            }
        }
    }
}

fn scrape_loop(
    url: &str,
    source: &str,
    interval: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> ServerMetrics {
    let mut m = ServerMetrics::new(source, interval.as_secs_f64());
    let rt = match crate::run::client_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            m.add_failure(format!("cannot start the scraper's runtime: {e}"));
            return m;
        }
    };
    // A scrape may take at most one interval (at least 1 s) so it never piles up.
    let timeout = interval.max(Duration::from_secs(1));
    crate::init_tls();
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            m.add_failure(format!("cannot build the HTTP client: {e}"));
            return m;
        }
    };
    let t0 = Instant::now();
    rt.block_on(async {
        let mut next = tokio::time::Instant::now();
        loop {
            scrape_once(&client, url, t0, &mut m).await;
            next += interval;
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = &mut stop => {
                    scrape_once(&client, url, t0, &mut m).await;
                    break;
                }
            }
        }
    });
    m
}

async fn scrape_once(client: &reqwest::Client, url: &str, t0: Instant, m: &mut ServerMetrics) {
    let t = t0.elapsed().as_secs_f64();
    match fetch(client, url).await {
        Ok(body) => m.add_body(t, &body),
        Err(why) => m.add_failure(format!("GET {}: {why}", m.source)),
    }
}

/// The body, read in chunks and refused past [`MAX_BODY_BYTES`].
async fn fetch(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let mut resp = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP status {}", resp.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(format!("body larger than {} MiB", MAX_BODY_BYTES >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "body is not UTF-8 text".to_string())
}
