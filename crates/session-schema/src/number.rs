//! JSON numbers kept as written.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A JSON number that keeps its spelling class: an integer stays an integer (`5`, never `5.0`),
/// a fraction stays a fraction (`42.5`).
///
/// Used for numeric fields the reference writes from JavaScript `number`s whose integer-ness is
/// not guaranteed by its types (`context_left_percent`, event `timestamp`s, `duration_ms`, …).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Num(pub serde_json::Number);

impl Num {
    /// The value as `f64` (always available, may round very large integers).
    pub fn as_f64(&self) -> f64 {
        self.0.as_f64().unwrap_or(f64::NAN)
    }

    /// The value as `i64` when it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        self.0.as_i64()
    }

    /// The value as `u64` when it is a non-negative integer in range.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.as_u64()
    }
}

impl Default for Num {
    fn default() -> Self {
        Num(serde_json::Number::from(0))
    }
}

impl From<i64> for Num {
    fn from(v: i64) -> Self {
        Num(v.into())
    }
}

impl From<u64> for Num {
    fn from(v: u64) -> Self {
        Num(v.into())
    }
}

impl fmt::Debug for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
