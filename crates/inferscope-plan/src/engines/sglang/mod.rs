//! SGLang's room: its command line (`python -m sglang.launch_server`), its memory accounting
//! (`kv`: the token pool per release; `mamba`: the hybrid state pool; `sizing`: both inside the
//! planner's pipeline) and its fitted speed.

pub mod kv;
pub mod mamba;
pub mod sizing;
pub mod speculative;

use super::{
    CommandOptions, EngineRoom, EnvironmentRules, FreeMemoryFix, ImageShape, Knob,
    MemoryAccounting, NotModelled, OfficialImage, ServeShape, ServerMetricNames,
};
use crate::arch::ModelArch;
use crate::engine::Meaning;
use crate::memory::EngineVersion;
use crate::plan::{Plan, PlanRequest};
use crate::speed::engines::{EngineEfficiency, row};
use crate::state::StateKind;
use inferscope_host::engine::Engine;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The room.
pub struct Sglang;

static OPTIONS: CommandOptions = CommandOptions {
    known,
    parser: "SGLang's argparse parser refuses unknown options (\"unrecognized arguments\")",
    underscores_as_dashes: false,
    abbreviations: true,
    negations: false,
    dotted_options: false,
    model_positional: false,
    zero_len_is_model_default: false,
    minus_one_seqs_is_auto: false,
    auto_len: false,
    human_readable_ints: false,
    meaning,
};

// SGLang's options: `prepare_server_args` (sglang/srt/server_args.py) is a plain
// `argparse.ArgumentParser` with `parse_args`: unknown options rejected, prefixes allowed, no
// `_` to `-` rewriting. The list is data/flags/sglang.txt (the union over releases, the file
// saying which).
fn known() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&str>> = OnceLock::new();
    SET.get_or_init(|| super::flag_list(include_str!("../../../data/flags/sglang.txt")))
}

fn meaning(f: &str) -> Option<Meaning> {
    use Meaning::*;
    Some(match f {
        "--mamba-ssm-dtype" => MambaSsmDtype,
        "--max-mamba-cache-size" => MambaPoolSize,
        "--mamba-full-memory-ratio" => MambaRatio,
        "--disable-radix-cache" => NoRadixCache,
        "--tp" | "--tp-size" | "--tensor-parallel-size" => Tp,
        "--pp" | "--pp-size" => Pp,
        "--context-length" => MaxLen,
        "--mem-fraction-static" => GpuUtil,
        "--kv-cache-dtype" => KvDtype,
        "--max-running-requests" => MaxSeqs,
        "--chunked-prefill-size" => BatchedTokens,
        "--disable-cuda-graph" => Eager,
        "--quantization" => Quant,
        "--dtype" => Dtype,
        "--model-path" | "--model" => Model,
        "--speculative-algorithm"
        | "--speculative-draft-model-path"
        | "--speculative-draft-model"
        | "--speculative-num-steps"
        | "--speculative-eagle-topk"
        | "--speculative-num-draft-tokens" => Speculative,
        "--disable-piecewise-cuda-graph" => PrefillGraphOff,
        "--host" | "--port" | "--api-key" | "--served-model-name" | "--tokenizer-path" => Inert,
        "--trust-remote-code" | "--enable-torch-compile" => InertSwitch,
        _ => return None,
    })
}

struct Memory;

impl MemoryAccounting for Memory {
    fn plan(&self, req: &PlanRequest) -> Plan {
        if let Some(why) = speculative::refusal(&req.arch, req) {
            return crate::plan::refused(req, why);
        }
        crate::plan::pipeline(
            req,
            Some(&crate::plan::OwnSizer {
                size: sizing::size,
                // activations, non-torch memory and CUDA graphs use the 1 −
                // mem_fraction_static share
                outside_budget: true,
            }),
        )
    }
}

impl EngineRoom for Sglang {
    fn engine(&self) -> Engine {
        Engine::Sglang
    }

