//! Length bombs: files whose headers claim terabytes, pickles with huge declared lengths and
//! gigabyte lines, fed to the real binary under an address-space limit. Each must end with one
//! clean line on stderr and exit 2: no panic, no abort on a failed allocation, no hang.
//!
//! The files are made at test time in a temporary directory; the big ones are sparse (a few MiB
//! written, the rest a hole), so the test needs little disk.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Address-space limit of the child (the binary itself maps ~20 MiB).
const LIMIT_BYTES: u64 = 768 << 20;
const GIB: u64 = 1 << 30;

/// Run the binary under RLIMIT_AS; returns (exit code, stderr).
fn run_limited(args: &[&str]) -> (i32, String, Duration) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inferscope"));
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe and the closure touches no shared state.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: LIMIT_BYTES,
                rlim_max: LIMIT_BYTES,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let out = cmd.output().expect("run inferscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

fn assert_clean_error(what: &str, args: &[&str], mention: &str) {
    let (code, stderr, took) = run_limited(args);
    let msg = stderr.trim_end();
    assert_eq!(code, 2, "{what}: exit {code}, stderr:\n{stderr}");
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "{what}: expected one line on stderr, got:\n{stderr}"
    );
    for bad in ["panicked", "memory allocation", "RUST_BACKTRACE", "Aborted"] {
        assert!(!msg.contains(bad), "{what}: {msg}");
    }
    assert!(
        msg.contains(mention),
        "{what}: {msg:?} does not name {mention:?}"
    );
    assert!(took < Duration::from_secs(60), "{what}: took {took:?}");
}

/// A file with `head` written at the start and a hole up to `len` bytes.
fn sparse(path: &Path, head: &[u8], len: u64) -> PathBuf {
    let mut f = File::create(path).unwrap();
    f.write_all(head).unwrap();
    if len > head.len() as u64 {
        f.set_len(len).unwrap();
    }
    path.to_path_buf()
}

fn gguf_prefix(tensors: u64, kvs: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&tensors.to_le_bytes());
    b.extend_from_slice(&kvs.to_le_bytes());
    b
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn gguf_headers_claiming_terabytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cases: Vec<(&str, Vec<u8>, u64)> = Vec::new();
    // A key of 1 TiB.
    let mut b = gguf_prefix(0, 1);
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    cases.push(("key-1tib", b, 0));
    // A string value of 1.5 GiB in a sparse 3 GiB file (the length fits the file).
    let mut b = gguf_prefix(0, 1);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'k');
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&(3 * GIB / 2).to_le_bytes());
    cases.push(("string-1.5gib-in-sparse-file", b, 3 * GIB));
    // An array of 2^40 u32.
    let mut b = gguf_prefix(0, 1);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'a');
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    cases.push(("array-2^40", b, 0));
    // An array of 200M u8 in a sparse 1 GiB file (fits the file).
    let mut b = gguf_prefix(0, 1);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'a');
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&200_000_000u64.to_le_bytes());
    cases.push(("array-200m-in-sparse-file", b, GIB));
    // 2^60 tensors, 2^60 key/values.
    cases.push(("tensors-2^60", gguf_prefix(1 << 60, 0), 0));
    cases.push(("kvs-2^60", gguf_prefix(0, 1 << 60), 0));
    for (name, head, len) in cases {
        let p = sparse(&d.join(format!("{name}.gguf")), &head, len);
        assert_clean_error(name, &["plan", "--model", s(&p)], name);
    }
}

const CONFIG: &str = r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,
"vocab_size":128,"max_position_embeddings":256,"torch_dtype":"float16"}"#;

#[test]
fn safetensors_headers_claiming_terabytes() {
    let dir = tempfile::tempdir().unwrap();
    let header = |json: &str| {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b
    };
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        ("len-u64-max", u64::MAX.to_le_bytes().to_vec(), 0),
        // The largest header accepted (100 MiB), claimed by an 8-byte file.
        (
            "len-100mib-short-file",
            (100u64 << 20).to_le_bytes().to_vec(),
            0,
        ),
        // 100 MiB of header that is a hole (zeros), in a sparse file: read, then rejected.
        (
            "len-100mib-of-zeros",
            (100u64 << 20).to_le_bytes().to_vec(),
            GIB,
        ),
        (
            "tensor-of-4-exabytes",
            header(
                r#"{"w":{"dtype":"F32","shape":[1000000,1000000,1000000],"data_offsets":[0,4000000000000000000]}}"#,
            ),
            0,
        ),
        (
            "shape-overflows-u64",
            header(
                r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
            ),
            0,
        ),
    ];
    for (name, head, len) in cases {
        let model = dir.path().join(name);
        std::fs::create_dir(&model).unwrap();
        std::fs::write(model.join("config.json"), CONFIG).unwrap();
        sparse(&model.join("model.safetensors"), &head, len);
        assert_clean_error(name, &["plan", "--model", s(&model)], "model.safetensors");
    }
}

