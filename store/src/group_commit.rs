//! Group commit: writers check their preconditions and take revisions in order and queue their
//! writes; one writer at a time leads, committing everything queued in one backend transaction
//! (one fsync), publishing it, telling each writer of the batch its outcome, and handing the lead
//! to the first writer still queued. Under concurrency many writes share one fsync; a lone
//! writer still pays exactly one. Each writer is woken only for its own outcome or to lead, so a
//! flush wakes as many threads as it settled, not every waiting one.
//!
//! Heartbeats may wait for company ([`Linger`]): a leader whose batch holds only writes under a
//! lingering prefix (node Leases, renewed by every node every 10 s, one at a time) waits up to
//! the linger for more writes before it commits, as etcd batches its backend commits; any other
//! write ends the wait at once, so only heartbeats pay the delay.
//!
//! Preconditions see queued-but-not-yet-durable writes (the `pending` overlay), so
//! compare-and-swap stays exact; readers see a write only once it is durable. If a batch fails,
//! every write queued behind it fails too (they were checked against it) and the revision
//! counter returns to the last durable revision.

use super::{EventType, Revision, StoredObject};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Which writes may wait for company before they are committed, and for how long.
#[derive(Debug, Clone)]
pub struct Linger {
    /// Keys under these prefixes linger.
    pub prefixes: Vec<String>,
    /// The longest a lingering write waits, from when it was queued, before its commit starts.
    pub wait: Duration,
    /// A batch this large is committed at once.
    pub max_batch: usize,
}

impl Linger {
    fn covers(&self, key: &str) -> bool {
        self.wait > Duration::ZERO && self.prefixes.iter().any(|p| key.starts_with(p.as_str()))
    }
}

/// What a queued writer is told.
#[derive(Debug, Clone)]
enum Signal {
    Wait,
    /// Lead the next flush.
    Lead,
    /// The write is settled: durable, or failed with this message.
    Done(Result<(), String>),
}

/// Where a queued writer waits for its [`Signal`].
#[derive(Debug)]
struct Slot {
    signal: Mutex<Signal>,
    changed: Condvar,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            signal: Mutex::new(Signal::Wait),
            changed: Condvar::new(),
        })
    }

    fn send(&self, signal: Signal) {
        *self.signal.lock().unwrap_or_else(|e| e.into_inner()) = signal;
        self.changed.notify_one();
    }

    /// Waits for `Lead` or `Done`.
    fn wait(&self) -> Signal {
        let mut signal = self.signal.lock().unwrap_or_else(|e| e.into_inner());
        while matches!(*signal, Signal::Wait) {
            signal = self.changed.wait(signal).unwrap_or_else(|e| e.into_inner());
        }
        std::mem::replace(&mut *signal, Signal::Wait)
    }
}

/// One queued write.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub revision: Revision,
    pub key: Arc<str>,
    pub event_type: EventType,
    /// The new object (for a deletion: its last state).
    pub stored: StoredObject,
    pub prev: Option<StoredObject>,
    slot: Arc<Slot>,
    /// Queued under a lingering prefix, at this instant.
    lingers: Option<Instant>,
}

pub(super) struct Queue {
    /// The highest revision handed out (durable or queued).
    pub assigned: Revision,
    /// The newest queued version of each key with queued writes (`None`: deleted).
    pending: HashMap<Arc<str>, (Revision, Option<StoredObject>)>,
    writes: Vec<Queued>,
    /// Someone leads (is flushing, or has been handed the lead and is about to).
    led: bool,
    linger: Option<Linger>,
    /// The leader is waiting for company (a write that does not linger ends the wait).
    lingering: bool,
}

/// A write in the queue, to be settled with [`Pipeline::settle`].
pub(super) struct Ticket {
    slot: Arc<Slot>,
    /// Nobody led when it was queued: this writer leads at once.
    leads: bool,
}

impl Queue {
    /// The version of `key` a new write must be checked against, if a queued write decides it.
    pub fn pending(&self, key: &str) -> Option<Option<StoredObject>> {
        self.pending.get(key).map(|(_, obj)| obj.clone())
    }

