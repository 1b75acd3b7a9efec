//! The units of Go's `time.ParseDuration`, which both the cron schedules (`@every`) and the
//! protobuf `Duration` text read: one table, so the two parsers cannot drift apart.

/// Nanoseconds in one `unit` (`ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`), as Go spells them.
pub(crate) fn unit_nanos(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1.0),
        "us" | "µs" | "μs" => Some(1e3),
        "ms" => Some(1e6),
        "s" => Some(1e9),
        "m" => Some(60e9),
        "h" => Some(3600e9),
        _ => None,
    }
}
