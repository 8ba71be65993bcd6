//! Model metadata from the Hugging Face Hub, fetched the way `huggingface_hub` (and so vLLM)
//! resolves a repo id, into the standard cache so the next run needs no network (issue 29).
//!
//! What is fetched: `config.json`, `generation_config.json` (where present), the safetensors
//! index `model.safetensors.index.json` (else the single `model.safetensors`), and each shard's
//! safetensors header by HTTP Range request — never the weights. URLs are the Hub's own: `{HF_ENDPOINT}/{repo}/resolve/{revision}/{file}`; the commit
//! comes from the `X-Repo-Commit` header (else `/api/models/{repo}/revision/{rev}`). Redirects to
//! another host (the Hub's file storage) are followed without the token.
//!
//! Stored: `models--ORG--NAME/refs/REV` (the commit) and `snapshots/COMMIT/{config.json,
//! generation_config.json, model.safetensors.index.json}` as `huggingface_hub` lays them out; the shard headers go to
//! `snapshots/COMMIT/.inferscope/` (`hub.json` + one `SHARD.header` each) because a truncated
//! `*.safetensors` there would look like a corrupt download to vLLM.
//!
//! Bounded: connect and read timeouts, metadata files and headers capped like local files, at
//! most shards + 3 requests (config, then the commit look-up when its header lacks the commit or
//! else generation_config.json, index, one
//! Range request per shard whose header fits in [`FIRST_RANGE`]; each may take up to
//! [`MAX_REDIRECTS`] redirect hops).

use anyhow::{Context, bail};
use inferscope_formats::safetensors;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes asked for first from each shard: the 8-byte length and, for nearly every checkpoint,
/// the whole header (a 1,000-tensor shard's header is about 100 KiB).
pub const FIRST_RANGE: u64 = 256 << 10;
/// Largest metadata file accepted (the same cap as a local config or index).
pub const MAX_META_BYTES: u64 = 100 << 20;
/// Time to establish a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for any read on a connection.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed per file (the Hub uses one: to its file storage, or a renamed repo).
const MAX_REDIRECTS: usize = 5;
/// The inferscope-owned folder inside a snapshot.
pub const SIDECAR: &str = ".inferscope";

