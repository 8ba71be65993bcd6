//! Inputs beyond the host that checks reason about: a serving plan (from `inferscope plan
//! --json`, or written by hand) and one running process.
//!
//! The plan side is deliberately the *output* contract of the planner (`fits`, `per_gpu.*`,
//! `kv_cache_tokens`, `max_concurrency`, `assumptions`), so `inferscope check --plan plan.json`
//! works with any planner version that keeps those keys, and tests can state a plan directly.

use crate::cpuset::{CpuSet, NodeSet};
use crate::ids::PciBusId;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Memory the plan puts on each GPU, in GiB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanPerGpu {
    /// Everything the engine will hold on one GPU (`gpu_memory_utilization` × total).
    pub total_gib: f64,
    /// Weights share of one GPU.
    pub weights_gib: f64,
    /// CUDA context, NCCL buffers and other non-torch memory.
    pub non_torch_gib: f64,
    /// Activation peak of the profiling run.
    pub activation_gib: f64,
    /// CUDA graph memory.
    pub cuda_graph_gib: f64,
    /// KV cache.
    pub kv_cache_gib: f64,
}

/// What a serving plan says (the planner's `--json` keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanFacts {
    /// The model and settings fit on the GPUs.
    pub fits: bool,
    /// Per-GPU memory breakdown.
    pub per_gpu: PlanPerGpu,
    /// KV cache capacity in tokens, over the whole tensor-parallel group.
    pub kv_cache_tokens: u64,
    /// How many sequences of `max_model_len` tokens fit at once.
    pub max_concurrency: f64,
    /// Concurrency the user asked for, if any.
    pub concurrency: Option<u32>,
    /// Context length the plan was made for.
    pub max_model_len: Option<u64>,
    /// Tensor-parallel size.
    pub tensor_parallel_size: Option<u32>,
    /// Total checkpoint bytes the host reads while loading (for host RAM and cgroup checks).
    pub weights_bytes_total: Option<u64>,
    /// GPUs the plan uses, by PCI address, when it names them.
    pub gpus: Vec<PciBusId>,
    /// NUMA node(s) the server will be bound to, if any.
    pub numa_nodes: Vec<u32>,
    /// Assumptions the planner made.
    pub assumptions: Vec<String>,
    /// The planner's changes, each re-planned and kept only when it helps (`plan --json`'s
    /// `suggestions`); None when the plan file predates them.
    pub suggestions: Option<Vec<PlanSuggestion>>,
}

/// One change `inferscope plan` re-planned and found to help.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanSuggestion {
    /// The change, as flags or words (`--kv-cache-dtype fp8`).
    pub change: String,
    /// The changed plan fits.
    pub fits: bool,
    /// Its maximum concurrency.
    pub max_concurrency: f64,
}

/// One running process, as `/proc/PID` and the driver show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessFacts {
    /// Process id.
    pub pid: u32,
    /// Command name (`/proc/PID/comm`).
    pub name: Reading<String>,
    /// CPUs the process may run on (`Cpus_allowed_list`).
    pub cpus_allowed: Reading<CpuSet>,
    /// NUMA nodes it may allocate from (`Mems_allowed_list`).
    pub mems_allowed: Reading<NodeSet>,
    /// Resident memory per NUMA node in 4 KiB units (`/proc/PID/numa_maps`, summed like
    /// `numastat -p`; huge pages count by their size).
    pub pages_per_node: Reading<BTreeMap<u32, u64>>,
    /// GPUs the driver says the process uses.
    pub gpus: Vec<PciBusId>,
    /// `CUDA_VISIBLE_DEVICES` in the process's environment, if readable and set.
    pub cuda_visible_devices: Reading<Option<String>>,
}
