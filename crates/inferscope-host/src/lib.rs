//! # inferscope-host
//!
//! The vocabulary every other inferscope crate speaks. A [`Snapshot`] is everything known about
//! one GPU host at one moment; capture code (the probe, importers) produces it, pure code (topology
//! queries, checks, the planner) reasons over it, and the binary renders it.
//!
//! Three decisions run through the crate:
//!
//! * **Unknown is not zero.** Facts that can be missing are [`Reading`]s, which carry the reason
//!   (not present, permission denied, not reported, ...) instead of a default value.
//! * **Numbering schemes are types.** [`PciBusId`], [`NumaNodeId`], [`NvmlIndex`],
//!   [`CudaOrdinal`] and [`GpuUuid`] cannot be mixed up by accident.
//! * **No I/O here.** Nothing in this crate touches the filesystem, the clock or a driver, so
//!   everything is testable from recorded data.

// Outside data never reaches an unwrap/expect (issue 10, docs/SECURITY.md); where one cannot
// fail, `#[allow]` it with a `// cannot fail:` comment (tests/no_unwrap.rs checks the comments).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
/// Implement serde for a type through its `Display` and `FromStr` (JSON strings such as
/// `"0-3,8-11"` or `"0000:17:00.0"`), so the JSON form is the form users already know.
macro_rules! serde_as_string {
    ($name:ty) => {
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod cpuset;
pub mod cuda;
pub mod driver;
pub mod engine;
pub mod engine_command;
pub mod facts;
pub mod ids;
pub mod log_dialect;
pub mod quote;
pub mod reading;
pub mod redact;
pub mod snapshot;
pub mod topology;
pub mod units;
pub mod validate;

pub use cpuset::{CpuSet, ListError, NodeSet};
pub use driver::*;
pub use facts::{PlanFacts, PlanPerGpu, PlanSuggestion, ProcessFacts};
pub use ids::{CudaOrdinal, GpuUuid, IdError, NumaNodeId, NvmlIndex, PciBusId, PciClass, PciId};
pub use reading::{Reading, Unknown, UnknownReason};
pub use snapshot::*;
pub use topology::{LinkClass, TopoMatrix};
pub use validate::ValidationErrors;
