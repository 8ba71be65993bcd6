//! `inferscope mem oom` and `inferscope mem snapshot` as users run them: exit codes, JSON keys,
//! stdin, and the exact one-line errors for bad input (`fixtures/bad/*/EXPECTED.md`).

mod common;

use common::{inferscope, repo};
use std::io::Write;
use std::process::{Command, Stdio};

/// Rows `| `file` | message |` of an EXPECTED.md table.
fn expected_rows(path: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    text.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("| `")?;
            let (file, rest) = l.split_once("` | ")?;
            Some((file.to_string(), rest.strip_suffix(" |")?.to_string()))
        })
        .collect()
}

#[test]
fn oom_bad_inputs_give_one_line_and_exit_2() {
    let rows = expected_rows("fixtures/bad/oom/EXPECTED.md");
    assert_eq!(rows.len(), 3);
    for (file, message) in rows {
        let path = format!("fixtures/bad/oom/{file}");
        let (code, out, err) = inferscope(&["mem", "oom", &path]);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(out.is_empty());
        assert_eq!(err, format!("inferscope: error: {path}: {message}\n"));
    }
}

#[test]
fn oom_json_has_the_contract_keys() {
    let (code, out, err) = inferscope(&[
        "mem",
        "oom",
        "--json",
        "fixtures/tools/oom/synthetic-torch2x-other-process-listed.txt",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "total_bytes",
        "requested_bytes",
        "free_bytes",
        "allocated_bytes",
        "reserved_unallocated_bytes",
        "other_processes",
        "diagnosis",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {out}");
    }
    assert_eq!(v["diagnosis"], "other_processes");
    assert_eq!(v["other_processes"][0]["pid"], 48213);
}

#[test]
fn oom_reads_stdin_and_prints_a_report() {
    let text = std::fs::read_to_string(
        repo().join("fixtures/tools/oom/torch21-6gb-zero-bytes-free-no-process-clause.txt"),
    )
    .unwrap();
    let body = &text[text.find("\n---\n").unwrap() + 5..];
    for args in [&["mem", "oom"][..], &["mem", "oom", "-"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(s.contains("Diagnosis: fragmentation"), "{s}");
        assert!(s.contains("expandable_segments:True"), "{s}");
    }
}
