//! Supervising one candidate server (I/O): free ports, the readiness probe, stopping the
//! keeper's process group, the server log's tail and GPU memory after a stop.

use anyhow::Context;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// A readiness probe: GET path, true on a 2xx answer.
pub fn http_ok(port: u16, path: &str) -> bool {
    let Ok(addr) = format!("127.0.0.1:{port}").parse() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut head = [0u8; 16];
    let mut n = 0;
    while n < head.len() {
        match s.read(head.get_mut(n..).unwrap_or_default()) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let text = String::from_utf8_lossy(head.get(..n).unwrap_or_default());
    text.starts_with("HTTP/1.") && text.get(9..10) == Some("2")
}

/// A local port nobody listens on now.
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free local port")?;
    Ok(l.local_addr()?.port())
}

/// Whether something already listens on `port`.
pub fn port_busy(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_err()
}

/// The last `n` lines of a file (bounded read of its end).
pub fn tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    use std::io::Seek;
    let _ = f.seek(std::io::SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.take(64 * 1024).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines
        .get(lines.len().saturating_sub(n)..)
        .unwrap_or_default()
        .join("\n")
}

/// A running server's keeper ([`super::keeper`]), leader of its own process group with the
/// server.
pub struct Server {
    /// The keeper process.
    pub child: Child,
    /// Its process group (the keeper's pid).
    pub pgid: i32,
}

impl Server {
    /// SIGTERM to the group (the keeper then stops every descendant, `setsid` ones included),
    /// SIGKILL to the group if the keeper is not done after `grace` and 5 s more; reaps the
    /// keeper and waits until the group is empty (bounded). Says how it ended.
    pub fn stop(mut self, grace: Duration) -> String {
        let mut how = match self.child.try_wait() {
            Ok(Some(st)) => format!("had exited ({st})"),
            _ => "stopped with SIGTERM".to_string(),
        };
        // SAFETY: plain killpg(2) on the group this process created (workers included).
        unsafe { libc::killpg(self.pgid, libc::SIGTERM) };
        let t = Instant::now();
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if t.elapsed() >= grace + Duration::from_secs(5) {
                // SAFETY: as above.
                unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
                let _ = self.child.wait();
                how = format!("killed with SIGKILL after {}s", grace.as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Workers left in the group after the leader exited.
        let t = Instant::now();
        // SAFETY: signal 0 only checks for existence.
        while unsafe { libc::killpg(self.pgid, 0) } == 0 {
            if t.elapsed() >= grace {
                // SAFETY: as above.
                unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
                how.push_str("; left-over group members killed");
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        how
    }
}

/// GPU memory in use per GPU (MiB; `None` where no reading), or why it cannot be read at all.
pub type GpuUsed = Result<Vec<Option<u64>>, String>;

/// After a stop: wait (bounded) until every GPU is back to its level before the start, reading
/// with `read`. A GPU whose memory is not reported before or after makes the answer "unknown",
/// never "free".
pub fn confirm_gpu_free(before: &GpuUsed, read: &dyn Fn() -> GpuUsed) -> String {
    let before = match before {
        Ok(b) => b,
        Err(e) => return format!("unknown ({e})"),
    };
    let t = Instant::now();
    loop {
        let now = match read() {
            Err(e) => return format!("unknown ({e})"),
            Ok(now) if now.len() != before.len() => {
                return format!(
                    "unknown (NVML listed {} GPUs before the start, {} after)",
                    before.len(),
                    now.len()
                );
            }
            Ok(now) => now,
        };
        let (mut over, mut unread) = (Vec::new(), Vec::new());
        for (i, (n, b)) in now.iter().zip(before).enumerate() {
            match (n, b) {
                (Some(n), Some(b)) if *n > b + 256 => {
                    over.push(format!("GPU{i} {} MiB above", n - b))
                }
                (Some(_), Some(_)) => {}
                _ => unread.push(format!("GPU{i}")),
            }
        }
        if over.is_empty() {
            return if unread.is_empty() {
                "free".into()
            } else {
                format!(
                    "unknown (NVML gave no memory reading for {})",
                    unread.join(", ")
                )
            };
        }
        if t.elapsed() > Duration::from_secs(30) {
            return format!("not free after 30 s: {}", over.join(", "));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A candidate label as a folder name: `[A-Za-z0-9.-]`, the rest `_`, at most 80 characters.
pub fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}
