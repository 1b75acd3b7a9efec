//! Group commit: writers check their preconditions and take revisions in order, queue their
//! writes, and whichever writer finds no flush under way commits everything queued in one
//! backend transaction (one fsync), publishes it, and wakes the others. Under concurrency many
//! writes share one fsync; a lone writer still pays exactly one.
//!
//! Preconditions see queued-but-not-yet-durable writes (the `pending` overlay), so
//! compare-and-swap stays exact; readers see a write only once it is durable. If a batch fails,
//! every write queued behind it fails too (they were checked against it) and the revision
//! counter returns to the last durable revision.

use super::{EventType, Revision, StoredObject};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One queued write.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub ticket: u64,
    pub revision: Revision,
    pub key: Arc<str>,
    pub event_type: EventType,
    /// The new object (for a deletion: its last state).
    pub stored: StoredObject,
    pub prev: Option<StoredObject>,
}

pub(super) struct Queue {
    /// The highest revision handed out (durable or queued).
    pub assigned: Revision,
    /// The newest queued version of each key with queued writes (`None`: deleted).
    pending: HashMap<Arc<str>, (Revision, Option<StoredObject>)>,
    writes: Vec<Queued>,
    flushing: bool,
    next_ticket: u64,
    /// Every ticket up to this one is settled (durable, or failed as `failed` says).
    settled: u64,
    failed: HashMap<u64, String>,
}

impl Queue {
    /// The version of `key` a new write must be checked against, if a queued write decides it.
    pub fn pending(&self, key: &str) -> Option<Option<StoredObject>> {
        self.pending.get(key).map(|(_, obj)| obj.clone())
    }

    /// Queues a write at revision `assigned + 1`; returns its ticket.
    pub fn push(
        &mut self,
        key: Arc<str>,
        event_type: EventType,
        stored: StoredObject,
        prev: Option<StoredObject>,
    ) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.assigned = stored.revision;
        let after = (event_type != EventType::Deleted).then(|| stored.clone());
        self.pending.insert(key.clone(), (stored.revision, after));
        self.writes.push(Queued {
            ticket,
            revision: stored.revision,
            key,
            event_type,
            stored,
            prev,
        });
        ticket
    }
}

/// The queue and the signal that a flush ended.
pub(super) struct Pipeline {
    queue: Mutex<Queue>,
    flushed: Condvar,
}

impl Pipeline {
    pub fn new(revision: Revision) -> Pipeline {
        Pipeline {
            queue: Mutex::new(Queue {
                assigned: revision,
                pending: HashMap::new(),
                writes: Vec::new(),
                flushing: false,
                next_ticket: 1,
                settled: 0,
                failed: HashMap::new(),
            }),
            flushed: Condvar::new(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ticket` is settled, flushing the queue whenever no one else is. `flush`
    /// makes a batch durable and visible; on failure it returns the message and the last
    /// durable revision. Returns the failure message if this ticket's write failed.
    pub fn settle<'a>(
        &'a self,
        mut queue: MutexGuard<'a, Queue>,
        ticket: u64,
        flush: impl Fn(&[Queued]) -> Result<(), (String, Revision)>,
    ) -> Result<(), String> {
        loop {
            if queue.settled >= ticket {
                return match queue.failed.remove(&ticket) {
                    Some(message) => Err(message),
                    None => Ok(()),
                };
            }
            if queue.flushing {
                queue = self.flushed.wait(queue).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            queue.flushing = true;
            let batch = std::mem::take(&mut queue.writes);
            drop(queue);
            let result = if batch.is_empty() {
                Ok(())
            } else {
                flush(&batch)
            };
            queue = self.lock();
            let mut last = batch.last().map_or(queue.settled, |w| w.ticket);
            match result {
                Ok(()) => {
                    for w in &batch {
                        if queue
                            .pending
                            .get(&w.key)
                            .is_some_and(|(r, _)| *r == w.revision)
                        {
                            queue.pending.remove(&w.key);
                        }
                    }
                }
                Err((message, durable)) => {
                    let behind = std::mem::take(&mut queue.writes);
                    for w in batch.iter().chain(&behind) {
                        queue.failed.insert(w.ticket, message.clone());
                    }
                    last = behind.last().map_or(last, |w| w.ticket);
                    queue.pending.clear();
                    queue.assigned = durable;
                }
            }
            queue.settled = queue.settled.max(last);
            queue.flushing = false;
            self.flushed.notify_all();
        }
    }
}
