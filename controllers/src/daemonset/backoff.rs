//! The back-off between deletions of failed daemon pods on one node (upstream's
//! `failedPodsBackoff`, client-go `flowcontrol.Backoff` of 1 s doubling to 15 min): a kubelet
//! that keeps rejecting the pod must not make the controller delete and recreate it in a hot
//! loop. Soft state, like the work queue's back-off: a restarted controller starts afresh.
//!
//! Worked example: a pod fails at t=0 → deleted at once, back-off 1 s. Its replacement fails
//! at t=0.4 s → in back-off until t=1 s, so the pass asks to run again in 0.6 s; at t=1 s it is
//! deleted and the back-off doubles to 2 s. An entry idle for twice the maximum (30 min) starts
//! again at 1 s.
//!
//! Planner: pure, no I/O.

use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

pub const INITIAL: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

/// Back-off entries by key (`<ds uid>/<observed generation>/<node>`, as upstream).
#[derive(Debug, Default, Clone)]
pub struct FailedBackoff {
    entries: HashMap<String, Entry>,
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or_default()
}

fn expired(now: Timestamp, e: &Entry) -> bool {
    since(now, e.last_update) > 2 * MAX
}

/// Upstream `failedPodsBackoffKey`.
pub fn key(ds_uid: &str, observed_generation: i64, node: &str) -> String {
    format!("{ds_uid}/{observed_generation}/{node}")
}

impl FailedBackoff {
    /// How long until a failed pod under `key` may be deleted; `None`: now (upstream
    /// `IsInBackOffSinceUpdate`).
    pub fn remaining(&self, key: &str, now: Timestamp) -> Option<Duration> {
        let e = self.entries.get(key)?;
        let elapsed = since(now, e.last_update);
        (elapsed < e.backoff).then(|| e.backoff - elapsed)
    }

    /// Records a deletion under `key` at `now` (upstream `Next`): the first, or the first after
    /// a long quiet, waits [`INITIAL`]; each next one twice the last, up to [`MAX`].
    pub fn step(&mut self, key: &str, now: Timestamp) {
        let backoff = match self.entries.get(key) {
            Some(e) if !expired(now, e) => (e.backoff * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// Forgets entries idle for longer than twice the maximum (upstream `GC`).
    pub fn forget_expired(&mut self, now: Timestamp) {
        self.entries.retain(|_, e| !expired(now, e));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `t + d`, for tests and callers that think in std durations.
pub fn after(t: Timestamp, d: Duration) -> Timestamp {
    t + SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        "2024-06-01T12:00:00Z".parse().unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn deletions_back_off_from_one_second_doubling_to_fifteen_minutes() {
        let mut b = FailedBackoff::default();
        let k = key("u", 1, "n1");
        assert_eq!(
            b.remaining(&k, t0()),
            None,
            "the first failure goes at once"
        );
        b.step(&k, t0());
        assert_eq!(b.remaining(&k, after(t0(), ms(400))), Some(ms(600)));
        assert_eq!(b.remaining(&k, after(t0(), ms(1000))), None);
        b.step(&k, after(t0(), ms(1000)));
        assert_eq!(b.remaining(&k, after(t0(), ms(1000))), Some(ms(2000)));
        for _ in 0..20 {
            b.step(&k, after(t0(), ms(1000)));
        }
        assert_eq!(b.remaining(&k, after(t0(), ms(1000))), Some(MAX));
        assert_eq!(b.remaining(&key("u", 1, "n2"), t0()), None, "per node");
    }

    #[test]
    fn an_entry_idle_for_twice_the_maximum_starts_again_and_is_forgotten() {
        let mut b = FailedBackoff::default();
        let k = key("u", 1, "n1");
        b.step(&k, t0());
        b.step(&k, t0());
        let later = after(t0(), 2 * MAX + Duration::from_secs(1));
        b.step(&k, later);
        assert_eq!(b.remaining(&k, later), Some(INITIAL));
        b.forget_expired(after(later, 2 * MAX + Duration::from_secs(1)));
        assert!(b.is_empty());
    }
}
