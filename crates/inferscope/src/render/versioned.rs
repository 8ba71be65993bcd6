//! `schema_version` as the first key of a `--json` document (docs/cli.md: "stable,
//! documented, `schema_version` first"), for outputs whose body is a library type that does
//! not carry one. The body's own keys follow in their order.

use serde::Serialize;

/// Layout version of the `--json` outputs that take it from here; raised when a key is
/// renamed or removed (keys are only ever added within a version).
pub const SCHEMA_VERSION: u32 = 1;

/// A JSON object: `schema_version`, then the keys of `body` (which must serialise as an
/// object: a struct or a map).
#[derive(Debug, Serialize)]
pub struct Versioned<'a, T: Serialize> {
    /// Layout version of the document.
    pub schema_version: u32,
    /// The document.
    #[serde(flatten)]
    pub body: &'a T,
}

/// `body` with [`SCHEMA_VERSION`] in front.
pub fn versioned<T: Serialize>(body: &T) -> Versioned<'_, T> {
    Versioned {
        schema_version: SCHEMA_VERSION,
        body,
    }
}
