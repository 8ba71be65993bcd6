//! `run --emit nodes|lws --nodes N`: one server spread over several machines (issue 30, item 3).
//!
//! What each node runs is its engine room's answer
//! ([`inferscope_plan::engines::EngineRoom::multi_node`], from the release's own flags); this
//! module writes it down:
//!
//! * `nodes`: one shell command per node. The leader's address is `$LEADER_ADDR` unless
//!   `--leader-addr` names it, and each node's section starts with a shell guard that stops
//!   when it is unset, so a pasted command never starts a worker that waits on `127.0.0.1`.
//! * `lws`: a Kubernetes LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`, the CRD of LWS v0.10.0
//!   kept in `fixtures/kubernetes/lws/`) plus a Service for the leader. LWS puts the leader's
//!   address, the group size and each pod's index in `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`
//!   and `LWS_WORKER_INDEX` (api/leaderworkerset/v1/leaderworkerset_types.go); the containers
//!   run the command under `sh -c` so the rank arithmetic of data-parallel starts works, and
//!   every `$` is doubled because Kubernetes expands `$(VAR)` in commands itself. One leader
//!   template and one worker template: LWS gives each worker its index.
//!
//! Not written here: the CPU/NUMA binding inside a node (each node's `inferscope run` decides it
//! from its own topology; the kubelet's managers in a cluster, see `--emit k8s`), and the
//! interconnect's device plugin resources, whose names depend on the cluster (said in a
//! comment).

use crate::error::LaunchError;
use crate::image::{Vendors, choose_for};
use inferscope_plan::engines::multi_node::{NodeCommand, NodeRequest, Rank, Word};
use std::fmt::Write as _;

/// How the machines talk to each other (`--network`): the planner's presets.
pub use inferscope_plan::cluster::Network;

/// Parse `--network` (the planner's spellings), or the error naming the choices.
pub fn parse_network(s: &str) -> Result<Network, LaunchError> {
    Network::parse(s).ok_or_else(|| {
        LaunchError::Usage(format!(
            "--network {:?}: expected {}",
            s.chars().take(40).collect::<String>(),
            Network::ALL.map(Network::cli_id).join(", ")
        ))
    })
}

/// Which multi-node artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiNodeFormat {
    /// One shell command per node.
    Nodes,
    /// A LeaderWorkerSet manifest and a Service.
    Lws,
}

/// What a multi-node emission needs beyond the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiNodeOptions {
    /// Machines in one server (≥ 2).
    pub nodes: u32,
    /// The leader's address (`nodes`); `None`: `$LEADER_ADDR`.
    pub leader_addr: Option<String>,
    /// `--image` (`lws`).
    pub image: Option<String>,
    /// `--engine-version`: the release whose flags and image to use.
    pub engine_version: Option<String>,
    /// `--network`; `None`: not said (no interconnect settings).
    pub network: Option<Network>,
}

/// The LWS variables (api/leaderworkerset/v1/leaderworkerset_types.go, v0.10.0).
const LWS_LEADER: &str = "LWS_LEADER_ADDRESS";
const LWS_INDEX: &str = "LWS_WORKER_INDEX";
/// `/dev/shm` for NCCL and the engine's worker processes (as `--emit docker`'s `--shm-size`).
const SHM: &str = "16Gi";

