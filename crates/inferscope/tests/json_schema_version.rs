//! Every `--json` output starts with `schema_version`, an integer (docs/cli.md, "stable,
//! documented, `schema_version` first"; issue 26 item 7).
//!
//! The commands are not listed by hand: the binary's own `--help` tree is walked, and every
//! command (or subcommand) whose help offers `--json` must have an invocation below, so a new
//! command with `--json` fails this test until it is added here. Inputs are the repository's
//! fixtures; `bench` and `compare` run against the scripted server (crates/inferscope-testkit),
//! `tune` starts tests/scripts/scripted_server.py as its server command.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_inferscope"));
    c.current_dir(common::repo());
    c
}

fn help(path: &[&str]) -> String {
    let o = bin().args(path).arg("--help").output().unwrap();
    assert!(o.status.success(), "{path:?} --help");
    String::from_utf8(o.stdout).unwrap()
}

/// Names under clap's `Commands:` heading (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every command path whose help has a `--json` flag.
fn commands_with_json() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut todo: Vec<Vec<String>> = subcommands(&help(&[]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    while let Some(path) = todo.pop() {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let h = help(&p);
        let subs = subcommands(&h);
        if h.lines().any(|l| l.trim_start().starts_with("--json")) {
            found.insert(path.join(" "));
        }
        for s in subs {
            let mut next = path.clone();
            next.push(s);
            todo.push(next);
        }
    }
    found
}

/// The scripted server (crates/inferscope-testkit): 2 tokens, 5 ms to the first.
fn scripted_server() -> inferscope_testkit::TestServer {
    inferscope_testkit::start_in_thread(inferscope_testkit::Mode::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 2,
        stagger: false,
    })
}

/// The first key of each JSON document in `out` (one, or one per line for JSON lines) is
/// `schema_version` with an integer value. Checked on the text: a parsed map has no order.
fn assert_versioned_first(what: &str, out: &str) {
    let docs: Vec<&str> = if out.trim_start().starts_with("{\n") {
        vec![out]
    } else {
        out.lines().filter(|l| !l.trim().is_empty()).collect()
    };
    assert!(!docs.is_empty(), "{what}: no output");
    for d in docs {
        let body = d
            .trim_start()
            .strip_prefix('{')
            .unwrap_or_else(|| panic!("{what}: {d}"));
        assert!(
            body.trim_start().starts_with("\"schema_version\":"),
            "{what}: first key is not schema_version:\n{}",
            d.chars().take(300).collect::<String>()
        );
        let v: serde_json::Value = serde_json::from_str(d).unwrap();
        assert!(
            v["schema_version"].as_u64().is_some_and(|n| n >= 1),
            "{what}: {v}"
        );
    }
}

#[test]
fn every_json_output_starts_with_schema_version() {
    let h100 = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let server = scripted_server();
    let url = server.url();
    let scripted = common::repo()
        .join("crates/inferscope/tests/scripts/scripted_server.py")
        .display()
        .to_string();
    // Two short bench results for compare.
    for name in ["a.json", "b.json"] {
        let o = bin()
            .args(["bench", "--url", &url, "--quiet", "--concurrency", "2"])
            .args(["--requests", "8", "--warmup", "0"])
            .args(["--dataset", "random:in=8,out=2,spread=0", "--out", &d(name)])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "bench: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let tune_server =
        format!("python3 {scripted} --port {{port}} --slots {{slots}} --service-ms 5 --tokens 2");

    // (command path as --help names it, arguments)
    let runs: Vec<(&str, Vec<String>)> = vec![
        ("check", vec!["check", "--json", "--root", h100]),
        ("topo", vec!["topo", "--json", "--root", h100]),
        ("labels", vec!["labels", "--json", "--root", h100]),
        (
            "plan",
            vec![
                "plan",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "2",
                "--json",
                "--",
                "vllm",
                "serve",
                "meta-llama/Llama-3.1-8B-Instruct",
                "--max-model-len",
                "8192",
            ],
        ),
        (
            "plan",
            vec![
                "plan",
                "--find",
                "--json",
                "--model",
                "meta-llama/Llama-3.1-8B-Instruct",
                "--max-model-len",
                "8192",
            ],
        ),
        (
            "run",
            vec![
                "run",
                "--dry-run",
                "--json",
                "--root",
                h100,
                "--gpus",
                "0",
                "--",
                "vllm",
                "serve",
                "m",
            ],
        ),
        (
            "bench",
            vec![
                "bench",
                "--url",
                &url,
                "--quiet",
                "--concurrency",
                "2",
                "--requests",
                "4",
                "--warmup",
                "0",
                "--dataset",
                "random:in=8,out=2,spread=0",
                "--json",
            ],
        ),
        (
            "compare",
            vec!["compare", &d("a.json"), &d("b.json"), "--json"],
        ),
        (
            "tune",
            vec![
                "tune",
                "--server",
                &tune_server,
                "--set",
                "slots=2",
                "--concurrency",
                "2",
                "--workload",
                "random:in=8,out=2",
                "--duration",
                "500ms",
                "--warmup",
                "0",
                "--repeat",
                "1",
                "--quiet",
                "--out",
                &d("tune"),
                "--json",
            ],
        ),
        (
            "watch",
            vec![
                "watch",
                "--pid",
                &pid,
                "--interval",
                "100ms",
                "--duration",
                "300ms",
                "--json",
            ],
        ),
        (
            "diff",
            vec![
                "diff",
                "fixtures/fleet/node-a.json",
                "fixtures/fleet/node-c.json",
                "--json",
            ],
        ),
        (
            "mem oom",
            vec![
                "mem",
                "oom",
                "--json",
                "fixtures/tools/oom/synthetic-torch2x-other-process-listed.txt",
            ],
        ),
        (
            "mem startup",
            vec![
                "mem",
                "startup",
                "--json",
                "fixtures/tools/vllm-logs/l40s-tp8-qwen3-235b-fp8-v0.10.2.txt",
            ],
        ),
        (
            "mem snapshot",
            vec![
                "mem",
                "snapshot",
                "--json",
                "fixtures/tools/torch-snapshots/vllm-like-protocol4.pickle",
            ],
        ),
    ]
    .into_iter()
    .map(|(c, a)| (c, a.into_iter().map(String::from).collect()))
    .collect();

    let covered: BTreeSet<String> = runs.iter().map(|(c, _)| c.to_string()).collect();
    assert_eq!(
        commands_with_json(),
        covered,
        "every command whose --help offers --json needs an invocation here"
    );
    for (cmd, args) in &runs {
        let o = bin().args(args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        // 1 is a verdict (a failed check, a regression), not a usage error.
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{cmd}: {args:?} exited {:?}: {err}",
            o.status.code()
        );
        assert_versioned_first(cmd, &out);
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}
