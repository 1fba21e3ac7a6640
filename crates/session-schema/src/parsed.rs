//! A value parsed from one line ([`Parsed`]), with what was repaired on the way: the
//! lone surrogate escapes decoded as U+FFFD and how to put them back (see
//! [`crate::surrogate`]), and whether the line started with a BOM.

use serde::Serialize;

use crate::surrogate::{LoneSurrogate, RestorePlan};

/// A value parsed from one line, with what had to be repaired on the way.
#[derive(Debug, Clone)]
pub struct Parsed<T> {
    /// The value.
    pub value: T,
    /// Lone surrogate escapes that were decoded as U+FFFD (empty for almost every line).
    pub lone_surrogates: Vec<LoneSurrogate>,
    /// Whether the line started with a UTF-8 BOM.
    pub had_bom: bool,
    /// How to put repaired lone surrogate escapes back when writing the value again.
    pub(crate) restore: RestorePlan,
}

impl<T> Parsed<T> {
    /// Wraps a value that needed no repair.
    pub fn clean(value: T) -> Self {
        Parsed {
            value,
            lone_surrogates: Vec::new(),
            had_bom: false,
            restore: RestorePlan::default(),
        }
    }

    /// Wraps a value decoded from `repaired`, the text with the lone surrogate escapes `found`
    /// replaced by `\ufffd`.
    pub(crate) fn repaired(value: T, repaired: &[u8], found: Vec<LoneSurrogate>) -> Self {
        Parsed {
            value,
            restore: RestorePlan::new(repaired, &found),
            lone_surrogates: found,
            had_bom: false,
        }
    }

    /// Whether anything was repaired.
    pub fn was_repaired(&self) -> bool {
        !self.lone_surrogates.is_empty()
    }
}

impl<T: Serialize> Parsed<T> {
    /// Compact JSON of the value without a newline, with any repaired lone surrogate escapes put
    /// back, so an unchanged value gives the bytes it was read from.
    ///
    /// # Errors
    /// The value's serialization failed (only possible for values built by hand with invalid
    /// raw JSON).
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let out = serde_json::to_vec(&self.value)?;
        Ok(self.restore.apply(out))
    }
}
