//! The rule of issue 10: no `unwrap`/`expect` on data from outside in non-test code unless a
//! `// cannot fail:` comment on the same or the previous line says why. `cargo clippy` enforces
//! the same rule with `deny(clippy::unwrap_used, clippy::expect_used)` in every crate's root
//! (outside `cfg(test)`); this test keeps it enforced by `cargo test` alone.
//!
//! Non-test code is each `src/` file up to its first top-level `#[cfg(test)]`; a file that opens
//! with `#![cfg(test)]` (a test module in its own file) is test code throughout. The benchmark
//! crate is checked too; `inferscope-testkit` is not: it is test support (a dev-dependency
//! only, `publish = false`) where a failed bind should fail the test that asked for it.

mod common;

/// Reviewed exceptions (file suffix, line content) awaiting their `// cannot fail:` comment in a
/// file owned by another change.
const REVIEWED: &[(&str, &str)] = &[(
    // Constant bounds (1 µs ..= MAX_US, 3 significant figures) that hdrhistogram accepts.
    "inferscope-bench/src/stats.rs",
    "Histogram::new_with_max(MAX_US, 3).expect(",
)];

use std::path::Path;

fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_unexplained_unwrap_or_expect_outside_tests() {
    let mut files = Vec::new();
    for e in std::fs::read_dir(common::repo().join("crates")).unwrap() {
        let crate_dir = e.unwrap().path();
        if crate_dir.ends_with("inferscope-testkit") {
            continue;
        }
        let src = crate_dir.join("src");
        if src.is_dir() {
            rs_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut prev = "";
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("#[cfg(test)]") || line.starts_with("#![cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            let hit = code.contains(".unwrap()") || code.contains(".expect(\"");
            let reviewed = REVIEWED
                .iter()
                .any(|(file, content)| f.ends_with(file) && line.contains(content));
            if hit
                && !reviewed
                && !line.contains("// cannot fail:")
                && !prev.contains("// cannot fail:")
            {
                bad.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
            prev = line;
        }
    }
    assert!(
        bad.is_empty(),
        "unwrap/expect without a `// cannot fail:` comment in non-test code:\n{}",
        bad.join("\n")
    );
}
