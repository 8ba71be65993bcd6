//! The container image (issue 18): `scripts/build-image.sh --from-binary` builds, with buildah,
//! the image content the Containerfile describes (the binary, user 65534, entrypoint, OCI
//! labels) on a base assembled from the libraries `ldd` lists, because this machine and CI
//! cannot pull base images nor run containers. The test unpacks the image's layers into a root
//! filesystem and runs `inferscope serve --metrics` in it with `chroot` as user 65534, the host
//! view mounted at /host as in the DaemonSet (here a fixture root): `/metrics` passes
//! `promtool check metrics` and `/snapshot` is read by `inferscope diff`.
//!
//! Needs root (chroot, buildah's storage) and Debian's `buildah`; without them it is skipped
//! with a message, unless `CI` is set, where it fails.

mod common;

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const ROOT: &str = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";

fn can_run() -> bool {
    let root = nix_is_root();
    let buildah = Command::new("buildah").arg("--version").output().is_ok();
    if root && buildah {
        return true;
    }
    let why = format!(
        "image test needs root and buildah (root: {root}, buildah: {buildah}); \
         apt-get install buildah and run as root"
    );
    common::skip(&why);
    false
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn blob(oci: &Path, digest: &str) -> std::path::PathBuf {
    oci.join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").unwrap())
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Removes the image when the test ends, however it ends.
struct Image(String);
impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("buildah").args(["rmi", &self.0]).output();
    }
}

/// The exporter running in the chroot, killed when dropped.
struct Chrooted(std::process::Child);
impl Drop for Chrooted {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {r}");
    r[r.find("\r\n\r\n").unwrap() + 4..].to_string()
}

#[test]
fn image_runs_the_exporter_from_its_own_root_filesystem() {
    if !can_run() {
        return;
    }
    let repo = common::repo();
    let name = format!("localhost/inferscope-image-test-{}", std::process::id());
    let out = run(Command::new(repo.join("scripts/build-image.sh"))
        .args([
            "--from-binary",
            env!("CARGO_BIN_EXE_inferscope"),
            "--name",
            &name,
        ])
        .current_dir(&repo));
    let version = env!("CARGO_PKG_VERSION");
    let image = Image(format!("{name}:{version}"));
    assert_eq!(out.trim(), image.0);

    // Unpack: OCI layout -> manifest -> config and layers.
    let dir = tempfile::tempdir().unwrap();
    let oci = dir.path().join("oci");
    run(Command::new("buildah").args([
        "push",
        "--quiet",
        &image.0,
        &format!("oci:{}", oci.display()),
    ]));
    let index = json(&oci.join("index.json"));
    let manifest = json(&blob(
        &oci,
        index["manifests"][0]["digest"].as_str().unwrap(),
    ));
    let config = json(&blob(&oci, manifest["config"]["digest"].as_str().unwrap()));
    let containerfile = std::fs::read_to_string(repo.join("Containerfile")).unwrap();
    let c = &config["config"];
    assert_eq!(c["User"], "65534:65534");
    assert!(containerfile.contains("\nUSER 65534:65534\n"));
    assert_eq!(
        c["Entrypoint"],
        serde_json::json!(["/usr/local/bin/inferscope"])
    );
    assert!(containerfile.contains("\nENTRYPOINT [\"/usr/local/bin/inferscope\"]\n"));
    assert_eq!(
        c["Cmd"],
        serde_json::json!(["serve", "--metrics", "--listen", "0.0.0.0:9400"])
    );
    assert_eq!(c["Labels"]["org.opencontainers.image.version"], version);
    for key in [
        "title",
        "description",
        "version",
        "revision",
        "licenses",
        "source",
    ] {
        let key = format!("org.opencontainers.image.{key}");
        assert!(containerfile.contains(&format!("{key}=")), "{key}");
        assert!(c["Labels"][&key].is_string(), "{key} missing: {c}");
    }
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let path = blob(&oci, layer["digest"].as_str().unwrap());
        run(Command::new("tar")
            .arg("-xf")
            .arg(&path)
            .arg("-C")
            .arg(&rootfs));
    }
    assert!(rootfs.join("usr/local/bin/inferscope").is_file());

    // The host view, where the DaemonSet mounts it.
    run(Command::new("cp")
        .arg("-a")
        .arg(repo.join(ROOT))
        .arg(rootfs.join("host")));
    let child = Command::new("chroot")
        .arg("--userspec=65534:65534")
        .arg(&rootfs)
        .args([
            "/usr/local/bin/inferscope",
            "serve",
            "--metrics",
            "--listen",
            "127.0.0.1:0",
            "--root",
            "/host",
        ])
        // Nothing from the test's environment but a PATH to find chroot by.
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut exporter = Chrooted(child);
    let mut line = String::new();
    std::io::BufReader::new(exporter.0.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("inferscope: serving metrics on http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();

    let metrics = get(&addr, "/metrics");
    assert_eq!(metrics.matches("inferscope_gpu_info{").count(), 8);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // The image's /snapshot against a capture of the same root by this build: no fact differs.
    let (code, local, err) = common::inferscope(&["snapshot", "--root", ROOT]);
    assert_eq!(code, 0, "{err}");
    let file = dir.path().join("local.json");
    std::fs::write(&file, local).unwrap();
    let (code, out, err) =
        common::inferscope(&["diff", &format!("http://{addr}"), file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("facts compared: identical\n"), "{out}");
    let snap: serde_json::Value = serde_json::from_str(&get(&addr, "/snapshot")).unwrap();
    assert_eq!(snap["source"]["root"], "/host");
    drop(exporter);
}
