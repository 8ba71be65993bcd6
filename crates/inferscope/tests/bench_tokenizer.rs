//! `inferscope bench --tokenizer FILE` refuses a bad tokenizer.json before sending anything:
//! exit 2 and the exact one line of `fixtures/bad/tokenizer/EXPECTED.md`.

mod common;

use common::{inferscope, repo};
use inferscope_testkit::{Mode, TestServer, start_in_thread};
use std::sync::atomic::Ordering;

/// Rows of the EXPECTED.md table, the message without its backticks.
fn expected_rows() -> Vec<(String, String)> {
    common::expected_rows("fixtures/bad/tokenizer/EXPECTED.md")
        .into_iter()
        .map(|(file, m)| {
            let m = m
                .strip_prefix('`')
                .and_then(|m| m.strip_suffix('`'))
                .unwrap();
            (file, m.to_string())
        })
        .collect()
}

/// A scripted server the bench would send to; nothing may connect.
fn quiet_server() -> (TestServer, String) {
    let server = start_in_thread(Mode::Silent);
    let url = server.url();
    (server, url)
}

fn assert_nothing_sent(server: &TestServer) {
    let n = server.truth.connections.load(Ordering::SeqCst);
    assert_eq!(n, 0, "the bench connected to the server");
}

#[test]
fn every_bad_tokenizer_gives_its_line_and_exit_2() {
    let rows = expected_rows();
    let mut listed: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    listed.sort();
    let mut files: Vec<String> = std::fs::read_dir(repo().join("fixtures/bad/tokenizer"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(
        listed, files,
        "EXPECTED.md must list exactly the .json files"
    );
    let (listener, url) = quiet_server();
    for (file, message) in rows {
        let path = format!("fixtures/bad/tokenizer/{file}");
        let (code, out, err) = inferscope(&[
            "bench",
            "--url",
            &url,
            "--requests",
            "1",
            "--quiet",
            "--tokenizer",
            &path,
        ]);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(out.is_empty(), "{file}: {out}");
        assert_eq!(err, format!("{}\n", message.replace("FILE", &path)));
    }
    assert_nothing_sent(&listener);
}

#[test]
fn oversized_and_missing_tokenizers_are_refused_without_reading() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse file claiming 1 GiB: refused from its size, never read into memory.
    let big = dir.path().join("tokenizer.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let (listener, url) = quiet_server();
    let big_s = big.display().to_string();
    let (code, _, err) = inferscope(&["bench", "--url", &url, "--quiet", "--tokenizer", &big_s]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "inferscope: error: --tokenizer {big_s}: 1073741824 bytes, larger than the 128 MiB a tokenizer.json can plausibly be\n"
        )
    );
    let missing = dir.path().join("nope.json").display().to_string();
    let (code, _, err) = inferscope(&["bench", "--url", &url, "--quiet", "--tokenizer", &missing]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!(
            "inferscope: error: --tokenizer {missing}: cannot read"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_nothing_sent(&listener);
}
