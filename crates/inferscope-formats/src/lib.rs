//! Pure parsers for the text formats inferscope reads: procfs and sysfs files.
//!
//! Every parser takes the file's text (or bytes) and returns plain Rust values or a
//! [`ParseError`] with a 1-based line and column. Nothing here touches the filesystem,
//! the clock, the environment or the network, and no input can make a parser panic.

#![warn(missing_docs)]

pub mod cgroup;
pub mod cmdline;
pub mod cpuinfo;
pub mod environ;
pub mod error;
mod lex;
pub mod limits;
pub mod meminfo;
pub mod mounts;
pub mod sysfs;
pub mod thp;

pub use error::ParseError;
