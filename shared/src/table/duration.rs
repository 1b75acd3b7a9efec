//! Human-readable durations and ages exactly as kubectl prints them (upstream
//! `k8s.io/apimachinery/pkg/util/duration.HumanDuration`).

use std::time::Duration;

use jiff::Timestamp;

/// Formats a duration with two or three significant figures, the way every AGE column reads.
///
/// Worked examples: 59s → `59s`, 119s → `119s`, 125s → `2m5s`, 600s → `10m`, 3h30m → `3h30m`,
/// 10h → `10h`, 50h → `2d2h`, 10d → `10d`, 800d → `2y70d`, 9y → `9y`.
pub fn human_duration(d: Duration) -> String {
    human_seconds(i128::from(d.as_secs()))
}

/// [`human_duration`] for a signed span measured in nanoseconds. Upstream tolerates a clock
/// running up to a second ahead ("0s") and prints `<invalid>` for anything further in the future.
pub(crate) fn human_nanos(nanos: i128) -> String {
    // Go's int(d.Seconds()) truncates toward zero, as Rust's integer division does.
    let seconds = nanos / 1_000_000_000;
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    human_seconds(seconds)
}

fn human_seconds(seconds: i128) -> String {
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_units(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return two_units(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return two_units(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    if hours < 24 * 365 * 8 {
        return two_units(days / 365, "y", days % 365, "d");
    }
    format!("{}y", days / 365)
}

/// `3h30m`: the large unit, then the small one unless it is zero (`3h`).
fn two_units(large: i128, large_unit: &str, small: i128, small_unit: &str) -> String {
    if small == 0 {
        format!("{large}{large_unit}")
    } else {
        format!("{large}{large_unit}{small}{small_unit}")
    }
}

/// Parses an RFC 3339 timestamp (`metav1.Time` or `metav1.MicroTime`); `None` when absent or
/// unparseable, which upstream treats like the zero time.
pub(crate) fn parse_time(value: Option<&str>) -> Option<Timestamp> {
    value.and_then(|s| s.parse::<Timestamp>().ok())
}

/// Nanoseconds from `earlier` to `later` (negative when `later` comes first).
pub(crate) fn nanos_between(earlier: Timestamp, later: Timestamp) -> i128 {
    later.as_nanosecond() - earlier.as_nanosecond()
}

/// The time since a timestamp as kubectl's AGE column shows it; `<unknown>` when the timestamp
/// is absent (upstream `translateTimestampSince` of a zero time).
pub fn age(creation_timestamp: Option<&str>, now: Timestamp) -> String {
    match parse_time(creation_timestamp) {
        Some(t) => human_nanos(nanos_between(t, now)),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn durations_read_like_upstream() {
        let cases: &[(u64, &str)] = &[
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 30 * 60, "3h30m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(*secs)), *want, "{secs}s");
        }
    }

    #[test]
    fn a_clock_slightly_ahead_reads_zero_and_further_is_invalid() {
        assert_eq!(human_nanos(-1_500_000_000), "0s");
        assert_eq!(human_nanos(-2_000_000_000), "<invalid>");
    }

    #[test]
    fn age_measures_from_the_creation_timestamp() {
        let now = fixture::now();
        assert_eq!(age(Some("2024-05-01T11:55:00Z"), now), "5m");
        assert_eq!(age(Some("2024-04-29T12:00:00Z"), now), "2d");
        assert_eq!(age(Some("2024-05-01T11:59:59.500000Z"), now), "0s");
        assert_eq!(age(None, now), "<unknown>");
        assert_eq!(age(Some("not a time"), now), "<unknown>");
    }
}
