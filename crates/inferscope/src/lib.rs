//! Library side of the `inferscope` binary: command implementations and renderers, kept out of
//! `main.rs` so integration tests and benchmarks can call them with any writer.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
/// Every note and warning this crate prints on stderr goes through the same escaping as
/// stdout (issue 33: a snapshot's kernel string or a server's model id can hold `\x1b[2J…`),
/// and a closed stderr is not a panic. Shadows `std::eprintln!` for every module below.
macro_rules! eprintln {
    () => {
        $crate::render::escape::stderr_line("")
    };
    ($($arg:tt)*) => {
        $crate::render::escape::stderr_line(&format!($($arg)*))
    };
}

pub mod clock;
pub mod commands;
pub mod help;
pub mod input;
// Snapshot files are read by inferscope-probe; `crate::load` stays the commands' path to it.
pub use inferscope_probe::load;
pub mod render;

/// `inferscope <version>`, recorded in every snapshot.
pub fn tool_name() -> String {
    format!("inferscope {}", env!("CARGO_PKG_VERSION"))
}
