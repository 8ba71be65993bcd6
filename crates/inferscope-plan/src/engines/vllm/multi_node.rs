//! vLLM over several machines, as its releases start it (read in the 0.11.0, 0.11.1 and 0.34.0
//! wheels).
//!
//! * 0.11.1 added `--nnodes`/`-n`, `--node-rank`/`-r`, `--master-addr`, `--master-port`
//!   (vllm/engine/arg_utils.py `EngineArgs.add_cli_args`, from `ParallelConfig` in
//!   vllm/config/parallel.py; default port 29501); 0.11.0 has none of them and spreads TP/PP over
//!   machines only through a Ray cluster, which inferscope does not write.
//! * A node of rank > 0 runs `vllm serve ... --headless`: vllm/entrypoints/cli/serve.py
//!   `run_headless` ("Run headless workers (for multi-node PP/TP)") starts the worker executor
//!   and no API server, so only the leader serves HTTP. The module entry point
//!   (`python -m vllm.entrypoints.openai.api_server`) has no headless mode.
//! * Data parallelism over machines is vLLM's multi-node DP form: every node
//!   `--data-parallel-size-local` (`-dpl`) replicas, `--data-parallel-address` (`-dpa`) the
//!   leader and `--data-parallel-rpc-port` (`-dpp`); nodes of rank > 0 add
//!   `--data-parallel-start-rank` (`-dpr`) and `--headless` (same files; docs "Data Parallel
//!   Deployment", multi-node). Each replica's TP × PP stays inside one node.

use super::super::multi_node::{
    MultiNodeError, NodeCommand, NodeRequest, Word, already_set, gpus_per_node, number_of,
};
use crate::memory::EngineVersion;
use inferscope_host::engine_command::{Found, find};

/// `--master-port`'s default (vllm/config/parallel.py `ParallelConfig.master_port`).
const MASTER_PORT: &str = "29501";
/// A fixed DP RPC port, so every node's command names the same one.
const DP_RPC_PORT: &str = "13345";
/// `vllm serve`'s port (vllm/entrypoints/openai/cli_args.py `port` default).
const DEFAULT_PORT: u16 = 8000;
const FIRST_NNODES: EngineVersion = EngineVersion {
    major: 0,
    minor: 11,
    patch: 1,
};

/// Flags a multi-node launch writes itself.
const ADDED: &[&str] = &[
    "--nnodes",
    "-n",
    "--node-rank",
    "-r",
    "--master-addr",
    "--master-port",
    "--headless",
    "--data-parallel-size-local",
    "-dpl",
    "--data-parallel-start-rank",
    "-dpr",
    "--data-parallel-address",
    "-dpa",
    "--data-parallel-rpc-port",
    "-dpp",
    "--data-parallel-rank",
    "-dpn",
];

