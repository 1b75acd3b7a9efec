//! The reconcile runtime every controller, the scheduler and the agent's pod workers share: a
//! deduplicating queue of keys, never two passes of one key at once (a key added while it is
//! being reconciled runs again afterwards), an error policy per failure (conflict: again at
//! once; transient: per-key capped exponential backoff, reset on success; permanent: not again
//! until the key is added anew), requeue-after through one delay queue (no task per delayed
//! key), bounded concurrency, graceful shutdown, and upstream's workqueue metrics. Controllers
//! only decide; this file runs them.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a successful pass asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Converged: run again only when the key is added.
    Done,
    /// Not converged yet (waiting on something outside): run again after the delay.
    RequeueAfter(Duration),
}

/// How a failed pass is retried: the error policy of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A write lost a compare-and-swap race (409 Conflict): the state moved on, so the next
    /// pass can succeed at once. After [`CONFLICT_STREAK`] conflicts in a row it backs off.
    Now,
    /// Something outside may recover (a disk, the network, a timeout): back off exponentially.
    Backoff,
    /// Retrying the same input fails the same way (invalid object): log it and wait until the
    /// key is added again (its object or a related one changed).
    Never,
}

/// Errors that know how they should be retried.
pub trait ErrorPolicy {
    fn retry(&self) -> Retry;
}

/// Conflicts retried at once in a row before a key backs off like a transient failure (two
/// writers fighting over one object must not spin).
pub const CONFLICT_STREAK: u32 = 5;

/// The longest pause a paced queue puts between two passes of a key.
pub const PACE_CAP: Duration = Duration::from_secs(2);

/// First retry delay after an error; doubles per consecutive failure of a key.
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Retry delays stop growing here.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// The retry delay after `failures` consecutive errors: 5 ms, 10 ms, 20 ms, … capped at 60 s.
/// Worked example: the 4th consecutive failure waits 5 ms × 2³ = 40 ms.
pub fn backoff(failures: u32) -> Duration {
    doubling_backoff(BACKOFF_BASE, BACKOFF_CAP, failures)
}

/// `base` doubled after each of `attempts` past the first, never more than `cap` (nor
/// overflowing): base, 2·base, 4·base, … for 1, 2, 3, … attempts.
pub fn doubling_backoff(base: Duration, cap: Duration, attempts: u32) -> Duration {
    base.checked_mul(doubling_factor(attempts))
        .map_or(cap, |d| d.min(cap))
}

/// The factor [`doubling_backoff`] multiplies its base by after `attempts`: 1, 2, 4, … for
/// 1, 2, 3, … (saturating at 2^31), for back-offs counted in ticks rather than time.
pub fn doubling_factor(attempts: u32) -> u32 {
    1u32 << attempts.saturating_sub(1).min(31)
}

/// Upper bounds (seconds) of the work-duration histogram, as upstream's workqueue uses.
pub const WORK_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0];

/// Counters of one queue, for `/metrics` (`workqueue_*`).
#[derive(Debug, Default)]
struct Counters {
    adds: AtomicU64,
    retries: AtomicU64,
    work_count: AtomicU64,
    /// Sum of pass durations in nanoseconds.
    work_nanos: AtomicU64,
    work_buckets: [AtomicU64; WORK_BUCKETS.len()],
}

/// A snapshot of a queue's metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    pub depth: usize,
    pub adds: u64,
    pub retries: u64,
    pub work_count: u64,
    pub work_seconds: f64,
    /// Cumulative counts per bound of [`WORK_BUCKETS`].
    pub work_buckets: Vec<u64>,
}

struct State<K> {
    pending: VecDeque<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    /// Keys waiting for a time: (when, sequence) → key, and key → its entry (earliest wins).
    delayed: BTreeMap<(Instant, u64), K>,
    delayed_at: HashMap<K, (Instant, u64)>,
    seq: u64,
    /// Paced queues only: a key's earliest next pass.
    not_before: HashMap<K, Instant>,
    /// Paced queues only: what a pass in flight said it cost ([`Queue::pace_by`]).
    costs: HashMap<K, Duration>,
}

