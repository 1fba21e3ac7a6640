//! The run index's time key: `started_at` as an instant in UTC with a fixed width, so that
//! SQLite orders runs by string comparison (`runs.started_at_utc`, the SQL function
//! `session_store_utc_key`).

/// The run index's sort key of a header `started_at`: the instant in UTC as
/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (truncated to milliseconds, like every timestamp the writers
/// produce), so that string order is time order whatever offset the writer used
/// (`2026-03-05T01:00:00.000+09:00` becomes `2026-03-04T16:00:00.000Z`). `None` for text
/// that is not an RFC 3339 timestamp or whose year is outside 0000–9999 (no fixed-width form).
/// A canonical value maps to itself.
pub(crate) fn utc_key(started_at: &str) -> Option<String> {
    let dt = session_schema::Timestamp::from_raw(started_at.to_owned()).parse()?;
    let utc = dt.to_offset(time::UtcOffset::UTC);
    (0..=9999).contains(&utc.year()).then(|| {
        session_schema::Timestamp::from_datetime(utc)
            .as_str()
            .to_owned()
    })
}
