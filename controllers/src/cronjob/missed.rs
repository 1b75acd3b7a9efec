//! Planner: pure, no I/O.
//!
//! Which scheduled time, if any, a CronJob should run now, counted from its last scheduled time
//! (or its creation): the most recent unmet time runs, older unmet ones are dropped (upstream
//! collapses a backlog into one run); with `startingDeadlineSeconds` the most recent time must
//! be at most that many seconds old (otherwise the run was missed), and only the times inside
//! that window count; more than 100 unmet times in the window start nothing (the seeds' rule:
//! "Set or decrease .spec.startingDeadlineSeconds or check clock skew"). Also when to wake next.

use berth_shared::cron::Schedule;
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// More unmet times than this start nothing.
pub const MAX_MISSED: usize = 100;

/// Wake this long after a scheduled instant: a pass that wakes a hair early finds nothing due
/// and asks again for the few milliseconds left, so the pad only guards against timer slack.
pub const WAKE_PAD: Duration = Duration::from_millis(10);

/// What is due at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// No unmet time.
    Nothing,
    /// Run the most recent unmet time.
    Run(Timestamp),
    /// The most recent unmet time is older than the starting deadline: missed.
    TooLate(Timestamp),
    /// More than [`MAX_MISSED`] unmet times in the window: nothing runs.
    TooMany,
    /// The schedule has no time within robfig's five-year horizon (`59 23 31 2 *`).
    Never,
}

/// What is due at `now` for a schedule last met at `earliest` (the last scheduled time, or the
/// CronJob's creation), with an optional starting deadline in seconds.
pub fn due(
    schedule: &Schedule,
    earliest: Timestamp,
    deadline_seconds: Option<i64>,
    now: Timestamp,
) -> Due {
    let Some(first) = schedule.next(earliest) else {
        return Due::Never;
    };
    if first > now {
        return Due::Nothing;
    }
    let Some(recent) = latest_in(schedule, earliest, now) else {
        return Due::Nothing;
    };
    let mut window_start = earliest;
    if let Some(d) = deadline_seconds {
        let deadline = SignedDuration::from_secs(d);
        if recent.checked_add(deadline).is_ok_and(|t| t < now) {
            return Due::TooLate(recent);
        }
        window_start = window_start.max(now.checked_sub(deadline).unwrap_or(Timestamp::MIN));
    }
    if count_in(schedule, window_start, now, MAX_MISSED + 1) > MAX_MISSED {
        return Due::TooMany;
    }
    Due::Run(recent)
}

/// How long until just after the schedule's next time after `now`; `None` if it never fires.
pub fn wake_after(schedule: &Schedule, now: Timestamp) -> Option<Duration> {
    let next = schedule.next(now)?;
    let wait = Duration::try_from(next.duration_since(now)).unwrap_or_default();
    Some(wait + WAKE_PAD)
}

/// Upper bound on the times examined in one search, whatever the schedule.
const SEARCH_LIMIT: usize = 20_000;

/// The latest scheduled time in `(after, until]`. Looks back over growing spans (a minute, an
/// hour, a day, a month, a year, six years), so a dense schedule is searched over a short span
/// and a sparse one over a long span, each with few steps.
pub fn latest_in(schedule: &Schedule, after: Timestamp, until: Timestamp) -> Option<Timestamp> {
    const SPANS: [i64; 6] = [
        60,
        3600,
        86_400,
        32 * 86_400,
        366 * 86_400,
        6 * 366 * 86_400,
    ];
    for span in SPANS {
        let back = until.checked_sub(SignedDuration::from_secs(span));
        let start = after.max(back.unwrap_or(Timestamp::MIN));
        let mut latest = None;
        let mut t = start;
        for _ in 0..SEARCH_LIMIT {
            match schedule.next(t) {
                Some(n) if n <= until => {
                    latest = Some(n);
                    t = n;
                }
                _ => break,
            }
        }
        if latest.is_some() || start == after {
            return latest;
        }
    }
    None
}