    fn help_command(&self) -> Option<&'static str> {
        Some("sglang")
    }

    fn server_commands(&self) -> &'static [&'static str] {
        &["python -m sglang.launch_server"]
    }

    fn options(&self) -> Result<&'static CommandOptions, NotModelled> {
        Ok(&OPTIONS)
    }

    fn memory(&self) -> Result<&'static dyn MemoryAccounting, NotModelled> {
        Ok(&Memory)
    }

    fn speed(&self) -> Result<EngineEfficiency, NotModelled> {
        // fitted by tests/speed_accuracy.rs on the calibration half of fixtures/speed/cases.jsonl
        Ok(row(
            Engine::Sglang,
            (
                0.98,
                0.53,
                1.30e-05,
                0.00e+00,
                "calibration half: 2 sglang case(s)",
            ),
        ))
    }

    fn environment(&self) -> Result<EnvironmentRules, NotModelled> {
        // `run`'s rules, read from the engine's source (docs/run.md "Engine compatibility")
        Ok(EnvironmentRules {
            accepts_uuids: false,
            uuid_source: "sglang/srt/distributed/device_communicators/custom_all_reduce.py CustomAllreduce.__init__ (0.5.2) maps int() over the comma-separated entries",
            sets_omp_threads: None,
            expandable_conflict: None,
        })
    }

    fn serve_command(&self, s: &ServeShape<'_>) -> Option<String> {
        Some(s.command(
            format!(
                "python -m sglang.launch_server --model-path {} --context-length {}",
                s.model, s.max_len
            ),
            "--tp",
            "--quantization fp8",
            "--kv-cache-dtype fp8_e5m2",
        ))
    }

    /// The image and its entrypoint, as its own Dockerfile says:
    /// `lmsysorg/sglang`: no server entrypoint; its docs and docker/compose.yaml run
    /// `python3 -m sglang.launch_server ...` as the command, so the whole command is passed.
    fn official_image(&self, s: &ImageShape) -> Result<OfficialImage, NotModelled> {
        let mut full = vec!["python3".to_string()];
        full.extend(s.rest.iter().cloned());
        Ok(OfficialImage {
            image: "lmsysorg/sglang:latest".to_string(),
            entrypoint: None,
            args: full,
            how: "the whole command: the image has no server entrypoint (SGLang's docs run python3 -m sglang.launch_server in it); SGLang's release tags carry the CUDA build (v0.5.19-cu129), so pin one with --image",
        })
    }

    fn state_layers_since(&self) -> Option<&'static str> {
        Some("0.5.10")
    }

    fn state_layers(
        &self,
        arch: &ModelArch,
        version: Option<&str>,
    ) -> Result<(), (String, &'static str)> {
        // the Mamba pool is modelled from 0.5.10 (`mamba`) for Mamba-2 and Gated DeltaNet layers
        let Some(first) = arch.state_layers.first() else {
            return Ok(());
        };
        let v = version.and_then(EngineVersion::parse);
        let old = v.is_some_and(|v| (v.major, v.minor, v.patch) < (0, 5, 10));
        if let Some(s) = arch
            .state_layers
            .iter()
            .find(|s| matches!(s.state, StateKind::Mamba1 { .. }))
        {
            return Err((
                s.layer_type.clone(),
                " (Mamba-1 state has no SGLang formula here)",
            ));
        }
        if let Some(s) = arch.state_layers.iter().find(|s| {
            matches!(
                s.state,
                StateKind::ShortConv { .. } | StateKind::Lightning { .. } | StateKind::Kda { .. }
            )
        }) {
            return Err((
                s.layer_type.clone(),
                " (SGLang's pool is modelled for Mamba-2 and Gated DeltaNet layers only)",
            ));
        }
        if old {
            return Err((
                first.layer_type.clone(),
                " (SGLang's Mamba pool is modelled from 0.5.10's rules)",
            ));
        }
        Ok(())
    }

    fn multi_node(
        &self,
        req: &super::multi_node::NodeRequest<'_>,
    ) -> Result<super::multi_node::NodeCommand, super::multi_node::MultiNodeError> {
        node_command(req)
    }

    fn env_prefixes(&self) -> &'static [&'static str] {
        &["SGLANG_"]
    }

    fn flag(&self, knob: Knob) -> Option<&'static str> {
        Some(match knob {
            Knob::MemoryFraction => "--mem-fraction-static",
            Knob::PrefillChunk => "--chunked-prefill-size",
            Knob::NoCudaGraphs => "--disable-cuda-graph",
            Knob::GraphBatchCap => "--cuda-graph-max-bs",
            // `--tp` and `--pp-size` as users write them (`server_args.py` aliases)
            Knob::TensorParallel => "--tp",
            Knob::PipelineParallel => "--pp-size",
            Knob::ContextLength => "--context-length",
            Knob::MaxSequences => "--max-running-requests",
        })
    }

    /// `python/sglang/srt/metrics/collector.py`: `sglang:token_usage`, `sglang:num_running_reqs`,
    /// `sglang:num_queue_reqs`, `sglang:cache_hit_rate`, and the histograms
    /// `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`.
    fn server_metrics(&self) -> Option<&'static ServerMetricNames> {
        Some(&ServerMetricNames {
            recorded: &[
                "sglang:token_usage",
                "sglang:num_running_reqs",
                "sglang:num_queue_reqs",
                "sglang:cache_hit_rate",
            ],
            histograms: &[
                "sglang:time_to_first_token_seconds",
                "sglang:inter_token_latency_seconds",
            ],
            kv_usage: &["sglang:token_usage"],
            waiting: &["sglang:num_queue_reqs"],
            running: &["sglang:num_running_reqs"],
            prefix_hit_rate: Some("sglang:cache_hit_rate"),
        })
    }

    /// `profile_max_num_token`'s failures ("Not enough memory. Please try to increase
    /// --mem-fraction-static", "… leave no GPU memory for the KV cache"): the weights left less
    /// free memory than the share outside the static pool.
    fn failure_diagnosis(
        &self,
        t: &str,
        weights_gib: Option<f64>,
        avail_after_weights_gib: Option<f64>,
    ) -> Option<String> {
        if !(t.contains("leave no GPU memory for the KV cache") || t.contains("Not enough memory"))
        {
            return None;
        }
        Some(match (weights_gib, avail_after_weights_gib) {
            (Some(w), Some(a)) => format!(
                "weights took {w:.2} GiB per GPU, leaving {a:.2} GiB free, less than the share \
                 --mem-fraction-static keeps out of the static pool: no room for KV cache"
            ),
            _ => "no room for the KV cache under --mem-fraction-static".to_string(),
        })
    }

    fn named_in_oom_remedies(&self) -> bool {
        true
    }

    /// `model_runner.py` `profile_max_num_token`: the pool is sized from the free memory read
    /// when the runner starts ("Load weight begin. avail mem=…"), a property of this GPU at
    /// that moment the planner cannot know.
    fn sizes_from_free_memory(&self) -> bool {
        true
    }

    fn missing_budget_lines(&self, has_before: bool, has_after: bool) -> Option<Vec<&'static str>> {
        let mut missing = Vec::new();
        if !has_before {
            missing.push(
                "SGLang's `Load weight begin. avail mem=X GB` (the free memory \
                 profile_max_num_token multiplies by 1 − mem_fraction_static)",
            );
        }
        if !has_after {
            missing.push("`Load weight end. … avail mem=X GB`");
        }
        missing.push(
            "`KV Cache is allocated. #tokens: N` / `max_total_num_tokens=N` or the error \
             (`Not enough memory`, `leave no GPU memory for the KV cache`)",
        );
        Some(missing)
    }

    /// `model_runner.py` `profile_max_num_token`: KV = after − total × (1 − f), total = free
    /// before weights.
    fn free_memory_fix(&self, total: f64, after: f64) -> Option<FreeMemoryFix> {
        if total <= 0.0 {
            return None;
        }
        let min = 1.0 - after / total;
        // Two points above the minimum leave 2 % of the card for KV.
        let frac = ((min + 0.02) * 100.0).ceil() / 100.0;
        if frac >= 1.0 || frac <= 0.0 {
            return None;
        }
        Some(FreeMemoryFix {
            change: format!("--mem-fraction-static {frac:.2}"),
            why: format!(
                "KV = {after:.2} − {total:.2} × (1 − f) > 0 needs f > {min:.4}; {frac:.2} leaves \
                 {:.2} GiB for KV",
                after - total * (1.0 - frac)
            ),
            cost: format!(
                "minimum viable is {min:.4}; leaves {:.2} GiB per GPU for activations and CUDA graphs",
                total * (1.0 - frac)
            ),
            kv_gib: after - total * (1.0 - frac),
        })
    }
}

