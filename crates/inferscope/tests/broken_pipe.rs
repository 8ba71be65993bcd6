//! A reader that stops early (`inferscope … --json | head -c 100`) is not an error: the output
//! larger than a pipe's buffer (here `plan --find --json`, ~200 KB) meets a closed pipe, and the
//! command exits 0 without a word on stderr, whether the text or the JSON writer hits it.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for json in [true, false] {
        let mut args = vec![
            "plan",
            "--find",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--top",
            "100000",
        ];
        if json {
            args.push("--json");
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_inferscope"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 100];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // the read end is dropped here: every later write gets EPIPE
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("Broken pipe"), "json={json}: {stderr}");
        assert!(
            out.status.success(),
            "json={json}: {:?} {stderr}",
            out.status
        );
    }
}
