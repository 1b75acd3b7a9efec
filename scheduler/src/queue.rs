//! The scheduling queue, pure: pods wait in an active queue (higher priority first, then first
//! come), one at a time is in flight, a pod that did not fit waits among the unschedulable
//! until the cluster changes (any node added or changed, any pod deleted) or 60 s pass, and a
//! pod that failed waits out a per-pod backoff first.
//!
//! Worked example of the backoff: after the 1st failed attempt a pod waits 1 s, then 2 s, 4 s,
//! 8 s, and 10 s from the 5th attempt on.
//!
//! Planner: pure, no I/O.

use berth_shared::reconcile::doubling_backoff;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The backoff after the first failed attempt.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Backoffs stop growing here.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// An unschedulable pod is retried after this long even if nothing changed.
pub const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(60);

/// The backoff after `attempts` attempts: 1 s doubling, capped at 10 s.
pub fn backoff(attempts: u32) -> Duration {
    doubling_backoff(INITIAL_BACKOFF, MAX_BACKOFF, attempts)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active(u64),
    InFlight,
    Backoff(Instant, u64),
    Unschedulable(Instant, u64),
}

#[derive(Debug, Clone)]
struct Entry {
    priority: i32,
    attempts: u32,
    last_attempt: Option<Instant>,
    /// The cluster changed (or the pod did) while it was being scheduled: a failure goes to
    /// backoff instead of waiting for the next change.
    changed_in_flight: bool,
    place: Place,
}

impl Entry {
    fn backoff_until(&self) -> Option<Instant> {
        Some(self.last_attempt? + backoff(self.attempts))
    }
}

/// The queue of pods waiting to be scheduled.
pub struct SchedulingQueue<K> {
    entries: HashMap<K, Entry>,
    active: BTreeSet<(Reverse<i32>, u64, K)>,
    backoff: BTreeSet<(Instant, u64, K)>,
    unschedulable: BTreeSet<(Instant, u64, K)>,
    seq: u64,
}

impl<K: Clone + Eq + Hash + Ord> Default for SchedulingQueue<K> {
    fn default() -> Self {
        SchedulingQueue {
            entries: HashMap::new(),
            active: BTreeSet::new(),
            backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            seq: 0,
        }
    }
}