impl<K: Clone + Eq + Hash> State<K> {
    /// Moves the keys whose time has come to the pending list; returns the next due time.
    fn promote(&mut self, now: Instant) -> (bool, Option<Instant>) {
        let mut moved = false;
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                return (moved, Some(entry.key().0));
            }
            let key = entry.remove();
            self.delayed_at.remove(&key);
            moved |= self.enqueue(key);
        }
        (moved, None)
    }

    /// Puts a key in the delay list for `when` (an earlier entry wins).
    fn delay(&mut self, key: K, when: Instant) {
        if let Some(&(at, seq)) = self.delayed_at.get(&key) {
            if at <= when {
                return;
            }
            self.delayed.remove(&(at, seq));
        }
        self.seq += 1;
        let entry = (when, self.seq);
        self.delayed.insert(entry, key.clone());
        self.delayed_at.insert(key, entry);
    }

    /// Adds a key to the pending list (once); true when it was added. A paced key whose
    /// earliest next pass is still ahead waits in the delay list until then.
    fn enqueue(&mut self, key: K) -> bool {
        if self.active.contains(&key) {
            self.dirty.insert(key);
            return false;
        }
        if let Some(&at) = self.not_before.get(&key) {
            if at > Instant::now() {
                self.delay(key, at);
                return false;
            }
            self.not_before.remove(&key);
        }
        if self.queued.insert(key.clone()) {
            self.pending.push_back(key);
            return true;
        }
        false
    }
}

