//! Fleet reasoning for `inferscope labels` and `inferscope diff`: pure functions from Snapshots
//! (and check findings) to data; the commands load and render.
//!
//! Why here and not in a library crate: both are small and specific to the CLI's fleet commands,
//! they combine the model (topology) with the check results (which `inferscope-model` must not
//! depend on), and no other crate needs them. They do no I/O, so they move to a crate unchanged
//! if one ever does.

pub mod diff;
pub mod labels;
