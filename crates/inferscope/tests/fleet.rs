//! `inferscope labels` and `inferscope diff` on fixture snapshots (golden files), label values
//! valid for Kubernetes, the planted differences of fixtures/fleet found, exit codes; the
//! hidden `completions` and `man` generators.

mod common;

use std::path::PathBuf;

/// Snapshot files to label: the fleet nodes and every check test snapshot.
fn snapshot_files() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = ["node-a", "node-b"]
        .iter()
        .map(|n| (format!("fleet-{n}"), format!("fixtures/fleet/{n}.json")))
        .collect();
    let dir = common::repo().join("crates/inferscope-check/testdata");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    for p in names {
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        v.push((
            stem.clone(),
            format!("crates/inferscope-check/testdata/{stem}.json"),
        ));
    }
    v
}

fn valid_label_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

#[test]
fn labels_per_fixture_snapshot() {
    for (name, file) in snapshot_files() {
        let (code, out, err) =
            common::inferscope(&["labels", "--snapshot", &file, "--format", "kv"]);
        assert_eq!(code, 0, "{file}: {err}");
        for line in out.lines() {
            let (key, value) = line.split_once('=').unwrap();
            let (prefix, name) = key.split_once('/').unwrap();
            assert_eq!(prefix, "feature.node.kubernetes.io", "{line}");
            assert!(
                name.starts_with("inferscope-") && name.len() <= 63,
                "{line}"
            );
            assert!(valid_label_value(name), "{line}");
            assert!(valid_label_value(value), "{line}");
        }
        insta::assert_snapshot!(format!("labels__{name}"), out);
    }
}

#[test]
fn nfd_format_is_kv_with_a_comment_header() {
    let file = "fixtures/fleet/node-a.json";
    let (_, kv, _) = common::inferscope(&["labels", "--snapshot", file, "--format", "kv"]);
    let (code, nfd, _) = common::inferscope(&["labels", "--snapshot", file]);
    assert_eq!(code, 0);
    let (header, body): (Vec<&str>, Vec<&str>) = nfd.lines().partition(|l| l.starts_with('#'));
    assert!(header[0].contains("Node Feature Discovery"), "{nfd}");
    assert_eq!(body.join("\n") + "\n", kv);
}

#[test]
fn labels_answer_the_scheduling_questions() {
    let (_, a, _) = common::inferscope(&[
        "labels",
        "--snapshot",
        "fixtures/fleet/node-a.json",
        "--format",
        "kv",
    ]);
    let p = "feature.node.kubernetes.io/inferscope-";
    for want in [
        "gpu.count=8",
        "gpu.product=NVIDIA-H100-80GB-HBM3",
        "gpu.nvlink=true",
        "tp.max-numa-local=4",
        "tp.max=8",
        "gpu.per-numa-node=4.4",
    ] {
        assert!(a.contains(&format!("{p}{want}\n")), "{want}:\n{a}");
    }
    // node-b's downtrained GPU fails GPU005; node-a's does not.
    let (_, b, _) = common::inferscope(&[
        "labels",
        "--snapshot",
        "fixtures/fleet/node-b.json",
        "--format",
        "kv",
    ]);
    assert!(b.contains(&format!("{p}check.GPU005=warn\n")));
    assert!(!a.contains("check.GPU005"));
    // Without driver facts, P2P is not known: unknown, never a guess.
    let (_, c, _) = common::inferscope(&[
        "labels",
        "--snapshot",
        "crates/inferscope-check/testdata/pcie8-2s-plx-switches.json",
        "--format",
        "kv",
    ]);
    assert!(
        c.contains(&format!("{p}tp.max-numa-local=unknown\n")),
        "{c}"
    );
}

