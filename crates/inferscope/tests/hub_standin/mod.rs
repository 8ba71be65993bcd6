//! A local stand-in for the Hugging Face Hub on 127.0.0.1 (issue 29): it speaks the Hub's
//! protocol as `huggingface_hub` and vLLM meet it — `GET /{org}/{name}/resolve/{rev}/{file}`
//! with `X-Repo-Commit`, `X-Error-Code` (`RepoNotFound`, `EntryNotFound`, `GatedRepo`), a 302 to
//! a second listener (the file storage, "CDN") for `*.safetensors`, and `Range: bytes=A-B`
//! answered with 206 and `Content-Range: bytes A-B/SIZE`.
//!
//! Repos are folders `fixtures/hub/ORG--NAME/`: each file is served as is; `F.header` +
//! `F.size` serve `F` as a file of `F.size` bytes whose first bytes are the header (only those
//! may be asked for); a `GATED` file makes the repo answer 401 `GatedRepo` without
//! `Authorization: Bearer hf_standin_token`; a `STATUS` file (`503 Service Unavailable`) is
//! answered to every request; `NO_COMMIT_HEADER` drops `X-Repo-Commit` (then
//! `/api/models/ORG/NAME/revision/REV` answers the commit). Every request is logged with its host and whether it
//! carried `Authorization`, so tests check the token never reaches the CDN.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The token the stand-in accepts for gated repos.
pub const TOKEN: &str = "hf_standin_token";
/// The commit every repo is at (`refs/main` → this).
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// One request seen.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `hub` or `cdn`.
    pub host: &'static str,
    /// Request path.
    pub path: String,
    /// It carried an Authorization header.
    pub auth: bool,
    /// Its Range header.
    pub range: Option<String>,
}

/// The running stand-in (threads live until the test process ends).
pub struct Hub {
    /// `http://127.0.0.1:PORT` — the value for HF_ENDPOINT.
    pub endpoint: String,
    /// Requests, in order.
    pub log: Arc<Mutex<Vec<Seen>>>,
}

impl Hub {
    /// Start both listeners serving `root` (normally `fixtures/hub`).
    pub fn start(root: PathBuf) -> Hub {
        let log = Arc::new(Mutex::new(Vec::new()));
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn_addr = cdn.local_addr().unwrap().to_string();
        let endpoint = format!("http://{}", hub.local_addr().unwrap());
        for (listener, host) in [(cdn, "cdn"), (hub, "hub")] {
            let (log, root, cdn_addr) = (log.clone(), root.clone(), cdn_addr.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    let (log, root, cdn_addr) = (log.clone(), root.clone(), cdn_addr.clone());
                    std::thread::spawn(move || serve(conn, host, &root, &cdn_addr, &log));
                }
            });
        }
        Hub { endpoint, log }
    }

    /// Requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

fn respond(mut s: &TcpStream, status: &str, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

fn serve(
    conn: TcpStream,
    host: &'static str,
    root: &std::path::Path,
    cdn: &str,
    log: &Mutex<Vec<Seen>>,
) {
    let mut r = BufReader::new(&conn);
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (mut auth, mut range) = (None, None);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap_or((&h, ""));
        match k.trim().to_ascii_lowercase().as_str() {
            "authorization" => auth = Some(v.trim().to_string()),
            "range" => range = Some(v.trim().to_string()),
            _ => {}
        }
    }
    log.lock().unwrap().push(Seen {
        host,
        path: path.clone(),
        auth: auth.is_some(),
        range: range.clone(),
    });
    let mut commit = vec![("X-Repo-Commit".to_string(), COMMIT.to_string())];
    let err = |code: &str| vec![("X-Error-Code".to_string(), code.to_string())];
    // hub: /ORG/NAME/resolve/REV/FILE; cdn: /blob/ORG--NAME/FILE
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (dir, file) = match (host, parts.as_slice()) {
        ("hub", [org, name, "resolve", _rev, file]) => {
            (root.join(format!("{org}--{name}")), file.to_string())
        }
        ("cdn", ["blob", repo, file]) => (root.join(repo), file.to_string()),
        // huggingface_hub's model_info: the commit a revision names
        ("hub", ["api", "models", org, name, "revision", _rev])
            if root.join(format!("{org}--{name}")).is_dir() =>
        {
            let body = format!("{{\"id\": \"{org}/{name}\", \"sha\": \"{COMMIT}\"}}");
            return respond(&conn, "200 OK", &[], body.as_bytes());
        }
        _ => {
            return respond(
                &conn,
                "404 Not Found",
                &err("RepoNotFound"),
                b"not a Hub URL",
            );
        }
    };
    if !dir.is_dir() {
        // The real Hub answers 401 for a repo it does not show you.
        return respond(
            &conn,
            "401 Unauthorized",
            &err("RepoNotFound"),
            b"Repository not found",
        );
    }
    if dir.join("NO_COMMIT_HEADER").exists() {
        // a mirror that does not send X-Repo-Commit: the client asks the model API
        commit.clear();
    }
    if let Ok(status) = std::fs::read_to_string(dir.join("STATUS")) {
        // a repo whose Hub answers this status to everything (a 5xx outage)
        return respond(&conn, status.trim(), &[], b"upstream error");
    }
    if host == "hub"
        && dir.join("GATED").exists()
        && auth.as_deref() != Some(&format!("Bearer {TOKEN}"))
    {
        return respond(
            &conn,
            "401 Unauthorized",
            &err("GatedRepo"),
            b"Access to this model is restricted",
        );
    }
    let whole = std::fs::read(dir.join(&file)).ok();
    let header = std::fs::read(dir.join(format!("{file}.header"))).ok();
    if whole.is_none() && header.is_none() {
        return respond(
            &conn,
            "404 Not Found",
            &err("EntryNotFound"),
            b"Entry not found",
        );
    }
    if host == "hub" && (file.ends_with(".safetensors") || file.ends_with(".gguf")) {
        let repo = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut h = commit.clone();
        h.push((
            "Location".into(),
            format!("http://{cdn}/blob/{repo}/{file}"),
        ));
        return respond(&conn, "302 Found", &h, b"");
    }
    let (bytes, size) = match (whole, header) {
        (Some(b), _) => {
            let n = b.len() as u64;
            (b, n)
        }
        (None, Some(h)) => {
            let size = std::fs::read_to_string(dir.join(format!("{file}.size"))).unwrap();
            (h, size.trim().parse().unwrap())
        }
        _ => unreachable!(),
    };
    match range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
    {
        Some((a, b)) => {
            let a: u64 = a.parse().unwrap();
            let b: u64 = b.parse::<u64>().unwrap().min(size - 1);
            // Only the stored bytes exist: a range past them is a test bug, answered 416.
            if b >= bytes.len() as u64 && (bytes.len() as u64) < size {
                let stop = (bytes.len() as u64).max(a);
                let mut h = commit.clone();
                h.push((
                    "Content-Range".into(),
                    format!("bytes {a}-{}/{size}", stop.saturating_sub(1)),
                ));
                return respond(
                    &conn,
                    "206 Partial Content",
                    &h,
                    &bytes[a as usize..stop as usize],
                );
            }
            let mut h = commit.clone();
            h.push(("Content-Range".into(), format!("bytes {a}-{b}/{size}")));
            respond(
                &conn,
                "206 Partial Content",
                &h,
                &bytes[a as usize..=b as usize],
            );
        }
        None => respond(&conn, "200 OK", &commit, &bytes),
    }
}
