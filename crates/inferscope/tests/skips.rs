//! Issue 32 item 5: a test that cannot run its check on this host says so, visibly, through
//! `common::skip` (docs/testing.md, "Skipped tests"), instead of returning as a silent pass.
//! Checked on the test sources of every crate: no test writes its own skip message (one that
//! the harness's capture would hide, or that would not fail under CI), and every host-shaped
//! early return (the NUMA refusal of `run_engines`) goes through `skip`.

mod common;

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `.rs` file under `crates/*/tests`.
fn test_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for c in std::fs::read_dir(common::repo().join("crates"))
        .unwrap()
        .flatten()
    {
        rust_files(&c.path().join("tests"), &mut files);
    }
    files.sort();
    assert!(files.len() > 50, "found only {} test files", files.len());
    files
}

#[test]
fn no_test_writes_its_own_skip_message() {
    // Spelled in two pieces so this file does not find itself.
    let print = concat!("eprint", "ln!(");
    let mut found = Vec::new();
    for f in test_sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            // The message may sit on the next lines of a multi-line eprintln!.
            let call: String = lines[i..lines.len().min(i + 3)].concat().to_lowercase();
            if l.contains(print) && call.contains("skip") {
                found.push(format!("{}:{}: {}", f.display(), i + 1, l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "skip through common::skip (SKIPPED: <test>: <why>, fails under CI):\n{}",
        found.join("\n")
    );
}

#[test]
fn numa_refusals_are_skips_not_passes() {
    let mut checked = 0;
    let mut silent = Vec::new();
    for f in test_sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("err.contains(\"NUMA node unknown\")") {
                checked += 1;
                let body = lines[i + 1..lines.len().min(i + 3)].concat();
                if !body.contains("skip(") {
                    silent.push(format!("{}:{}", f.display(), i + 1));
                }
            }
        }
    }
    assert!(
        checked >= 3,
        "the run_engines checks moved: {checked} found"
    );
    assert!(silent.is_empty(), "silent early returns: {silent:?}");
}
