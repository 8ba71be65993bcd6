//! Errors of launch planning. Each variant renders as one line that names the input at fault
//! and, where there is one, the way out; the binary prints it and exits 2 without running
//! anything.

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// `--gpus` text that does not parse.
    #[error("--gpus {text:?}: {why}")]
    BadGpuList {
        /// The text given (truncated).
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// `--numa-node` text that does not parse.
    #[error("--numa-node {text:?}: {why}")]
    BadNodeList {
        /// The text given (truncated).
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A GPU named on the command line is not in the snapshot.
    #[error("no GPU {gpu}: {have}")]
    UnknownGpu {
        /// The GPU as the user named it.
        gpu: String,
        /// What the source does have (`this machine has no GPU`).
        have: String,
    },
    /// A NUMA node named on the command line is not in the snapshot.
    #[error("no NUMA node {node}: {have}")]
    UnknownNode {
        /// The node as the user named it.
        node: u32,
        /// What the source does have.
        have: String,
    },
    /// A GPU whose NUMA node neither the kernel nor its local CPUs tell.
    #[error(
        "{gpu}: NUMA node unknown ({detail}), so its local CPUs are unknown; choose the node with --numa-node N instead"
    )]
    GpuNodeUnknown {
        /// `GPU2 (0000:3b:00.0)`.
        gpu: String,
        /// Why the node is unknown.
        detail: String,
    },
    /// Nothing is left of the CPU set after intersecting with the cgroup.
    #[error("empty CPU set: {detail}")]
    EmptyCpuSet {
        /// Which CPUs were wanted, which the cgroup allows, and what to do.
        detail: String,
    },
    /// `--cpus-per-gpu` cannot give a GPU its slot.
    #[error("--cpus-per-gpu {per_gpu}: {detail}")]
    NotEnoughCpus {
        /// N as given.
        per_gpu: u32,
        /// Which GPU, which node, how many CPUs it has.
        detail: String,
    },
    /// `auto:N` cannot be satisfied.
    #[error("--gpus auto:{n}: {detail}")]
    Auto {
        /// N as given.
        n: u32,
        /// Why.
        detail: String,
    },
    /// Options that cannot be combined or are out of range.
    #[error("{0}")]
    Usage(String),
    /// No command after `--`.
    #[error(
        "no command to run: give the server command after `--`, e.g. `inferscope run --gpus 0 -- vllm serve MODEL`"
    )]
    NoCommand,
}