    /// Queues a write at revision `stored.revision` (which must be `assigned + 1`).
    pub fn push(
        &mut self,
        key: Arc<str>,
        event_type: EventType,
        stored: StoredObject,
        prev: Option<StoredObject>,
    ) -> Ticket {
        self.assigned = stored.revision;
        let after = (event_type != EventType::Deleted).then(|| stored.clone());
        self.pending.insert(key.clone(), (stored.revision, after));
        let slot = Slot::new();
        let lingers = self
            .linger
            .as_ref()
            .is_some_and(|l| l.covers(&key))
            .then(Instant::now);
        self.writes.push(Queued {
            revision: stored.revision,
            key,
            event_type,
            stored,
            prev,
            slot: slot.clone(),
            lingers,
        });
        let leads = !self.led;
        self.led = true;
        Ticket { slot, leads }
    }

    /// Until when the leader should wait for more writes before committing what is queued:
    /// `None` when the batch must go now (it holds a write that does not linger, or is full).
    fn linger_until(&self) -> Option<Instant> {
        let linger = self.linger.as_ref()?;
        if self.writes.len() >= linger.max_batch {
            return None;
        }
        let mut first = None;
        for w in &self.writes {
            let at = w.lingers?;
            first = Some(first.map_or(at, |f: Instant| f.min(at)));
        }
        first.map(|at| at + linger.wait)
    }
}

/// The queue of writes waiting for durability.
pub(super) struct Pipeline {
    queue: Mutex<Queue>,
    /// Signalled when a write is queued while the leader lingers.
    arrived: Condvar,
}

impl Pipeline {
    pub fn new(revision: Revision) -> Pipeline {
        Pipeline {
            queue: Mutex::new(Queue {
                assigned: revision,
                pending: HashMap::new(),
                writes: Vec::new(),
                led: false,
                linger: None,
                lingering: false,
            }),
            arrived: Condvar::new(),
        }
    }

    /// Lets writes under `linger.prefixes` wait for company (`None`: every write goes at once).
    pub fn set_linger(&self, linger: Option<Linger>) {
        self.lock().linger = linger;
        self.arrived.notify_all();
    }

    pub fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the ticket's write is settled, leading flushes when handed the lead. `flush`
    /// makes a batch durable and visible; on failure it returns the message and the last
    /// durable revision. Returns the failure message if this write failed.
    pub fn settle(
        &self,
        queue: MutexGuard<'_, Queue>,
        ticket: Ticket,
        flush: impl Fn(&[Queued]) -> Result<(), (String, Revision)>,
    ) -> Result<(), String> {
        if queue.lingering {
            self.arrived.notify_all();
        }
        drop(queue);
        let mut lead = ticket.leads;
        loop {
            if lead {
                self.lead(&flush);
            }
            match ticket.slot.wait() {
                Signal::Done(result) => return result,
                Signal::Lead => lead = true,
                Signal::Wait => lead = false,
            }
        }
    }

    /// One flush: everything queued now, then the outcome to each of its writers and the lead
    /// to the first writer queued since (if any).
    fn lead(&self, flush: &impl Fn(&[Queued]) -> Result<(), (String, Revision)>) {
        let mut queue = self.lock();
        while let Some(until) = queue.linger_until() {
            let now = Instant::now();
            if now >= until {
                break;
            }
            queue.lingering = true;
            queue = self
                .arrived
                .wait_timeout(queue, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        queue.lingering = false;
        let batch = std::mem::take(&mut queue.writes);
        drop(queue);
        let result = if batch.is_empty() {
            Ok(())
        } else {
            flush(&batch)
        };
        let mut queue = self.lock();
        let mut settled = batch;
        match &result {
            Ok(()) => {
                for w in &settled {
                    if queue
                        .pending
                        .get(&w.key)
                        .is_some_and(|(r, _)| *r == w.revision)
                    {
                        queue.pending.remove(&w.key);
                    }
                }
            }
            Err((_, durable)) => {
                // Writes queued behind a failed batch were checked against it: they fail too.
                settled.append(&mut queue.writes);
                queue.pending.clear();
                queue.assigned = *durable;
            }
        }
        match queue.writes.first() {
            Some(next) => next.slot.send(Signal::Lead),
            None => queue.led = false,
        }
        drop(queue);
        let outcome = result.map_err(|(message, _)| message);
        for w in &settled {
            w.slot.send(Signal::Done(outcome.clone()));
        }
    }
}
