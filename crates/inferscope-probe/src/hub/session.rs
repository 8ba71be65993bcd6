//! One Hub fetch session: the HTTP client (no automatic redirects, bounded times), the
//! requests it made, and the errors worded for the user.

use super::{CONNECT_TIMEOUT, HubEnv, MAX_REDIRECTS, READ_TIMEOUT};
use anyhow::bail;

/// One fetch session: the client, the endpoint's origin, and the requests made.
pub(super) struct Session<'a> {
    pub(super) env: &'a HubEnv,
    pub(super) repo: &'a str,
    client: reqwest::Client,
    pub(super) rt: tokio::runtime::Runtime,
    origin: reqwest::Url,
    pub(super) requests: usize,
    /// `config.json` came back.
    pub(super) reached: bool,
    /// The last `X-Repo-Commit` any hop carried (the Hub's 302 has it, the storage host not).
    pub(super) commit: Option<String>,
}

/// A non-success answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) error_code: Option<String>,
}

impl Session<'_> {
    pub(super) fn url(&self, revision: &str, file: &str) -> String {
        format!(
            "{}/{}/resolve/{revision}/{file}",
            self.env.endpoint, self.repo
        )
    }

    fn same_origin(&self, u: &reqwest::Url) -> bool {
        u.scheme() == self.origin.scheme()
            && u.host_str() == self.origin.host_str()
            && u.port_or_known_default() == self.origin.port_or_known_default()
    }

    /// GET `url` (following redirects; the token only to the endpoint's host), with an optional
    /// Range. Returns the final response, or the first non-redirect failure status.
    pub(super) fn get(
        &mut self,
        url: &str,
        range: Option<(u64, u64)>,
    ) -> Result<Result<reqwest::Response, Answer>, String> {
        let mut url = reqwest::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
        // One request per file asked; the redirect hops it takes (at most MAX_REDIRECTS) are
        // part of it, as a browser or `huggingface_hub` counts them.
        self.requests += 1;
        for _ in 0..=MAX_REDIRECTS {
            let mut req = self.client.get(url.clone());
            if let Some((a, b)) = range {
                req = req.header("Range", format!("bytes={a}-{b}"));
            }
            if self.same_origin(&url)
                && let Some(t) = &self.env.token
            {
                req = req.bearer_auth(t);
            }
            // built inside the runtime: reqwest arms its timers when the future is created
            let resp = self
                .rt
                .block_on(async { req.send().await })
                .map_err(|e| reason(&e))?;
            let status = resp.status().as_u16();
            if let Some(c) = resp
                .headers()
                .get("x-repo-commit")
                .and_then(|v| v.to_str().ok())
            {
                self.commit = Some(c.to_string());
            }
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let loc = resp
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .ok_or("a redirect without a Location")?;
                url = url
                    .join(loc)
                    .map_err(|e| format!("a redirect to a bad URL ({e})"))?;
                continue;
            }
            if (200..300).contains(&status) {
                return Ok(Ok(resp));
            }
            let error_code = resp
                .headers()
                .get("x-error-code")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return Ok(Err(Answer { status, error_code }));
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }

    /// Up to `cap` bytes of the body; more is an error when `strict`.
    pub(super) fn body(
        &self,
        mut resp: reqwest::Response,
        cap: u64,
        strict: bool,
    ) -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        loop {
            match self.rt.block_on(async { resp.chunk().await }) {
                Ok(Some(c)) => {
                    buf.extend_from_slice(&c);
                    if buf.len() as u64 > cap {
                        if strict {
                            return Err(format!("larger than {cap} bytes"));
                        }
                        buf.truncate(cap as usize);
                        return Ok(buf);
                    }
                }
                Ok(None) => return Ok(buf),
                Err(e) => return Err(reason(&e)),
            }
        }
    }
}

