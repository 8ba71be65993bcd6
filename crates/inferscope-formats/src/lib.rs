//! Pure parsers for the text formats inferscope reads: procfs and sysfs files, and what users
//! already have from other tools (`nvidia-smi topo -m`, `nvidia-smi -q` text and XML, hwloc XML).
//!
//! Every parser takes the file's text (or bytes) and returns plain Rust values or a
//! [`ParseError`] with a 1-based line and column. Nothing here touches the filesystem,
//! the clock, the environment or the network, and no input can make a parser panic.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Indexing and slicing panic on out-of-range input; parsers use `.get(..)` or patterns instead.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![warn(missing_docs)]

pub mod cgroup;
pub mod cmdline;
pub mod cpuinfo;
pub mod detect;
pub mod environ;
pub mod error;
pub mod gguf;
pub mod hwloc_xml;
mod lex;
pub mod limits;
pub mod line_guard;
pub mod meminfo;
pub mod mounts;
pub mod numa_maps;
pub mod nvidia_numa_status;
mod nvidia_smi_common;
pub mod nvidia_smi_q;
pub mod nvidia_smi_topo;
pub mod nvidia_smi_xml;
pub mod oom;
pub mod oom_phase;
pub mod safetensors;
pub mod startup_log;
pub mod sysfs;
pub mod thp;
pub mod torch_memory_snapshot;

pub use error::ParseError;
