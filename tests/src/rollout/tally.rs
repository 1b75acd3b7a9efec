//! What a followed watch keeps: a [`Tally`] folds the listed objects and every watch event into
//! a state, and a [`Timeline`] holds the state's sample after each event, in stream order, so a
//! test can ask for the extremes a rollout reached. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// The state one watch stream folds into.
pub trait Tally: Default + Send + 'static {
    type Sample: Line + Clone + Send + 'static;

    /// Adds an object read from the list the watch starts from.
    fn insert(&mut self, obj: &Value);

    /// Applies one watch event (`ADDED`, `MODIFIED`, `DELETED`); true when it was one.
    fn apply(&mut self, event: &Value) -> bool;

    /// The state now, after the event `stamp` describes.
    fn sample(&self, stamp: Stamp) -> Self::Sample;

    /// The state on one line, for failure messages.
    fn summary(&self) -> String;
}

/// The uid of a listed or watched object (empty when it has none): what tallies key it by.
pub fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

/// Folds one watch event into `objects` (kept by uid): `ADDED` and `MODIFIED` store what
/// `read` makes of the object, `DELETED` removes it. Returns whether it was one of those.
pub fn apply_event<V>(
    objects: &mut BTreeMap<String, V>,
    event: &Value,
    read: impl FnOnce(&Value) -> V,
) -> bool {
    let obj = &event["object"];
    match event["type"].as_str() {
        Some("ADDED" | "MODIFIED") => {
            objects.insert(uid(obj), read(obj));
            true
        }
        Some("DELETED") => {
            objects.remove(&uid(obj));
            true
        }
        _ => false,
    }
}

/// Where a sample falls in a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// When the event arrived, from the start of the watch.
    pub at: Duration,
    /// The resourceVersion of the event's object (the list's for the first sample). Berth's
    /// resourceVersions are one global revision counter (as etcd's), so samples of watches on
    /// different resources can be put in the order the store wrote them.
    pub rv: u64,
    /// `LIST` for the starting state, else `TYPE name rv=N`.
    pub event: String,
}

impl Stamp {
    /// The stamp on one line: time and event, padded.
    pub fn line(&self) -> String {
        format!("{:>6.1?} {:<52}", self.at, self.event)
    }
}

/// A sample on one line.
pub trait Line {
    /// What the numbers on a line mean.
    const LEGEND: &'static str;
    fn line(&self) -> String;
}

/// Every sample of one watch, in order.
#[derive(Debug, Clone)]
pub struct Timeline<S> {
    pub samples: Vec<S>,
}

impl<S> Default for Timeline<S> {
    fn default() -> Self {
        Timeline {
            samples: Vec::new(),
        }
    }
}

impl<S: Line> Timeline<S> {
    /// One line per sample, for failure messages.
    pub fn describe(&self) -> String {
        let mut out = format!("{} samples ({}):\n", self.samples.len(), S::LEGEND);
        for s in &self.samples {
            out.push_str(&s.line());
            out.push('\n');
        }
        out
    }
}
