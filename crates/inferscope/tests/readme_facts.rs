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

/// The backticked words of `text` (`` `check` `` → `check`).
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `text` with every run of whitespace one space: phrases survive re-wrapping.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The README text between `from` and the next `to` after it.
fn between<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let at = text
        .find(from)
        .unwrap_or_else(|| panic!("README no longer says {from:?}"))
        + from.len();
    let end = text[at..]
        .find(to)
        .unwrap_or_else(|| panic!("nothing ends {from:?} with {to:?}"));
    &text[at..at + end]
}

/// `inferscope ARGS --help` (exit code, output).
fn help(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .arg("--help")
        .current_dir(common::repo())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Every command path of the binary (`check`, `mem oom`, ...), from its own help.
fn command_paths() -> Vec<Vec<String>> {
    fn subcommands(text: &str) -> Vec<String> {
        let Some(list) = text.split("Commands:\n").nth(1) else {
            return Vec::new();
        };
        list.lines()
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .map(str::to_string)
            .collect()
    }
    let mut out = Vec::new();
    for c in subcommands(&help(&[]).1) {
        let subs = subcommands(&help(&[c.as_str()]).1);
        for s in &subs {
            out.push(vec![c.clone(), s.clone()]);
        }
        if subs.is_empty() {
            out.push(vec![c]);
        }
    }
    assert!(out.len() > 10, "{out:?}");
    out
}

/// Whether a command's help lists `flag` as an option of its own (not only in prose).
fn has_flag(help_text: &str, flag: &str) -> bool {
    help_text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(&format!("{flag} "))
            || l.starts_with(&format!("{flag}="))
            || l == flag
            || l.split(", ")
                .any(|p| p.starts_with(&format!("{flag} ")) || p == flag)
    })
}

