//! The result of resolution: a [`LaunchPlan`] says exactly what `inferscope run` will do (or what
//! an emitted config does), and why. It is serialisable for `run --dry-run --json`; like the
//! Snapshot, it has no floats and no maps with unordered keys, so its JSON is stable.

use crate::engine::Engine;
use crate::request::MemMode;
use inferscope_host::{CpuSet, GpuUuid, NodeSet, NumaNodeId, PciBusId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedGpu {
    /// `GPU0`, numbered in PCI bus order as `topo` and `nvidia-smi` do.
    pub label: String,
    /// Index in that numbering (the NVML index; what `docker --gpus device=` takes).
    pub index: u32,
    /// PCI address.
    pub pci_bus_id: PciBusId,
    /// UUID, when the driver or an import told it.
    pub uuid: Option<GpuUuid>,
    /// NUMA node used for placement (the kernel's, or derived from local CPUs; see `reasons`).
    pub numa_node: NumaNodeId,
    /// True for NVIDIA GPUs (CUDA variables apply).
    pub nvidia: bool,
}

/// The NUMA memory policy of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// `bind`, `preferred` or `interleave`.
    pub policy: MemMode,
    /// Nodes of the policy (exactly one for `preferred`).
    pub nodes: NodeSet,
}

/// The CPUs of one worker when `--cpus-per-gpu` splits a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSlice {
    /// GPU label (`GPU2`).
    pub gpu: String,
    /// Its NUMA node.
    pub node: NumaNodeId,
    /// Position of the GPU among its node's GPUs, PCI order (0-based).
    pub slot: u32,
    /// Its CPUs: usable CPUs `[slot·N, (slot+1)·N)` of the node.
    pub cpus: CpuSet,
}

/// What `inferscope run` does, or what an emitted configuration expresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPlan {
    /// True when planned from the live machine; only such a plan may be applied.
    pub live: bool,
    /// Where the snapshot came from (`/`, a fixture root, an imported file's root).
    pub source: String,
    /// GPUs in `CUDA_VISIBLE_DEVICES` order; empty with `--numa-node`.
    pub gpus: Vec<PlannedGpu>,
    /// NUMA nodes whose CPUs are used.
    pub nodes: NodeSet,
    /// CPU affinity of the process.
    pub cpus: CpuSet,
    /// Memory policy; `null` when none can be set (the cgroup allows none of the nodes), with a
    /// warning saying so.
    pub memory: Option<MemoryPlan>,
    /// Per-worker CPUs with `--cpus-per-gpu`, in GPU order; empty otherwise.
    pub workers: Vec<WorkerSlice>,
    /// Variables to set in the server's environment (inherited ones left alone are not here).
    pub env: BTreeMap<String, String>,
    /// The GPU selection the plan was made for (`CUDA_VISIBLE_DEVICES` with
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`, or `HIP_VISIBLE_DEVICES`), whether or not the inherited
    /// environment already holds it. `run` itself leaves an inherited value alone (see `env`);
    /// an `--emit` artifact runs somewhere else, so it always sets this selection explicitly.
    /// Empty when no visibility variable could be computed (a warning says why).
    #[serde(default)]
    pub gpu_selection: BTreeMap<String, String>,
    /// The server command.
    pub command: Vec<String>,
    /// The engine detected from the command (its JSON id, `Engine::id`, or `unknown`), whose
    /// compatibility row shaped `env`.
    #[serde(default, with = "engine_or_unknown")]
    pub engine: Option<Engine>,
    /// What `run` recommends but does not set, each with its reason.
    #[serde(default)]
    pub advice: Vec<String>,
    /// Why each choice was made, one sentence each.
    pub reasons: Vec<String>,
    /// What the user should know: GPUs spanning nodes, CPUs or nodes removed by the cgroup,
    /// replaced variables, GPUs already in use.
    pub warnings: Vec<String>,
}

/// `engine` in JSON: the engine's id, or `"unknown"` for a program no engine inferscope knows
/// (the spelling `run --dry-run --json` has always had).
mod engine_or_unknown {
    use super::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(e: &Option<Engine>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(e.map_or("unknown", Engine::id))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Engine>, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Engine::ALL.into_iter().find(|e| e.id() == s))
    }
}

impl LaunchPlan {
    /// The one line `inferscope run` prints before `exec`: what is bound, and why.
    pub fn summary(&self) -> String {
        let mem = match &self.memory {
            Some(m) => format!("memory {} on node {}", m.policy, m.nodes),
            None => "memory policy unchanged".to_string(),
        };
        let mut line = format!("CPUs {} ({} CPUs), {mem}", self.cpus, self.cpus.len());
        if !self.workers.is_empty() {
            let w: Vec<String> = self
                .workers
                .iter()
                .map(|w| format!("{} {}", w.gpu, w.cpus))
                .collect();
            line.push_str(&format!(
                " (slots: {}; one process tree, every worker gets the union)",
                w.join(", ")
            ));
        }
        if let Some(why) = self.reasons.first() {
            line.push_str(&format!(": {why}"));
        }
        if !self.env.is_empty() {
            let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            line.push_str(&format!("; set {}", env.join(" ")));
        }
        if let Some(program) = self.command.first() {
            line.push_str(&format!("; exec {program}"));
        }
        line
    }
}