#[test]
fn labels_from_a_root() {
    let (code, out, err) = common::inferscope(&[
        "labels",
        "--root",
        "fixtures/hosts/dual-socket-5gpu-asymmetric/root",
        "--format",
        "kv",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("inferscope-gpu.count=5\n"), "{out}");
    assert!(out.contains("inferscope-gpu.per-numa-node=4.1\n"), "{out}");
}

#[test]
fn diff_puts_the_planted_node_first() {
    let (code, out, err) = common::inferscope(&[
        "diff",
        "fixtures/fleet/node-a.json",
        "fixtures/fleet/node-c.json",
        "fixtures/fleet/node-b.json",
    ]);
    assert_eq!(code, 1, "{err}");
    insta::assert_snapshot!("diff__fleet_text", out);
    let (code, json, _) = common::inferscope(&[
        "diff",
        "fixtures/fleet/node-a.json",
        "fixtures/fleet/node-b.json",
        "fixtures/fleet/node-c.json",
        "--json",
    ]);
    assert_eq!(code, 1);
    insta::assert_snapshot!("diff__fleet_json", json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["nodes"][0]["name"], "node-b");
    let fields: Vec<&str> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["gpu3.pcie", "vm.thp_enabled", "vm.swappiness"]);
}

#[test]
fn diff_of_equal_nodes_exits_0() {
    let (code, out, _) = common::inferscope(&[
        "diff",
        "fixtures/fleet/node-a.json",
        "fixtures/fleet/node-c.json",
    ]);
    assert_eq!(code, 0);
    assert!(out.ends_with("facts compared: identical\n"), "{out}");
}

#[test]
fn diff_of_different_machines() {
    let t = "crates/inferscope-check/testdata";
    let (code, out, _) = common::inferscope(&[
        "diff",
        &format!("{t}/h100-sxm8-2s-switch-12nic.json"),
        &format!("{t}/dual-socket-5gpu-asymmetric.json"),
    ]);
    assert_eq!(code, 1);
    insta::assert_snapshot!("diff__two_machines", out);
}

#[test]
fn diff_needs_two_files_and_readable_snapshots() {
    let (code, _, _) = common::inferscope(&["diff", "fixtures/fleet/node-a.json"]);
    assert_eq!(code, 2);
    let (code, _, err) =
        common::inferscope(&["diff", "fixtures/fleet/node-a.json", "/nonexistent.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.json"), "{err}");
}

#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = common::inferscope(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("inferscope"), "{shell}");
        assert!(out.contains("labels") && out.contains("diff"), "{shell}");
    }
    let (code, out, _) = common::inferscope(&["man"]);
    assert_eq!(code, 0);
    assert!(out.starts_with(".ie"), "{}", &out[..out.len().min(200)]);
    assert!(
        out.contains(".TH inferscope 1"),
        "{}",
        &out[..out.len().min(400)]
    );
    // The subcommands are listed as inferscope-NAME(1) pages.
    assert!(out.contains("inferscope\\-labels(1)"), "{out}");
    // Hidden from the help.
    let (_, help, _) = common::inferscope(&["--help"]);
    assert!(!help.contains("completions") && !help.contains("\n  man "));
    let dir = tempfile::tempdir().unwrap();
    let (code, list, err) = common::inferscope(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        list.contains("inferscope.1") && list.contains("inferscope-diff.1"),
        "{list}"
    );
    let page = std::fs::read_to_string(dir.path().join("inferscope-serve.1")).unwrap();
    assert!(page.contains("\\-\\-listen"), "{page}");
}

