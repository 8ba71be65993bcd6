//! The exporter's HTTP server with a counting capture: each request gets a capture that started
//! after it arrived, the three paths, 404 for the rest, and the periodic job under the lock.

use inferscope_probe::exporter::{Capture, serve};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

struct Counting {
    scrapes: Arc<AtomicUsize>,
}

impl Capture for Counting {
    fn metrics(&mut self) -> String {
        let n = self.scrapes.fetch_add(1, Ordering::SeqCst) + 1;
        format!("# HELP scrapes Captures so far.\n# TYPE scrapes gauge\nscrapes {n}\n")
    }
    fn snapshot(&mut self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&serde_json::json!({"schema_version": 1}))
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_fresh_captures_health_and_nothing_else() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let scrapes = Arc::new(AtomicUsize::new(0));
    let jobs = Arc::new(AtomicUsize::new(0));
    let (c, j) = (scrapes.clone(), jobs.clone());
    std::thread::spawn(move || {
        let job: Arc<dyn Fn(&mut Counting) + Send + Sync> = Arc::new(move |_: &mut Counting| {
            j.fetch_add(1, Ordering::SeqCst);
        });
        let _ = serve(
            listener,
            Counting { scrapes: c },
            Some((Duration::from_secs(3600), "job", job)),
        );
    });
    let first = get(&addr, "/metrics");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("text/plain; version=0.0.4"), "{first}");
    assert!(first.ends_with("scrapes 1\n"), "{first}");
    // A later request never gets the earlier body.
    assert!(get(&addr, "/metrics").ends_with("scrapes 2\n"));
    let snap = get(&addr, "/snapshot");
    assert!(snap.contains("application/json") && snap.ends_with(r#"{"schema_version":1}"#));
    assert!(get(&addr, "/healthz").ends_with("\r\n\r\nok\n"));
    let other = get(&addr, "/metrics/../etc/passwd");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    // /healthz, /snapshot and 404s capture no metrics; the job ran once at start.
    assert_eq!(scrapes.load(Ordering::SeqCst), 2);
    assert_eq!(jobs.load(Ordering::SeqCst), 1);
}
