//! `inferscope mem oom` and `inferscope mem snapshot` as users run them: exit codes, JSON keys,
//! stdin, and the exact one-line errors for bad input (`fixtures/bad/*/EXPECTED.md`).

mod common;

use common::{expected_rows, inferscope, repo};
use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn oom_bad_inputs_give_one_line_and_exit_2() {
    common::assert_bad_inputs("fixtures/bad/oom", &["mem", "oom"], 3);
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

#[test]
fn snapshot_hostile_and_broken_pickles_give_one_line_and_exit_2() {
    let rows = expected_rows("fixtures/tools/torch-snapshots/EXPECTED.md");
    assert_eq!(rows.len(), 6);
    for (file, message) in rows {
        let path = format!("fixtures/tools/torch-snapshots/{file}");
        let (code, out, err) = inferscope(&["mem", "snapshot", &path]);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(out.is_empty());
        assert_eq!(err, format!("inferscope: error: {path}: {message}\n"));
    }
}

#[test]
fn snapshot_analysis_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("map.svg");
    let mut results = Vec::new();
    for proto in [2, 4] {
        let path = format!("fixtures/tools/torch-snapshots/vllm-like-protocol{proto}.pickle");
        let (code, out, err) = inferscope(&[
            "mem",
            "snapshot",
            &path,
            "--json",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        results.push(serde_json::from_str::<serde_json::Value>(&out).unwrap());
    }
    assert_eq!(results[0], results[1], "protocols 2 and 4 decode alike");
    let v = &results[0];
    const MIB: u64 = 1 << 20;
    assert_eq!(v["overall"]["segments"], 6);
    assert_eq!(v["overall"]["blocks"], 16);
    assert_eq!(v["overall"]["reserved_bytes"], 964 * MIB);
    assert_eq!(v["overall"]["allocated_bytes"], 819 * MIB);
    assert_eq!(v["overall"]["largest_free_block_bytes"], 64 * MIB);
    // 144 MiB free, largest 64 MiB: 1 - 64/144.
    let frag = v["overall"]["external_fragmentation"].as_f64().unwrap();
    assert!((frag - (1.0 - 64.0 / 144.0)).abs() < 1e-9);
    assert_eq!(v["small_pool"]["segments"], 2);
    assert_eq!(v["private_pools"][0]["pool"], "1,3");
    assert_eq!(v["private_pools"][0]["stats"]["allocated_bytes"], 48 * MIB);
    assert_eq!(
        v["top_sites"][0]["site"],
        "/opt/vllm/worker/cache_engine.py:88 in _allocate_kv_cache"
    );
    // Shared frame lists decode for every block that references them.
    assert_eq!(v["top_sites"][2]["blocks"], 2);
    assert_eq!(v["oom"]["size"], 40 * MIB);
    assert_eq!(v["expandable"]["oom_would_fit"], true);
    let map = std::fs::read_to_string(&svg).unwrap();
    assert!(map.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(map.matches("<rect ").count(), 16);
    assert!(map.trim_end().ends_with("</svg>"));
    let (code, out, _) = inferscope(&[
        "mem",
        "snapshot",
        "fixtures/tools/torch-snapshots/vllm-like-protocol4.pickle",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("Top allocation sites"), "{out}");
}
