//! Time arguments (`--since yesterday`, `--until 2026-11-30`, `--older-than 30d`) and time
//! display (local or UTC).
//!
//! Input goes through `jiff`: its "friendly" duration format for ages (`90m`, `1d12h`,
//! `2 days ago`, `1y`, `3 months`, ISO 8601 `P1D`) and its time zone database for dates and
//! `today`/`yesterday`, which mean midnight in the zone of the input ([`input_zone`]: `$TZ`,
//! else the system's). Calendar units (years, months, weeks, days) are counted in that zone,
//! so `1d` across a daylight-saving change is the same wall-clock time a day earlier.

use jiff::Span;
use jiff::civil;
use jiff::tz::TimeZone;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

use crate::env::Env;
use crate::error::CliError;

/// The longest age accepted (1000 years of 366 days): anything longer names no time a store
/// can hold.
pub(crate) const MAX_AGE_SECS: u64 = 1000 * 366 * 86_400;

/// The forms [`parse_instant`] accepts, for its error message.
const INSTANT_FORMS: &str = "use RFC 3339 (2026-11-30T12:00:00Z), a date (2026-11-30) or \
     date and time (2026-11-30 14:00) in the local zone, today, yesterday, or an age \
     (90m, 12h, 1d12h, 7d, 2w, 3 months, 1y, 2 days ago)";

/// The forms [`older_than`] accepts, for its error message.
const AGE_FORMS: &str = "use an age such as 90m, 12h, 1d12h, 30d, 2w, 6 months, 1y or \
     `2 days` (a bare number means days)";

/// The zone in which dates, `today` and calendar units of time arguments are read: `$TZ` when
/// it names a zone (an IANA name, `:Name`, or a POSIX rule such as `EST5EDT,M3.2.0,M11.1.0`),
/// else the system's zone, else UTC.
pub(crate) fn input_zone(env: &Env) -> TimeZone {
    if let Some(tz) = env.get("TZ") {
        let name = tz.strip_prefix(':').unwrap_or(tz);
        if let Ok(zone) = TimeZone::get(name) {
            return zone;
        }
        if let Ok(zone) = TimeZone::posix(name) {
            return zone;
        }
    }
    TimeZone::try_system().unwrap_or(TimeZone::UTC)
}

/// Parses a `--tz` value: `UTC`, `local` (`local`, normally the [`input_zone`]) or an IANA zone name
/// (`Europe/Paris`).
///
/// # Errors
/// [`CliError::Usage`] for a name the zone database does not know.
pub(crate) fn parse_zone(text: &str, local: &TimeZone) -> Result<TimeZone, CliError> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("local") {
        return Ok(local.clone());
    }
    if t.eq_ignore_ascii_case("utc") || t == "Z" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(t).map_err(|_| {
        CliError::Usage(format!(
            "unknown time zone `{text}`: use UTC, local or an IANA zone name such as Europe/Paris"
        ))
    })
}

/// An instant as `jiff` sees it.
pub(crate) fn to_jiff(dt: OffsetDateTime) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_nanosecond(dt.unix_timestamp_nanos()).ok()
}

/// A `jiff` instant as the `time` crate sees it.
fn from_jiff(ts: jiff::Timestamp) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(ts.as_nanosecond()).ok()
}

/// Why an age did not parse.
enum AgeError {
    /// Not an age.
    Malformed,
    /// An age, but too long to count back (more than [`MAX_AGE_SECS`], or past the range of
    /// representable times).
    TooLong,
}

/// An age in jiff's friendly format (or ISO 8601), counted back from `now` in `zone`; a bare
/// number counts days. `2 days ago` and `2 days` are the same age; an explicit sign is not
/// accepted.
fn age_before(
    text: &str,
    now: OffsetDateTime,
    zone: &TimeZone,
) -> Result<OffsetDateTime, AgeError> {
    let t = text.trim();
    if t.is_empty() || t.starts_with(['-', '+']) {
        return Err(AgeError::Malformed);
    }
    let span: Span = if t.bytes().all(|b| b.is_ascii_digit()) {
        format!("{t}d").parse()
    } else {
        t.parse()
    }
    .map_err(|e: jiff::Error| {
        // A well-formed age with a number too large for its unit.
        let msg = e.to_string();
        if t.starts_with(|c: char| c.is_ascii_digit())
            && (msg.contains("range") || msg.contains("too big"))
        {
            AgeError::TooLong
        } else {
            AgeError::Malformed
        }
    })?;
    let span = span.abs();
    let now_j = to_jiff(now).ok_or(AgeError::TooLong)?;
    let then = now_j
        .to_zoned(zone.clone())
        .checked_sub(span)
        .map_err(|_| AgeError::TooLong)?;
    let then = from_jiff(then.timestamp()).ok_or(AgeError::TooLong)?;
    let max = time::Duration::seconds(i64::try_from(MAX_AGE_SECS).unwrap_or(i64::MAX));
    if now - then > max {
        return Err(AgeError::TooLong);
    }
    Ok(then)
}