impl<K: Clone + Eq + Hash + Ord> SchedulingQueue<K> {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Takes `key` out of whichever ordered set holds it.
    fn detach(&mut self, key: &K) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let priority = e.priority;
        match e.place {
            Place::Active(s) => {
                self.active.remove(&(Reverse(priority), s, key.clone()));
            }
            Place::Backoff(t, s) => {
                self.backoff.remove(&(t, s, key.clone()));
            }
            Place::Unschedulable(t, s) => {
                self.unschedulable.remove(&(t, s, key.clone()));
            }
            Place::InFlight => {}
        }
    }

    fn put(&mut self, key: &K, place: Place) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        e.place = place;
        let priority = e.priority;
        match place {
            Place::Active(s) => {
                self.active.insert((Reverse(priority), s, key.clone()));
            }
            Place::Backoff(t, s) => {
                self.backoff.insert((t, s, key.clone()));
            }
            Place::Unschedulable(t, s) => {
                self.unschedulable.insert((t, s, key.clone()));
            }
            Place::InFlight => {}
        }
    }

    /// Active now, or in backoff while the pod's backoff runs.
    fn activate_or_backoff(&mut self, key: &K, now: Instant) {
        self.detach(key);
        let until = self.entries.get(key).and_then(Entry::backoff_until);
        let seq = self.next_seq();
        match until {
            Some(t) if t > now => self.put(key, Place::Backoff(t, seq)),
            _ => self.put(key, Place::Active(seq)),
        }
    }

    /// A pod to schedule appeared or changed. New pods join the active queue; a changed
    /// unschedulable pod is retried (after its backoff); a changed pod in flight will be
    /// retried if this attempt fails.
    pub fn add(&mut self, key: K, priority: i32, now: Instant) {
        let Some(e) = self.entries.get_mut(&key) else {
            self.entries.insert(
                key.clone(),
                Entry {
                    priority,
                    attempts: 0,
                    last_attempt: None,
                    changed_in_flight: false,
                    place: Place::InFlight,
                },
            );
            let seq = self.next_seq();
            self.put(&key, Place::Active(seq));
            return;
        };
        match e.place {
            Place::InFlight => {
                e.priority = priority;
                e.changed_in_flight = true;
            }
            Place::Unschedulable(..) => {
                self.detach(&key);
                if let Some(e) = self.entries.get_mut(&key) {
                    e.priority = priority;
                }
                self.activate_or_backoff(&key, now);
            }
            place @ (Place::Active(_) | Place::Backoff(..)) => {
                self.detach(&key);
                if let Some(e) = self.entries.get_mut(&key) {
                    e.priority = priority;
                }
                self.put(&key, place);
            }
        }
    }

    /// The next pod to schedule, now in flight.
    pub fn pop(&mut self, now: Instant) -> Option<K> {
        let (_, _, key) = self.active.pop_first()?;
        let e = self.entries.get_mut(&key)?;
        e.place = Place::InFlight;
        e.attempts += 1;
        e.last_attempt = Some(now);
        e.changed_in_flight = false;
        Some(key)
    }

    /// The pod was placed (or is no longer to be scheduled): forget it.
    pub fn remove(&mut self, key: &K) {
        self.detach(key);
        self.entries.remove(key);
    }

    /// The pod in flight fit no node: it waits for a change in the cluster, or goes to backoff
    /// if one happened while it was in flight.
    pub fn unschedulable(&mut self, key: &K, now: Instant) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        if e.place != Place::InFlight {
            return;
        }
        if e.changed_in_flight {
            self.activate_or_backoff(key, now);
        } else {
            let seq = self.next_seq();
            self.put(key, Place::Unschedulable(now, seq));
        }
    }

    /// Binding the pod in flight failed: retry after its backoff.
    pub fn failed(&mut self, key: &K, now: Instant) {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.place == Place::InFlight)
        {
            self.activate_or_backoff(key, now);
        }
    }

    /// The cluster changed in a way that may make room: every unschedulable pod is retried
    /// (after its backoff), and pods in flight will be if they fail.
    pub fn move_all(&mut self, now: Instant) {
        let keys: Vec<K> = self
            .unschedulable
            .iter()
            .map(|(_, _, k)| k.clone())
            .collect();
        for k in keys {
            self.activate_or_backoff(&k, now);
        }
        for e in self.entries.values_mut() {
            if e.place == Place::InFlight {
                e.changed_in_flight = true;
            }
        }
    }

    /// Moves pods whose backoff ended to the active queue, and retries pods unschedulable for
    /// 60 s.
    pub fn flush(&mut self, now: Instant) {
        while let Some((t, _, _)) = self.backoff.first() {
            if *t > now {
                break;
            }
            if let Some((_, _, k)) = self.backoff.pop_first() {
                let seq = self.next_seq();
                self.put(&k, Place::Active(seq));
            }
        }
        let stale: Vec<K> = self
            .unschedulable
            .iter()
            .take_while(|(since, _, _)| *since + UNSCHEDULABLE_RETRY <= now)
            .map(|(_, _, k)| k.clone())
            .collect();
        for k in stale {
            self.activate_or_backoff(&k, now);
        }
    }

    /// When [`flush`](Self::flush) next has something to do.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let b = self.backoff.first().map(|(t, _, _)| *t);
        let u = self
            .unschedulable
            .first()
            .map(|(t, _, _)| *t + UNSCHEDULABLE_RETRY);
        b.into_iter().chain(u).min()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The keys of every pod the queue holds.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    fn drain(q: &mut SchedulingQueue<&'static str>, now: Instant) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop(now)).collect()
    }

    /// A queue holding these pods (key, priority), added in this order at `t0`.
    fn queue_of(t0: Instant, pods: &[(&'static str, i32)]) -> SchedulingQueue<&'static str> {
        let mut q = SchedulingQueue::default();
        for &(k, p) in pods {
            q.add(k, p, t0);
        }
        q
    }

    /// A queue whose one pod, `p`, was added and popped at `t0` (returned): an attempt is in
    /// flight.
    fn attempting_p() -> (Instant, SchedulingQueue<&'static str>) {
        let t0 = Instant::now();
        let mut q = queue_of(t0, &[("p", 0)]);
        assert_eq!(q.pop(t0), Some("p"));
        (t0, q)
    }

    /// The same, the attempt found `p` unschedulable at `t0`.
    fn unschedulable_p() -> (Instant, SchedulingQueue<&'static str>) {
        let (t0, mut q) = attempting_p();
        q.unschedulable(&"p", t0);
        (t0, q)
    }

    /// Moves the pods due by `now` to the active queue, then pops one.
    fn flush_and_pop(q: &mut SchedulingQueue<&'static str>, now: Instant) -> Option<&'static str> {
        q.flush(now);
        q.pop(now)
    }

    #[test]
    fn backoff_doubles_from_one_second_up_to_ten() {
        let got: Vec<u64> = (1..=6).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn pods_leave_by_priority_then_arrival() {
        let t0 = Instant::now();
        let mut q = queue_of(
            t0,
            &[("low-1", 0), ("high", 100), ("low-2", 0), ("low-1", 0)],
        );
        assert_eq!(drain(&mut q, t0), ["high", "low-1", "low-2"]);
    }

    #[test]
    fn the_active_queue_orders_by_priority_then_time_whatever_the_way_in() {
        type Case = (&'static str, Vec<(&'static str, i32)>, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (
                "higher priority first, equal priorities in arrival order",
                vec![("a", 0), ("b", 10), ("c", 0), ("d", 10)],
                vec!["b", "d", "a", "c"],
            ),
            (
                "negative priorities go after the default",
                vec![("neg", -5), ("zero", 0)],
                vec!["zero", "neg"],
            ),
            (
                "a system-critical pod overtakes everything queued before it",
                vec![("a", 1000), ("b", 0), ("node-critical", 2_000_001_000)],
                vec!["node-critical", "a", "b"],
            ),
        ];
        for (name, adds, want) in cases {
            let t0 = Instant::now();
            let mut q = queue_of(t0, &adds);
            assert_eq!(drain(&mut q, t0), want, "{name}");
        }
        // A pod back from its backoff still goes before waiting pods of lower priority.
        let t0 = Instant::now();
        let mut q = queue_of(t0, &[("high", 100)]);
        assert_eq!(q.pop(t0), Some("high"));
        q.failed(&"high", t0);
        q.add("low", 0, t0);
        q.flush(at(t0, 1));
        assert_eq!(drain(&mut q, at(t0, 1)), ["high", "low"]);
    }

    #[test]
    fn an_unschedulable_pod_waits_for_a_cluster_change_then_its_backoff() {
        let (t0, mut q) = unschedulable_p();
        assert_eq!(
            flush_and_pop(&mut q, at(t0, 30)),
            None,
            "nothing changed yet"
        );
        // A change half a second after the attempt: the 1 s backoff is still running.
        let half = t0 + Duration::from_millis(500);
        q.move_all(half);
        assert_eq!(q.pop(half), None);
        assert_eq!(q.next_wakeup(), Some(at(t0, 1)));
        assert_eq!(flush_and_pop(&mut q, at(t0, 1)), Some("p"));
    }

    #[test]
    fn an_unschedulable_pod_is_retried_after_sixty_seconds_without_change() {
        let (t0, mut q) = unschedulable_p();
        assert_eq!(q.next_wakeup(), Some(at(t0, 60)));
        assert_eq!(flush_and_pop(&mut q, at(t0, 59)), None);
        assert_eq!(flush_and_pop(&mut q, at(t0, 60)), Some("p"));
    }

    #[test]
    fn a_change_while_in_flight_sends_a_failed_pod_to_backoff_not_to_wait() {
        let (t0, mut q) = attempting_p();
        q.move_all(t0);
        q.unschedulable(&"p", t0);
        assert_eq!(flush_and_pop(&mut q, at(t0, 1)), Some("p"));
    }

    #[test]
    fn an_update_of_an_unschedulable_pod_retries_it() {
        let (t0, mut q) = unschedulable_p();
        q.add("p", 0, at(t0, 5));
        assert_eq!(q.pop(at(t0, 5)), Some("p"));
    }

    #[test]
    fn a_failed_binding_is_retried_after_a_growing_backoff() {
        let (t0, mut q) = attempting_p();
        q.failed(&"p", t0);
        assert_eq!(flush_and_pop(&mut q, at(t0, 1)), Some("p"));
        q.failed(&"p", at(t0, 1));
        assert_eq!(
            flush_and_pop(&mut q, at(t0, 2)),
            None,
            "second failure waits 2 s"
        );
        assert_eq!(flush_and_pop(&mut q, at(t0, 3)), Some("p"));
    }

    #[test]
    fn a_removed_pod_is_gone_wherever_it_waited() {
        let t0 = Instant::now();
        let mut q = queue_of(t0, &[("a", 0), ("b", 0)]);
        q.pop(t0);
        q.unschedulable(&"a", t0);
        q.remove(&"a");
        q.remove(&"b");
        q.move_all(t0);
        q.flush(at(t0, 120));
        assert!(q.is_empty());
        assert_eq!(q.next_wakeup(), None);
    }
}
