//! Shared helpers for the integration tests.
#![allow(dead_code)]

// (`#[path]`: this file is also a test target of its own, whose modules sit beside it.)
#[path = "common/vllm.rs"]
pub mod vllm;

use std::path::PathBuf;

/// Repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Names of the host fixture trees.
pub fn host_fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("fixtures/hosts"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("root").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Fixed capture options so snapshots of fixtures are reproducible.
pub fn opts() -> inferscope_probe::CaptureOptions {
    inferscope_probe::CaptureOptions {
        captured_at: "2026-12-02T00:00:00Z".into(),
        tool: "inferscope test".into(),
    }
}

/// Capture a fixture tree by name.
pub fn capture_fixture(name: &str) -> inferscope_host::Snapshot {
    let root = repo().join("fixtures/hosts").join(name).join("root");
    let mut snap = inferscope_probe::capture(&inferscope_probe::FsRoot::new(&root), &opts());
    // The checkout location must not leak into golden files.
    snap.source.root = format!("fixtures/hosts/{name}/root");
    snap
}

/// Run the binary from the repository root; returns exit code, stdout, stderr.
pub fn inferscope(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Rows `| `file` | message |` of an EXPECTED.md table (path relative to the repository).
pub fn expected_rows(path: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    text.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("| `")?;
            let (file, rest) = l.split_once("` | ")?;
            Some((file.to_string(), rest.strip_suffix(" |")?.to_string()))
        })
        .collect()
}

/// Every bad file listed in `DIR/EXPECTED.md` (`| `file` | message |`), given to `inferscope
/// ARGS... DIR/file`, exits 2 with nothing on stdout and exactly `inferscope: error: PATH: message`
/// on stderr. `count` guards against a table that silently lost rows.
pub fn assert_bad_inputs(dir: &str, args: &[&str], count: usize) {
    let rows = expected_rows(&format!("{dir}/EXPECTED.md"));
    assert_eq!(rows.len(), count, "{dir}/EXPECTED.md rows");
    for (file, message) in rows {
        let path = format!("{dir}/{file}");
        let mut full: Vec<&str> = args.to_vec();
        full.push(&path);
        let (code, out, err) = inferscope(&full);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(out.is_empty(), "{file}: stdout {out:?}");
        assert_eq!(err, format!("inferscope: error: {path}: {message}\n"));
    }
}

/// A running `inferscope serve --metrics --listen 127.0.0.1:0 ARGS...`, killed when dropped, and
/// the address it printed on its first stderr line.
pub struct Exporter {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Exporter {
    /// Start it from the repository root with extra arguments and environment.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Exporter {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(["serve", "--metrics", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .current_dir(repo())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("inferscope: serving metrics on http://")
            .and_then(|r| r.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_string();
        Exporter { child, addr }
    }

    /// Send raw bytes on a new connection; the whole response.
    pub fn request(&self, raw: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        resp
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET path` on a connection the server closes after answering; the whole response.
    pub fn get(&self, path: &str) -> String {
        self.request(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ))
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two paths a set-up script gives the end-to-end tests: from the environment variables `keys`,
/// else from the `env` file the script writes in its cache (`$dir_var`, default `$HOME/default`).
pub fn set_up_paths(
    keys: [&str; 2],
    dir_var: &str,
    default: &str,
) -> (Option<PathBuf>, Option<PathBuf>) {
    let from_env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let (mut a, mut b) = (from_env(keys[0]), from_env(keys[1]));
    if a.is_none() || b.is_none() {
        let dir = from_env(dir_var).or_else(|| from_env("HOME").map(|h| h.join(default)));
        let text = dir
            .map(|d| d.join("env"))
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default();
        for line in text.lines() {
            let line = line.trim_start_matches("export ");
            if let Some(v) = line.strip_prefix(&format!("{}=", keys[0])) {
                a.get_or_insert_with(|| PathBuf::from(v));
            } else if let Some(v) = line.strip_prefix(&format!("{}=", keys[1])) {
                b.get_or_insert_with(|| PathBuf::from(v));
            }
        }
    }
    (a, b)
}

/// Say that the calling test cannot run its check here, and why (docs/testing.md, "Skipped
/// tests"). Rust's harness has no runtime skip, so the test then returns and is counted as
/// passed; this line is what tells them apart: `SKIPPED: <test>: <why>`, written straight to the
/// process's stderr, past the harness's output capture, so `cargo test` shows it even for a
/// passing test. Under `CI` it fails instead: nothing skips there.
pub fn skip(why: &str) {
    use std::io::Write;
    let name = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(!in_ci, "{name} cannot run here and CI skips nothing: {why}");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {name}: {why}");
}

/// (`INFERSCOPE_SKIP_E2E=1`, under CI). The skip switch is refused under CI: nothing can silently
/// skip an end-to-end test there.
pub fn e2e_switches() -> (bool, bool) {
    let skip = std::env::var("INFERSCOPE_SKIP_E2E").as_deref() == Ok("1");
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(
        !(skip && in_ci),
        "INFERSCOPE_SKIP_E2E=1 is refused under CI: end-to-end tests are never skipped there"
    );
    (skip, in_ci)
}

/// The real llama-server and tiny model the end-to-end tests drive, set up by `scripts/test`
/// (through `scripts/setup_llama_server.sh`). Taken from `INFERSCOPE_LLAMA_SERVER` and
/// `INFERSCOPE_TINY_GGUF`, else from the `env` file the set-up writes in its cache
/// (`$INFERSCOPE_LLAMA_DIR`, default `~/.cache/inferscope-llama`), so a plain `cargo test` works
/// after one `scripts/test`. `None` only when `INFERSCOPE_SKIP_E2E=1` outside CI: under `CI` the
/// skip switch is refused, so nothing can silently skip an end-to-end test there.
pub fn llama_server() -> Option<(PathBuf, PathBuf)> {
    let (server, gguf) = set_up_paths(
        ["INFERSCOPE_LLAMA_SERVER", "INFERSCOPE_TINY_GGUF"],
        "INFERSCOPE_LLAMA_DIR",
        ".cache/inferscope-llama",
    );
    let (skip, _) = e2e_switches();
    match (server, gguf) {
        (Some(s), Some(g)) if s.is_file() && g.is_file() => Some((s, g)),
        _ if skip => {
            // Not `skip`: the switch is already refused under CI (e2e_switches).
            use std::io::Write;
            let name = std::thread::current()
                .name()
                .unwrap_or("a test")
                .to_string();
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {name}: INFERSCOPE_SKIP_E2E=1 (a llama-server end-to-end test)"
            );
            None
        }
        (s, g) => panic!(
            "this end-to-end test needs a real llama-server and a tiny model (found server: {s:?}, \
             model: {g:?}).\nRun the project's test command once, which sets them up (about 9 minutes \
             on 2 cores, cached in ~/.cache/inferscope-llama) and runs every test:\n\n    scripts/test\n\n\
             After that a plain `cargo test` finds them. To skip deliberately outside CI: \
             INFERSCOPE_SKIP_E2E=1 cargo test"
        ),
    }
}
