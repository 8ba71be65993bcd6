//! Issue 33: a hostile network, a careless user and a broken download. Each test here failed
//! on the code before the fix (a hang, gigabytes of memory, a leaked password, a raw escape
//! sequence, a plan of a smaller model) and states the behaviour now promised in
//! docs/SECURITY.md.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run the binary with `stdin`, `env` and an address-space limit; kill it after `limit`.
/// Returns (exit code or -1 when killed, stdout, stderr, peak RSS in KiB from wait4).
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(
    args: &[&str],
    env: &[(&str, &Path)],
    stdin: Stdio,
    limit: Duration,
) -> (i32, String, String, u64) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inferscope"));
    cmd.args(args)
        .current_dir(common::repo())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // 2 GiB of address space: enough for tokio and reqwest, and the old `diff` aborts against
    // it instead of taking gigabytes from the test machine.
    // SAFETY: setrlimit is async-signal-safe and the closure touches no shared state.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let killer = std::thread::spawn(move || {
        let t = Instant::now();
        while t.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
            // Exited (a zombie until wait4 below): nothing to kill.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return;
            }
        }
        // SAFETY: plain kill(2) of our own child, not yet reaped (wait4 below reaps it).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose Child handle is never waited on.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    killer.join().unwrap();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let out = String::from_utf8_lossy(&out_t.join().unwrap()).into_owned();
    let err = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
    (code, out, err, usage.ru_maxrss as u64)
}

fn quick(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let (c, o, e, _) = run(args, env, Stdio::null(), Duration::from_secs(60));
    (c, o, e)
}

/// How a fake node misbehaves.
#[derive(Clone, Copy)]
enum Node {
    /// 200, chunked, `{` and then spaces forever.
    Endless,
    /// 200 declaring a 100 GiB body, then spaces until the client leaves.
    Declared,
    /// 200 without a length: 9 MiB of spaces after `{`, then close.
    Oversized,
}

/// A fake exporter of this kind: the scripted server (crates/inferscope-testkit) in
/// `Mode::Endless`.
fn fake_node(kind: Node) -> String {
    let spaces = vec![b' '; 64 << 10];
    let (head, piece, limit): (&[u8], Vec<u8>, Option<usize>) = match kind {
        Node::Endless => (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n",
            [format!("{:x}\r\n", spaces.len()).as_bytes(), &spaces, b"\r\n"].concat(),
            None,
        ),
        Node::Declared => (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 107374182400\r\n\r\n{",
            spaces,
            None,
        ),
        Node::Oversized => (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{",
            spaces,
            Some(9 << 20),
        ),
    };
    let mode = inferscope_testkit::Mode::Endless {
        head: std::sync::Arc::new(head.to_vec()),
        piece: std::sync::Arc::new(piece),
        limit,
    };
    inferscope_testkit::start_in_thread(mode).addr.to_string()
}

/// Item 1: 64 nodes sending endless, oversized or over-declared bodies. Before: up to 64 MiB
/// kept per node, 32 at once (2.1 GB; aborted under a 512 MiB limit with no node reported).
/// Now each is refused at 8 MiB and answer bodies share a 64 MiB budget.
#[test]
fn diff_of_64_hostile_nodes_is_bounded_and_reports_each() {
    let kinds = [Node::Endless, Node::Declared, Node::Oversized];
    let addrs: Vec<String> = (0..64).map(|i| fake_node(kinds[i % 3])).collect();
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let mut args = vec!["diff", "--timeout", "60"];
    args.extend(urls.iter().map(String::as_str));
    args.extend(["fixtures/fleet/node-a.json", "fixtures/fleet/node-c.json"]);
    let (code, out, err, rss_kib) = run(&args, &[], Stdio::null(), Duration::from_secs(180));
    assert_eq!(code, 1, "{err}");
    let rss_mib = rss_kib / 1024;
    eprintln!("diff of 64 hostile nodes: peak RSS {rss_mib} MiB");
    assert!(rss_mib < 256, "peak RSS {rss_mib} MiB");
    for (i, a) in addrs.iter().enumerate() {
        let want = format!(
            "not compared: {a} (http://{a}/snapshot: larger than 8 MiB; not a snapshot written by inferscope)"
        );
        assert!(out.contains(&want), "node {i}: {want}\n{out}");
    }
}

/// Item 5: a password in a node's URL is never printed, in text or JSON, whatever failed.
#[test]
fn diff_never_prints_the_password_of_a_url() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let url = format!("http://admin:hunter2secret@127.0.0.1:{port}");
    let bad = "http://admin:hunter2secret@[::1";
    for json in [false, true] {
        let mut args = vec![
            "diff",
            url.as_str(),
            "fixtures/fleet/node-a.json",
            "fixtures/fleet/node-c.json",
        ];
        if json {
            args.push("--json");
        }
        let (code, out, err) = quick(&args, &[]);
        assert_eq!(code, 1, "{err}");
        assert!(
            !out.contains("hunter2") && !err.contains("hunter2"),
            "{out}{err}"
        );
        assert!(
            out.contains(&format!(
                "http://admin:<redacted>@127.0.0.1:{port}/snapshot"
            )),
            "{out}"
        );
        let (code, out, err) = quick(&["diff", bad, "fixtures/fleet/node-a.json"], &[]);
        assert_eq!(code, 2);
        assert!(
            !out.contains("hunter2") && !err.contains("hunter2"),
            "{out}{err}"
        );
    }
}

/// Item 2: an error quoting input quotes a few hundred bytes, not 60 MiB.
#[test]
fn an_error_quotes_at_most_a_few_hundred_bytes_of_a_60_mib_value() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        common::repo().join("fixtures/bad/snapshot/unknown-reason-not-in-schema.json"),
    )
    .unwrap();
    let file = dir.path().join("huge-variant.json");
    std::fs::write(&file, text.replace("it_is_broken", &"x".repeat(60 << 20))).unwrap();
    let f = file.to_str().unwrap();
    for args in [
        vec!["topo", "--snapshot", f],
        vec!["diff", f, "fixtures/fleet/node-a.json"],
    ] {
        let (code, out, err) = quick(&args, &[]);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty());
        assert!(err.len() < 1024, "{args:?}: {} bytes of error", err.len());
        assert!(
            err.contains("not a valid inferscope snapshot: unknown variant `xxxx")
                && err.contains("bytes]…")
                && err.contains(" at line 418 column "),
            "{err}"
        );
    }
}

