//! The README and docs say only what is true of this checkout: the counts they quote match the
//! catalogs, every link they make stays inside the repository and resolves, and the test command
//! they give is the one CI runs.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

fn read(rel: &str) -> String {
    fs::read_to_string(common::repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The number written just after `marker` (`"catalog ("` in `"catalog (97)"`).
fn number_after(text: &str, marker: &str) -> usize {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("README no longer says {marker:?}"));
    let digits: String = text[at + marker.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {marker:?} in README"))
}

#[test]
fn readme_counts_match_the_catalogs() {
    let readme = read("README.md");
    let models = inferscope_plan::catalog::ids().count();
    let gpus = inferscope_plan::gpus::all().unwrap().len();
    let checks = inferscope_check::registry().len();
    assert_eq!(
        number_after(&readme, "the embedded catalog ("),
        models,
        "model catalog count"
    );
    assert_eq!(
        number_after(&readme, "GPUs from the catalog ("),
        gpus,
        "GPU catalog count"
    );
    assert_eq!(
        number_after(&readme, "the preflight: "),
        checks,
        "check count"
    );
}

fn markdown_files() -> Vec<PathBuf> {
    let root = common::repo();
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap().filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out
}

/// Targets of `[text](target)` links.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn readme_and_docs_reference_only_files_in_the_repository() {
    let root = fs::canonicalize(common::repo()).unwrap();
    let mut problems = Vec::new();
    for file in markdown_files() {
        let text = fs::read_to_string(&file).unwrap();
        let name = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for bad in [
            "../shared",
            "shared/fixtures",
            "/work/",
            "notes/crates.md",
            "DESIGN.md",
        ] {
            if text.contains(bad) {
                problems.push(format!(
                    "{name} mentions {bad:?}, which a user's checkout does not have"
                ));
            }
        }
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            let resolved = file.parent().unwrap_or(Path::new(".")).join(path);
            match fs::canonicalize(&resolved) {
                Ok(p) if p.starts_with(&root) => {}
                Ok(p) => problems.push(format!(
                    "{name} links {target:?}, outside the repository ({})",
                    p.display()
                )),
                Err(e) => problems.push(format!("{name} links {target:?}, which is missing ({e})")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let readme = read("README.md");
    let section = readme
        .split("## Run the tests")
        .nth(1)
        .expect("README has a '## Run the tests' section");
    let command = section
        .split("```")
        .nth(1)
        .and_then(|block| block.lines().map(str::trim).find(|l| !l.is_empty()))
        .expect("a command in a code block");
    assert_eq!(command, "scripts/test");
    let ci = read(".ci/run");
    let steps: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        steps,
        [
            "set -euo pipefail",
            "cd \"$(dirname \"$0\")/..\"",
            "exec scripts/test"
        ],
        ".ci/run is the README's test command and nothing else"
    );
}
