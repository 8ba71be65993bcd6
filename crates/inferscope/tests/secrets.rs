//! No secrets out: plant secrets in a host tree's environment and command lines (and in a pasted
//! serving command), run every command that records or prints them, unpack the gather archive,
//! and search everything written for every secret value.

mod common;

use common::{inferscope, repo};
use std::io::Read;
use std::path::Path;

/// (variable, value) planted in `proc/self/environ` and `proc/4242/environ`.
const PLANTED: &[(&str, &str)] = &[
    ("HF_TOKEN", "hf_PlantedHfToken0123456789abcd"),
    ("HUGGING_FACE_HUB_TOKEN", "hf_PlantedHubToken0123456789abc"),
    ("OPENAI_API_KEY", "sk-PlantedOpenAiKey0123456789abcdef"),
    ("VLLM_API_KEY", "planted-vllm-api-key-1"),
    ("SGLANG_ACCESS_TOKEN", "planted-sglang-token-1"),
    ("NCCL_IB_PASSWORD", "planted-nccl-password-1"),
    ("TGI_CLIENT_SECRET", "planted-tgi-secret-1"),
    ("AWS_SECRET_ACCESS_KEY", "planted-aws-secret-1"),
    ("MY_DB_PASSWORD", "planted-db-password-1"),
    (
        "HF_ENDPOINT",
        "https://mirroruser:planted-url-password-1@mirror.example/",
    ),
    (
        "VLLM_PROXY_URL",
        "http://planted-url-token-user-1@proxy.example:3128",
    ),
    (
        "VLLM_EXTRA_ARGS",
        "--served-model-name x --api-key sk-PlantedEmbeddedKey0123456789abcd",
    ),
];

/// Every secret value above (what must never appear), plus those planted in command lines.
const SECRETS: &[&str] = &[
    "hf_PlantedHfToken",
    "hf_PlantedHubToken",
    "sk-PlantedOpenAiKey",
    "planted-vllm-api-key-1",
    "planted-sglang-token-1",
    "planted-nccl-password-1",
    "planted-tgi-secret-1",
    "planted-aws-secret-1",
    "planted-db-password-1",
    "planted-url-password-1",
    "planted-url-token-user-1",
    "sk-PlantedEmbeddedKey",
    "planted-cmdline-api-key-1",
    "planted-cmdline-hf-token-1",
    "planted-kernel-url-password-1",
];

fn environ() -> Vec<u8> {
    let mut b = Vec::new();
    for (k, v) in [("PATH", "/usr/bin"), ("CUDA_VISIBLE_DEVICES", "0,1")]
        .iter()
        .chain(PLANTED)
    {
        b.extend_from_slice(format!("{k}={v}").as_bytes());
        b.push(0);
    }
    b
}

fn cmdline() -> Vec<u8> {
    let words = [
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
        "--api-key",
        "planted-cmdline-api-key-1",
        "--hf-token=planted-cmdline-hf-token-1",
    ];
    words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect()
}

/// A copy of a fixture host with secrets planted; returns (tempdir, root).
fn planted_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("fixtures/hosts/cloud-vm-2gpu-numa-unknown/root");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {}", src.display());
    let root = dir.path().join("root");
    std::fs::write(root.join("proc/self/environ"), environ()).unwrap();
    std::fs::write(root.join("proc/self/cmdline"), cmdline()).unwrap();
    let kernel = std::fs::read_to_string(root.join("proc/cmdline")).unwrap_or_default();
    std::fs::write(
        root.join("proc/cmdline"),
        format!(
            "{} nfsroot=http://root:planted-kernel-url-password-1@10.0.0.1/x\n",
            kernel.trim_end()
        ),
    )
    .unwrap();
    let p = root.join("proc/4242");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("comm"), "vllm\n").unwrap();
    std::fs::write(
        p.join("status"),
        "Name:\tvllm\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n",
    )
    .unwrap();
    std::fs::write(p.join("environ"), environ()).unwrap();
    std::fs::write(p.join("cmdline"), cmdline()).unwrap();
    (dir, root)
}

fn assert_clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} contains the secret {s:?}");
    }
}

