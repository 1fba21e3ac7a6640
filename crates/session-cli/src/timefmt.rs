//! Time arguments (`--since 7d`, `--older-than 30d`) and time display (local or UTC).

use std::time::Duration;

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::error::CliError;

/// The longest age accepted (1000 years of 366 days): anything longer names no time a store
/// can hold and would overflow the arithmetic on instants.
pub(crate) const MAX_AGE_SECS: u64 = 1000 * 366 * 86_400;

/// Parses an age such as `90d`, `12h`, `2w`, `30m`, `45s` (a bare number means days).
///
/// # Errors
/// [`CliError::Usage`] for anything else, naming the accepted forms, and for an age longer than
/// [`MAX_AGE_SECS`].
pub(crate) fn parse_age(text: &str) -> Result<Duration, CliError> {
    match age(text) {
        Ok(d) => Ok(d),
        Err(AgeError::Malformed) => Err(CliError::Usage(format!(
            "invalid age `{text}`: use a number with s, m, h, d or w (e.g. 30d)"
        ))),
        Err(AgeError::TooLong) => Err(CliError::Usage(format!(
            "age `{text}` is out of range: at most 1000 years (366000d)"
        ))),
    }
}

/// Why an age did not parse.
enum AgeError {
    /// Not a number with a unit.
    Malformed,
    /// Well-formed but longer than [`MAX_AGE_SECS`].
    TooLong,
}

fn age(text: &str) -> Result<Duration, AgeError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(AgeError::Malformed);
    }
    let secs: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "" | "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(AgeError::Malformed),
    };
    // All digits: a parse failure can only be a number too large for u64.
    let n: u64 = num.parse().map_err(|_| AgeError::TooLong)?;
    match n.checked_mul(secs) {
        Some(total) if total <= MAX_AGE_SECS => Ok(Duration::from_secs(total)),
        _ => Err(AgeError::TooLong),
    }
}

/// The instant `age` before `now`.
///
/// # Errors
/// [`CliError::Usage`] when that instant cannot be represented (before the year -9999).
pub(crate) fn before(
    now: OffsetDateTime,
    age: Duration,
    text: &str,
) -> Result<OffsetDateTime, CliError> {
    now.checked_sub(time::Duration::try_from(age).map_err(|_| out_of_range(text))?)
        .ok_or_else(|| out_of_range(text))
}

fn out_of_range(text: &str) -> CliError {
    CliError::Usage(format!(
        "age `{text}` reaches back before the earliest representable time"
    ))
}

/// Parses a point in time: RFC 3339, `YYYY-MM-DD` (start of that UTC day), or an age counted back
/// from `now` (`7d`).
///
/// # Errors
/// [`CliError::Usage`] naming the accepted forms.
pub(crate) fn parse_instant(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, CliError> {
    let t = text.trim();
    if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
        return Ok(dt);
    }
    if let Ok(d) = Date::parse(t, format_description!("[year]-[month]-[day]")) {
        return Ok(PrimitiveDateTime::new(d, time::Time::MIDNIGHT).assume_utc());
    }
    match age(t) {
        Ok(d) => return before(now, d, text),
        // A well-formed age that is too long: say so rather than list the forms.
        Err(AgeError::TooLong) => return parse_age(t).and_then(|d| before(now, d, text)),
        Err(AgeError::Malformed) => {}
    }
    Err(CliError::Usage(format!(
        "invalid time `{text}`: use RFC 3339 (2026-11-30T12:00:00Z), a date (2026-11-30) or an age (7d)"
    )))
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

    #[test]
    fn ages() {
        assert_eq!(parse_age("30d").unwrap(), Duration::from_secs(30 * 86_400));
        assert_eq!(parse_age("2w").unwrap(), Duration::from_secs(14 * 86_400));
        assert_eq!(parse_age("12h").unwrap(), Duration::from_secs(12 * 3600));
        assert_eq!(parse_age("7").unwrap(), Duration::from_secs(7 * 86_400));
        for bad in ["", "d", "3y", "-1d", "1.5d", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
        // The longest accepted age, and the first one past it.
        assert_eq!(
            parse_age("366000d").unwrap(),
            Duration::from_secs(MAX_AGE_SECS)
        );
        for long in [
            "366001d",
            "99999999999d",
            "1000000000000d",
            "18446744073709551615s",
        ] {
            let err = parse_age(long).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{long}");
            assert!(err.to_string().contains("out of range"), "{long}: {err}");
        }
    }

    #[test]
    fn instants() {
        let now = datetime!(2026-11-30 12:00 UTC);
        assert_eq!(
            parse_instant("2026-11-01", now).unwrap(),
            datetime!(2026-11-01 0:00 UTC)
        );
        assert_eq!(
            parse_instant("1d", now).unwrap(),
            datetime!(2026-11-29 12:00 UTC)
        );
        assert_eq!(
            parse_instant("2026-11-30T01:02:03.004+09:00", now).unwrap(),
            datetime!(2026-11-29 16:02:03.004 UTC)
        );
        assert!(parse_instant("yesterday", now).is_err());
        // Ages too long to subtract are usage errors, never an overflow.
        for long in ["1000000000000d", "99999999999d", "366001d"] {
            assert_eq!(
                parse_instant(long, now).unwrap_err().exit_code(),
                2,
                "{long}"
            );
        }
        assert_eq!(
            parse_instant("366000d", now).unwrap(),
            now - Duration::from_secs(MAX_AGE_SECS)
        );
        // The earliest representable instant minus an age still fails cleanly.
        let earliest = time::PrimitiveDateTime::MIN.assume_utc();
        assert_eq!(
            before(earliest, Duration::from_secs(1), "1s")
                .unwrap_err()
                .exit_code(),
            2
        );
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
            let _ = parse_age(&text);
            let _ = parse_instant(&text, OffsetDateTime::UNIX_EPOCH);
        }

        #[test]
        fn day_ages_round_trip(n in 0u64..100_000) {
            prop_assert_eq!(parse_age(&format!("{n}d")).unwrap(), Duration::from_secs(n * 86_400));
        }
    }
}