/// A handle to add keys to a controller's queue. Cheap to clone.
pub struct Queue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    counters: Arc<Counters>,
    /// See [`Queue::set_pace`]; 0 is unpaced.
    pace: Arc<std::sync::atomic::AtomicU32>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Queue {
            state: self.state.clone(),
            notify: self.notify.clone(),
            counters: self.counters.clone(),
            pace: self.pace.clone(),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for Queue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Queue<K> {
    pub fn new() -> Queue<K> {
        Queue {
            state: Arc::new(Mutex::new(State {
                pending: VecDeque::new(),
                queued: HashSet::new(),
                active: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                delayed: BTreeMap::new(),
                delayed_at: HashMap::new(),
                seq: 0,
                not_before: HashMap::new(),
                costs: HashMap::new(),
            })),
            notify: Arc::new(Notify::new()),
            counters: Arc::new(Counters::default()),
            pace: Arc::default(),
        }
    }

    /// A queue whose keys run again no sooner than `factor` times their last pass's duration
    /// after it ends (see [`Queue::set_pace`]).
    pub fn paced(factor: u32) -> Queue<K> {
        let q = Queue::new();
        q.set_pace(factor);
        q
    }

    /// Paces the queue: a key runs again no sooner than `factor` times its last pass's
    /// duration after that pass ended (capped at [`PACE_CAP`]; 0 turns pacing off). A key
    /// whose object changes all the time (a ReplicaSet of thousands of pods, each reporting
    /// its status) is then busy at most 1/(1+factor) of the time, and the changes in between
    /// are taken together by its next pass; passes of microseconds are not slowed noticeably.
    /// Worked example: factor 8, a 25 ms pass → the next starts at least 200 ms after it ended.
    pub fn set_pace(&self, factor: u32) {
        self.pace.store(factor, Ordering::Relaxed);
    }

    /// Paces `key`'s next pass by `cost` instead of the wall time of the pass now running
    /// (called by that pass; nothing on an unpaced queue). A pass that mostly waits, on the
    /// store's fsync of its writes or on the informers catching up with them, reports the CPU
    /// it used: the next pass re-reads the same objects for about that much, and is not held
    /// back by the waits. Worked example: factor 8, a pass deleting 25 pods in 300 ms of
    /// which 20 ms on the CPU → the next may start 160 ms after it, not 2 s (the cap).
    pub fn pace_by(&self, key: &K, cost: Duration) {
        if self.pace.load(Ordering::Relaxed) > 0 {
            self.lock().costs.insert(key.clone(), cost);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a key (once: a key already waiting is not added twice).
    pub fn add(&self, key: K) {
        self.counters.adds.fetch_add(1, Ordering::Relaxed);
        self.lock().enqueue(key);
        // Added, or put in the delay list (paced): either way the runner looks again.
        self.notify.notify_one();
    }

    /// Adds a key after a delay (the earliest of several delays wins). The key waits in the
    /// queue's delay list; the runner of the queue ([`run`]) promotes it when it is due.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let when = Instant::now() + delay;
        self.lock().delay(key, when);
        // The runner recomputes its next wake-up.
        self.notify.notify_one();
    }

    /// Number of keys waiting to run now.
    pub fn len(&self) -> usize {
        self.lock().pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys waiting for a time.
    pub fn delayed_len(&self) -> usize {
        self.lock().delayed.len()
    }

    /// The queue's metrics now.
    pub fn stats(&self) -> QueueStats {
        let c = &self.counters;
        QueueStats {
            depth: self.len(),
            adds: c.adds.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            work_count: c.work_count.load(Ordering::Relaxed),
            work_seconds: c.work_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            work_buckets: c
                .work_buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }

    /// The next key to run, promoting due delayed keys; otherwise when to look again.
    fn take(&self) -> Result<K, Option<Instant>> {
        let mut s = self.lock();
        let (_, next) = s.promote(Instant::now());
        let Some(key) = s.pending.pop_front() else {
            return Err(next);
        };
        s.queued.remove(&key);
        s.active.insert(key.clone());
        Ok(key)
    }

    fn observe_work(&self, took: Duration) {
        let c = &self.counters;
        c.work_count.fetch_add(1, Ordering::Relaxed);
        c.work_nanos.fetch_add(
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let secs = took.as_secs_f64();
        for (i, bound) in WORK_BUCKETS.iter().enumerate() {
            if secs <= *bound {
                c.work_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn finish(&self, key: &K, result: Result<Outcome, Retry>, took: Duration) {
        let retry = {
            let mut s = self.lock();
            s.active.remove(key);
            let factor = self.pace.load(Ordering::Relaxed);
            let cost = s.costs.remove(key).unwrap_or(took);
            if factor > 0 {
                let pause = cost.saturating_mul(factor).min(PACE_CAP);
                if !pause.is_zero() {
                    s.not_before.insert(key.clone(), Instant::now() + pause);
                }
            }
            let delay = match result {
                Ok(outcome) => {
                    s.failures.remove(key);
                    match outcome {
                        Outcome::Done => None,
                        Outcome::RequeueAfter(d) => Some(d),
                    }
                }
                Err(Retry::Never) => {
                    s.failures.remove(key);
                    None
                }
                Err(policy) => {
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    let n = s.failures.entry(key.clone()).or_insert(0);
                    *n += 1;
                    match policy {
                        Retry::Now if *n <= CONFLICT_STREAK => Some(Duration::ZERO),
                        _ => Some(backoff(*n)),
                    }
                }
            };
            // Added while it ran: the newer state deserves a pass now.
            if s.dirty.remove(key) {
                Some(Duration::ZERO)
            } else {
                delay
            }
        };
        match retry {
            Some(d) if d.is_zero() => {
                self.lock().enqueue(key.clone());
                self.notify.notify_one();
            }
            Some(d) => self.add_after(key.clone(), d),
            None => {}
        }
    }
}

/// A failed pass: how to retry it and what to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub retry: Retry,
    pub message: String,
}

impl Failure {
    pub fn of<E: ErrorPolicy + Display>(e: &E) -> Failure {
        Failure {
            retry: e.retry(),
            message: e.to_string(),
        }
    }

    pub fn transient(e: impl Display) -> Failure {
        Failure {
            retry: Retry::Backoff,
            message: e.to_string(),
        }
    }
}

/// A key the runners work on: queued, compared, sent between tasks and logged.
pub trait RunKey: Clone + Eq + Hash + Send + Display + 'static {}

impl<K: Clone + Eq + Hash + Send + Display + 'static> RunKey for K {}

/// Runs `reconcile` over the queue's keys with at most `concurrency` passes at once, until
/// `shutdown` is cancelled (passes in flight finish first). Every error backs off.
pub async fn run<K: RunKey, Fut, E>(
    queue: Queue<K>,
    concurrency: usize,
    shutdown: CancellationToken,
    name: &'static str,
    reconcile: impl Fn(K) -> Fut + Send + Sync + 'static,
) where
    Fut: Future<Output = Result<Outcome, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    run_with_policy(queue, concurrency, shutdown, name, move |k| {
        let r = reconcile.clone();
        async move { r(k).await.map_err(Failure::transient) }
    })
    .await
}

/// Like [`run`], with the retry of each failure chosen by the pass ([`Failure::retry`]).
pub async fn run_with_policy<K: RunKey, F, Fut>(
    queue: Queue<K>,
    concurrency: usize,
    shutdown: CancellationToken,
    name: &'static str,
    reconcile: F,
) where
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, Failure>> + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.cancelled() => break,
        };
        let key = loop {
            // Register interest before checking, so an add between the check and the wait
            // is not missed.
            let notified = queue.notify.notified();
            let next = match queue.take() {
                Ok(k) => break Some(k),
                Err(next) => next,
            };
            let until = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(until) => {}
                _ = shutdown.cancelled() => break None,
            }
        };
        let Some(key) = key else { break };
        let q = queue.clone();
        let r = reconcile.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let result = r(key.clone()).await;
            let took = started.elapsed();
            q.observe_work(took);
            let result = match result {
                Ok(o) => Ok(o),
                Err(f) => {
                    match f.retry {
                        Retry::Never => {
                            tracing::warn!(controller = name, %key, error = %f.message, "reconcile failed; not retrying until the object changes")
                        }
                        _ => {
                            tracing::debug!(controller = name, %key, error = %f.message, retry = ?f.retry, "reconcile failed")
                        }
                    }
                    Err(f.retry)
                }
            };
            q.finish(&key, result, took);
            drop(permit);
            // Another key may be waiting for this permit.
            q.notify.notify_one();
        });
    }
    // Wait for passes in flight.
    let _ = permits.acquire_many(concurrency.max(1) as u32).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn backoff_doubles_from_five_milliseconds_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(5));
        assert_eq!(backoff(4), Duration::from_millis(40));
        assert_eq!(backoff(40), BACKOFF_CAP);
    }

    #[test]
    fn a_key_added_twice_before_it_runs_runs_once() {
        let q: Queue<String> = Queue::new();
        q.add("a".into());
        q.add("a".into());
        assert_eq!(q.len(), 1);
        assert_eq!(q.stats().adds, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_waits_in_one_list_and_the_earliest_delay_wins() {
        let q: Queue<String> = Queue::new();
        q.add_after("a".into(), Duration::from_secs(10));
        q.add_after("a".into(), Duration::from_secs(2));
        q.add_after("a".into(), Duration::from_secs(5));
        assert_eq!((q.len(), q.delayed_len()), (0, 1));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.take().ok(), Some("a".to_string()));
        assert_eq!(q.delayed_len(), 0);
    }

    /// Runs a queue whose passes fail per `script` (then succeed) and records when each pass
    /// ran; stops after the first success.
    async fn passes(script: Vec<Retry>) -> Vec<Duration> {
        let q: Queue<String> = Queue::new();
        let times = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let start = Instant::now();
        q.add("k".into());
        let (t, c, s) = (times.clone(), calls.clone(), stop.clone());
        let runner = tokio::spawn(run_with_policy(
            q.clone(),
            1,
            stop.clone(),
            "test",
            move |_k: String| {
                let (t, c, s, script) = (t.clone(), c.clone(), s.clone(), script.clone());
                async move {
                    t.lock().unwrap().push(start.elapsed());
                    let n = c.fetch_add(1, Ordering::SeqCst);
                    match script.get(n) {
                        Some(retry) => Err(Failure {
                            retry: *retry,
                            message: "failed".into(),
                        }),
                        None => {
                            s.cancel();
                            Ok(Outcome::Done)
                        }
                    }
                }
            },
        ));
        let _ = tokio::time::timeout(Duration::from_secs(600), runner).await;
        times.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_with_growing_backoff_until_success() {
        let t = passes(vec![Retry::Backoff, Retry::Backoff]).await;
        assert_eq!(t.len(), 3);
        assert!(t[1] - t[0] >= Duration::from_millis(5));
        assert!(t[2] - t[1] >= Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_is_retried_at_once() {
        let t = passes(vec![Retry::Now, Retry::Now]).await;
        assert_eq!(t.len(), 3);
        assert_eq!(t[2], t[0], "no time passes between conflict retries");
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_streak_falls_back_to_backoff() {
        let t = passes(vec![Retry::Now; CONFLICT_STREAK as usize + 1]).await;
        let last = t.len() - 1;
        assert_eq!(t[last - 1], t[0]);
        assert!(t[last] - t[last - 1] >= backoff(CONFLICT_STREAK + 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_is_not_retried_until_the_key_is_added_again() {
        let q: Queue<String> = Queue::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let (c, r) = (calls.clone(), ran.clone());
        let runner = tokio::spawn(run_with_policy(
            q.clone(),
            1,
            stop.clone(),
            "test",
            move |_k: String| {
                let (c, r) = (c.clone(), r.clone());
                async move {
                    c.fetch_add(1, Ordering::SeqCst);
                    r.notify_one();
                    Err::<Outcome, _>(Failure {
                        retry: Retry::Never,
                        message: "invalid".into(),
                    })
                }
            },
        ));
        q.add("k".into());
        ran.notified().await;
        // Two minutes of virtual time: a backoff would have retried many times by now.
        tokio::time::advance(Duration::from_secs(120)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(q.delayed_len(), 0);
        q.add("k".into());
        ran.notified().await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        stop.cancel();
        runner.await.unwrap();
        assert_eq!(q.stats().work_count, 2);
    }

    /// Runs a key of a queue paced ×4 twice: each pass takes `pass`, and the first is told of
    /// a change while it runs (after reporting `cost` through `pace_by`, if given). Returns the
    /// time from the first pass's start to the second's.
    async fn paced_rerun_after(pass: Duration, cost: Option<Duration>) -> Duration {
        let q: Queue<String> = Queue::paced(4);
        let times = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let (t, s, q2) = (times.clone(), stop.clone(), q.clone());
        let runner = tokio::spawn(run(q.clone(), 1, stop.clone(), "test", move |k: String| {
            let (t, s, q2) = (t.clone(), s.clone(), q2.clone());
            async move {
                let n = {
                    let mut t = t.lock().unwrap();
                    t.push(Instant::now());
                    t.len()
                };
                tokio::time::advance(pass).await;
                if n == 1 {
                    if let Some(cost) = cost {
                        q2.pace_by(&k, cost);
                    }
                    q2.add(k);
                } else {
                    s.cancel();
                }
                Ok::<_, String>(Outcome::Done)
            }
        }));
        q.add("k".into());
        runner.await.unwrap();
        let t = times.lock().unwrap().clone();
        assert_eq!(t.len(), 2);
        t[1] - t[0]
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_key_changed_during_its_pass_runs_again_after_a_multiple_of_its_duration() {
        // 50 ms pass, then 4 × 50 ms before the next.
        assert_eq!(
            paced_rerun_after(Duration::from_millis(50), None).await,
            Duration::from_millis(250)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_key_whose_pass_reported_its_cost_is_paced_by_that_cost() {
        // 500 ms of waiting, 10 ms of it worth pacing by: 500 ms, then 4 × 10 ms (not 4 × 500).
        assert_eq!(
            paced_rerun_after(Duration::from_millis(500), Some(Duration::from_millis(10))).await,
            Duration::from_millis(540)
        );
    }
}