/// Where and how to reach the Hub, from the environment `huggingface_hub` reads.
#[derive(Debug, Clone, Default)]
pub struct HubEnv {
    /// `HF_ENDPOINT`, default `https://huggingface.co`.
    pub endpoint: String,
    /// `HF_TOKEN`, else the token file (`HF_TOKEN_PATH`, `$HF_HOME/token`,
    /// `~/.cache/huggingface/token`).
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE` set to 1/ON/YES/TRUE: never touch the network.
    pub offline: bool,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

impl HubEnv {
    /// Read the environment.
    pub fn from_env() -> HubEnv {
        let endpoint = var("HF_ENDPOINT")
            .unwrap_or_else(|| "https://huggingface.co".into())
            .trim_end_matches('/')
            .to_string();
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_uppercase().as_str(),
                "1" | "ON" | "YES" | "TRUE"
            )
        });
        let token = var("HF_TOKEN").map(|t| t.trim().to_string()).or_else(|| {
            let file = var("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
                var("HF_HOME")
                    .map(|h| PathBuf::from(h).join("token"))
                    .or_else(|| {
                        var("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/token"))
                    })
            })?;
            // The file `hf auth login` writes: one line. A missing or odd file is no token.
            let text = super::files::read_regular(&file, 4096, "a token file").ok()?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        });
        HubEnv {
            endpoint,
            token,
            offline,
        }
    }
}

/// True for what the Hub accepts as `ORG/NAME`: two parts of letters, digits, `-`, `_`, `.`,
/// neither starting with `.` nor holding `..`.
pub fn is_repo_id(spec: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && !p.starts_with('.')
            && !p.contains("..")
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    matches!(spec.split_once('/'), Some((o, n)) if ok(o) && ok(n))
}

/// What `.inferscope/hub.json` records about one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardHeader {
    /// The shard's file name.
    pub file: String,
    /// Its length in bytes (from `Content-Range`).
    pub size: u64,
}

/// `.inferscope/hub.json`: what was fetched, so an offline run reads the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sidecar {
    /// The endpoint asked (never the token).
    pub endpoint: String,
    /// The revision asked.
    pub revision: String,
    /// The commit it resolved to.
    pub commit: String,
    /// Shard headers stored beside this file as `FILE.header`.
    pub shards: Vec<ShardHeader>,
    /// Why the headers were not all read (then the index's `total_size` sizes the weights).
    pub fallback: Option<String>,
}

/// Weights read from a sidecar.
pub struct SidecarWeights {
    /// Tensors of every shard (empty when falling back to `total_size`).
    pub headers: Vec<safetensors::SafetensorsHeader>,
    /// `Some(total_size, why)` when the headers were not all readable.
    pub fallback: Option<(u64, String)>,
}

/// The sidecar of snapshot `dir`, when the Hub client wrote one.
pub fn read_sidecar(dir: &Path) -> anyhow::Result<Option<SidecarWeights>> {
    let side = dir.join(SIDECAR);
    let meta = side.join("hub.json");
    if std::fs::symlink_metadata(&meta).is_err() {
        return Ok(None);
    }
    let text = super::files::read_regular(&meta, 1 << 20, "an inferscope sidecar")?;
    let s: Sidecar = serde_json::from_str(&text)
        .with_context(|| format!("{}: not an inferscope sidecar", meta.display()))?;
    if let Some(why) = s.fallback {
        let total = index_total(dir)?.with_context(|| {
            format!(
                "{}: no metadata.total_size to fall back on",
                dir.join(super::files::INDEX).display()
            )
        })?;
        return Ok(Some(SidecarWeights {
            headers: Vec::new(),
            fallback: Some((total, why)),
        }));
    }
    let mut headers = Vec::new();
    for sh in &s.shards {
        if !plain_file_name(&sh.file) {
            bail!("{}: names {:?}, not a file name", meta.display(), sh.file);
        }
        let path = side.join(format!("{}.header", sh.file));
        let bytes = read_capped(&path)?;
        headers.push(
            safetensors::parse_header(&bytes, sh.size)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        );
    }
    Ok(Some(SidecarWeights {
        headers,
        fallback: None,
    }))
}

fn read_capped(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    super::files::open_regular(path)?
        .take(safetensors::MAX_HEADER_LEN + 8)
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(buf)
}

fn index_total(dir: &Path) -> anyhow::Result<Option<u64>> {
    let path = dir.join(super::files::INDEX);
    let text = super::files::read_regular(&path, MAX_META_BYTES, "a safetensors index")?;
    let idx =
        safetensors::parse_index(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(idx.total_size.filter(|t| *t > 0))
}

pub(super) fn plain_file_name(n: &str) -> bool {
    !n.is_empty() && !n.contains('/') && !n.contains('\\') && !n.starts_with('.')
}

/// One fetch session: the client, the endpoint's origin, and the requests made.
pub(super) struct Session<'a> {
    pub(super) env: &'a HubEnv,
    pub(super) repo: &'a str,
    client: reqwest::Client,
    pub(super) rt: tokio::runtime::Runtime,
    origin: reqwest::Url,
    pub(super) requests: usize,
    /// `config.json` came back.
    reached: bool,
    /// The last `X-Repo-Commit` any hop carried (the Hub's 302 has it, the storage host not).
    pub(super) commit: Option<String>,
}

/// A non-success answer.
pub(super) struct Answer {
    pub(super) status: u16,
    error_code: Option<String>,
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
    fn body(&self, mut resp: reqwest::Response, cap: u64, strict: bool) -> Result<Vec<u8>, String> {
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

/// Fetch `repo` at `revision` into the hub cache `cache`; returns the snapshot folder and a note
/// for the output. Every failure is one line naming the repo, the file and the URL.
pub fn fetch(
    repo: &str,
    revision: &str,
    cache: &Path,
    env: &HubEnv,
) -> anyhow::Result<(PathBuf, String)> {
    let mut s = session(env, repo)?;
    let r = fetch_in(&mut s, revision, cache);
    if std::env::var_os("INFERSCOPE_HUB_REQUESTS").is_some() {
        // Tests count the requests: the bound is part of the contract.
        eprintln!("inferscope: hub requests: {}", s.requests);
    }
    // Once config.json came back the repo exists: what fails after is about its files.
    r.map_err(|e| {
        if s.reached {
            Reached(e.to_string()).into()
        } else {
            e
        }
    })
}

/// A client for `repo` on `env`'s endpoint: no automatic redirects (the token must not follow
/// one to another host), bounded connect and read times.
pub(super) fn session<'a>(env: &'a HubEnv, repo: &'a str) -> anyhow::Result<Session<'a>> {
    inferscope_bench::init_tls();
    let origin = reqwest::Url::parse(&env.endpoint)
        .map_err(|e| anyhow::anyhow!("HF_ENDPOINT {:?}: not a URL ({e})", env.endpoint))?;
    if origin.scheme() == "https" && !inferscope_bench::TLS_ENABLED {
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

/// A small file, or `None` on 404 (entry not found). Also returns `X-Repo-Commit`.
fn small(
    s: &mut Session,
    revision: &str,
    file: &str,
    optional: bool,
) -> anyhow::Result<Option<(Vec<u8>, Option<String>)>> {
    let url = s.url(revision, file);
    let resp = match s.get(&url, None) {
        Err(e) => bail!("{}: {file}: cannot fetch {url}: {e}", s.repo),
        Ok(Err(a))
            if optional && a.status == 404 && a.error_code.as_deref() != Some("RepoNotFound") =>
        {
            return Ok(None);
        }
        Ok(Err(a)) => return Err(fail(s, file, &url, &a)),
        Ok(Ok(r)) => r,
    };
    let commit = resp
        .headers()
        .get("x-repo-commit")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = s
        .body(resp, MAX_META_BYTES, true)
        .map_err(|e| anyhow::anyhow!("{}: {file}: {url}: {e}", s.repo))?;
    Ok(Some((body, commit)))
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

/// The first `8 + header length` bytes of `file` and the file's length, by Range requests.
/// Errors say whether the file was not found (`true`): a repo without `model.safetensors`.
fn shard_header(
    s: &mut Session,
    revision: &str,
    file: &str,
) -> Result<(Vec<u8>, u64), (bool, String)> {
    shard_header_in(s, revision, file).map_err(|e| (e.ends_with(" answered 404"), e))
}

fn shard_header_in(s: &mut Session, revision: &str, file: &str) -> Result<(Vec<u8>, u64), String> {
    let url = s.url(revision, file);
    let mut want = FIRST_RANGE;
    let mut buf: Vec<u8> = Vec::new();
    let mut size = None;
    loop {
        let start = buf.len() as u64;
        let resp = match s.get(&url, Some((start, want - 1))) {
            Err(e) => return Err(format!("{url}: {e}")),
            Ok(Err(a)) => return Err(format!("{url}: answered {}", a.status)),
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let total = resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once('/'))
            .and_then(|(_, t)| t.trim().parse::<u64>().ok());
        if status == 200 {
            // The server ignored the Range: read only what is wanted, then drop the connection.
            size = resp.content_length();
            buf = s
                .body(resp, want, false)
                .map_err(|e| format!("{url}: {e}"))?;
        } else {
            size = size.or(total);
            let part = s
                .body(resp, want - start, false)
                .map_err(|e| format!("{url}: {e}"))?;
            buf.extend_from_slice(&part);
        }
        if buf.len() < 8 {
            return Err(format!("{url}: shorter than a safetensors header"));
        }
        let n = safetensors::header_len(&buf).map_err(|e| format!("{url}: {e}"))?;
        let end = 8 + n;
        if buf.len() as u64 >= end {
            buf.truncate(end as usize);
            let size = size.ok_or_else(|| format!("{url}: no Content-Range length"))?;
            return Ok((buf, size));
        }
        if want >= end || status == 200 {
            return Err(format!("{url}: the answer ended inside the header"));
        }
        want = end;
    }
}

fn fetch_in(s: &mut Session, revision: &str, cache: &Path) -> anyhow::Result<(PathBuf, String)> {
    let repo = s.repo;
    let (config, header_commit) = small(s, revision, "config.json", false)?.unwrap_or_default();
    s.reached = true;
    // Checked before anything is stored: a cache must not keep what the next run cannot read.
    if let Err(e) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&config) {
        bail!(
            "{repo}: config.json: {}: not a JSON object ({e})",
            s.url(revision, "config.json")
        );
    }
    let commit_header = header_commit.is_some();
    let commit = commit_of(s, revision, header_commit)?;
    // generation_config.json sets the sampling defaults vLLM starts with (no limit the planner
    // reads); fetched for the cache only when the commit came with config.json, so the request
    // that the commit look-up would have cost pays for it and the bound holds.
    let generation = if commit_header {
        small(s, revision, "generation_config.json", true)
            .ok()
            .flatten()
            .map(|(b, _)| b)
            .filter(|b| serde_json::from_slice::<serde_json::Value>(b).is_ok())
    } else {
        None
    };
    let index = small(s, revision, super::files::INDEX, true)?.map(|(b, _)| b);
    let (shards, total) = match &index {
        Some(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            let idx = safetensors::parse_index(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{repo}: {}: {}: {e}",
                    super::files::INDEX,
                    s.url(revision, super::files::INDEX)
                )
            })?;
            let names: Vec<String> = idx.shards().iter().map(|n| n.to_string()).collect();
            if let Some(bad) = names.iter().find(|n| !plain_file_name(n)) {
                bail!(
                    "{repo}: {}: weight_map names {bad:?}, not a file name",
                    super::files::INDEX
                );
            }
            // 0 is what some writers put when they did not count: unknown, never zero bytes
            (names, idx.total_size.filter(|t| *t > 0))
        }
        None => (vec!["model.safetensors".to_string()], None),
    };
    let mut headers = Vec::new();
    let mut fallback = None;
    let mut no_weights = false;
    for f in &shards {
        match shard_header(s, revision, f) {
            Ok((bytes, size)) => match safetensors::parse_header(&bytes, size) {
                Ok(_) => headers.push((f.clone(), bytes, size)),
                Err(e) => {
                    fallback = Some(format!("the header of {f} is not valid ({e})"));
                    break;
                }
            },
            Err((not_found, e)) => {
                no_weights = not_found && index.is_none();
                fallback = Some(format!("cannot read the header of {f}: {e}"));
                break;
            }
        }
    }
    let fallback = match (fallback, total) {
        (None, _) => None,
        // No index and no model.safetensors: no safetensors weights; estimate from the config.
        (Some(_), _) if no_weights => None,
        (Some(why), Some(_)) => Some(why),
        (Some(why), None) => {
            bail!(
                "{repo}: {why}, and {} has no metadata.total_size (or 0) to fall back on",
                super::files::INDEX
            )
        }
    };
    // Write the snapshot: huggingface_hub's layout for the metadata files, the sidecar for headers.
    let dir = cache.join(format!("models--{}", repo.replace('/', "--")));
    let snap = dir.join("snapshots").join(&commit);
    let side = snap.join(SIDECAR);
    std::fs::create_dir_all(&side).with_context(|| format!("cannot create {}", side.display()))?;
    write_atomic(&snap.join("config.json"), &config)?;
    if let Some(g) = &generation {
        write_atomic(&snap.join("generation_config.json"), g)?;
    }
    if let Some(b) = &index {
        write_atomic(&snap.join(super::files::INDEX), b)?;
    }
    for (f, bytes, _) in &headers {
        write_atomic(&side.join(format!("{f}.header")), bytes)?;
    }
    let sidecar = Sidecar {
        endpoint: s.env.endpoint.clone(),
        revision: revision.to_string(),
        commit: commit.clone(),
        shards: headers
            .iter()
            .map(|(f, _, size)| ShardHeader {
                file: f.clone(),
                size: *size,
            })
            .collect(),
        fallback: fallback.clone(),
    };
    write_atomic(
        &side.join("hub.json"),
        &serde_json::to_vec_pretty(&sidecar)?,
    )?;
    if revision != commit {
        std::fs::create_dir_all(dir.join("refs"))?;
        write_atomic(&dir.join("refs").join(revision), commit.as_bytes())?;
    }
    // the fallback, if any, is told by the weights part of the source line
    let note = format!("Hub {}, commit {commit}", s.env.endpoint);
    Ok((snap, note))
}

pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("inferscope-tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_two_plain_parts() {
        for ok in ["Qwen/Qwen3-Next-80B-A3B-Instruct", "a.b/c_d-1.5"] {
            assert!(is_repo_id(ok), "{ok}");
        }
        for bad in ["x", "a/b/c", "../x", "a/..", "a/.b", "a b/c", "/x", "x/"] {
            assert!(!is_repo_id(bad), "{bad}");
        }
    }
}