/// SGLang over several machines. Every node runs the same `launch_server` with `--nnodes N
/// --node-rank R --dist-init-addr LEADER:PORT` (sglang/srt/server_args.py `ServerArgs`, 0.3.3+;
/// 0.3.0–0.3.2 spell it `--nccl-init-addr`, kept as an alias later); nodes of rank ≥ 1 run no
/// tokenizer and no HTTP server (0.5.23 sglang/srt/entrypoints/engine.py
/// `Engine._launch_subprocesses`: "Non-zero-rank nodes do not run tokenizer processes"). The
/// GPUs are `tp × pp` over the nodes (0.5.23 `compute_world_size` = dp × tp × pp; attention DP
/// runs inside the TP group); DP replicas across nodes are one server per node group behind
/// SGLang's router, which is not written here. The HTTP server listens on 127.0.0.1 by default
/// (`serving.py` `host`), so the leader gets `--host 0.0.0.0` unless the command says otherwise.
fn node_command(
    req: &super::multi_node::NodeRequest<'_>,
) -> Result<super::multi_node::NodeCommand, super::multi_node::MultiNodeError> {
    use super::multi_node::{
        MultiNodeError, NodeCommand, Word, already_set, gpus_per_node, number_of,
    };
    let added = [
        "--nnodes",
        "--node-rank",
        "--dist-init-addr",
        "--nccl-init-addr",
    ];
    if let Some(flag) = already_set(req.command, &added) {
        return Err(MultiNodeError(format!(
            "the command already sets {flag}: give the one-node command, inferscope adds each node's flags"
        )));
    }
    let dp_attention = already_set(req.command, &["--enable-dp-attention"]).is_some();
    let dp = number_of(req.command, &["--dp-size", "--dp", "--data-parallel-size"]);
    if dp.is_some_and(|d| d > 1) && !dp_attention {
        return Err(MultiNodeError(
            "SGLang data-parallel replicas across machines are separate servers behind its router: give each group's TP/PP command (--dp-size with --enable-dp-attention stays inside the TP group)".into(),
        ));
    }
    let tp = req.settings.tensor_parallel_size.unwrap_or(1);
    let pp = req.settings.pipeline_parallel_size.unwrap_or(1);
    let gpus = gpus_per_node(tp * pp, "TP × PP", req.nodes)?;
    let version = req.version.and_then(EngineVersion::parse);
    let first_dist_init = EngineVersion {
        major: 0,
        minor: 3,
        patch: 3,
    };
    let init_flag = match version {
        Some(v) if v < first_dist_init => "--nccl-init-addr",
        _ => "--dist-init-addr",
    };
    let version = version.map_or("(newest release)".to_string(), |v| v.to_string());
    let init = match &req.leader {
        Word::Lit(a) => Word::Lit(format!("{a}:{DIST_INIT_PORT}")),
        Word::Expr(e) => Word::Expr(format!("{}:{DIST_INIT_PORT}\"", e.trim_end_matches('"'))),
    };
    let mut argv: Vec<Word> = req.command.iter().map(Word::lit).collect();
    let leader = req.rank.is_leader();
    if leader && already_set(req.command, &["--host"]).is_none() {
        argv.extend([Word::lit("--host"), Word::lit("0.0.0.0")]);
    }
    argv.extend([
        Word::lit("--nnodes"),
        Word::Lit(req.nodes.to_string()),
        Word::lit("--node-rank"),
        req.rank.times(1),
        Word::lit(init_flag),
        init,
    ]);
    Ok(NodeCommand {
        argv,
        serves_http: leader,
        gpus,
        port: number_of(req.command, &["--port"])
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(30000),
        readiness_path: "/health",
        notes: vec![format!(
            "SGLang {version}: --nnodes/--node-rank/{init_flag} on every node (sglang/srt/server_args.py); TP {tp} × PP {pp} over {} nodes of {gpus} GPUs; ranks ≥ 1 start no HTTP server (sglang/srt/entrypoints/engine.py)",
            req.nodes
        )],
    })
}

