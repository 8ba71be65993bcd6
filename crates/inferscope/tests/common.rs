//! Shared helpers for the integration tests.
#![allow(dead_code)]

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
pub fn capture_fixture(name: &str) -> inferscope_model::Snapshot {
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