/// The cutoff of an `--older-than AGE`: `AGE` counted back from `now` in `zone`.
///
/// # Errors
/// [`CliError::Usage`] naming the accepted forms, or saying the age is out of range (longer
/// than 1000 years).
pub(crate) fn older_than(
    text: &str,
    now: OffsetDateTime,
    zone: &TimeZone,
) -> Result<OffsetDateTime, CliError> {
    match age_before(text, now, zone) {
        Ok(t) => Ok(t),
        Err(AgeError::Malformed) => Err(CliError::Usage(format!(
            "invalid age `{text}`: {AGE_FORMS}"
        ))),
        Err(AgeError::TooLong) => Err(out_of_range(text)),
    }
}

fn out_of_range(text: &str) -> CliError {
    CliError::Usage(format!(
        "age `{text}` is out of range: at most 1000 years (366000d)"
    ))
}

/// Midnight starting `date` in `zone` (the first instant of the day where a zone skips
/// midnight).
fn start_of(date: civil::Date, zone: &TimeZone) -> Option<OffsetDateTime> {
    let z = date.to_zoned(zone.clone()).ok()?;
    from_jiff(z.start_of_day().ok()?.timestamp())
}

/// Parses a point in time: RFC 3339; `now`; `today` or `yesterday` (midnight in `zone`); a
/// date `YYYY-MM-DD` (midnight in `zone`) or a date and time `YYYY-MM-DD HH:MM[:SS]` (in
/// `zone`); or an age counted back from `now` (`90m`, `1d12h`, `2 days ago`, `1y`; see
/// [`older_than`]).
///
/// # Errors
/// [`CliError::Usage`] naming the accepted forms.
pub(crate) fn parse_instant(
    text: &str,
    now: OffsetDateTime,
    zone: &TimeZone,
) -> Result<OffsetDateTime, CliError> {
    let t = text.trim();
    if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
        return Ok(dt);
    }
    let today = || {
        let now_j = to_jiff(now)?;
        Some(now_j.to_zoned(zone.clone()).date())
    };
    let day = match t.to_ascii_lowercase().as_str() {
        "now" => return Ok(now),
        "today" => today(),
        "yesterday" => today().and_then(|d| d.yesterday().ok()),
        _ => None,
    };
    if let Some(d) = day {
        return start_of(d, zone).ok_or_else(|| out_of_range(text));
    }
    // A date alone is its midnight (a zone that skips midnight: the first instant after).
    if let Ok(dt) = t.parse::<civil::DateTime>() {
        return dt
            .to_zoned(zone.clone())
            .ok()
            .and_then(|z| from_jiff(z.timestamp()))
            .ok_or_else(|| invalid_instant(text));
    }
    match age_before(t, now, zone) {
        Ok(t) => Ok(t),
        // A well-formed age that is too long: say so rather than list the forms.
        Err(AgeError::TooLong) => Err(out_of_range(text)),
        Err(AgeError::Malformed) => Err(invalid_instant(text)),
    }
}

fn invalid_instant(text: &str) -> CliError {
    CliError::Usage(format!("invalid time `{text}`: {INSTANT_FORMS}"))
}

/// How times are shown.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeDisplay {
    /// The offset to show (UTC when `--utc` or when the local offset is unknown).
    pub(crate) offset: UtcOffset,
}

impl TimeDisplay {
    /// `YYYY-MM-DD HH:MM:SS` in the display offset, with `Z` or `±HH:MM`; the raw string when
    /// it does not parse.
    pub(crate) fn show(&self, raw: &str) -> String {
        match OffsetDateTime::parse(raw.trim(), &Rfc3339) {
            Ok(dt) => self.show_dt(dt),
            Err(_) => raw.to_owned(),
        }
    }

