//! The clock the printers' tests read ages against: one fixed instant, so a fixture created an
//! hour earlier always prints `60m`.

use jiff::Timestamp;

/// The printers' tests' "now", as written in their fixtures.
pub(super) const NOW: &str = "2024-05-01T12:00:00Z";

/// [`NOW`] as a timestamp.
pub(super) fn now() -> Timestamp {
    NOW.parse().expect("NOW is a valid RFC 3339 timestamp")
}
