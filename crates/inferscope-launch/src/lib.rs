//! # inferscope-launch
//!
//! Planning for `inferscope run`: which GPUs, which CPUs, which NUMA memory policy and which
//! environment a server process should get, and how to say the same thing to `numactl`, Docker,
//! systemd or Kubernetes. The crate takes a [`Snapshot`](inferscope_host::Snapshot) and a
//! [`RunRequest`] and returns a [`LaunchPlan`] (or one [`LaunchError`]); it never touches the
//! machine. The binary captures the live snapshot, calls [`resolve`], and then either prints the
//! plan (`--dry-run`), prints [`emit()`]'s text (`--emit`), or applies it and `exec`s the server.
//!
//! Decisions, each of which the issue left open:
//!
//! * **GPU numbers are `topo`'s.** `--gpus 0,1` means `GPU0`/`GPU1` as `inferscope topo` and
//!   `nvidia-smi` print them (PCI bus order, the NVML index), never CUDA ordinals, which depend on
//!   the caller's `CUDA_VISIBLE_DEVICES`. UUIDs (unique prefixes accepted, as CUDA does) and PCI
//!   addresses are accepted too.
//! * **CPUs come from NUMA nodes, not from `local_cpulist`.** A GPU's CPUs are all CPUs of its
//!   node, intersected with the cgroup's `cpuset.cpus.effective`. `local_cpulist` is used only
//!   when the kernel does not report the node (cloud VMs), to place the GPU on the node whose CPUs
//!   contain it, or on the only node.
//! * **`--cpus-per-gpu N` slots are positions, so separate workers never collide.** The GPUs on a
//!   node are numbered in PCI order; the k-th takes usable CPUs `[k·N, (k+1)·N)` of its node. Four
//!   workers started one by one (`--gpus 0`, `--gpus 1`, ...) therefore get disjoint CPUs without
//!   sharing any state, and one process started with `--gpus 0,1,2,3` gets the union of the same
//!   slots. A slot that runs past the node's usable CPUs is an error, not an overlap.
//! * **Memory policy.** One node: `bind`. GPUs on several nodes: a warning, then `interleave`
//!   over those nodes unless `--mem` says otherwise; `preferred` can name only one node, so it
//!   prefers the first GPU's node (the rank-0 worker's). Nodes the cgroup's
//!   `cpuset.mems.effective` excludes are dropped with a warning; if none is left, no memory
//!   policy is set (and the plan says so) rather than one the kernel would refuse.
//! * **`auto:N` is a deterministic search**, exhaustive while the number of combinations is small
//!   (every real host), greedy above that. See [`auto`] for the order of criteria.
//! * **Environment: set nothing that can hurt** (issue 13). The engine is detected from the
//!   command ([`engine`]). GPUs are selected by CUDA index with `CUDA_DEVICE_ORDER=PCI_BUS_ID`
//!   (every engine parses indices; some die on UUIDs, their rooms say which); UUIDs only with
//!   `DeviceIds::Uuid`, refused for engines that reject them. AMD GPUs get `HIP_VISIBLE_DEVICES`.
//!   `OMP_NUM_THREADS` and `PYTORCH_CUDA_ALLOC_CONF` are set only when asked. A variable the
//!   inherited environment already has is never changed: when it disagrees with `--gpus` on the
//!   live machine that is an error, from a snapshot a warning. What `run` would recommend goes
//!   into `advice`, with the reason.
//! * **One process tree gets the union.** `run` binds itself, then `exec`s; every worker the
//!   server forks inherits the same CPUs and memory policy. `--cpus-per-gpu` chooses which CPUs
//!   (each GPU's slot), it does not bind each worker to its own slot.
//! * **The cgroup is the capturing process's.** Resolution intersects with the cgroup recorded in
//!   the snapshot; for `--emit` about another machine, capture the snapshot where the server will
//!   run. An unknown cgroup is not "no limit": it is reported as a warning.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Nor does it reach a `[]` index or slice: `.get(..)`, iterators or slice patterns instead.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![warn(missing_docs)]

pub mod auto;
pub mod emit;
pub mod engine;
mod env;
pub mod error;
pub mod image;
pub mod multi_node;
pub mod plan;
pub mod request;
mod resolve;

pub use emit::{Emit, EmitOptions, emit};
pub use engine::Engine;
pub use error::LaunchError;
pub use multi_node::{MultiNodeFormat, MultiNodeOptions, Network, emit_multi_node, parse_network};
pub use plan::{LaunchPlan, MemoryPlan, PlannedGpu, WorkerSlice};
pub use request::{
    DeviceIds, GpuRef, MemMode, OmpThreads, RunRequest, Target, parse_gpus, parse_nodes,
    parse_omp_threads,
};
pub use resolve::resolve;