/// The error's chain in one line (reqwest's top level says only "error sending request").
pub(super) fn reason(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    if e.is_timeout() {
        parts.push("timed out".to_string());
    }
    let mut src: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = src {
        parts.push(s.to_string());
        src = s.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// A client for `repo` on `env`'s endpoint: no automatic redirects (the token must not follow
/// one to another host), bounded connect and read times.
pub(super) fn session<'a>(env: &'a HubEnv, repo: &'a str) -> anyhow::Result<Session<'a>> {
    crate::init_tls();
    let origin = reqwest::Url::parse(&env.endpoint)
        .map_err(|e| anyhow::anyhow!("HF_ENDPOINT {:?}: not a URL ({e})", env.endpoint))?;
    if origin.scheme() == "https" && !crate::TLS_ENABLED {
        bail!(
            "{repo}: {} is HTTPS and this build has no TLS: it was built with `--no-default-features` (rebuild with the default `tls` feature), or set HF_ENDPOINT to an http:// mirror, or HF_HUB_OFFLINE=1",
            env.endpoint
        );
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .user_agent(concat!("inferscope/", env!("CARGO_PKG_VERSION")))
        .build()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(Session {
        env,
        repo,
        client,
        rt,
        origin,
        requests: 0,
        reached: false,
        commit: None,
    })
}

/// A failure after the Hub served the repo's `config.json` (a bad index or header): the model
/// exists, so the caller does not call it unknown.
#[derive(Debug)]
pub struct Reached(pub String);

impl std::fmt::Display for Reached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reached {}

pub(super) fn fail(s: &Session, file: &str, url: &str, a: &Answer) -> anyhow::Error {
    let repo = s.repo;
    let code = a.error_code.as_deref().unwrap_or("");
    match (a.status, code) {
        (_, "GatedRepo") | (403, _) => anyhow::anyhow!(
            "{repo} is gated: accept its licence on the Hub and set HF_TOKEN ({} answered {} for {url}{})",
            s.env.endpoint,
            a.status,
            if s.env.token.is_some() {
                "; the token given has no access"
            } else {
                ""
            }
        ),
        (401, "RepoNotFound") | (404, "RepoNotFound") => anyhow::anyhow!(
            "{} has no such repo, or it is private (set HF_TOKEN) ({} for {url})",
            s.env.endpoint,
            a.status
        ),
        (401, _) => anyhow::anyhow!(
            "{repo} is gated or private: accept its licence on the Hub and set HF_TOKEN ({} answered 401 for {url})",
            s.env.endpoint
        ),
        (404, "RevisionNotFound") => anyhow::anyhow!(
            "{repo}: revision not found on {} (404 for {url})",
            s.env.endpoint
        ),
        (404, _) => anyhow::anyhow!("{repo}: {file} not found (404 for {url})"),
        (st, _) => anyhow::anyhow!("{repo}: {file}: the Hub answered {st} for {url}"),
    }
}

/// The commit `revision` names: the header's, the revision itself when it is a full hash, else
/// the Hub's model API.
pub(super) fn commit_of(
    s: &mut Session,
    revision: &str,
    header: Option<String>,
) -> anyhow::Result<String> {
    let is_hash = |r: &str| r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit());
    let commit = match header {
        Some(c) => c,
        None if is_hash(revision) => revision.to_string(),
        None => {
            let url = format!(
                "{}/api/models/{}/revision/{revision}",
                s.env.endpoint, s.repo
            );
            let resp = match s.get(&url, None) {
                Err(e) => bail!(
                    "{}: the commit of {revision}: cannot fetch {url}: {e}",
                    s.repo
                ),
                Ok(Err(a)) => return Err(fail(s, "the model API", &url, &a)),
                Ok(Ok(r)) => r,
            };
            let body = s
                .body(resp, 16 << 20, true)
                .map_err(|e| anyhow::anyhow!("{}: {url}: {e}", s.repo))?;
            let v: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| anyhow::anyhow!("{}: {url}: not JSON ({e})", s.repo))?;
            v.get("sha")
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .ok_or_else(|| anyhow::anyhow!("{}: {url}: no \"sha\" in the answer", s.repo))?
        }
    };
    if !super::files::revision_ok(&commit) {
        bail!(
            "{}: the Hub named commit {commit:?}; refusing to store it",
            s.repo
        );
    }
    Ok(commit)
}