    /// Formats an instant in the display offset.
    pub(crate) fn show_dt(&self, dt: OffsetDateTime) -> String {
        let dt = dt.to_offset(self.offset);
        let (h, m, _) = self.offset.as_hms();
        let zone = if self.offset.is_utc() {
            "Z".to_owned()
        } else {
            format!(
                "{}{:02}:{:02}",
                if self.offset.is_negative() { '-' } else { '+' },
                h.abs(),
                m.abs()
            )
        };
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}{}",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            zone
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn tokyo() -> TimeZone {
        TimeZone::get("Asia/Tokyo").unwrap()
    }

    #[test]
    fn ages() {
        let now = datetime!(2026-11-30 12:00 UTC);
        let age = |t: &str| older_than(t, now, &TimeZone::UTC);
        assert_eq!(age("30d").unwrap(), datetime!(2026-10-31 12:00 UTC));
        assert_eq!(age("2w").unwrap(), datetime!(2026-11-16 12:00 UTC));
        assert_eq!(age("12h").unwrap(), datetime!(2026-11-30 0:00 UTC));
        assert_eq!(age("7").unwrap(), datetime!(2026-11-23 12:00 UTC));
        assert_eq!(age("90m").unwrap(), datetime!(2026-11-30 10:30 UTC));
        assert_eq!(age("1d12h").unwrap(), datetime!(2026-11-29 0:00 UTC));
        assert_eq!(age("1y").unwrap(), datetime!(2025-11-30 12:00 UTC));
        assert_eq!(age("2 days ago").unwrap(), datetime!(2026-11-28 12:00 UTC));
        assert_eq!(age("3 months").unwrap(), datetime!(2026-08-30 12:00 UTC));
        assert_eq!(age("P1D").unwrap(), datetime!(2026-11-29 12:00 UTC));
        for bad in ["", "d", "-1d", "+1d", "1.5d", "soon", "2026-11-30"] {
            let err = age(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.to_string().contains("1d12h"), "{bad}: {err}");
        }
        // The longest accepted age, and the first ones past it.
        assert_eq!(
            age("366000d").unwrap(),
            now - std::time::Duration::from_secs(MAX_AGE_SECS)
        );
        for long in [
            "366001d",
            "99999999999d",
            "1000000000000d",
            "18446744073709551615s",
            "1100y",
        ] {
            let err = age(long).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{long}");
            assert!(err.to_string().contains("out of range"), "{long}: {err}");
        }
    }

    #[test]
    fn calendar_ages_count_in_the_zone() {
        // 2026-03-08 is the day New York moves to daylight saving time: a day back from noon
        // local time is noon local time the day before, 23 hours earlier.
        let ny = TimeZone::get("America/New_York").unwrap();
        let now = datetime!(2026-03-08 16:00 UTC); // 12:00 EDT
        assert_eq!(
            older_than("1d", now, &ny).unwrap(),
            datetime!(2026-03-07 17:00 UTC) // 12:00 EST
        );
        assert_eq!(
            older_than("24h", now, &ny).unwrap(),
            datetime!(2026-03-07 16:00 UTC)
        );
    }

