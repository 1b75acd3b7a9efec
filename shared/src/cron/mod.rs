//! CronJob schedules as upstream evaluates them (robfig/cron v3's standard parser and
//! `SpecSchedule.Next`): five fields with lists, ranges, steps and month/day names, `?`, the
//! descriptors (`@hourly` … `@yearly`, and `@every <duration>` which upstream's parser also
//! takes), an optional `TZ=`/`CRON_TZ=` prefix, and next-run times in a time zone with
//! robfig's daylight-saving behaviour: a time inside a spring-forward gap is skipped that day,
//! a time inside a fall-back overlap runs in both occurrences. One parser serves admission
//! (syntax and its error texts) and the CronJob controller (run times).

mod civil;
mod next;
mod parse;
#[cfg(test)]
mod tests;

pub use parse::{DurationError, IntError, ScheduleError};

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A parsed schedule. Its zone is the `TZ=` prefix's, or the one given with
/// [`Schedule::with_default_zone`], or UTC.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    zone: Option<TimeZone>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The five fields as bit sets (bit `n` = value `n`; [`STAR`] when the field was `*`/`?`).
    Spec(Spec),
    /// `@every`: a fixed delay in whole seconds (at least one).
    Every(i64),
}

/// Set in a field's bits when the field was `*` or `?` (possibly with step 1): the day-of-month
/// / day-of-week rule looks at it.
pub(crate) const STAR: u64 = 1 << 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spec {
    pub minute: u64,
    pub hour: u64,
    pub dom: u64,
    pub month: u64,
    pub dow: u64,
}

impl Schedule {
    /// Parses `spec` as upstream's `cron.ParseStandard`; the error texts are robfig's.
    /// A `TZ=` prefix is looked up in the time zone database.
    pub fn parse(spec: &str) -> Result<Schedule, ScheduleError> {
        parse::parse(spec)
    }

    /// The zone to use when the schedule has no `TZ=` prefix of its own.
    pub fn with_default_zone(mut self, zone: TimeZone) -> Schedule {
        if self.zone.is_none() {
            self.zone = Some(zone);
        }
        self
    }

    /// Whether the schedule carried its own `TZ=`/`CRON_TZ=` prefix.
    pub fn has_zone_prefix(spec: &str) -> bool {
        spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=")
    }

    /// The first run strictly after `after` (whole seconds), or `None` when there is none within
    /// five years (`59 23 31 2 *`), as robfig's `Next` returns the zero time.
    pub fn next(&self, after: Timestamp) -> Option<Timestamp> {
        let secs = after.as_second();
        let at = match &self.kind {
            Kind::Every(delay) => secs.checked_add(*delay),
            Kind::Spec(spec) => next::next(spec, self.zone(), secs),
        }?;
        Timestamp::from_second(at).ok()
    }

    fn zone(&self) -> &TimeZone {
        static UTC: TimeZone = TimeZone::UTC;
        self.zone.as_ref().unwrap_or(&UTC)
    }
}

/// Looks up a time zone database name as Go's `time.LoadLocation` does for upstream; the error
/// text is Go's (`unknown time zone Mars/Base`).
pub fn load_zone(name: &str) -> Result<TimeZone, UnknownZone> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| UnknownZone(name.to_string()))
}

/// A time zone name the database does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {0}")]
pub struct UnknownZone(pub String);
