//! Planner: pure, no I/O.
//!
//! What becomes of an event before it is written, as client-go's `EventCorrelator` decides it
//! (`tools/record/events_cache.go`), so a controller that acts on thousands of objects leaves
//! the cluster the events upstream's would:
//!
//! - **Aggregation.** Events that differ only in their message (same source, object, type and
//!   reason; e.g. a ReplicaSet's `SuccessfulCreate` "Created pod: web-…" for each pod) are
//!   written one by one until 10 distinct messages were seen within 10 minutes; from then on
//!   they go into one event whose message is `(combined from similar events): ` and the latest
//!   message, and whose count grows.
//! - **Spam filter.** A source may write 25 events about one object in a burst, then one more
//!   every 5 minutes (a token bucket per source and object); the rest are dropped.
//!
//! Both are kept per recorder (per controller) in memory, as upstream keeps them per
//! broadcaster: a restart forgets them, and at most [`MAX_ENTRIES`] keys of each are kept.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;

/// Distinct messages of one aggregate key before they are combined (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long a similar event counts towards aggregation (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events a source may write about one object at once (`defaultSpamBurst`).
pub const SPAM_BURST: f64 = 25.0;
/// One more event per object every this long once the burst is spent (`defaultSpamQPS`, 1/300).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Keys kept by each of the two caches (`maxLruCacheEntries`).
pub const MAX_ENTRIES: usize = 4096;

/// The message prefix of an aggregated event (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What identifies an event for correlation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventKeys {
    /// Source and involved object: the spam filter's key (`getSpamKey`).
    pub object: String,
    /// `object` with the event's type and reason: the aggregation key
    /// (`EventAggregatorByReasonFunc`).
    pub aggregate: String,
}

impl EventKeys {
    /// The keys of an event from `component` about the object `(api_version, kind, namespace,
    /// name, uid)`.
    pub fn new(component: &str, object: [&str; 5], event_type: &str, reason: &str) -> EventKeys {
        let object = std::iter::once(component)
            .chain(object)
            .collect::<Vec<_>>()
            .join("\u{1f}");
        let aggregate = format!("{object}\u{1f}{event_type}\u{1f}{reason}");
        EventKeys { object, aggregate }
    }
}

/// The decision for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Correlated {
    /// Write (or count) the event as it is.
    Record,
    /// Write (or count) the one combined event of this aggregate key, with this message.
    Combined { message: String },
    /// Drop it: the source has spent its budget of events about this object.
    Skip,
}

#[derive(Debug)]
struct Aggregate {
    messages: HashSet<String>,
    last: Timestamp,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Timestamp,
}

impl Bucket {
    /// The tokens the bucket holds at `now`.
    fn tokens_at(&self, now: Timestamp) -> f64 {
        let elapsed = since(self.last, now);
        (self.tokens + elapsed.as_secs_f64() / SPAM_REFILL.as_secs_f64()).min(SPAM_BURST)
    }
}

/// The state of one recorder's correlation.
#[derive(Debug, Default)]
pub struct Correlator {
    aggregates: HashMap<String, Aggregate>,
    buckets: HashMap<String, Bucket>,
}

impl Correlator {
    /// Decides what becomes of an event with `keys` and `message` seen at `now`, and updates the
    /// state for it. As upstream, the event is aggregated first and the spam filter then judges
    /// the event that would be written.
    pub fn correlate(&mut self, keys: &EventKeys, message: &str, now: Timestamp) -> Correlated {
        let combined = self.aggregate(&keys.aggregate, message, now);
        if !self.take_token(&keys.object, now) {
            return Correlated::Skip;
        }
        if combined {
            Correlated::Combined {
                message: format!("{COMBINED_PREFIX}{message}"),
            }
        } else {
            Correlated::Record
        }
    }

    /// Notes `message` under `key`; whether the event is to be combined.
    fn aggregate(&mut self, key: &str, message: &str, now: Timestamp) -> bool {
        if !self.aggregates.contains_key(key) && self.aggregates.len() >= MAX_ENTRIES {
            prune(&mut self.aggregates, |a: &Aggregate| {
                (since(a.last, now) > AGGREGATE_INTERVAL, a.last)
            });
        }
        let record = self
            .aggregates
            .entry(key.to_string())
            .or_insert_with(|| Aggregate {
                messages: HashSet::new(),
                last: now,
            });
        if since(record.last, now) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.last = now;
        if record.messages.len() < AGGREGATE_MAX_EVENTS {
            record.messages.insert(message.to_string());
        }
        record.messages.len() >= AGGREGATE_MAX_EVENTS
    }

    /// Takes one token of the object's bucket; whether there was one.
    fn take_token(&mut self, key: &str, now: Timestamp) -> bool {
        if !self.buckets.contains_key(key) && self.buckets.len() >= MAX_ENTRIES {
            // A full bucket is what a forgotten object gets again.
            prune(&mut self.buckets, |b: &Bucket| {
                (b.tokens_at(now) >= SPAM_BURST, b.last)
            });
        }
        let bucket = self.buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: SPAM_BURST,
            last: now,
        });
        bucket.tokens = bucket.tokens_at(now);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The time from `then` to `now`; zero if the clock went back.
