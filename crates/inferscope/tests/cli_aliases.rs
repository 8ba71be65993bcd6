//! One vocabulary across commands (docs/cli.md, "Flags shared by several commands"): the new
//! spellings work, and every old spelling scripts may use still does the same thing.

mod common;

use common::inferscope;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn labels_json_and_the_format_alias_agree() {
    let node = "fixtures/fleet/node-b.json";
    let (code, by_flag, err) = inferscope(&["labels", "--snapshot", node, "--json"]);
    assert_eq!(code, 0, "{err}");
    let (code, by_format, _) = inferscope(&["labels", "--snapshot", node, "--format", "json"]);
    assert_eq!(code, 0);
    assert_eq!(by_flag, by_format);
    let v = json(&by_flag);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["source"], node);
    // The same labels, in the same order, as the text forms print.
    let (code, kv, _) = inferscope(&["labels", "--snapshot", node, "--format", "kv"]);
    assert_eq!(code, 0);
    let from_json: Vec<String> = v["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{}={}",
                l["key"].as_str().unwrap(),
                l["value"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(from_json, kv.lines().collect::<Vec<_>>());
    assert!(kv.contains("inferscope-check.GPU005=warn\n"), "{kv}");
    // --json with another --format is a contradiction, said as a usage error.
    let (code, _, err) = inferscope(&["labels", "--snapshot", node, "--json", "--format", "kv"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn check_pid_takes_one_or_a_list() {
    let me = std::process::id().to_string();
    let parent = std::os::unix::process::parent_id().to_string();
    let run = |pids: &[&str]| {
        let mut args = vec!["check", "--json", "--only", "PROC001,PROC002"];
        args.extend_from_slice(pids);
        let (code, out, err) = inferscope(&args);
        assert!(code == 0 || code == 1, "{pids:?}: {err}");
        let v = json(&out);
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["code"].as_str().unwrap(),
                    f["subject"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let one = run(&["--pid", &me]);
    assert!(!one.is_empty());
    assert!(one.iter().all(|f| f.contains(&me)), "{one:?}");
    let comma = run(&["--pid", &format!("{me},{parent}")]);
    let repeated = run(&["--pid", &me, "--pid", &parent]);
    let spaced = run(&["--pid", &me, &parent]);
    assert_eq!(comma, repeated);
    assert_eq!(comma, spaced);
    // The first process's findings, then the second's: each process checked once.
    assert_eq!(comma.len(), 2 * one.len(), "{comma:?}");
    assert_eq!(&comma[..one.len()], one.as_slice());
    assert!(
        comma[one.len()..].iter().all(|f| f.contains(&parent)),
        "{comma:?}"
    );
    let (code, _, err) = inferscope(&["check", "--pid", &format!("{me},4294967")]);
    assert_eq!(code, 2);
    assert!(err.contains("--pid 4294967: no such process"), "{err}");
}

#[test]
fn bench_server_snapshot_and_its_old_spelling() {
    // The snapshot is read before any request is sent, so a bad one is the error either way.
    let bad = "fixtures/bad/snapshot/future-schema-version.json";
    let mut errors = Vec::new();
    for flag in ["--server-snapshot", "--snapshot"] {
        let (code, _, err) = inferscope(&[
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--requests",
            "1",
            flag,
            bad,
        ]);
        assert_eq!(code, 2, "{flag}: {err}");
        assert!(err.contains("schema_version 99"), "{flag}: {err}");
        errors.push(err);
    }
    assert_eq!(errors[0], errors[1]);
    let (_, help, _) = inferscope(&["bench", "--help"]);
    assert!(help.contains("--server-snapshot <FILE>"), "{help}");
    assert!(
        !help.contains("--snapshot <FILE>"),
        "the old spelling is hidden: {help}"
    );
}

#[test]
fn root_means_the_same_everywhere() {
    let root = "fixtures/hosts/rtx5090-2gpu-workstation/root";
    let (code, snap, err) = inferscope(&["snapshot", "--root", root]);
    assert_eq!(code, 0, "{err}");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &snap).unwrap();
    let path = file.path().to_str().unwrap();
    // topo, check and labels read the same tree through --root as through its snapshot.
    for cmd in [
        &["topo", "--json"][..],
        &["labels", "--format", "kv"],
        &["check", "--json"],
    ] {
        let mut by_root = cmd.to_vec();
        by_root.extend(["--root", root]);
        let mut by_file = cmd.to_vec();
        by_file.extend(["--snapshot", path]);
        let (a, out_root, _) = inferscope(&by_root);
        let (b, out_file, _) = inferscope(&by_file);
        assert_eq!(a, b, "{cmd:?}");
        let strip = |s: &str| {
            s.lines()
                .filter(|l| !l.contains("\"source\""))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&out_root), strip(&out_file), "{cmd:?}");
    }
    // No command shows a default for --root: absent means this machine.
    for cmd in [
        "snapshot", "gather", "check", "topo", "labels", "serve", "run",
    ] {
        let (_, help, _) = inferscope(&[cmd, "--help"]);
        let line = help.lines().find(|l| l.contains("--root")).unwrap_or("");
        assert!(!help.contains("[default: /]"), "{cmd}: {line}");
    }
}

#[test]
fn durations_read_one_way() {
    // The same text is the same error in watch and bench: one parser.
    let (code, _, watch_err) = inferscope(&["watch", "--interval", "5 parsecs"]);
    assert_eq!(code, 2);
    let (code, _, bench_err) = inferscope(&[
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--duration",
        "5 parsecs",
    ]);
    assert_eq!(code, 2);
    let msg = "`5 parsecs`: unknown unit `parsecs` (use us, ms, s, m, h)";
    assert!(watch_err.contains(msg), "{watch_err}");
    assert!(bench_err.contains(msg), "{bench_err}");
    // A sampling interval must be above zero.
    let (code, _, err) = inferscope(&["watch", "--interval", "0s"]);
    assert_eq!(code, 2);
    assert!(err.contains("above 0"), "{err}");
    // Flags that took whole seconds take durations too; the old integers still work.
    for t in ["30", "30s", "1m"] {
        let (code, _, err) = inferscope(&[
            "diff",
            "fixtures/fleet/node-a.json",
            "fixtures/fleet/node-c.json",
            "--timeout",
            t,
        ]);
        assert_eq!(code, 0, "--timeout {t}: {err}");
    }
    let (code, _, err) = inferscope(&["diff", "a.json", "b.json", "--timeout", "2h"]);
    assert_eq!(code, 2);
    assert!(err.contains("2h is not in 1..=3600 seconds"), "{err}");
}

/// The help paragraph of `flag` in `cmd --help` (its line and the lines indented under it).
fn help_of(cmd: &str, flag: &str) -> String {
    let (_, help, _) = inferscope(&[cmd, "--help"]);
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(flag));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("{cmd} --help has no {flag}"));
    let mut text = vec![first.trim().to_string()];
    text.extend(
        lines
            .take_while(|l| l.starts_with("          ") && !l.trim_start().starts_with('-'))
            .map(|l| l.trim().to_string()),
    );
    // clap pads the columns to each command's longest flag
    text.join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn bench_and_tune_declare_their_load_flags_once() {
    // Declared once (issue 32): the same spelling, value, default and words in both commands.
    for flag in [
        "--dataset <SPEC>",
        "--api <API>",
        "--model <NAME>",
        "--max-tokens <N>",
        "--rate <R>",
        "--slo <LIST>",
        "--seed <S>",
        "--timeout <D>",
        "--idle-timeout <D>",
        "--attainment <F>",
        "--max-probes <N>",
    ] {
        assert_eq!(help_of("bench", flag), help_of("tune", flag), "{flag}");
    }
    // tune's first spelling, --workload, is the same flag; bench's --dataset works in tune.
    for flag in ["--dataset", "--workload"] {
        for cmd in ["tune", "bench"] {
            let (code, _, err) = match cmd {
                "tune" => inferscope(&[
                    "tune",
                    "--server",
                    "srv --port {port}",
                    flag,
                    "random:in=8,out=2",
                    "--objective",
                    "goodput",
                ]),
                _ => inferscope(&[
                    "bench",
                    "--url",
                    "http://127.0.0.1:9",
                    flag,
                    "sessions:turns=2,think=0s,user=8,out=2",
                ]),
            };
            assert_eq!(code, 2, "{cmd} {flag}: {err}");
            let expected = match cmd {
                "tune" => "--objective goodput needs --slo",
                _ => "is multi-turn chat: add --api chat",
            };
            assert!(err.contains(expected), "{cmd} {flag}: {err}");
        }
    }
}
