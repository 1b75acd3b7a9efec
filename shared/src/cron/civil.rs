//! Civil (wall-clock) arithmetic on Unix seconds in a time zone, as Go's `time` package does it
//! for robfig/cron: fields of an instant, and `time.Date`'s normalisation and its choice of
//! offset for wall times that fall in a daylight-saving gap or overlap.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The wall-clock fields of an instant in a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Civil {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    /// 0 = Sunday.
    pub weekday: i64,
}

/// The zone's UTC offset in seconds at Unix second `unix` (0 outside jiff's range).
pub(crate) fn offset_at(zone: &TimeZone, unix: i64) -> i64 {
    Timestamp::from_second(unix)
        .map(|ts| i64::from(zone.to_offset(ts).seconds()))
        .unwrap_or(0)
}

/// The wall-clock fields of Unix second `unix` in `zone`.
pub(crate) fn fields(zone: &TimeZone, unix: i64) -> Civil {
    let local = unix + offset_at(zone, unix);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: secs / 3600,
        minute: secs % 3600 / 60,
        second: secs % 60,
        weekday: (days + 4).rem_euclid(7),
    }
}

/// Go's `time.Date(year, month, day, hour, min, sec, 0, zone)` as Unix seconds: out-of-range
/// months and days carry over (February 30 is March 1 or 2), and a wall time the zone skips or
/// repeats gets the offset Go picks: the offset in force at the wall time read as UTC, corrected
/// once if that offset's period does not contain the result. Worked example, New York, spring
/// forward at 07:00 UTC on 2012-03-11: 02:30 read as UTC is in EST (-5), 07:30 UTC is in EDT
/// (-4), so Go answers 02:30 + 4 h = 06:30 UTC = 01:30 EST. Berlin, whose offsets are positive,
/// moves the same gap forward instead (02:30 → 03:30 CEST).
pub(crate) fn go_date(
    zone: &TimeZone,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
) -> i64 {
    let m0 = month - 1;
    let year = year + m0.div_euclid(12);
    let month = m0.rem_euclid(12) + 1;
    let days = days_from_civil(year, month, 1) + (day - 1);
    let wall = days * 86_400 + hour * 3600 + minute * 60 + second;
    let guess = offset_at(zone, wall);
    wall - offset_at(zone, wall - guess)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str) -> TimeZone {
        TimeZone::get(name).expect("zone")
    }

    fn unix(s: &str) -> i64 {
        s.parse::<Timestamp>().expect("timestamp").as_second()
    }

    #[test]
    fn day_counts_round_trip_across_leap_years_and_centuries() {
        for (y, m, d) in [
            (1970, 1, 1),
            (2000, 2, 29),
            (2100, 3, 1),
            (1969, 12, 31),
            (2024, 2, 29),
        ] {
            assert_eq!(civil_from_days(days_from_civil(y, m, d)), (y, m, d));
        }
        assert_eq!(days_from_civil(1970, 1, 2), 1);
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert_eq!(
            days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28),
            1
        );
    }

    #[test]
    fn fields_read_the_wall_clock_and_weekday_in_the_zone() {
        let c = fields(&zone("Asia/Kolkata"), unix("2024-05-01T12:00:00Z"));
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute),
            (2024, 5, 1, 17, 30)
        );
        assert_eq!(c.weekday, 3, "a Wednesday");
    }

    /// Like Go's `time.Date`: out-of-range months and days carry over; a wall time in a gap
    /// moves by the gap (New York back an hour, Berlin forward), one in an overlap takes New
    /// York's first (daylight) occurrence and Berlin's second.
    #[test]
    fn go_date_carries_over_and_picks_gos_offset_in_gaps_and_overlaps() {
        let (utc, ny, berlin) = (
            TimeZone::UTC,
            zone("America/New_York"),
            zone("Europe/Berlin"),
        );
        #[rustfmt::skip]
        let cases = [
            ("day 30 of February", &utc, (2023, 2, 30, 0, 0), "2023-03-02T00:00:00Z"),
            ("month 13", &utc, (2012, 13, 1, 0, 0), "2013-01-01T00:00:00Z"),
            ("day 32 of December", &utc, (2012, 12, 32, 0, 0), "2013-01-01T00:00:00Z"),
            ("gap, New York", &ny, (2012, 3, 11, 2, 30), "2012-03-11T01:30:00-05:00"),
            ("gap, Berlin", &berlin, (2012, 3, 25, 2, 30), "2012-03-25T03:30:00+02:00"),
            ("overlap, New York", &ny, (2012, 11, 4, 1, 0), "2012-11-04T01:00:00-04:00"),
            ("overlap, Berlin", &berlin, (2012, 10, 28, 2, 30), "2012-10-28T02:30:00+01:00"),
        ];
        for (why, tz, (y, mo, d, h, mi), want) in cases {
            assert_eq!(go_date(tz, y, mo, d, h, mi, 0), unix(want), "{why}");
        }
    }
}