/// The dist-init port every node names (any free port; SGLang derives its other ports from it).
const DIST_INIT_PORT: u16 = 20000;

#[cfg(test)]
mod tests {
    use crate::engine::{Engine, parse_command};
    use crate::engines::EngineRoom;
    use crate::engines::sglang::Sglang;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn launch_server_command_reads() {
        let s = parse_command(&words(
            "CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp 2 --context-length 8192 --mem-fraction-static 0.85 --disable-radix-cache",
        ))
        .unwrap();
        assert_eq!(
            (s.engine, s.tensor_parallel_size, s.max_model_len),
            (Engine::Sglang, Some(2), Some(8192))
        );
        assert_eq!(s.gpu_memory_utilization, Some(0.85));
        assert!(s.disable_radix_cache);
    }

    #[test]
    fn unknown_commands_list_the_servers() {
        let e = parse_command(&words("python3 -m foo.bar --x 1")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "python module `foo.bar` is not a serving engine inferscope knows (vllm.entrypoints.openai.api_server, sglang.launch_server)"
        );
        let e = parse_command(&words("foo --x 1")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`foo` is not a serving engine inferscope knows (vllm serve, python -m vllm.entrypoints.openai.api_server, python -m sglang.launch_server, text-generation-launcher, llama-server, lmdeploy serve api_server)"
        );
    }

