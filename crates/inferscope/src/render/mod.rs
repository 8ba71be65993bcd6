//! Renderers: pure functions from model data to any writer.

pub mod check;
pub mod escape;
pub mod fleet;
pub mod mem;
pub mod plan;
pub mod topo;
pub mod tune;
pub mod versioned;
pub mod watch;

/// Bytes as a short binary-unit figure (`251.6 GiB`).
pub use inferscope_host::units::human_bytes as bytes;