    #[test]
    fn instants() {
        let now = datetime!(2026-11-30 12:00 UTC);
        let utc = |t: &str| parse_instant(t, now, &TimeZone::UTC);
        assert_eq!(utc("2026-11-01").unwrap(), datetime!(2026-11-01 0:00 UTC));
        assert_eq!(utc("1d").unwrap(), datetime!(2026-11-29 12:00 UTC));
        assert_eq!(
            utc("2026-11-30T01:02:03.004+09:00").unwrap(),
            datetime!(2026-11-29 16:02:03.004 UTC)
        );
        assert_eq!(utc("today").unwrap(), datetime!(2026-11-30 0:00 UTC));
        assert_eq!(utc("Yesterday").unwrap(), datetime!(2026-11-29 0:00 UTC));
        assert_eq!(utc("now").unwrap(), now);
        assert_eq!(utc("2 days ago").unwrap(), datetime!(2026-11-28 12:00 UTC));
        assert_eq!(utc("1y").unwrap(), datetime!(2025-11-30 12:00 UTC));
        assert_eq!(utc("1d12h").unwrap(), datetime!(2026-11-29 0:00 UTC));
        assert_eq!(utc("90m").unwrap(), datetime!(2026-11-30 10:30 UTC));
        assert_eq!(
            utc("2026-11-30 14:05").unwrap(),
            datetime!(2026-11-30 14:05 UTC)
        );
        let err = utc("next tuesday").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().contains("RFC 3339") && err.to_string().contains("yesterday"),
            "{err}"
        );
        // Ages too long to subtract are usage errors, never an overflow.
        for long in ["1000000000000d", "99999999999d", "366001d"] {
            let err = utc(long).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{long}");
            assert!(err.to_string().contains("out of range"), "{long}: {err}");
        }
        assert_eq!(
            utc("366000d").unwrap(),
            now - std::time::Duration::from_secs(MAX_AGE_SECS)
        );
        // The earliest representable instant minus an age still fails cleanly.
        let earliest = time::PrimitiveDateTime::MIN.assume_utc();
        assert_eq!(
            parse_instant("1s", earliest, &TimeZone::UTC)
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn dates_and_days_are_midnight_in_the_zone() {
        // 12:00 UTC is 21:00 in Tokyo: "today" there began at 15:00 UTC the day before.
        let now = datetime!(2026-11-30 12:00 UTC);
        let tk = |t: &str| parse_instant(t, now, &tokyo());
        assert_eq!(tk("today").unwrap(), datetime!(2026-11-29 15:00 UTC));
        assert_eq!(tk("yesterday").unwrap(), datetime!(2026-11-28 15:00 UTC));
        assert_eq!(tk("2026-11-01").unwrap(), datetime!(2026-10-31 15:00 UTC));
        assert_eq!(
            tk("2026-11-01T09:30").unwrap(),
            datetime!(2026-11-01 0:30 UTC)
        );
        // An explicit offset is kept whatever the zone.
        assert_eq!(
            tk("2026-11-01T00:00:00Z").unwrap(),
            datetime!(2026-11-01 0:00 UTC)
        );
    }

    #[test]
    fn zones() {
        let env = Env::from_pairs([("TZ".to_owned(), "Asia/Tokyo".to_owned())]);
        assert_eq!(input_zone(&env).iana_name(), Some("Asia/Tokyo"));
        let local = input_zone(&env);
        assert_eq!(
            parse_zone("local", &local).unwrap().iana_name(),
            Some("Asia/Tokyo")
        );
        let colon = Env::from_pairs([("TZ".to_owned(), ":Europe/Paris".to_owned())]);
        assert_eq!(input_zone(&colon).iana_name(), Some("Europe/Paris"));
        assert_eq!(parse_zone("UTC", &local).unwrap(), TimeZone::UTC);
        assert_eq!(
            parse_zone("America/Sao_Paulo", &local).unwrap().iana_name(),
            Some("America/Sao_Paulo")
        );
        let err = parse_zone("Mars/Olympus", &local).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("IANA"), "{err}");
    }

    #[test]
    fn display() {
        let utc = TimeDisplay {
            offset: UtcOffset::UTC,
        };
        assert_eq!(utc.show("2026-11-30T11:38:23.192Z"), "2026-11-30 11:38:23Z");
        let jst = TimeDisplay {
            offset: UtcOffset::from_hms(9, 0, 0).unwrap(),
        };
        assert_eq!(
            jst.show("2026-11-30T20:38:23.192Z"),
            "2026-12-01 05:38:23+09:00"
        );
        assert_eq!(utc.show("not a date"), "not a date");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ages_parse_or_fail_cleanly(text in "\\PC{0,12}") {
            let _ = older_than(&text, OffsetDateTime::UNIX_EPOCH, &TimeZone::UTC);
            let _ = parse_instant(&text, OffsetDateTime::UNIX_EPOCH, &TimeZone::UTC);
        }

        #[test]
        fn day_ages_round_trip(n in 0i64..100_000) {
            let now = OffsetDateTime::UNIX_EPOCH;
            prop_assert_eq!(
                older_than(&format!("{n}d"), now, &TimeZone::UTC).unwrap(),
                now - time::Duration::days(n)
            );
        }
    }
}