/// The number of scheduled times in `(after, until]`, counting no further than `cap`.
pub fn count_in(schedule: &Schedule, after: Timestamp, until: Timestamp, cap: usize) -> usize {
    let mut n = 0;
    let mut t = after;
    while n < cap {
        match schedule.next(t) {
            Some(next) if next <= until => {
                n += 1;
                t = next;
            }
            _ => break,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    /// What is due at `now` with no deadline, the last run having been at `earliest`.
    fn due_between(s: &Schedule, earliest: &str, now: &str) -> Due {
        due(s, at(earliest), None, at(now))
    }

    fn every_minute() -> Schedule {
        Schedule::parse("* * * * *").expect("schedule")
    }

    #[test]
    fn nothing_is_due_before_the_first_time_after_the_last_run() {
        let s = every_minute();
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-01T08:30:59Z");
        assert_eq!(d, Due::Nothing);
    }

    #[test]
    fn the_time_that_just_came_is_due() {
        let s = every_minute();
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-01T08:31:00.2Z");
        assert_eq!(d, Due::Run(at("2024-05-01T08:31:00Z")));
    }

    #[test]
    fn after_an_outage_only_the_most_recent_missed_time_runs() {
        let s = every_minute();
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-01T08:33:40Z");
        assert_eq!(d, Due::Run(at("2024-05-01T08:33:00Z")));
    }

    #[test]
    fn more_than_a_hundred_missed_times_start_nothing_without_a_deadline() {
        // The seeds' example: every minute from 08:30, controller down 08:29 to 10:21.
        let s = every_minute();
        let d = due_between(&s, "2024-05-01T08:29:00Z", "2024-05-01T10:21:00Z");
        assert_eq!(d, Due::TooMany);
        // Exactly 100 is still fine.
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-01T10:10:00Z");
        assert_eq!(d, Due::Run(at("2024-05-01T10:10:00Z")));
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-01T10:11:00Z");
        assert_eq!(d, Due::TooMany);
    }

    #[test]
    fn a_deadline_counts_only_the_times_inside_it() {
        // The same outage with startingDeadlineSeconds 200: four times in the last 200 s.
        let s = every_minute();
        let earliest = at("2024-05-01T08:29:00Z");
        let now = at("2024-05-01T10:21:00Z");
        assert_eq!(due(&s, earliest, Some(200), now), Due::Run(now));
        assert_eq!(
            count_in(&s, now - SignedDuration::from_secs(200), now, 101),
            4
        );
    }

    #[test]
    fn a_most_recent_time_older_than_the_deadline_is_missed() {
        let s = every_minute();
        let earliest = at("2024-05-01T08:30:00Z");
        let d = due(&s, earliest, Some(30), at("2024-05-01T08:33:40Z"));
        assert_eq!(d, Due::TooLate(at("2024-05-01T08:33:00Z")));
        let d = due(&s, earliest, Some(200), at("2024-05-01T08:33:40Z"));
        assert_eq!(d, Due::Run(at("2024-05-01T08:33:00Z")));
        // Exactly at the deadline is still in time (upstream's `Before`).
        let d = due(&s, earliest, Some(40), at("2024-05-01T08:33:40Z"));
        assert_eq!(d, Due::Run(at("2024-05-01T08:33:00Z")));
    }

    #[test]
    fn a_schedule_that_never_fires_is_never_due() {
        let s = Schedule::parse("59 23 31 2 *").expect("schedule");
        let d = due_between(&s, "2024-05-01T08:30:00Z", "2024-05-02T08:30:00Z");
        assert_eq!(d, Due::Never);
        assert_eq!(wake_after(&s, at("2024-05-02T08:30:00Z")), None);
    }

    #[test]
    fn irregular_schedules_find_their_true_most_recent_time() {
        // Weekdays at 09:00: on Monday morning the last one was Friday.
        let s = Schedule::parse("0 9 * * 1-5").expect("schedule");
        let d = due_between(&s, "2024-04-29T09:00:00Z", "2024-05-06T08:00:00Z");
        assert_eq!(d, Due::Run(at("2024-05-03T09:00:00Z")));
        let yearly = Schedule::parse("@yearly").expect("schedule");
        let d = due_between(&yearly, "2020-01-01T00:00:00Z", "2024-05-06T08:00:00Z");
        assert_eq!(d, Due::Run(at("2024-01-01T00:00:00Z")));
    }

    #[test]
    fn the_controller_wakes_just_after_the_next_time() {
        let s = every_minute();
        assert_eq!(
            wake_after(&s, at("2024-05-01T08:30:59.5Z")),
            Some(Duration::from_millis(500) + WAKE_PAD)
        );
        assert_eq!(
            wake_after(&s, at("2024-05-01T08:30:00Z")),
            Some(Duration::from_secs(60) + WAKE_PAD)
        );
    }
}