#[test]
fn pickles_with_huge_declared_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let op = |proto: u8, opcode: u8, len: &[u8]| {
        let mut b = vec![0x80, proto, opcode];
        b.extend_from_slice(len);
        b.extend_from_slice(b"abc.");
        b
    };
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        // BINUNICODE8 / BINBYTES8 / FRAME claiming 1 TiB in a tiny file.
        (
            "binunicode8-1tib",
            op(4, 0x8d, &(1u64 << 40).to_le_bytes()),
            0,
        ),
        (
            "binbytes8-1tib",
            op(4, 0x8e, &(1u64 << 40).to_le_bytes()),
            0,
        ),
        ("frame-1tib", op(4, 0x95, &(1u64 << 40).to_le_bytes()), 0),
        // BINUNICODE claiming 4 GiB - 16, LONG4 claiming 2 GiB.
        (
            "binunicode-4gib",
            op(2, b'X', &0xFFFF_FFF0u32.to_le_bytes()),
            0,
        ),
        ("long4-2gib", op(2, 0x8b, &0x7FFF_FFF0u32.to_le_bytes()), 0),
        // BINBYTES8 of 1.5 GiB inside a sparse 1.9 GiB file: the length fits the file.
        (
            "binbytes8-1.5gib-in-sparse-file",
            op(4, 0x8e, &(3 * GIB / 2).to_le_bytes()),
            19 * GIB / 10,
        ),
        // Larger than the largest snapshot read.
        ("sparse-3gib", vec![0x80, 4], 3 * GIB),
    ];
    for (name, head, len) in cases {
        let p = sparse(&d.join(format!("{name}.pickle")), &head, len);
        assert_clean_error(name, &["mem", "snapshot", s(&p)], name);
    }
}

/// A 1 GiB file of one line: 8 MiB of text, then a hole (zeros), no newline.
fn big_line(dir: &Path, name: &str, unit: &str) -> PathBuf {
    let text = unit.repeat((8 << 20) / unit.len());
    sparse(&dir.join(name), text.as_bytes(), GIB)
}

#[test]
fn gigabyte_lines_in_pasted_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let oom = big_line(d, "oom.txt", "CUDA out of memory. Tried to allocate ");
    assert_clean_error("mem oom", &["mem", "oom", s(&oom)], "oom.txt");
    let topo = big_line(d, "topo.txt", "\tGPU0\tNV12");
    assert_clean_error(
        "topo --from-nvidia-smi",
        &["topo", "--from-nvidia-smi", s(&topo)],
        "topo.txt",
    );
    let q = big_line(d, "q.txt", "    Product Name : NVIDIA H100 ");
    assert_clean_error(
        "snapshot --import",
        &["snapshot", "--import", s(&q)],
        "q.txt",
    );
    // The same line kept just under the import limit (read and parsed, not refused by size).
    let line: String = "\tGPU0".repeat((16 << 20) / 5);
    let topo16 = d.join("topo16.txt");
    std::fs::write(&topo16, format!("{line}\n")).unwrap();
    assert_clean_error(
        "topo --from-nvidia-smi (16 MiB line)",
        &["topo", "--from-nvidia-smi", s(&topo16)],
        "topo16.txt",
    );
    let xml = d.join("x.xml");
    std::fs::write(
        &xml,
        format!(
            "<?xml version=\"1.0\"?>\n<nvidia_smi_log>{}",
            "<gpu>".repeat(3 << 20)
        ),
    )
    .unwrap();
    assert_clean_error(
        "snapshot --import (deep XML)",
        &["snapshot", "--import", s(&xml)],
        "x.xml",
    );
    let snap = big_line(d, "snap.json", "{\"a\":[");
    assert_clean_error(
        "topo --snapshot",
        &["topo", "--snapshot", s(&snap)],
        "snap.json",
    );
}
