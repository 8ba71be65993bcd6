//! `Reading<T>`: a value the machine told us, or the reason it did not.
//!
//! The most common bug in host-inspection tools is `unwrap_or(0)`: a file that could not be read
//! turns into "0 hugepages" or "0 bytes of swap", and a check then reasons about a number nobody
//! measured. Every fact in a [`crate::Snapshot`] that can be missing is a `Reading`, so the
//! reason travels with it to the JSON and to the user.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a fact is unknown. Stable JSON names (snake_case); add variants, never rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownReason {
    /// The file or interface does not exist here (old kernel, no such driver, VM).
    NotPresent,
    /// The operating system refused us (needs root or a capability).
    PermissionDenied,
    /// The source exists but answered in a form we could not parse.
    Malformed,
    /// The hardware or firmware says it does not know (e.g. `numa_node` reads -1).
    NotReported,
    /// The platform does not support this fact at all (e.g. NVML `NOT_SUPPORTED`).
    NotSupported,
    /// Reading failed for another I/O reason.
    ReadError,
    /// This snapshot was made from a source that does not carry the fact
    /// (an imported text, or a capture that skipped it).
    NotCaptured,
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnknownReason::NotPresent => "not present",
            UnknownReason::PermissionDenied => "permission denied",
            UnknownReason::Malformed => "malformed",
            UnknownReason::NotReported => "not reported",
            UnknownReason::NotSupported => "not supported",
            UnknownReason::ReadError => "read error",
            UnknownReason::NotCaptured => "not captured",
        })
    }
}

/// The reason a reading is unknown, with the evidence (path, error text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unknown {
    /// Machine-readable reason.
    pub reason: UnknownReason,
    /// Human-readable evidence: which file, what it said.
    pub detail: String,
}

/// A fact read from the machine, or why it is unknown.
///
/// JSON: `{"value": 5}` or `{"unknown": {"reason": "permission_denied", "detail": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    /// The machine told us this.
    Value(T),
    /// We do not know, and here is why.
    Unknown(Unknown),
}

impl<T> Reading<T> {
    /// A known value.
    pub fn value(v: T) -> Self {
        Reading::Value(v)
    }

    /// An unknown value with its reason and evidence.
    pub fn unknown(reason: UnknownReason, detail: impl Into<String>) -> Self {
        Reading::Unknown(Unknown {
            reason,
            detail: detail.into(),
        })
    }

    /// The value, if known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unknown(_) => None,
        }
    }

    /// The value by move, if known.
    pub fn into_known(self) -> Option<T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unknown(_) => None,
        }
    }

    /// True when the value is known.
    pub fn is_known(&self) -> bool {
        matches!(self, Reading::Value(_))
    }

    /// Transform a known value; an unknown stays unknown with the same reason.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Reading<U> {
        match self {
            Reading::Value(v) => Reading::Value(f(v)),
            Reading::Unknown(u) => Reading::Unknown(u),
        }
    }

    /// Borrowing view.
    pub fn as_ref(&self) -> Reading<&T> {
        match self {
            Reading::Value(v) => Reading::Value(v),
            Reading::Unknown(u) => Reading::Unknown(u.clone()),
        }
    }

    /// Chain a computation that may itself be unknown.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U> {
        match self {
            Reading::Value(v) => f(v),
            Reading::Unknown(u) => Reading::Unknown(u),
        }
    }
}

impl<T: fmt::Display> fmt::Display for Reading<T> {
    /// Known values print as themselves; unknown ones as `unknown (reason)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reading::Value(v) => v.fmt(f),
            Reading::Unknown(u) => write!(f, "unknown ({})", u.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_keeps_unknown_apart_from_zero() {
        let zero: Reading<u64> = Reading::value(0);
        let denied: Reading<u64> = Reading::unknown(UnknownReason::PermissionDenied, "/proc/x");
        assert_eq!(serde_json::to_string(&zero).unwrap(), r#"{"value":0}"#);
        assert_eq!(
            serde_json::to_string(&denied).unwrap(),
            r#"{"unknown":{"reason":"permission_denied","detail":"/proc/x"}}"#
        );
        assert_ne!(zero, denied);
        assert_eq!(denied.to_string(), "unknown (permission denied)");
        let back: Reading<u64> = serde_json::from_str(r#"{"value":0}"#).unwrap();
        assert_eq!(back.known(), Some(&0));
    }
}