/// Write the per-node commands or the manifest for `command` over `opts.nodes` machines.
pub fn emit_multi_node(
    command: &[String],
    format: MultiNodeFormat,
    opts: &MultiNodeOptions,
) -> Result<String, LaunchError> {
    if command.is_empty() {
        return Err(LaunchError::NoCommand);
    }
    let settings = inferscope_plan::engine::parse_command(command)
        .map_err(|e| LaunchError::Usage(format!("--nodes: {e}")))?;
    let room = inferscope_plan::engines::room(settings.engine);
    let node = |leader: Word, rank: Rank| {
        room.multi_node(&NodeRequest {
            command,
            settings: &settings,
            version: opts.engine_version.as_deref(),
            nodes: opts.nodes,
            leader,
            rank,
        })
        .map_err(|e| LaunchError::Usage(e.0))
    };
    match format {
        MultiNodeFormat::Nodes => {
            let leader = match &opts.leader_addr {
                Some(a) => Word::Lit(a.clone()),
                None => Word::Expr("\"$LEADER_ADDR\"".into()),
            };
            let all = (0..opts.nodes)
                .map(|i| node(leader.clone(), Rank::Index(i)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(nodes_text(&all, opts))
        }
        MultiNodeFormat::Lws => {
            let leader_addr = Word::Expr(format!("\"${LWS_LEADER}\""));
            let leader = node(leader_addr.clone(), Rank::Index(0))?;
            let worker = node(leader_addr, Rank::Var(LWS_INDEX.into()))?;
            let image = choose_for(
                Some(settings.engine),
                command,
                Vendors {
                    nvidia: true,
                    amd: false,
                },
                opts.image.as_deref(),
                opts.engine_version.as_deref(),
            )?;
            let name = object_name(settings.engine.cli_id(), settings.model.as_deref());
            let why = match (&opts.image, &opts.engine_version) {
                (Some(_), _) => "from --image".to_string(),
                (None, Some(v)) => format!(
                    "{}'s official image of --engine-version {v}",
                    settings.engine.name()
                ),
                (None, None) => format!(
                    "{}'s official image, newest release (--engine-version picks one)",
                    settings.engine.name()
                ),
            };
            let why = format!("{why}; its entrypoint is replaced by `sh -c` running the command");
            Ok(lws_text(&name, &image.image, &why, &leader, &worker, opts))
        }
    }
}

/// The words as one shell line: literals quoted, expansions as they are.
pub fn shell_line(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| match w {
            Word::Lit(s) => crate::emit::shell_quote(s),
            Word::Expr(s) => s.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn header(out: &mut String, first: &NodeCommand, opts: &MultiNodeOptions) {
    let _ = writeln!(
        out,
        "# inferscope run: one server over {} nodes × {} GPUs",
        opts.nodes, first.gpus
    );
    for n in &first.notes {
        let _ = writeln!(out, "# {}", crate::emit::comment(n));
    }
    match opts.network {
        Some(n) if n.rdma() => {
            let _ = writeln!(
                out,
                "# network: RDMA; NCCL uses its IB transport by itself when the devices are visible (NCCL_IB_HCA picks the adapters)"
            );
        }
        Some(Network::NvlinkDomain) => {
            let _ = writeln!(
                out,
                "# network: one NVLink domain across trays; NCCL uses it when the nodes share an IMEX domain (set up by the cluster)"
            );
        }
        Some(_) => {
            let _ = writeln!(
                out,
                "# network: Ethernet; NCCL_IB_DISABLE=1 keeps NCCL on TCP sockets (NCCL_SOCKET_IFNAME picks the interface)"
            );
        }
        None => {}
    }
}

fn nodes_text(all: &[NodeCommand], opts: &MultiNodeOptions) -> String {
    let mut out = String::new();
    let Some(first) = all.first() else {
        return out;
    };
    header(&mut out, first, opts);
    let _ = writeln!(
        out,
        "# Start every node's command (any order); prefix each with `inferscope run --gpus auto:{} --` on its node to bind CPUs and memory to its GPUs.",
        first.gpus
    );
    let eth = opts.network == Some(Network::Eth100);
    for (i, n) in all.iter().enumerate() {
        let _ = writeln!(out);
        let role = if n.serves_http {
            format!(
                "leader: serves the API on port {}, ready when GET {} answers 200",
                n.port, n.readiness_path
            )
        } else {
            "worker: no API server".to_string()
        };
        let _ = writeln!(out, "# node {i} ({role})");
        if opts.leader_addr.is_none() {
            let _ = writeln!(
                out,
                ": \"${{LEADER_ADDR:?set LEADER_ADDR to node 0's address, reachable from every node}}\""
            );
        }
        let env = if eth { "NCCL_IB_DISABLE=1 " } else { "" };
        let _ = writeln!(out, "{env}{}", shell_line(&n.argv));
    }
    out
}

/// A Kubernetes object name from the engine and the model: lowercase letters, digits and
/// `-`, at most 40 characters (LWS appends group and worker indices to pod names).
fn object_name(engine: &str, model: Option<&str>) -> String {
    let base = model
        .map(|m| m.trim_end_matches('/').rsplit('/').next().unwrap_or(m))
        .unwrap_or("server");
    let mut name = String::new();
    for c in format!("{engine}-{base}").chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name: String = name.chars().take(40).collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "inference-server".into()
    } else {
        name.to_string()
    }
}

fn yaml_str(s: &str) -> String {
    crate::emit::k8s_string(s)
}

fn container(out: &mut String, n: &NodeCommand, image: &str, opts: &MultiNodeOptions) {
    let i = "        ";
    let role = if n.serves_http { "leader" } else { "worker" };
    let _ = writeln!(out, "{i}containers:");
    let _ = writeln!(out, "{i}- name: {role}");
    let _ = writeln!(out, "{i}  image: {}", yaml_str(image));
    let script = format!("exec {}", shell_line(&n.argv));
    let _ = writeln!(out, "{i}  command: [\"sh\", \"-c\", {}]", yaml_str(&script));
    // every pod downloads the model: a token for gated repos, from a Secret when there is one
    let _ = writeln!(out, "{i}  env:");
    let _ = writeln!(out, "{i}  - name: HF_TOKEN");
    let _ = writeln!(out, "{i}    valueFrom:");
    let _ = writeln!(
        out,
        "{i}      secretKeyRef: {{name: hf-token, key: token, optional: true}}"
    );
    if opts.network == Some(Network::Eth100) {
        let _ = writeln!(out, "{i}  - name: NCCL_IB_DISABLE");
        let _ = writeln!(out, "{i}    value: \"1\"");
    }
    let _ = writeln!(out, "{i}  resources:");
    let _ = writeln!(out, "{i}    limits:");
    let _ = writeln!(out, "{i}      nvidia.com/gpu: \"{}\"", n.gpus);
    if opts.network.is_some_and(Network::rdma) {
        let _ = writeln!(
            out,
            "{i}      # RDMA: add your cluster's RDMA device-plugin resource here (its name depends on the plugin, e.g. NVIDIA's network operator)"
        );
        let _ = writeln!(out, "{i}  securityContext:");
        let _ = writeln!(out, "{i}    capabilities:");
        let _ = writeln!(
            out,
            "{i}      add: [\"IPC_LOCK\"]   # RDMA registers pinned memory"
        );
    }
    if n.serves_http {
        let _ = writeln!(out, "{i}  ports:");
        let _ = writeln!(out, "{i}  - containerPort: {}", n.port);
        let _ = writeln!(out, "{i}  readinessProbe:");
        let _ = writeln!(out, "{i}    httpGet:");
        let _ = writeln!(out, "{i}      path: {}", n.readiness_path);
        let _ = writeln!(out, "{i}      port: {}", n.port);
        let _ = writeln!(out, "{i}    periodSeconds: 10");
        let _ = writeln!(out, "{i}    failureThreshold: 3");
    }
    let _ = writeln!(out, "{i}  volumeMounts:");
    let _ = writeln!(out, "{i}  - name: dshm");
    let _ = writeln!(out, "{i}    mountPath: /dev/shm");
    let _ = writeln!(out, "{i}volumes:");
    let _ = writeln!(out, "{i}- name: dshm");
    let _ = writeln!(out, "{i}  emptyDir:");
    let _ = writeln!(out, "{i}    medium: Memory");
    let _ = writeln!(out, "{i}    sizeLimit: {SHM}");
}

fn lws_text(
    name: &str,
    image: &str,
    why: &str,
    leader: &NodeCommand,
    worker: &NodeCommand,
    opts: &MultiNodeOptions,
) -> String {
    let mut out = String::new();
    header(&mut out, leader, opts);
    let _ = writeln!(out, "# image: {}", crate::emit::comment(why));
    let _ = writeln!(
        out,
        "# HF_TOKEN: each pod downloads the model; for a gated repo create the Secret hf-token (key token)"
    );
    let _ = writeln!(
        out,
        "# LeaderWorkerSet (LWS v0.10.0 CRD): one group of {} pods is one server; the leader alone serves the API.",
        opts.nodes
    );
    let _ = writeln!(out, "apiVersion: leaderworkerset.x-k8s.io/v1");
    let _ = writeln!(out, "kind: LeaderWorkerSet");
    let _ = writeln!(out, "metadata:");
    let _ = writeln!(out, "  name: {name}");
    let _ = writeln!(out, "spec:");
    let _ = writeln!(out, "  replicas: 1");
    let _ = writeln!(out, "  startupPolicy: LeaderCreated");
    let _ = writeln!(out, "  leaderWorkerTemplate:");
    let _ = writeln!(out, "    size: {}", opts.nodes);
    let _ = writeln!(out, "    restartPolicy: RecreateGroupOnPodRestart");
    let _ = writeln!(out, "    leaderTemplate:");
    let _ = writeln!(out, "      metadata:");
    let _ = writeln!(out, "        labels:");
    let _ = writeln!(out, "          role: leader");
    let _ = writeln!(out, "      spec:");
    container(&mut out, leader, image, opts);
    let _ = writeln!(out, "    workerTemplate:");
    let _ = writeln!(out, "      spec:");
    container(&mut out, worker, image, opts);
    let _ = writeln!(out, "---");
    let _ = writeln!(out, "apiVersion: v1");
    let _ = writeln!(out, "kind: Service");
    let _ = writeln!(out, "metadata:");
    let _ = writeln!(out, "  name: {name}-leader");
    let _ = writeln!(out, "spec:");
    let _ = writeln!(out, "  type: ClusterIP");
    let _ = writeln!(out, "  selector:");
    let _ = writeln!(out, "    leaderworkerset.sigs.k8s.io/name: {name}");
    let _ = writeln!(out, "    role: leader");
    let _ = writeln!(out, "  ports:");
    let _ = writeln!(out, "  - name: http");
    let _ = writeln!(out, "    port: {}", leader.port);
    let _ = writeln!(out, "    targetPort: {}", leader.port);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn opts(nodes: u32) -> MultiNodeOptions {
        MultiNodeOptions {
            nodes,
            ..MultiNodeOptions::default()
        }
    }

    #[test]
    fn per_node_commands_guard_the_leader_address_and_name_each_role() {
        let cmd = words("vllm serve meta-llama/Llama-3.1-405B-Instruct -tp 8 -pp 2");
        let text = emit_multi_node(&cmd, MultiNodeFormat::Nodes, &opts(2)).unwrap();
        assert!(text.contains("# node 0 (leader: serves the API on port 8000"));
        assert!(text.contains("# node 1 (worker: no API server)"));
        assert_eq!(text.matches(": \"${LEADER_ADDR:?").count(), 2, "{text}");
        assert!(text.contains(
            "vllm serve meta-llama/Llama-3.1-405B-Instruct -tp 8 -pp 2 --nnodes 2 --node-rank 1 --master-addr \"$LEADER_ADDR\" --master-port 29501 --headless"
        ), "{text}");
        let given = MultiNodeOptions {
            leader_addr: Some("10.0.0.1".into()),
            network: Some(Network::Eth100),
            ..opts(2)
        };
        let text = emit_multi_node(&cmd, MultiNodeFormat::Nodes, &given).unwrap();
        assert!(!text.contains("LEADER_ADDR"), "{text}");
        assert!(text.contains("NCCL_IB_DISABLE=1 vllm serve"), "{text}");
        assert!(text.contains("--master-addr 10.0.0.1"), "{text}");
    }

    #[test]
    fn the_manifest_doubles_dollars_and_serves_from_the_leader_only() {
        let cmd = words("vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel");
        let o = MultiNodeOptions {
            engine_version: Some("0.11.1".into()),
            network: Some(Network::IbNdr),
            ..opts(2)
        };
        let text = emit_multi_node(&cmd, MultiNodeFormat::Lws, &o).unwrap();
        assert!(
            text.contains("image: \"vllm/vllm-openai:v0.11.1\""),
            "{text}"
        );
        assert!(text.contains("name: vllm-deepseek-v3\n"), "{text}");
        assert!(text.contains("$$((LWS_WORKER_INDEX * 8))"), "{text}");
        assert!(text.contains("\\\"$$LWS_LEADER_ADDRESS\\\""), "{text}");
        assert_eq!(text.matches("readinessProbe:").count(), 1);
        assert_eq!(text.matches("nvidia.com/gpu: \"8\"").count(), 2);
        assert_eq!(text.matches("IPC_LOCK").count(), 2);
    }

    #[test]
    fn engines_without_a_multi_node_launch_and_bad_values_say_so() {
        let e = emit_multi_node(
            &words("llama-server -m m.gguf -ngl 99"),
            MultiNodeFormat::Nodes,
            &opts(2),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "multi-node launch not modelled for llama.cpp"
        );
        assert!(parse_network("ib-xdr").is_err());
        assert_eq!(
            object_name("vllm", Some("Org/Model_Name.v2/")),
            "vllm-model-name-v2"
        );
    }
}