/// Item 3: `mem startup - < /dev/zero` read NULs forever.
#[test]
fn mem_startup_stops_on_dev_zero() {
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let (code, out, err, _) = run(
        &["mem", "startup", "-"],
        &[],
        Stdio::from(zero),
        Duration::from_secs(30),
    );
    assert_eq!(code, 2, "killed after 30 s? {err}");
    assert!(out.is_empty());
    assert_eq!(
        err,
        "inferscope: error: <stdin>: line 1: binary data, not a start-up log\n"
    );
}

/// config.json matching `fixtures/tools/safetensors/model-0000{1,2}-of-00002.safetensors`
/// and their index (tiny Llama: hidden 32, 2 layers, 4 heads, 2 KV heads, vocab 128).
const TINY_CONFIG: &str = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 256,
  "torch_dtype": "float16", "tie_word_embeddings": false}"#;

/// A model folder with the real 2-shard fixture's index, and the shards named in `shards`.
fn model_dir(dir: &Path, shards: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), TINY_CONFIG).unwrap();
    let src = common::repo().join("fixtures/tools/safetensors");
    std::fs::copy(
        src.join("model.safetensors.index.json"),
        dir.join("model.safetensors.index.json"),
    )
    .unwrap();
    for s in shards {
        std::fs::copy(src.join(s), dir.join(s)).unwrap();
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

const PLAN: [&str; 5] = ["plan", "--gpu", "h100-sxm", "--max-model-len", "256"];

/// Item 3: a FIFO as config.json, as a shard the index names, or as the cache's refs/main
/// blocked `plan` forever. Item 9: a refs/main of `../../..` led it outside the cache.
#[test]
fn plan_refuses_fifos_and_refs_leading_out_of_the_cache() {
    let t = tempfile::tempdir().unwrap();
    let plan = |model: &str, hub: &Path| {
        let mut args = PLAN.to_vec();
        args.extend(["--model", model]);
        let (c, o, e, _) = run(
            &args,
            &[("HF_HUB_CACHE", hub)],
            Stdio::null(),
            Duration::from_secs(30),
        );
        (c, o, e)
    };
    let hub = t.path().join("hub");
    std::fs::create_dir_all(&hub).unwrap();
    // config.json a FIFO.
    let d = t.path().join("fifo-config");
    model_dir(
        &d,
        &[
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ],
    );
    let (code, _, err) = plan(d.to_str().unwrap(), &hub);
    assert_eq!(code, 0, "the folder plans before the FIFO: {err}");
    std::fs::remove_file(d.join("config.json")).unwrap();
    mkfifo(&d.join("config.json"));
    let (code, _, err) = plan(d.to_str().unwrap(), &hub);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("config.json: not a regular file (a FIFO, socket or device)"),
        "{err}"
    );
    // A shard named in the index a FIFO.
    let d = t.path().join("fifo-shard");
    model_dir(&d, &["model-00001-of-00002.safetensors"]);
    mkfifo(&d.join("model-00002-of-00002.safetensors"));
    let (code, _, err) = plan(d.to_str().unwrap(), &hub);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("model-00002-of-00002.safetensors: not a regular file"),
        "{err}"
    );
    // refs/main a FIFO, then refs/main leading out of the cache to a planted config.
    let repo = hub.join("models--org--tiny");
    let hash = "0e9e39f249a16976918f6564b8830bc894c89659";
    model_dir(
        &repo.join("snapshots").join(hash),
        &[
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ],
    );
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), hash).unwrap();
    let (code, out, err) = plan("org/tiny", &hub);
    assert_eq!(code, 0, "the cache plans before: {err}");
    assert!(out.contains("Hugging Face cache"), "{out}");
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    mkfifo(&repo.join("refs/main"));
    let (code, _, err) = plan("org/tiny", &hub);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("refs/main: not a regular file"), "{err}");
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    model_dir(
        &t.path().join("outside/cfg"),
        &[
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ],
    );
    // snapshots/<ref> = hub/models--org--tiny/snapshots/../../../outside/cfg
    std::fs::write(repo.join("refs/main"), "../../../outside/cfg\n").unwrap();
    let (code, out, err) = plan("org/tiny", &hub);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("refs/main: \"../../../outside/cfg\" is not a commit hash or a ref name"),
        "{err}"
    );
    // Item 2: a 100 MB refs/main is neither read whole nor quoted.
    let f = std::fs::File::create(repo.join("refs/main")).unwrap();
    f.set_len(100_000_000).unwrap();
    let (code, _, err) = plan("org/tiny", &hub);
    assert_eq!(code, 2);
    assert!(err.len() < 1024, "{} bytes", err.len());
    assert!(
        err.contains("refs/main: larger than 1024 bytes; not a Hugging Face cache ref"),
        "{err}"
    );
}

