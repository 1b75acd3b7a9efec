//! Watch events stamped with the local clock as they arrive, for benchmarks that time what a
//! watcher sees (a Job ADDED, a pod Running): a thread of its own lists the collection, watches
//! it from the list's revision (again from the last one seen if the server ends the stream) and
//! records each event with its arrival `Instant` and wall-clock time, so the benchmark's own
//! requests never delay the stamps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::Value;

use crate::api::{Api, Next};
use crate::client::Endpoint;
use crate::process::LogTail;
use crate::wait::wait_for;

/// One event as it arrived.
#[derive(Debug, Clone)]
pub struct Stamped {
    /// `ADDED`, `MODIFIED`, `DELETED` (bookmarks are not kept).
    pub kind: String,
    pub object: Value,
    pub at: Instant,
    pub wall: Timestamp,
}

/// A running recorder; stops its thread when dropped.
pub struct StampedWatch {
    events: Arc<Mutex<Vec<Stamped>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StampedWatch {
    /// Starts recording the events of `collection` (a list path such as `/api/v1/pods` or
    /// `/apis/batch/v1/namespaces/x/jobs`, without a query). Returns once the watch is open, so
    /// everything written afterwards is seen.
    pub fn start(endpoint: Endpoint, collection: &str) -> StampedWatch {
        let events = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicBool::new(false));
        let thread = {
            let (events, stop, open) = (events.clone(), stop.clone(), open.clone());
            let collection = collection.to_string();
            std::thread::spawn(move || record(endpoint, &collection, &events, &stop, &open))
        };
        let w = StampedWatch {
            events,
            stop,
            thread: Some(thread),
        };
        wait_for(Duration::from_secs(30), "the stamped watch open", || {
            if open.load(Ordering::SeqCst) {
                Ok(())
            } else if w.thread.as_ref().is_some_and(JoinHandle::is_finished) {
                panic!("the stamped watch of {collection} ended before it opened");
            } else {
                Err("not yet")
            }
        });
        w
    }

    /// Every event recorded so far, in arrival order.
    pub fn events(&self) -> Vec<Stamped> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The first recorded event that `pick` accepts, and what it made of it.
    pub fn first<T>(&self, pick: impl Fn(&Stamped) -> Option<T>) -> Option<(Instant, T)> {
        let events = self.events.lock().ok()?;
        events.iter().find_map(|e| pick(e).map(|t| (e.at, t)))
    }

    /// Waits (up to `timeout`) for the first event `pick` accepts; panics saying `what` if
    /// none arrives.
    pub fn wait_first<T>(
        &self,
        timeout: Duration,
        what: &str,
        pick: impl Fn(&Stamped) -> Option<T>,
    ) -> (Instant, T) {
        wait_for(timeout, what, || {
            if self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
                panic!("the stamped watch ended (its panic is above) while waiting for {what}");
            }
            self.first(&pick)
                .ok_or_else(|| format!("{} events recorded", self.len()))
        })
    }

    pub fn len(&self) -> usize {
        self.events.lock().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for StampedWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The recorder thread: list, then watch until told to stop, resuming from the last revision.
fn record(
    endpoint: Endpoint,
    collection: &str,
    events: &Mutex<Vec<Stamped>>,
    stop: &AtomicBool,
    open: &AtomicBool,
) {
    let api = Api::new(endpoint, LogTail::default());
    let list = api.get_ok(collection);
    let mut rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    while !stop.load(Ordering::SeqCst) {
        let path = format!("{collection}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}");
        let mut watch = match api.watch(&path) {
            Ok(w) => w,
            Err(reply) => panic!("cannot watch {collection}: {}", reply.describe()),
        };
        open.store(true, Ordering::SeqCst);
        while !stop.load(Ordering::SeqCst) {
            match watch.next(Duration::from_millis(200)) {
                Next::Event(e) => {
                    let (at, wall) = (Instant::now(), Timestamp::now());
                    if let Some(v) = e["object"]["metadata"]["resourceVersion"].as_str() {
                        rv = v.to_string();
                    }
                    let kind = e["type"].as_str().unwrap_or("").to_string();
                    if kind == "BOOKMARK" {
                        continue;
                    }
                    if kind == "ERROR" {
                        panic!("the watch of {collection} failed: {e}");
                    }
                    if let Ok(mut all) = events.lock() {
                        all.push(Stamped {
                            kind,
                            object: e["object"].clone(),
                            at,
                            wall,
                        });
                    }
                }
                Next::Timeout => {}
                Next::Closed(_) => break,
            }
        }
    }
}
