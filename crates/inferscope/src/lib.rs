//! Library side of the `inferscope` binary: command implementations and renderers, kept out of
//! `main.rs` so integration tests and benchmarks can call them with any writer.

pub mod clock;
pub mod commands;
pub mod import;
pub mod load;
pub mod render;

/// `inferscope <version>`, recorded in every snapshot.
pub fn tool_name() -> String {
    format!("inferscope {}", env!("CARGO_PKG_VERSION"))
}
