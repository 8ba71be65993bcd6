//! The exporter fetch against a one-shot local HTTP server: a real node snapshot, a gzip file
//! served by mistake, an answer declaring more than the cap, a redirect, and a node that is down.

use inferscope_host::Snapshot;
use inferscope_probe::fetch::{MAX_NODE_BYTES, fetch_all, short_name, shown, snapshot_url};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// Serve one HTTP answer (`head` then `body`) on a free local port; returns its URL.
fn serve_once(head: &str, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let head = head.to_string();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut req = [0u8; 4096];
        let _ = conn.read(&mut req);
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(&body);
    });
    url
}

fn ok_head(len: usize) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
}

fn fetch_one_url(url: &str) -> Result<Snapshot, String> {
    let mut r = fetch_all(&[url.to_string()], Duration::from_secs(10)).unwrap();
    r.remove(0)
}

#[test]
fn a_real_node_snapshot_comes_back_validated() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fleet/node-a.json");
    let body = std::fs::read(path).unwrap();
    let url = serve_once(&ok_head(body.len()), body);
    let snap = fetch_one_url(&url).unwrap();
    assert_eq!(snap.gpus.len(), 8);
}

#[test]
fn gzip_and_oversized_answers_are_refused_by_name() {
    let gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0];
    let url = serve_once(&ok_head(gz.len()), gz);
    let e = fetch_one_url(&url).unwrap_err();
    assert!(e.ends_with(inferscope_probe::load::GZIP_HINT), "{e}");
    let big = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        MAX_NODE_BYTES + 1
    );
    let url = serve_once(&big, Vec::new());
    let e = fetch_one_url(&url).unwrap_err();
    assert!(
        e.ends_with("larger than 8 MiB; not a snapshot written by inferscope"),
        "{e}"
    );
}

#[test]
fn redirects_are_not_followed_and_a_down_node_is_no_answer() {
    let url = serve_once(
        "HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n",
        Vec::new(),
    );
    let e = fetch_one_url(&url).unwrap_err();
    assert!(e.contains("(redirects are not followed)"), "{e}");
    // A port nothing listens on: bind, note it, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = fetch_one_url(&format!("http://127.0.0.1:{port}")).unwrap_err();
    assert!(
        e.starts_with(&format!("http://127.0.0.1:{port}/snapshot: no answer")),
        "{e}"
    );
}

#[test]
fn urls_names_and_credentials() {
    assert_eq!(snapshot_url("http://n:9400").unwrap().path(), "/snapshot");
    assert_eq!(snapshot_url("http://n:9400/x").unwrap().path(), "/x");
    assert!(
        snapshot_url("https://n:9400")
            .unwrap_err()
            .contains("only http://")
    );
    assert_eq!(short_name("http://n:9400/"), "n:9400");
    assert_eq!(short_name("http://n/other"), "n:80/other");
    assert!(!shown("http://admin:hunter2@n:9400").contains("hunter2"));
}
