//! # inferscope-plan
//!
//! Will this model and these flags fit, how many users, how fast: a pure planner whose memory
//! model follows what the engines actually do (see docs/planner.md), tested against real vLLM
//! start-up logs.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
// Module owners while the planner is being built (one engineer per file group):
// arch.rs, catalog.rs, memory.rs, plan.rs, suggest.rs, data/models/  — planner core
// gpus.rs, speed.rs, data/gpus.toml                                   — GPU catalog and speed
// engine.rs, find.rs                                                  — serving-command parsing, --find

pub mod allocator;
pub mod arch;
pub mod auto_len;
pub mod catalog;
pub mod checkpoint;
pub mod cluster;
pub mod dsa;
pub mod engine;
pub mod engines;
pub mod find;
pub mod find_context;
pub mod flags;
pub mod gguf_arch;
pub mod gguf_quant;
pub mod hybrid;
pub mod memory;
pub mod plan;
pub mod plan_speed;
pub mod prices;
pub mod rules;
pub mod state;
pub mod suggest;
pub mod target;

pub use arch::{ModelArch, PlanError, from_hf_config};
pub use memory::EngineVersion;
pub use plan::{GpuSpec, Plan, PlanRequest, plan};
pub mod gpus;
pub mod speed;