    #[test]
    fn multi_node_every_node_runs_launch_server_and_only_the_leader_listens() {
        use crate::engines::multi_node::{NodeRequest, Rank, Word};
        let command = words(
            "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-405B-Instruct --tp 16",
        );
        let settings = crate::engine::parse_command(&command).unwrap();
        let node = |rank: Rank, version: Option<&str>| {
            Sglang
                .multi_node(&NodeRequest {
                    command: &command,
                    settings: &settings,
                    version,
                    nodes: 2,
                    leader: Word::Expr("\"$LWS_LEADER_ADDRESS\"".into()),
                    rank,
                })
                .unwrap()
        };
        let text = |ws: &[Word]| {
            ws.iter()
                .map(|w| match w {
                    Word::Lit(s) | Word::Expr(s) => s.as_str(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let leader = node(Rank::Index(0), None);
        assert!(text(&leader.argv).ends_with(
            "--tp 16 --host 0.0.0.0 --nnodes 2 --node-rank 0 --dist-init-addr \"$LWS_LEADER_ADDRESS:20000\""
        ), "{}", text(&leader.argv));
        assert!(leader.serves_http && leader.gpus == 8 && leader.port == 30000);
        let worker = node(Rank::Var("LWS_WORKER_INDEX".into()), Some("0.3.0"));
        assert!(text(&worker.argv).ends_with(
            "--tp 16 --nnodes 2 --node-rank \"$LWS_WORKER_INDEX\" --nccl-init-addr \"$LWS_LEADER_ADDRESS:20000\""
        ), "{}", text(&worker.argv));
        assert!(!worker.serves_http);
        let dp = words("python3 -m sglang.launch_server --model-path m --tp 8 --dp-size 2");
        let dp_settings = crate::engine::parse_command(&dp).unwrap();
        let e = Sglang
            .multi_node(&NodeRequest {
                command: &dp,
                settings: &dp_settings,
                version: None,
                nodes: 2,
                leader: Word::lit("10.0.0.1"),
                rank: Rank::Index(0),
            })
            .unwrap_err();
        assert!(e.0.contains("separate servers behind its router"), "{e}");
    }
}