/// Issue 32 item 5: `--root`/`--snapshot` are taken exactly where the README says, and every
/// command that takes either is named there.
#[test]
fn root_and_snapshot_are_taken_where_the_readme_says() {
    let readme = flat(&read("README.md"));
    let both = backticked(between(&readme, "Both are taken by ", ";"));
    let root_only = backticked(between(&readme, "`--root` alone by ", " ("));
    assert!(both.contains(&"check".to_string()), "{both:?}");
    let mut problems = Vec::new();
    for path in command_paths() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args).1;
        let name = path.join(" ");
        let (root, snap) = (has_flag(&text, "--root"), has_flag(&text, "--snapshot"));
        let (says_both, says_root) = (both.contains(&name), root_only.contains(&name));
        if (says_both || says_root) && !root {
            problems.push(format!(
                "README says `{name}` takes --root; its help has none"
            ));
        }
        if says_both && !snap {
            problems.push(format!(
                "README says `{name}` takes --snapshot; its help has none"
            ));
        }
        if root && !(says_both || says_root) {
            problems.push(format!("`{name}` takes --root; the README does not say so"));
        }
        if snap && !says_both {
            problems.push(format!(
                "`{name}` takes --snapshot; the README does not say so"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every "N checks" the README states is the registry's count.
#[test]
fn every_check_count_in_the_readme_is_the_registrys() {
    let readme = read("README.md");
    let checks = inferscope_check::registry().len();
    let words: Vec<&str> = readme.split_whitespace().collect();
    let mut stated = Vec::new();
    for w in words.windows(2) {
        if w[1].trim_end_matches(|c: char| !c.is_alphanumeric()) == "checks"
            && let Ok(n) = w[0].trim_start_matches('(').parse::<usize>()
        {
            stated.push(n);
        }
    }
    assert!(stated.len() >= 3, "the README states the count {stated:?}");
    assert!(
        stated.iter().all(|&n| n == checks),
        "README says {stated:?} checks; the registry has {checks}"
    );
}

/// What `scripts/test` installs (Debian packages through `apt_need`, the set-up scripts and the
/// venv caches they create) is what the README's "Run the tests" says it installs.
#[test]
fn scripts_test_installs_what_the_readme_says() {
    let readme = read("README.md");
    let section = flat(between(&readme, "## Run the tests", "\n## "));
    let section = section.as_str();
    let script = read("scripts/test");
    let apt: std::collections::BTreeSet<String> = script
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("apt_need "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(str::to_string)
        .collect();
    assert!(apt.len() >= 4, "{apt:?}");
    let said: std::collections::BTreeSet<String> =
        backticked(between(section, "the Debian packages ", "(via apt"))
            .into_iter()
            .collect();
    assert_eq!(
        said, apt,
        "Debian packages: README vs scripts/test's apt_need"
    );
    let mut setups: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| w.starts_with("scripts/setup_") && w.ends_with(".sh"))
        .collect();
    setups.sort();
    setups.dedup();
    assert_eq!(setups.len(), 2, "{setups:?}");
    for s in setups {
        assert!(
            section.contains(&format!("`{s}`")),
            "README does not name {s}"
        );
        let body = read(s);
        let cache = body
            .split("$HOME/.cache/")
            .nth(1)
            .and_then(|t| t.split(|c: char| !(c.is_alphanumeric() || c == '-')).next())
            .unwrap_or_else(|| panic!("{s} has no default cache"));
        assert!(body.contains("-m venv"), "{s} creates no venv");
        assert!(
            section.contains(&format!("`~/.cache/{cache}`")),
            "README does not say {s} caches in ~/.cache/{cache}"
        );
    }
}

/// The crates the README's layout lists are the workspace's crates.
#[test]
fn readme_layout_lists_every_crate() {
    let readme = read("README.md");
    let layout = between(&readme, "## Layout\n\n```\n", "```");
    let listed: std::collections::BTreeSet<String> = layout
        .lines()
        .filter_map(|l| l.strip_prefix("crates/"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    let on_disk: std::collections::BTreeSet<String> = fs::read_dir(common::repo().join("crates"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, on_disk, "README layout vs crates/");
}

/// Every `inferscope` command in the README's code blocks and command table parses: its command
/// path exists and every flag it shows is one the command takes (`inferscope ARGS --help`, so
/// clap rejects an unknown flag or value before printing help). Flags after `--` belong to the
/// engine's command line and are not ours.
#[test]
fn every_command_the_readme_shows_parses() {
    let readme = read("README.md");
    let mut commands: Vec<String> = Vec::new();
    for (i, block) in readme.split("```").enumerate() {
        if i % 2 == 0 {
            // Outside code blocks: the command table's first cells.
            for l in block.lines().filter(|l| l.starts_with("| `inferscope ")) {
                // The usage in the first backticks; quoted values (a server command) are not ours.
                let usage = l.split('`').nth(1).unwrap_or_default();
                let unquoted: String = usage.split('\'').step_by(2).collect();
                commands.push(format!(
                    "TABLE inferscope {}",
                    unquoted.trim_start_matches("inferscope ")
                ));
            }
            continue;
        }
        for line in block.lines() {
            let line = line.split(" #").next().unwrap_or_default();
            for seg in line.split(['|', '>']).flat_map(|s| s.split("&&")) {
                let seg = seg.trim().trim_start_matches("sudo ");
                if let Some(rest) = seg.strip_prefix("cargo run --release -- ") {
                    commands.push(rest.to_string());
                } else if let Some(rest) = seg.strip_prefix("inferscope ") {
                    commands.push(rest.to_string());
                }
            }
        }
    }
    assert!(commands.len() >= 20, "{commands:?}");
    let mut problems = Vec::new();
    for c in &commands {
        if let Some(cell) = c.strip_prefix("TABLE ") {
            // A usage line with placeholders: the command path must exist and each flag be in
            // its help.
            let ours = cell
                .split(" -- ")
                .next()
                .unwrap_or_default()
                .replace("\\|", " ");
            let words: Vec<&str> = ours.split_whitespace().collect();
            let path: Vec<&str> = words
                .iter()
                .skip(1)
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
                .copied()
                .collect();
            let (code, text) = help(&path);
            if code != 0 {
                problems.push(format!(
                    "`{cell}`: `inferscope {} --help` exits {code}",
                    path.join(" ")
                ));
                continue;
            }
            for w in &words {
                let flag = w.trim_matches(|c| c == '[' || c == ']' || c == '.');
                let flag = flag.split('=').next().unwrap_or_default();
                if flag.starts_with("--") && !has_flag(&text, flag) {
                    problems.push(format!(
                        "`{cell}`: `inferscope {}` has no {flag}",
                        path.join(" ")
                    ));
                }
            }
            continue;
        }
        let ours = c.split(" -- ").next().unwrap_or_default();
        let args: Vec<&str> = ours.split_whitespace().collect();
        let (code, text) = help(&args);
        if code != 0 {
            problems.push(format!("`inferscope {c}` does not parse: {text}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The Unreleased section's bullets, each with its continuation lines joined.
fn unreleased_bullets() -> Vec<String> {
    let log = read("CHANGELOG.md");
    let section = log
        .split("## Unreleased\n")
        .nth(1)
        .expect("an Unreleased section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(b) = line.strip_prefix("- ") {
            out.push(b.to_string());
        } else if let (Some(last), false) = (out.last_mut(), line.trim().is_empty()) {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    out
}

/// CHANGELOG.md states its convention for breaking changes, and an Unreleased line that renames,
/// removes or deprecates something without keeping the old spelling working is marked
/// `**Breaking:**`.
#[test]
fn changelog_marks_breaking_changes() {
    let log = read("CHANGELOG.md");
    let head = log.split("## Unreleased").next().unwrap_or_default();
    assert!(
        head.contains("starts with **Breaking:**"),
        "the CHANGELOG's head states the convention"
    );
    let bullets = unreleased_bullets();
    assert!(bullets.len() > 50, "{} bullets", bullets.len());
    let unmarked: Vec<&String> = bullets
        .iter()
        .filter(|b| {
            let l = b.to_lowercase();
            ["renamed", "removed", "deprecated"]
                .iter()
                .any(|w| l.contains(w))
                && !["alias", "still works", "none renamed", "not renamed"]
                    .iter()
                    .any(|w| l.contains(w))
                && !b.starts_with("**Breaking:**")
        })
        .collect();
    assert!(
        unmarked.is_empty(),
        "rename/removal lines not marked **Breaking:**:\n{unmarked:#?}"
    );
}
