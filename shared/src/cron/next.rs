//! The next run of a five-field schedule: robfig/cron v3's `SpecSchedule.Next`, step for step,
//! so that daylight-saving transitions behave as upstream's controller does. Fields are matched
//! from the month down; a field that does not match is incremented (months and days in wall
//! time with Go's `AddDate`, hours and minutes as absolute durations), and a wrap-around starts
//! over from the month. Adding absolute hours is what skips a time inside a spring-forward gap
//! (02:00 → 03:00 never shows hour 2) and runs a time inside a fall-back overlap twice (01:00
//! EDT + 1 h = 01:00 EST shows hour 1 again).

use super::Spec;
use super::civil::{Civil, fields, go_date};
use jiff::tz::TimeZone;

/// The first run strictly after Unix second `after`, or `None` if there is none in five years.
pub(crate) fn next(s: &Spec, zone: &TimeZone, after: i64) -> Option<i64> {
    // Start at the earliest possible time: the upcoming second.
    let mut t = after.checked_add(1)?;
    // Whether a field has been incremented (then the lower fields start from zero).
    let mut added = false;
    let year_limit = fields(zone, t).year + 5;
    'wrap: loop {
        let mut c = fields(zone, t);
        if c.year > year_limit {
            return None;
        }
        while s.month & (1 << c.month) == 0 {
            if !added {
                added = true;
                t = go_date(zone, c.year, c.month, 1, 0, 0, 0);
            }
            t = add_date(zone, t, 1, 0);
            c = fields(zone, t);
            if c.month == 1 {
                continue 'wrap;
            }
        }
        while !day_matches(s, &c) {
            if !added {
                added = true;
                t = go_date(zone, c.year, c.month, c.day, 0, 0, 0);
            }
            t = add_date(zone, t, 0, 1);
            // Where midnight does not exist (São Paulo), the day starts at 23:00 the day
            // before or at 01:00: robfig moves to the next whole day's first hour.
            let hour = fields(zone, t).hour;
            if hour != 0 {
                t += if hour > 12 { 24 - hour } else { -hour } * 3600;
            }
            c = fields(zone, t);
            if c.day == 1 {
                continue 'wrap;
            }
        }
        while s.hour & (1 << c.hour) == 0 {
            if !added {
                added = true;
                t = go_date(zone, c.year, c.month, c.day, c.hour, 0, 0);
            }
            t += 3600;
            c = fields(zone, t);
            if c.hour == 0 {
                continue 'wrap;
            }
        }
        while s.minute & (1 << c.minute) == 0 {
            if !added {
                added = true;
                t -= t.rem_euclid(60);
            }
            t += 60;
            c = fields(zone, t);
            if c.minute == 0 {
                continue 'wrap;
            }
        }
        // Standard schedules run at second 0.
        while c.second != 0 {
            added = true;
            t += 1;
            c = fields(zone, t);
            if c.second == 0 {
                continue 'wrap;
            }
        }
        return Some(t);
    }
}

/// Go's `t.AddDate(0, months, days)`: the same wall time that many months and days on.
fn add_date(zone: &TimeZone, t: i64, months: i64, days: i64) -> i64 {
    let c = fields(zone, t);
    go_date(
        zone,
        c.year,
        c.month + months,
        c.day + days,
        c.hour,
        c.minute,
        c.second,
    )
}

/// Day of month OR day of week when both are restricted; AND when either is `*`.
fn day_matches(s: &Spec, c: &Civil) -> bool {
    let dom = s.dom & (1 << c.day) != 0;
    let dow = s.dow & (1 << c.weekday) != 0;
    if s.dom & super::STAR != 0 || s.dow & super::STAR != 0 {
        dom && dow
    } else {
        dom || dow
    }
}
