//! # inferscope-fleet
//!
//! Fleet reasoning for `inferscope diff` and `inferscope labels`: pure functions from
//! [`Snapshot`](inferscope_host::Snapshot)s (and check findings) to data. The binary loads the
//! snapshots (files, exporter URLs, the live machine) and prints what these functions return.
//!
//! Why a crate of its own: labels combine the topology with check findings, so they cannot live
//! in `inferscope-host` (which `inferscope-check` depends on), and neither a diff of facts nor a
//! label is a check, so `inferscope-check` is the wrong home. Here both are unit-tested on the
//! fleet fixtures (`fixtures/fleet/`, three snapshots with planted differences) without the CLI.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![warn(missing_docs)]

pub mod diff;
pub mod exposition;
pub mod labels;

/// The fleet fixtures (`fixtures/fleet/`), for the unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use inferscope_host::Snapshot;

    /// `node-a`, `node-b` (planted differences) or `node-c` (equal to a but the hostname).
    pub fn node(name: &str) -> Snapshot {
        let text = match name {
            "a" => include_str!("../../../fixtures/fleet/node-a.json"),
            "b" => include_str!("../../../fixtures/fleet/node-b.json"),
            "c" => include_str!("../../../fixtures/fleet/node-c.json"),
            other => panic!("no fleet fixture {other}"),
        };
        serde_json::from_str(text).unwrap()
    }
}