/// Item 11: the index names 2 shards and 1 is present. Before: planned as a model half the
/// size ("Fits: yes"); now an error naming the missing file.
#[test]
fn plan_of_a_partial_download_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("partial");
    model_dir(&d, &["model-00001-of-00002.safetensors"]);
    let mut args = PLAN.to_vec();
    args.extend(["--model", d.to_str().unwrap()]);
    let (code, out, err) = quick(&args, &[]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(
        err,
        format!(
            "inferscope: error: {}/model.safetensors.index.json: names 2 weight files and 1 are missing (model-00002-of-00002.safetensors): a partial download; finish it, or pass {}/config.json to estimate the weights from the config alone\n",
            d.display(),
            d.display()
        )
    );
    // Complete, it plans from both shards' headers.
    std::fs::copy(
        common::repo().join("fixtures/tools/safetensors/model-00002-of-00002.safetensors"),
        d.join("model-00002-of-00002.safetensors"),
    )
    .unwrap();
    let (code, out, err) = quick(&args, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("exact bytes from 2 safetensors headers"),
        "{out}"
    );
}

/// Item 9: `serve --nfd-features DIR/feat` wrote through a link planted at `DIR/.feat.tmp`.
#[test]
fn nfd_features_never_write_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("feat");
    let target = dir.path().join("victim");
    std::os::unix::fs::symlink(&target, dir.path().join(".feat.tmp")).unwrap();
    let e = common::Exporter::start(
        &[
            "--root",
            "fixtures/hosts/h100-sxm8-2s-switch-12nic/root",
            "--nfd-features",
            file.to_str().unwrap(),
        ],
        &[("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")],
    );
    let t = Instant::now();
    while !file.exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    drop(e);
    assert!(!target.exists(), "written through the planted link");
    let meta = std::fs::symlink_metadata(&file).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("inferscope-gpu.count=8\n")
    );
    // The planted link is left alone, and no temporary file is left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".feat.tmp", "feat"]);
}

/// Item 8: control characters from a snapshot (a kernel string that clears the screen) reach
/// the terminal escaped; JSON output still parses to the same string.
#[test]
fn control_characters_from_a_snapshot_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(common::repo().join("fixtures/fleet/node-a.json")).unwrap();
    let evil = text.replace(
        "\"value\": \"5.15.0-105-generic\"",
        "\"value\": \"5.15\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m\"",
    );
    assert_ne!(evil, text);
    let file = dir.path().join("evil.json");
    std::fs::write(&file, evil).unwrap();
    let f = file.to_str().unwrap();
    let (code, out, err) = quick(&["diff", f, "fixtures/fleet/node-b.json"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    assert!(
        out.contains("5.15\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m"),
        "{out}"
    );
    let (code, out, _) = quick(&["diff", f, "fixtures/fleet/node-b.json", "--json"], &[]);
    assert_eq!(code, 1);
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n' && c != ' '),
        "{out:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.to_string().contains("5.15\\u001b[2J"), "{v}");
}
