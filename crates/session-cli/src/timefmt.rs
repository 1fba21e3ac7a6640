//! Time arguments (`--since 7d`, `--older-than 30d`) and time display (local or UTC).

use std::time::Duration;

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::error::CliError;

/// Parses an age such as `90d`, `12h`, `2w`, `30m`, `45s` (a bare number means days).
///
/// # Errors
/// [`CliError::Usage`] for anything else, naming the accepted forms.
pub(crate) fn parse_age(text: &str) -> Result<Duration, CliError> {
    let t = text.trim();
    let bad = || {
        CliError::Usage(format!(
            "invalid age `{text}`: use a number with s, m, h, d or w (e.g. 30d)"
        ))
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "" | "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
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
    if let Ok(age) = parse_age(t) {
        return Ok(now - age);
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