pub(super) fn node_command(req: &NodeRequest<'_>) -> Result<NodeCommand, MultiNodeError> {
    let fail = |s: String| Err(MultiNodeError(s));
    let version = req
        .version
        .and_then(EngineVersion::parse)
        .unwrap_or(EngineVersion::LATEST);
    if version < FIRST_NNODES {
        return fail(format!(
            "vLLM {version} has no --nnodes (added in 0.11.1, vllm/engine/arg_utils.py): its TP/PP over several machines runs on a Ray cluster (`ray start` on every node, then `vllm serve ... --distributed-executor-backend ray` on the head), which inferscope does not write; use --engine-version 0.11.1 or later"
        ));
    }
    match find(req.command) {
        Found::Engine { args, .. }
            if args
                .checked_sub(1)
                .and_then(|i| req.command.get(i))
                .is_some_and(|w| w == "serve") => {}
        _ => {
            return fail(
                "a multi-node vLLM is started as `vllm serve MODEL ...`: the workers run `vllm serve --headless` (vllm/entrypoints/cli/serve.py run_headless), which the module entry point does not have".into(),
            );
        }
    }
    if let Some(flag) = already_set(req.command, ADDED) {
        return fail(format!(
            "the command already sets {flag}: give the one-node command, inferscope adds each node's flags"
        ));
    }
    let s = req.settings;
    let tp = s.tensor_parallel_size.unwrap_or(1);
    let pp = s.pipeline_parallel_size.unwrap_or(1);
    let dp = s.data_parallel_size.unwrap_or(1);
    let mut argv: Vec<Word> = req.command.iter().map(Word::lit).collect();
    let worker = !req.rank.is_leader();
    let mut notes = Vec::new();
    let gpus = if dp == 1 {
        let gpus = gpus_per_node(tp * pp, "TP × PP", req.nodes)?;
        argv.extend([
            Word::lit("--nnodes"),
            Word::Lit(req.nodes.to_string()),
            Word::lit("--node-rank"),
            req.rank.times(1),
            Word::lit("--master-addr"),
            req.leader.clone(),
            Word::lit("--master-port"),
            Word::lit(MASTER_PORT),
        ]);
        notes.push(format!(
            "vLLM {version}: --nnodes/--node-rank/--master-addr/--master-port (0.11.1+, vllm/engine/arg_utils.py EngineArgs.add_cli_args); TP {tp} × PP {pp} over {} nodes of {gpus} GPUs",
            req.nodes
        ));
        gpus
    } else {
        if !dp.is_multiple_of(req.nodes) {
            return fail(format!(
                "DP {dp} replicas do not split evenly over {} nodes (vLLM's multi-node DP keeps each replica's TP × PP inside one node)",
                req.nodes
            ));
        }
        let local = dp / req.nodes;
        argv.extend([
            Word::lit("--data-parallel-size-local"),
            Word::Lit(local.to_string()),
            Word::lit("--data-parallel-address"),
            req.leader.clone(),
            Word::lit("--data-parallel-rpc-port"),
            Word::lit(DP_RPC_PORT),
        ]);
        if worker {
            argv.extend([
                Word::lit("--data-parallel-start-rank"),
                req.rank.times(local),
            ]);
        }
        notes.push(format!(
            "vLLM {version}: multi-node data parallel, {local} of {dp} replicas (TP {tp} × PP {pp} each) per node: -dpl/-dpa/-dpp, -dpr on the workers (vllm/engine/arg_utils.py EngineArgs.add_cli_args)"
        ));
        local * tp * pp
    };
    if worker {
        argv.push(Word::lit("--headless"));
        notes.push(
            "nodes of rank > 0 run --headless: no API server (vllm/entrypoints/cli/serve.py run_headless)".into(),
        );
    }
    let port = number_of(req.command, &["--port"])
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(DEFAULT_PORT);
    Ok(NodeCommand {
        argv,
        serves_http: !worker,
        gpus,
        port,
        readiness_path: "/health",
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::multi_node::Rank;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn node(cmd: &str, version: Option<&str>, rank: Rank) -> Result<NodeCommand, MultiNodeError> {
        let command = words(cmd);
        let settings = crate::engine::parse_command(&command).unwrap();
        node_command(&NodeRequest {
            command: &command,
            settings: &settings,
            version,
            nodes: 2,
            leader: Word::Expr("\"$LEADER_ADDR\"".into()),
            rank,
        })
    }

    fn text(c: &NodeCommand) -> String {
        c.argv
            .iter()
            .map(|w| match w {
                Word::Lit(s) | Word::Expr(s) => s.as_str(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn tp_pp_over_two_nodes_the_leader_serves_and_the_worker_is_headless() {
        let cmd = "vllm serve meta-llama/Llama-3.1-405B-Instruct -tp 8 -pp 2 --port 8080";
        let leader = node(cmd, Some("0.11.1"), Rank::Index(0)).unwrap();
        assert_eq!(
            text(&leader),
            format!(
                "{cmd} --nnodes 2 --node-rank 0 --master-addr \"$LEADER_ADDR\" --master-port 29501"
            )
        );
        assert!(leader.serves_http && leader.gpus == 8 && leader.port == 8080);
        let worker = node(cmd, None, Rank::Var("LWS_WORKER_INDEX".into())).unwrap();
        assert!(text(&worker).ends_with(
            "--node-rank \"$LWS_WORKER_INDEX\" --master-addr \"$LEADER_ADDR\" --master-port 29501 --headless"
        ));
        assert!(!worker.serves_http);
    }

    #[test]
    fn data_parallel_keeps_each_replica_in_a_node_and_numbers_the_workers_ranks() {
        let cmd = "vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel";
        let w = node(cmd, None, Rank::Var("LWS_WORKER_INDEX".into())).unwrap();
        assert!(text(&w).ends_with(
            "--data-parallel-size-local 8 --data-parallel-address \"$LEADER_ADDR\" --data-parallel-rpc-port 13345 --data-parallel-start-rank $((LWS_WORKER_INDEX * 8)) --headless"
        ), "{}", text(&w));
        assert_eq!(w.gpus, 8);
        let n1 = node(cmd, None, Rank::Index(1)).unwrap();
        assert!(text(&n1).contains("--data-parallel-start-rank 8 --headless"));
    }

    #[test]
    fn releases_without_nnodes_the_module_form_and_preset_flags_are_refused() {
        let e = node("vllm serve m -tp 16", Some("0.11.0"), Rank::Index(0)).unwrap_err();
        assert!(
            e.0.contains("vLLM 0.11.0 has no --nnodes (added in 0.11.1"),
            "{e}"
        );
        let e = node(
            "python3 -m vllm.entrypoints.openai.api_server --model m -tp 16",
            None,
            Rank::Index(0),
        )
        .unwrap_err();
        assert!(e.0.contains("vllm serve MODEL"), "{e}");
        let e = node("vllm serve m -tp 16 --node-rank 1", None, Rank::Index(0)).unwrap_err();
        assert!(e.0.contains("already sets --node-rank"), "{e}");
        let e = node("vllm serve m -tp 9", None, Rank::Index(0)).unwrap_err();
        assert!(e.0.contains("TP × PP = 9 GPUs"), "{e}");
        let e = node("vllm serve m -dp 3", None, Rank::Index(0)).unwrap_err();
        assert!(e.0.contains("DP 3 replicas"), "{e}");
    }
}