#[test]
fn secrets_never_reach_snapshot_check_topo_or_gather() {
    let (dir, root) = planted_root();
    let r = root.to_str().unwrap();

    let (code, snap, err) = inferscope(&["snapshot", "--root", r]);
    assert_eq!(code, 0, "{err}");
    assert_clean("snapshot --root", &snap);
    assert_clean("snapshot --root (stderr)", &err);
    // Presence is recorded, values are not.
    let json: serde_json::Value = serde_json::from_str(&snap).unwrap();
    let env = json.get("env").or_else(|| json.pointer("/host/env"));
    let env_text = serde_json::to_string(&env).unwrap();
    for name in ["HF_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY", "HF_ENDPOINT"] {
        assert!(
            snap.contains(name),
            "{name} not recorded as present: {env_text}"
        );
    }
    assert!(snap.contains("<redacted>"));
    assert!(
        snap.contains("mirror.example"),
        "non-secret part of the URL kept"
    );

    for args in [
        vec!["check", "--root", r, "--json"],
        vec!["check", "--root", r, "--json", "--pid", "4242"],
        vec!["check", "--root", r, "--pid", "4242", "--verbose"],
        vec!["topo", "--root", r, "--json"],
        vec!["topo", "--root", r],
    ] {
        let (code, out, err) = inferscope(&args);
        assert!(code == 0 || code == 1, "{args:?}: {err}");
        assert_clean(&format!("{args:?}"), &out);
        assert_clean(&format!("{args:?} (stderr)"), &err);
    }

    // The snapshot as a file, then everything that reads it.
    let snap_file = dir.path().join("snap.json");
    std::fs::write(&snap_file, &snap).unwrap();
    let (code, out, err) =
        inferscope(&["check", "--snapshot", snap_file.to_str().unwrap(), "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    assert_clean("check --snapshot", &out);

    // The gather archive: every file, unpacked.
    let archive = dir.path().join("g.tar.gz");
    let (code, _, err) = inferscope(&["gather", "--root", r, "--out", archive.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut seen_environ = false;
    let mut seen_kernel_cmdline = false;
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap());
    let mut tar = tar::Archive::new(gz);
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert_clean(&format!("gather archive entry {path}"), &text);
        assert_clean(&format!("gather archive entry name {path}"), &path);
        if path.ends_with("proc/cmdline") {
            seen_kernel_cmdline = true;
            assert!(text.contains("root:<redacted>@10.0.0.1"), "{text}");
        }
        // Capture never reads a process's command line, so none is archived (only the kernel's).
        assert!(
            !(path.ends_with("/cmdline")
                && path.contains("proc/")
                && !path.ends_with("proc/cmdline")),
            "a process command line was archived: {path}"
        );
        if path.ends_with("proc/self/environ") {
            seen_environ = true;
            assert!(text.contains("HF_TOKEN=<redacted>"), "{text}");
        }
    }
    assert!(seen_environ, "the archive has the (reduced) environment");
    assert!(
        seen_kernel_cmdline,
        "the archive has the kernel command line"
    );
    // The raw archive bytes too (names, headers), in case of an uncompressed copy somewhere.
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    assert_clean("gather archive (raw tar)", &String::from_utf8_lossy(&raw));
    drop(dir);
}

#[test]
fn secrets_in_pasted_commands_are_not_printed() {
    let (dir, root) = planted_root();
    let (_, snap, _) = inferscope(&["snapshot", "--root", root.to_str().unwrap()]);
    let snap_file = dir.path().join("snap.json");
    std::fs::write(&snap_file, snap).unwrap();
    let command = [
        "HF_TOKEN=hf_PlantedHfToken0123456789abcd",
        "vllm",
        "serve",
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        "--api-key",
        "planted-cmdline-api-key-1",
        "--hf-token=planted-cmdline-hf-token-1",
        "--download-dir",
        "https://u:planted-url-password-1@mirror.example/x",
    ];
    for json in [true, false] {
        let mut args = vec![
            "run",
            "--dry-run",
            "--snapshot",
            snap_file.to_str().unwrap(),
            "--numa-node",
            "0",
        ];
        if json {
            args.push("--json");
        }
        args.push("--");
        args.extend(command);
        let (code, out, err) = inferscope(&args);
        assert_eq!(code, 0, "{err}");
        assert_clean("run --dry-run", &out);
        assert_clean("run --dry-run (stderr)", &err);
        assert!(out.contains("--api-key"), "{out}");
    }
    for json in [true, false] {
        let mut args = vec!["plan", "--gpu", "l40s", "--gpus", "2"];
        if json {
            args.push("--json");
        }
        args.push("--");
        args.extend(&command[1..]);
        let (code, out, err) = inferscope(&args);
        assert!(code == 0 || code == 1, "{err}");
        assert_clean("plan", &out);
        assert!(out.contains("--hf-token=<redacted>"), "{out}");
        assert_clean("plan (stderr)", &err);
    }
}

#[test]
fn the_policy_is_the_documented_one() {
    // Names the issue lists, checked against the shared policy directly.
    for n in [
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "X_TOKEN",
        "X_KEY",
        "X_SECRET",
        "MY_PASSWORD_FILE",
    ] {
        assert!(inferscope_host::redact::is_secret_name(n), "{n}");
    }
    assert!(Path::new(&repo().join("docs/SECURITY.md")).exists());
}
