//! Constructors for check outcomes, so each check reads as the rule it states.

use inferscope_host::{Reading, Unknown};
use serde::{Deserialize, Serialize};

use crate::Status;

/// The result of a check on one subject, before the registry adds code, title and severity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// What it is about.
    pub subject: String,
    /// Result.
    pub status: Status,
    /// What was read.
    pub evidence: String,
    /// Exact fix, on failure.
    pub remedy: Option<String>,
}

impl Outcome {
    /// Checked and fine.
    pub fn pass(subject: impl Into<String>, evidence: impl Into<String>) -> Self {
        Outcome {
            subject: subject.into(),
            status: Status::Pass,
            evidence: evidence.into(),
            remedy: None,
        }
    }

    /// Checked and failed, with the fix.
    pub fn fail(
        subject: impl Into<String>,
        evidence: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        Outcome {
            subject: subject.into(),
            status: Status::Fail,
            evidence: evidence.into(),
            remedy: Some(remedy.into()),
        }
    }

    /// Could not be checked.
    pub fn unknown(subject: impl Into<String>, why: impl Into<String>) -> Self {
        Outcome {
            subject: subject.into(),
            status: Status::Unknown,
            evidence: why.into(),
            remedy: None,
        }
    }

    /// Unknown because a reading is unknown: evidence is the reading's reason and detail.
    pub fn from_unknown(subject: impl Into<String>, what: &str, u: &Unknown) -> Self {
        Outcome::unknown(
            subject,
            format!("{what} unknown ({}): {}", u.reason, u.detail),
        )
    }
}

/// The value of a reading, or an unknown outcome to return from the check.
pub fn need<'a, T>(r: &'a Reading<T>, subject: &str, what: &str) -> Result<&'a T, Outcome> {
    match r {
        Reading::Value(v) => Ok(v),
        Reading::Unknown(u) => Err(Outcome::from_unknown(subject, what, u)),
    }
}