fn since(then: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// Makes room in a full cache: drops the entries `stale_and_last` calls stale (forgetting them
/// changes nothing) and, if that frees less than a quarter, the least recently used half by
/// the last use it reads (an LRU's eviction, amortised over many inserts).
fn prune<V>(map: &mut HashMap<String, V>, stale_and_last: impl Fn(&V) -> (bool, Timestamp)) {
    map.retain(|_, v| !stale_and_last(v).0);
    if map.len() > MAX_ENTRIES * 3 / 4 {
        let mut lasts: Vec<Timestamp> = map.values().map(|v| stale_and_last(v).1).collect();
        lasts.sort_unstable();
        let cut = lasts[lasts.len() / 2];
        map.retain(|_, v| stale_and_last(v).1 > cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("a valid time")
    }

    fn after(t: Timestamp, secs: u64) -> Timestamp {
        t.checked_add(Duration::from_secs(secs)).expect("in range")
    }

    fn keys(object: &str, reason: &str) -> EventKeys {
        EventKeys::new(
            "replicaset-controller",
            ["apps/v1", "ReplicaSet", "default", object, "uid-1"],
            "Normal",
            reason,
        )
    }

    /// Decisions for `n` events with distinct messages about one object, one second apart.
    fn run(c: &mut Correlator, k: &EventKeys, n: usize, start: Timestamp) -> Vec<Correlated> {
        (0..n)
            .map(|i| {
                let at = after(start, i as u64);
                c.correlate(k, &format!("Created pod: web-{i}"), at)
            })
            .collect()
    }

    #[test]
    fn nine_distinct_messages_are_recorded_and_the_tenth_is_combined() {
        let mut c = Correlator::default();
        let got = run(&mut c, &keys("web", "SuccessfulCreate"), 12, start());
        assert!(got[..9].iter().all(|d| *d == Correlated::Record), "{got:?}");
        assert_eq!(
            got[9],
            Correlated::Combined {
                message: "(combined from similar events): Created pod: web-9".into()
            }
        );
        assert!(matches!(got[11], Correlated::Combined { .. }));
    }

    #[test]
    fn one_message_repeated_is_never_combined() {
        let mut c = Correlator::default();
        let k = keys("web", "FailedCreate");
        let now = start();
        for i in 0..20 {
            let d = c.correlate(&k, "quota exceeded", after(now, i));
            assert_eq!(d, Correlated::Record, "event {i}");
        }
    }

    #[test]
    fn other_reasons_and_objects_aggregate_apart() {
        let mut c = Correlator::default();
        let now = start();
        run(&mut c, &keys("web", "SuccessfulCreate"), 9, now);
        assert_eq!(
            c.correlate(&keys("web", "SuccessfulDelete"), "Deleted pod: web-0", now),
            Correlated::Record
        );
        assert_eq!(
            c.correlate(&keys("api", "SuccessfulCreate"), "Created pod: api-0", now),
            Correlated::Record
        );
    }

    #[test]
    fn aggregation_starts_again_after_ten_quiet_minutes() {
        let mut c = Correlator::default();
        let k = keys("web", "SuccessfulCreate");
        let now = start();
        run(&mut c, &k, 9, now);
        let later = after(now, 8 + AGGREGATE_INTERVAL.as_secs() + 1);
        assert_eq!(
            c.correlate(&k, "Created pod: web-x", later),
            Correlated::Record
        );
    }

    #[test]
    fn twenty_five_events_about_an_object_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let k = keys("web", "SuccessfulCreate");
        let now = start();
        let got: Vec<Correlated> = (0..30)
            .map(|i| c.correlate(&k, &format!("m{i}"), now))
            .collect();
        assert!(got[..25].iter().all(|d| *d != Correlated::Skip), "{got:?}");
        assert!(got[25..].iter().all(|d| *d == Correlated::Skip), "{got:?}");
        let refilled = after(now, SPAM_REFILL.as_secs());
        assert_ne!(c.correlate(&k, "m30", refilled), Correlated::Skip);
        assert_eq!(c.correlate(&k, "m31", refilled), Correlated::Skip);
        // Another reason about the same object shares the object's budget.
        assert_eq!(
            c.correlate(&keys("web", "SuccessfulDelete"), "d", refilled),
            Correlated::Skip
        );
        // Another object has its own.
        assert_eq!(
            c.correlate(&keys("api", "SuccessfulCreate"), "a", refilled),
            Correlated::Record
        );
    }

    #[test]
    fn the_caches_stay_bounded_and_keep_the_recent_keys() {
        let mut c = Correlator::default();
        let now = start();
        for i in 0..(3 * MAX_ENTRIES) {
            let at = after(now, i as u64);
            c.correlate(&keys(&format!("rs-{i}"), "SuccessfulCreate"), "m", at);
        }
        assert!(c.aggregates.len() <= MAX_ENTRIES, "{}", c.aggregates.len());
        assert!(c.buckets.len() <= MAX_ENTRIES, "{}", c.buckets.len());
        let newest = keys(&format!("rs-{}", 3 * MAX_ENTRIES - 1), "SuccessfulCreate");
        assert!(c.aggregates.contains_key(&newest.aggregate));
        assert!(c.buckets.contains_key(&newest.object));
    }
}