/// A copy of the H100 fixture root with node-b's planted differences
/// (`fixtures/fleet/node-b-root-overlay/`: THP always, swappiness 100, GPU3 at x8) laid over it.
fn node_b_root(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("node-b");
    let repo = common::repo();
    for (from, to) in [
        ("fixtures/hosts/h100-sxm8-2s-switch-12nic/root/.", &root),
        ("fixtures/fleet/node-b-root-overlay/.", &root),
    ] {
        std::fs::create_dir_all(to).unwrap();
        let st = std::process::Command::new("cp")
            .args([
                "-a",
                repo.join(from).to_str().unwrap(),
                to.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
    root
}

#[test]
fn diff_of_exporters_and_a_file_names_the_planted_node() {
    let no_nvml = ("INFERSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    let base = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root";
    let dir = tempfile::tempdir().unwrap();
    let b_root = node_b_root(dir.path());
    let a = common::Exporter::start(&["--root", base], &[no_nvml]);
    let b = common::Exporter::start(&["--root", b_root.to_str().unwrap()], &[no_nvml]);
    // The third node is a file: the same machine as node a, captured by `snapshot`.
    let (code, json, err) = common::inferscope(&["snapshot", "--root", base]);
    assert_eq!(code, 0, "{err}");
    let file = dir.path().join("node-c.json");
    std::fs::write(&file, json).unwrap();
    // A node that accepts connections and never answers, and one that answers with metrics
    // instead of a snapshot: both reported, neither fatal.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let (url_a, url_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let not_snapshot = format!("http://{}/metrics", a.addr);
    let args = [
        "diff",
        &url_a,
        &url_b,
        file.to_str().unwrap(),
        &silent_url,
        &not_snapshot,
        "--timeout",
        "2",
    ];
    let (code, out, err) = common::inferscope(&args);
    assert_eq!(code, 1, "{err}");
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "3 nodes, 53 facts compared, 3 differ; odd one out: {} (differs from the majority on 3 of 3)",
            b.addr
        )),
        "{out}"
    );
    for row in [
        "gpu3.pcie       x8 of x16, Gen5 max *",
        "vm.thp_enabled  always *",
        "vm.swappiness   100 *",
    ] {
        assert!(out.contains(row), "{row}\n{out}");
    }
    assert!(out.contains(" node-c\n"), "{out}");
    let silent_name = silent_url.trim_start_matches("http://");
    assert!(
        out.contains(&format!(
            "not compared: {silent_name} ({silent_url}/snapshot: no answer: "
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "not compared: {}/metrics ({not_snapshot}: the answer is not JSON; an inferscope \
             exporter serves its snapshot on /snapshot)",
            a.addr
        )),
        "{out}"
    );

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (code, out, _) = common::inferscope(&json_args);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"][0]["name"], b.addr.as_str());
    assert_eq!(v["nodes"][0]["hostname"], "xe9680-gpu07");
    let fields: Vec<&str> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["gpu3.pcie", "vm.thp_enabled", "vm.swappiness"]);
    let unreachable = v["unreachable"].as_array().unwrap();
    assert_eq!(unreachable.len(), 2, "{out}");
    assert_eq!(unreachable[0]["source"], silent_url.as_str());
    drop((a, b, silent));
}

#[test]
fn diff_of_urls_needs_two_answers() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let (code, out, err) = common::inferscope(&["diff", &url, "fixtures/fleet/node-a.json"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.starts_with(
            "inferscope: error: only 1 of 2 nodes gave a snapshot; need two to compare ("
        ),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    let (code, _, err) =
        common::inferscope(&["diff", "https://node:9400", "fixtures/fleet/node-a.json"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("https://node:9400: only http:// is supported"),
        "{err}"
    );
}

/// A fake node answering every connection with the bytes of `file`, then closing (the scripted
/// server of crates/inferscope-testkit in `Mode::Raw`).
fn fake_node(file: std::path::PathBuf) -> String {
    let answer = std::fs::read(file).unwrap();
    let server = inferscope_testkit::start_in_thread(inferscope_testkit::Mode::Raw(
        std::sync::Arc::new(answer),
    ));
    server.addr.to_string()
}

/// Every answer in fixtures/bad/exporter-answers makes `diff` report that node with the message
/// in its EXPECTED.md row and compare the others (exit 1), never fail or hang.
#[test]
fn bad_exporter_answers_are_reported_per_node() {
    let dir = common::repo().join("fixtures/bad/exporter-answers");
    let expected = std::fs::read_to_string(dir.join("EXPECTED.md")).unwrap();
    let rows: Vec<(String, String)> = expected
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| {
            let (file, rest) = l.split_once("` | ").unwrap();
            (
                file.to_string(),
                rest.strip_suffix(" |").unwrap().to_string(),
            )
        })
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "EXPECTED.md")
        .collect();
    files.sort();
    let mut listed: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    listed.sort();
    assert_eq!(listed, files, "every bad answer has a row in EXPECTED.md");
    let mut wrong = Vec::new();
    for (file, message) in &rows {
        let addr = fake_node(dir.join(file));
        let url = format!("http://{addr}");
        let (code, out, err) = common::inferscope(&[
            "diff",
            &url,
            "fixtures/fleet/node-a.json",
            "fixtures/fleet/node-c.json",
            "--timeout",
            "5",
        ]);
        let want = format!("not compared: {addr} ({url}/snapshot: {message})\n");
        if code != 1 || !out.ends_with(&want) {
            wrong.push(format!(
                "{file}: exit {code}\n  want {want}  got  {out}{err}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
