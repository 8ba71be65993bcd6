//! # inferscope-mem
//!
//! Pure reasoning about GPU and host memory: no I/O, no clock. Capture lives elsewhere
//! (`inferscope-formats` parses OOM text and snapshot pickles, `inferscope-probe` samples
//! processes); this crate turns that data into answers users act on:
//!
//! * [`oom`]: why an allocation failed (fragmentation, exhaustion, other processes, a memory
//!   fraction limit, or not enough information) and the remedies that apply;
//! * [`startup`]: a server start-up log's measured breakdown beside the planner's prediction,
//!   and for a failed start-up the diagnosis and re-planned fixes;
//! * [`snapshot`]: segments, blocks and fragmentation of a `torch.cuda.memory._snapshot()`,
//!   top allocation sites, what expandable segments would change, and an SVG map;
//! * [`watch`]: detectors over sampled series: leak/creep (least squares slope with a residual
//!   test, plateau vs steady growth), pages drifting to a remote NUMA node, PCIe saturation;
//! * [`watch_track`]: watch's tracker: samples ([`watch_sample`]) in, the summary and its
//!   findings out.
//!
//! Keeping these pure means every rule is tested on recorded data, and the same code serves the
//! CLI, the watch summary and the metrics exporter.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![warn(missing_docs)]

pub mod oom;
pub mod oom_phase;
pub mod snapshot;
pub mod startup;
pub mod startup_fixes;
pub mod startup_fixes_llama;
pub mod watch;
pub mod watch_sample;
pub mod watch_track;
