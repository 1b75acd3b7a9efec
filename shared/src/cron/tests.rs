//! Schedule evaluation, table-driven: robfig/cron v3's own `TestActivation` and `TestNext`
//! cases (the five-field ones; its six-field specs with second 0 are written without the
//! seconds), the same daylight-saving cases in Europe/Berlin, whose positive offset makes Go
//! resolve gap times forward instead of back, leap years, the day-of-month / day-of-week OR
//! rule, the descriptors, `@every`, and schedules that never fire.

use super::Schedule;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The next run after `from` (RFC 3339) of `spec` in `zone`, as RFC 3339 in that zone ("" for
/// none).
fn next(zone: &str, spec: &str, from: &str) -> String {
    let tz = TimeZone::get(zone).expect("zone");
    let schedule = Schedule::parse(spec)
        .expect("schedule")
        .with_default_zone(tz.clone());
    let from: Timestamp = from.parse().expect("time");
    match schedule.next(from) {
        Some(t) => t.to_zoned(tz).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        None => String::new(),
    }
}

/// Whether `spec` runs at exactly `at` (UTC, RFC 3339).
fn runs_at(spec: &str, at: &str) -> bool {
    let t: Timestamp = at.parse().expect("time");
    let before = t - jiff::SignedDuration::from_secs(1);
    let schedule = Schedule::parse(spec).expect("schedule");
    schedule.next(before) == Some(t)
}

#[test]
fn every_syntax_form_activates_at_the_times_robfig_says() {
    let cases = [
        // Every fifteen minutes.
        ("0/15 * * * *", "2012-07-09T15:00:00Z", true),
        ("0/15 * * * *", "2012-07-09T15:45:00Z", true),
        ("0/15 * * * *", "2012-07-09T15:40:00Z", false),
        // Every fifteen minutes, starting at 5 minutes.
        ("5/15 * * * *", "2012-07-09T15:05:00Z", true),
        ("5/15 * * * *", "2012-07-09T15:20:00Z", true),
        ("5/15 * * * *", "2012-07-09T15:50:00Z", true),
        // Named months.
        ("0/15 * * Jul *", "2012-07-15T15:00:00Z", true),
        ("0/15 * * Jun *", "2012-07-15T15:00:00Z", false),
        // Everything set.
        ("30 08 ? Jul Sun", "2012-07-15T08:30:00Z", true),
        ("30 08 15 Jul ?", "2012-07-15T08:30:00Z", true),
        ("30 08 ? Jul Sun", "2012-07-16T08:30:00Z", false),
        ("30 08 15 Jul ?", "2012-07-16T08:30:00Z", false),
        // Predefined schedules.
        ("@hourly", "2012-07-09T15:00:00Z", true),
        ("@hourly", "2012-07-09T15:04:00Z", false),
        ("@daily", "2012-07-09T15:00:00Z", false),
        ("@daily", "2012-07-09T00:00:00Z", true),
        ("@midnight", "2012-07-09T00:00:00Z", true),
        ("@weekly", "2012-07-09T00:00:00Z", false),
        ("@weekly", "2012-07-08T00:00:00Z", true),
        ("@weekly", "2012-07-08T01:00:00Z", false),
        ("@monthly", "2012-07-08T00:00:00Z", false),
        ("@monthly", "2012-07-01T00:00:00Z", true),
        ("@yearly", "2013-01-01T00:00:00Z", true),
        ("@annually", "2013-01-01T00:00:00Z", true),
        ("@yearly", "2013-02-01T00:00:00Z", false),
        // Both day fields restricted: either matches (the seeds' `0 0 13 * 5`).
        ("* * 1,15 * Sun", "2012-07-15T00:00:00Z", true),
        ("* * 1,15 * Sun", "2012-06-15T00:00:00Z", true),
        ("* * 1,15 * Sun", "2012-08-01T00:00:00Z", true),
        ("* * */10 * Sun", "2012-07-15T00:00:00Z", true),
        ("0 0 13 * 5", "2026-01-02T00:00:00Z", true),
        ("0 0 13 * 5", "2026-01-13T00:00:00Z", true),
        ("0 0 13 * 5", "2026-01-14T00:00:00Z", false),
        // One day field is a star: both must match.
        ("* * * * Mon", "2012-07-15T00:00:00Z", false),
        ("* * 1,15 * *", "2012-07-09T00:00:00Z", false),
        ("* * 1,15 * *", "2012-07-15T00:00:00Z", true),
        ("* * */2 * Sun", "2012-07-15T00:00:00Z", true),
        // Names, ranges with steps, lists, `?`, day-of-week 7.
        ("0 0-23/2 * * *", "2012-07-09T14:00:00Z", true),
        ("0 0-23/2 * * *", "2012-07-09T15:00:00Z", false),
        ("0 */2 * * *", "2012-07-09T22:00:00Z", true),
        ("0 9 * jan-mar mon-fri", "2013-02-01T09:00:00Z", true),
        ("0 9 * jan-mar mon-fri", "2013-02-02T09:00:00Z", false),
        ("0 0 ? * 7", "2012-07-15T00:00:00Z", true),
        ("0 0 * * SUN", "2012-07-15T00:00:00Z", true),
        ("1,31 * * * *", "2012-07-09T15:31:00Z", true),
    ];
    for (spec, at, want) in cases {
        assert_eq!(runs_at(spec, at), want, "{spec} at {at}");
    }
}

#[test]
fn next_runs_wrap_around_hours_days_months_and_years() {
    let cases = [
        (
            "0/15 * * * *",
            "2012-07-09T14:45:00Z",
            "2012-07-09T15:00:00+00:00",
        ),
        (
            "0/15 * * * *",
            "2012-07-09T14:59:00Z",
            "2012-07-09T15:00:00+00:00",
        ),
        (
            "0/15 * * * *",
            "2012-07-09T14:59:59Z",
            "2012-07-09T15:00:00+00:00",
        ),
        (
            "20-35/15 * * * *",
            "2012-07-09T15:45:00Z",
            "2012-07-09T16:20:00+00:00",
        ),
        (
            "*/15 * * * *",
            "2012-07-09T23:46:00Z",
            "2012-07-10T00:00:00+00:00",
        ),
        (
            "20-35/15 * * * *",
            "2012-07-09T23:45:00Z",
            "2012-07-10T00:20:00+00:00",
        ),
        (
            "0 0 9 Apr-Oct ?",
            "2012-07-09T23:35:00Z",
            "2012-08-09T00:00:00+00:00",
        ),
        (
            "0 0 */5 Apr,Aug,Oct Mon",
            "2012-07-09T23:35:00Z",
            "2012-08-01T00:00:00+00:00",
        ),
        (
            "0 0 */5 Oct Mon",
            "2012-07-09T23:35:00Z",
            "2012-10-01T00:00:00+00:00",
        ),
        (
            "0 0 * Feb Mon",
            "2012-07-09T23:35:00Z",
            "2013-02-04T00:00:00+00:00",
        ),
        (
            "0 0 * Feb Mon/2",
            "2012-07-09T23:35:00Z",
            "2013-02-01T00:00:00+00:00",
        ),
        (
            "* * * * *",
            "2012-12-31T23:59:45Z",
            "2013-01-01T00:00:00+00:00",
        ),
        (
            "* * * * *",
            "2012-12-31T23:59:00Z",
            "2013-01-01T00:00:00+00:00",
        ),
        (
            "@every 90s",
            "2012-07-09T23:59:00.5Z",
            "2012-07-10T00:00:30+00:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next("UTC", spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn leap_days_come_only_in_leap_years() {
    let cases = [
        (
            "0 0 29 Feb ?",
            "2012-07-09T23:35:00Z",
            "2016-02-29T00:00:00+00:00",
        ),
        (
            "0 0 29 2 *",
            "2023-03-01T00:00:00Z",
            "2024-02-29T00:00:00+00:00",
        ),
        // 2100 is not a leap year: the next February 29 after 2096 is in 2104, beyond robfig's
        // five-year horizon, so there is none (upstream then reports an invalid schedule).
        ("0 0 29 2 *", "2096-03-01T00:00:00Z", ""),
        (
            "0 0 29 2 *",
            "2099-03-01T00:00:00Z",
            "2104-02-29T00:00:00+00:00",
        ),
        (
            "0 0 28-29 2 *",
            "2023-02-28T00:00:00Z",
            "2024-02-28T00:00:00+00:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next("UTC", spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn schedules_that_can_never_fire_have_no_next_run() {
    for spec in [
        "59 23 31 2 *",
        "0 0 30 Feb ?",
        "0 0 31 Apr ?",
        "0 0 31 4,6,9,11 *",
    ] {
        assert_eq!(next("UTC", spec, "2012-07-09T23:35:00Z"), "", "{spec}");
    }
}

#[test]
fn new_york_spring_forward_skips_the_missing_hour_as_robfig_does() {
    let ny = "America/New_York";
    let cases = [
        // 2 am EST jumps to 3 am EDT on 2012-03-11: a run at 02:30 that day does not happen.
        (
            "30 2 11 Mar ?",
            "2012-03-11T00:00:00-05:00",
            "2013-03-11T02:30:00-04:00",
        ),
        // Hourly: 01:00 EST, then 03:00 EDT.
        (
            "0 * * * ?",
            "2012-03-11T00:00:00-05:00",
            "2012-03-11T01:00:00-05:00",
        ),
        (
            "0 * * * ?",
            "2012-03-11T01:00:00-05:00",
            "2012-03-11T03:00:00-04:00",
        ),
        (
            "0 * * * ?",
            "2012-03-11T03:00:00-04:00",
            "2012-03-11T04:00:00-04:00",
        ),
        (
            "0 * * * ?",
            "2012-03-11T04:00:00-04:00",
            "2012-03-11T05:00:00-04:00",
        ),
        // Nightly at 1 am: unaffected.
        (
            "0 1 * * ?",
            "2012-03-11T00:00:00-05:00",
            "2012-03-11T01:00:00-05:00",
        ),
        (
            "0 1 * * ?",
            "2012-03-11T01:00:00-05:00",
            "2012-03-12T01:00:00-04:00",
        ),
        // Nightly at 2 am: skipped on the day of the change.
        (
            "0 2 * * ?",
            "2012-03-11T00:00:00-05:00",
            "2012-03-12T02:00:00-04:00",
        ),
        (
            "30 2 * * *",
            "2026-03-08T00:00:00-05:00",
            "2026-03-09T02:30:00-04:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next(ny, spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn new_york_fall_back_runs_the_repeated_hour_twice_as_robfig_does() {
    let ny = "America/New_York";
    let cases = [
        // 2 am EDT falls back to 1 am EST on 2012-11-04.
        (
            "30 2 04 Nov ?",
            "2012-11-04T00:00:00-04:00",
            "2012-11-04T02:30:00-05:00",
        ),
        (
            "30 1 04 Nov ?",
            "2012-11-04T01:45:00-04:00",
            "2012-11-04T01:30:00-05:00",
        ),
        // Hourly: 01:00 EDT, 01:00 EST, 02:00 EST.
        (
            "0 * * * ?",
            "2012-11-04T00:00:00-04:00",
            "2012-11-04T01:00:00-04:00",
        ),
        (
            "0 * * * ?",
            "2012-11-04T01:00:00-04:00",
            "2012-11-04T01:00:00-05:00",
        ),
        (
            "0 * * * ?",
            "2012-11-04T01:00:00-05:00",
            "2012-11-04T02:00:00-05:00",
        ),
        // Nightly at 1 am runs twice.
        (
            "0 1 * * ?",
            "2012-11-04T00:00:00-04:00",
            "2012-11-04T01:00:00-04:00",
        ),
        (
            "0 1 * * ?",
            "2012-11-04T01:00:00-04:00",
            "2012-11-04T01:00:00-05:00",
        ),
        (
            "0 1 * * ?",
            "2012-11-04T01:00:00-05:00",
            "2012-11-05T01:00:00-05:00",
        ),
        // Nightly at 2 am and 3 am: once.
        (
            "0 2 * * ?",
            "2012-11-04T00:00:00-04:00",
            "2012-11-04T02:00:00-05:00",
        ),
        (
            "0 2 * * ?",
            "2012-11-04T02:00:00-05:00",
            "2012-11-05T02:00:00-05:00",
        ),
        (
            "0 3 * * ?",
            "2012-11-04T00:00:00-04:00",
            "2012-11-04T03:00:00-05:00",
        ),
        (
            "0 3 * * ?",
            "2012-11-04T03:00:00-05:00",
            "2012-11-05T03:00:00-05:00",
        ),
        // Monthly, across the change.
        (
            "0 3 3 * ?",
            "2012-11-04T00:00:00-04:00",
            "2012-12-03T03:00:00-05:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next(ny, spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn berlin_skips_the_spring_gap_and_repeats_the_autumn_overlap() {
    let berlin = "Europe/Berlin";
    let cases = [
        // 2 am CET jumps to 3 am CEST on 2012-03-25: 02:30 is skipped that day.
        (
            "30 2 * * *",
            "2012-03-25T00:00:00+01:00",
            "2012-03-26T02:30:00+02:00",
        ),
        (
            "30 2 25 Mar ?",
            "2012-03-25T00:00:00+01:00",
            "2013-03-25T02:30:00+01:00",
        ),
        (
            "0 * * * *",
            "2012-03-25T01:00:00+01:00",
            "2012-03-25T03:00:00+02:00",
        ),
        (
            "0 3 * * *",
            "2012-03-25T00:00:00+01:00",
            "2012-03-25T03:00:00+02:00",
        ),
        // 3 am CEST falls back to 2 am CET on 2012-10-28: 02:30 runs in both.
        (
            "30 2 * * *",
            "2012-10-28T00:00:00+02:00",
            "2012-10-28T02:30:00+02:00",
        ),
        (
            "30 2 * * *",
            "2012-10-28T02:30:00+02:00",
            "2012-10-28T02:30:00+01:00",
        ),
        (
            "30 2 * * *",
            "2012-10-28T02:30:00+01:00",
            "2012-10-29T02:30:00+01:00",
        ),
        (
            "0 * * * *",
            "2012-10-28T02:00:00+02:00",
            "2012-10-28T02:00:00+01:00",
        ),
        (
            "0 * * * *",
            "2012-10-28T02:00:00+01:00",
            "2012-10-28T03:00:00+01:00",
        ),
        // Schedules away from the change are untouched.
        (
            "0 0 * * *",
            "2012-10-27T12:00:00+02:00",
            "2012-10-28T00:00:00+02:00",
        ),
        (
            "0 0 * * *",
            "2012-10-28T00:00:00+02:00",
            "2012-10-29T00:00:00+01:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next(berlin, spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn a_midnight_that_does_not_exist_moves_to_the_first_hour_as_robfig_does() {
    let sp = "America/Sao_Paulo";
    let cases = [
        (
            "0 9 10 * ?",
            "2018-10-17T05:00:00-04:00",
            "2018-11-10T09:00:00-02:00",
        ),
        (
            "0 9 22 * ?",
            "2018-02-14T05:00:00-05:00",
            "2018-02-22T09:00:00-03:00",
        ),
    ];
    for (spec, from, want) in cases {
        assert_eq!(next(sp, spec, from), want, "{spec} after {from}");
    }
}

#[test]
fn a_zone_prefix_wins_over_the_default_zone() {
    assert_eq!(
        next("UTC", "TZ=Asia/Kolkata 30 9 * * *", "2024-05-01T00:00:00Z"),
        "2024-05-01T04:00:00+00:00"
    );
    assert_eq!(
        next(
            "UTC",
            "CRON_TZ=America/New_York 0 * * * ?",
            "2012-03-11T06:00:00Z"
        ),
        "2012-03-11T07:00:00+00:00"
    );
    assert_eq!(
        next("Asia/Kolkata", "0 0 * * *", "2024-05-01T00:00:00Z"),
        "2024-05-02T00:00:00+05:30"
    );
}
