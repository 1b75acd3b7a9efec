//! The reconcile runtime every controller, the scheduler and the agent's pod workers share: a
//! deduplicating queue of keys, never two passes of one key at once (a key added while it is
//! being reconciled runs again afterwards), per-key capped exponential backoff on errors (reset
//! on success), requeue-after, bounded concurrency and graceful shutdown. Controllers only
//! decide; this file runs them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What a successful pass asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Converged: run again only when the key is added.
    Done,
    /// Not converged yet (waiting on something outside): run again after the delay.
    RequeueAfter(Duration),
}

/// First retry delay after an error; doubles per consecutive failure of a key.
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Retry delays stop growing here.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// The retry delay after `failures` consecutive errors: 5 ms, 10 ms, 20 ms, … capped at 60 s.
/// Worked example: the 4th consecutive failure waits 5 ms × 2³ = 40 ms.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(31);
    BACKOFF_BASE
        .checked_mul(1u32 << exp)
        .map_or(BACKOFF_CAP, |d| d.min(BACKOFF_CAP))
}

struct State<K> {
    pending: VecDeque<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
}

/// A handle to add keys to a controller's queue. Cheap to clone.
pub struct Queue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Queue {
            state: self.state.clone(),
            notify: self.notify.clone(),
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
            })),
            notify: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a key (once: a key already waiting is not added twice).
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.active.contains(&key) {
            s.dirty.insert(key);
            return;
        }
        if s.queued.insert(key.clone()) {
            s.pending.push_back(key);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Adds a key after a delay.
    pub fn add_after(&self, key: K, delay: Duration) {
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(key);
        });
    }

    /// Number of keys waiting.
    pub fn len(&self) -> usize {
        self.lock().pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self) -> Option<K> {
        let mut s = self.lock();
        let key = s.pending.pop_front()?;
        s.queued.remove(&key);
        s.active.insert(key.clone());
        Some(key)
    }

    fn finish(&self, key: &K, result: Result<Outcome, ()>) {
        let retry = {
            let mut s = self.lock();
            s.active.remove(key);
            let delay = match result {
                Ok(outcome) => {
                    s.failures.remove(key);
                    match outcome {
                        Outcome::Done => None,
                        Outcome::RequeueAfter(d) => Some(d),
                    }
                }
                Err(()) => {
                    let n = s.failures.entry(key.clone()).or_insert(0);
                    *n += 1;
                    Some(backoff(*n))
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
            Some(d) if d.is_zero() => self.add(key.clone()),
            Some(d) => self.add_after(key.clone(), d),
            None => {}
        }
    }
}

/// Runs `reconcile` over the queue's keys with at most `concurrency` passes at once, until
/// `shutdown` is cancelled (passes in flight finish first).
pub async fn run<K, F, Fut, E>(
    queue: Queue<K>,
    concurrency: usize,
    shutdown: CancellationToken,
    name: &'static str,
    reconcile: F,
) where
    K: Clone + Eq + Hash + Send + Display + 'static,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, E>> + Send + 'static,
    E: Display + Send + 'static,
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
            if let Some(k) = queue.take() {
                break Some(k);
            }
            tokio::select! {
                _ = notified => {}
                _ = shutdown.cancelled() => break None,
            }
        };
        let Some(key) = key else { break };
        let q = queue.clone();
        let r = reconcile.clone();
        tokio::spawn(async move {
            let result = r(key.clone()).await;
            let result = match result {
                Ok(o) => Ok(o),
                Err(e) => {
                    tracing::debug!(controller = name, %key, error = %e, "reconcile failed; backing off");
                    Err(())
                }
            };
            q.finish(&key, result);
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
    use std::sync::atomic::{AtomicUsize, Ordering};

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
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_with_backoff_until_success() {
        let q: Queue<String> = Queue::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let stop = CancellationToken::new();
        let s = stop.clone();
        q.add("k".into());
        let runner = tokio::spawn(run(
            q.clone(),
            2,
            stop.clone(),
            "test",
            move |_k: String| {
                let c = c.clone();
                let s = s.clone();
                async move {
                    let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                    if n < 3 {
                        Err("not yet")
                    } else {
                        s.cancel();
                        Ok(Outcome::Done)
                    }
                }
            },
        ));
        tokio::time::timeout(Duration::from_secs(5), runner)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
