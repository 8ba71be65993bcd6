//! `inferscope diff http://node:9400 ...` (and anything else that reads an exporter's snapshot):
//! fetch each node's Snapshot from its exporter's
//! `/snapshot`, all nodes at once (at most [`PARALLEL`] connections), each fetch bounded in time
//! and size. A node that fails is an error for that node only; the caller reports it.
//!
//! Memory is bounded by design, whatever the nodes send (issue 33): an answer may hold at most
//! [`MAX_NODE_BYTES`], and answer bodies held at once share [`BODY_BUDGET`]. A fetch reserves
//! its share (the declared `Content-Length`, else the whole cap) before reading its body, so 64
//! nodes sending endless bodies hold at most `BODY_BUDGET` between them, not 64 × the cap.
//! Time spent waiting for that share does not count against `--timeout`.

use inferscope_host::Snapshot;
use std::time::{Duration, Instant};

/// Connections open at once (a cluster of hundreds of nodes must not open hundreds of sockets).
pub const PARALLEL: usize = 32;
/// Time to establish a TCP connection to a node.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer accepted from one node. A snapshot of an 8-GPU H100 node is 156 KiB
/// (`fixtures/fleet/node-a.json`), a 16-GPU host with 300 PCI functions about 300 KiB: 8 MiB
/// is 25 times the largest real one.
pub const MAX_NODE_BYTES: u64 = 8 << 20;
/// Answer bytes held at once across all nodes (8 endless answers at the cap, or hundreds of
/// real snapshots).
pub const BODY_BUDGET: u64 = 64 << 20;
/// Unit of the budget's semaphore permits.
const PERMIT_BYTES: u64 = 1024;

/// True when `arg` names an exporter rather than a file.
pub fn is_url(arg: &str) -> bool {
    arg.starts_with("http://") || arg.starts_with("https://")
}

/// The snapshot URL for an argument: `http://host:port` (or `.../`) means its `/snapshot`; any
/// other path is used as given.
pub fn snapshot_url(arg: &str) -> Result<reqwest::Url, String> {
    let mut url =
        reqwest::Url::parse(arg).map_err(|e| format!("{}: not a URL: {e}", shown(arg)))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{}: only http:// is supported (the exporter serves plain HTTP)",
            shown(arg)
        ));
    }
    if url.host_str().is_none() {
        return Err(format!("{}: the URL names no host", shown(arg)));
    }
    if url.path().is_empty() || url.path() == "/" {
        url.set_path("/snapshot");
    }
    Ok(url)
}

/// Column name for a URL: `host:port`, and the path when it is not the default `/snapshot`.
pub fn short_name(arg: &str) -> String {
    match reqwest::Url::parse(arg) {
        Ok(u) => {
            let path = match u.path() {
                "" | "/" | "/snapshot" => "",
                p => p,
            };
            match (u.host_str(), u.port_or_known_default()) {
                (Some(h), Some(p)) => format!("{h}:{p}{path}"),
                (Some(h), None) => format!("{h}{path}"),
                _ => arg.to_string(),
            }
        }
        Err(_) => arg.to_string(),
    }
}

/// The URL as printed: credentials in it replaced (`http://admin:<redacted>@node`).
pub fn shown(url: &str) -> String {
    inferscope_host::redact::scrub(url).into_owned()
}

async fn fetch_one(
    client: &reqwest::Client,
    budget: &tokio::sync::Semaphore,
    arg: &str,
    timeout: Duration,
) -> Result<Snapshot, String> {
    let url = snapshot_url(arg)?;
    let name = shown(url.as_str());
    let no_answer = || format!("{name}: no answer: timed out after {timeout:?}");
    let start = Instant::now();
    let mut resp = tokio::time::timeout(timeout, client.get(url.clone()).send())
        .await
        .map_err(|_| no_answer())?
        .map_err(|e| {
            let what = if e.is_connect() || e.is_timeout() {
                "no answer"
            } else {
                "not an HTTP answer"
            };
            format!("{name}: {what}: {}", chain(&e))
        })?;
    if resp.status().is_redirection() {
        return Err(format!(
            "{name}: HTTP {} (redirects are not followed)",
            resp.status()
        ));
    }
    if !resp.status().is_success() {
        return Err(format!("{name}: HTTP {}", resp.status()));
    }
    let too_big = || {
        format!(
            "{name}: larger than {} MiB; not a snapshot written by inferscope",
            MAX_NODE_BYTES >> 20
        )
    };
    let declared = resp.content_length();
    if declared.is_some_and(|n| n > MAX_NODE_BYTES) {
        return Err(too_big());
    }
    // Reserve this answer's share of the budget before reading it; hyper stops a body at its
    // declared length, so the declared length is what the body can hold.
    let share = declared
        .unwrap_or(MAX_NODE_BYTES)
        .div_ceil(PERMIT_BYTES)
        .max(1);
    let waiting = Instant::now();
    let _share = budget
        .acquire_many(u32::try_from(share).unwrap_or(u32::MAX))
        .await
        .map_err(|_| format!("{name}: fetch cancelled"))?;
    let left = timeout.saturating_sub(start.elapsed().saturating_sub(waiting.elapsed()));
    let read = async {
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("{name}: answer cut short: {}", chain(&e)))?
        {
            if (body.len() + chunk.len()) as u64 > MAX_NODE_BYTES {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        Ok::<_, String>(body)
    };
    let body = tokio::time::timeout(left, read)
        .await
        .map_err(|_| no_answer())??;
    if body.starts_with(&crate::load::GZIP_MAGIC) {
        return Err(format!("{name}: {}", crate::load::GZIP_HINT));
    }
    let text = String::from_utf8(body).map_err(|_| format!("{name}: answer is not UTF-8 text"))?;
    if !text.trim_start().starts_with('{') {
        return Err(format!(
            "{name}: the answer is not JSON; an inferscope exporter serves its snapshot on /snapshot"
        ));
    }
    crate::load::parse_snapshot(&text, &name).map_err(|e| format!("{e:#}"))
}

/// The causes of an error on one line (reqwest's own message repeats the URL and hides the
/// cause).
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    if e.source().is_none() {
        parts.push(e.to_string());
    }
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if parts.last() != Some(&t) {
            parts.push(t);
        }
        src = s.source();
    }
    parts.join(": ")
}

/// Fetch every URL; one result per argument, in order. `timeout` bounds each whole fetch.
pub fn fetch_all(
    args: &[String],
    timeout: Duration,
) -> anyhow::Result<Vec<Result<Snapshot, String>>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // No proxy from the environment and no redirects: the answer comes from the node named.
    // The whole-fetch timeout is applied per phase in `fetch_one` (it excludes the wait for
    // the memory budget), not by the client.
    crate::init_tls();
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .build()?;
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let budget = std::sync::Arc::new(tokio::sync::Semaphore::new(
        (BODY_BUDGET / PERMIT_BYTES) as usize,
    ));
    Ok(runtime.block_on(async {
        let tasks: Vec<_> = args
            .iter()
            .map(|arg| {
                let (client, slots, budget, arg) =
                    (client.clone(), slots.clone(), budget.clone(), arg.clone());
                tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    // Whatever went wrong, the message shows no credentials from the URL.
                    fetch_one(&client, &budget, &arg, timeout)
                        .await
                        .map_err(|e| shown(&e))
                })
            })
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(
                t.await
                    .unwrap_or_else(|e| Err(format!("fetch failed: {e}"))),
            );
        }
        out
    }))
}
