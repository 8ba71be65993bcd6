//! `inferscope diff http://node:9400 ...`: fetch each node's Snapshot from its exporter's
//! `/snapshot`, all nodes at once (at most [`PARALLEL`] in flight), each fetch bounded in time
//! and size. A node that fails is an error for that node only; the caller reports it.

use inferscope_host::Snapshot;
use std::time::Duration;

/// Fetches in flight at once (a cluster of hundreds of nodes must not open hundreds of sockets).
pub const PARALLEL: usize = 32;
/// Time to establish a TCP connection to a node.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// True when `arg` names an exporter rather than a file.
pub fn is_url(arg: &str) -> bool {
    arg.starts_with("http://") || arg.starts_with("https://")
}

/// The snapshot URL for an argument: `http://host:port` (or `.../`) means its `/snapshot`; any
/// other path is used as given.
pub fn snapshot_url(arg: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(arg).map_err(|e| format!("{arg}: not a URL: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{arg}: only http:// is supported (the exporter serves plain HTTP)"
        ));
    }
    if url.host_str().is_none() {
        return Err(format!("{arg}: the URL names no host"));
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

async fn fetch_one(client: &reqwest::Client, arg: &str) -> Result<Snapshot, String> {
    let url = snapshot_url(arg)?;
    let mut resp = client.get(url.clone()).send().await.map_err(|e| {
        let what = if e.is_connect() || e.is_timeout() {
            "no answer"
        } else {
            "not an HTTP answer"
        };
        format!("{url}: {what}: {}", chain(&e))
    })?;
    if resp.status().is_redirection() {
        return Err(format!(
            "{url}: HTTP {} (redirects are not followed)",
            resp.status()
        ));
    }
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status()));
    }
    let cap = crate::load::MAX_SNAPSHOT_BYTES;
    let too_big = || {
        format!(
            "{url}: larger than {} MiB; not a snapshot written by inferscope",
            cap >> 20
        )
    };
    if resp.content_length().is_some_and(|n| n > cap) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("{url}: answer cut short: {}", chain(&e)))?
    {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).map_err(|_| format!("{url}: answer is not UTF-8 text"))?;
    if !text.trim_start().starts_with('{') {
        return Err(format!(
            "{url}: the answer is not JSON; an inferscope exporter serves its snapshot on /snapshot"
        ));
    }
    crate::load::parse_snapshot(&text, url.as_str()).map_err(|e| format!("{e:#}"))
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
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .timeout(timeout)
        .build()?;
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    Ok(runtime.block_on(async {
        let tasks: Vec<_> = args
            .iter()
            .map(|arg| {
                let (client, slots, arg) = (client.clone(), slots.clone(), arg.clone());
                tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    fetch_one(&client, &arg).await
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
