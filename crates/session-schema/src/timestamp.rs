//! Timestamps (`ts`, `started_at`, `updated_at`).
//!
//! The reference writes `new Date().toISOString()`: RFC 3339, UTC, milliseconds,
//! `YYYY-MM-DDTHH:MM:SS.mmmZ` (24 characters). Readers keep whatever string they find, so a record
//! with an unparseable timestamp is still readable and round-trips unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A timestamp as written in the file; parsed on demand.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(String);

impl Timestamp {
    /// The current time in the reference's form.
    pub fn now() -> Self {
        Timestamp::from_datetime(OffsetDateTime::now_utc())
    }

    /// Formats `dt` (converted to UTC, truncated to milliseconds) as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn from_datetime(dt: OffsetDateTime) -> Self {
        let dt = dt.to_offset(UtcOffset::UTC);
        Timestamp(format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        ))
    }

    /// Milliseconds since the Unix epoch, formatted like [`Timestamp::from_datetime`].
    ///
    /// Out-of-range values give the epoch.
    pub fn from_unix_millis(ms: i64) -> Self {
        let nanos = i128::from(ms) * 1_000_000;
        let dt =
            OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        Timestamp::from_datetime(dt)
    }

    /// Keeps any string as a timestamp (it need not parse).
    pub fn from_raw(s: impl Into<String>) -> Self {
        Timestamp(s.into())
    }

    /// The string as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the string as RFC 3339 (any offset). `None` when it does not parse.
    pub fn parse(&self) -> Option<OffsetDateTime> {
        OffsetDateTime::parse(self.0.trim(), &Rfc3339).ok()
    }

    /// The instant in milliseconds since the Unix epoch, when the string parses.
    pub fn unix_millis(&self) -> Option<i64> {
        self.parse()
            .and_then(|dt| i64::try_from(dt.unix_timestamp_nanos() / 1_000_000).ok())
    }

    /// Whether the string is exactly in the reference's 24-character UTC form.
    pub fn is_canonical(&self) -> bool {
        self.parse()
            .is_some_and(|dt| Timestamp::from_datetime(dt).0 == self.0)
    }
}

impl Default for Timestamp {
    fn default() -> Self {
        Timestamp::from_datetime(OffsetDateTime::UNIX_EPOCH)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({:?})", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(dt: OffsetDateTime) -> Self {
        Timestamp::from_datetime(dt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_to_iso_string() {
        let ts = Timestamp::from_unix_millis(1_764_503_903_861);
        assert_eq!(ts.as_str(), "2025-11-30T11:58:23.861Z");
        assert!(ts.is_canonical());
        assert_eq!(ts.unix_millis(), Some(1_764_503_903_861));
    }

    #[test]
    fn offsets_convert_to_utc_and_bad_strings_are_kept() {
        let ts = Timestamp::from_raw("2026-02-03T23:59:59.999+09:00");
        let utc = Timestamp::from_datetime(ts.parse().unwrap());
        assert_eq!(utc.as_str(), "2026-02-03T14:59:59.999Z");
        assert!(!ts.is_canonical());
        let bad = Timestamp::from_raw("not a date");
        assert!(bad.parse().is_none());
        assert_eq!(serde_json::to_string(&bad).unwrap(), "\"not a date\"");
    }
}
