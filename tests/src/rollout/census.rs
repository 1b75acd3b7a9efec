//! A census of a Deployment's pods kept from pod watch events, one sample per event, and the
//! extremes the samples reached, so that rollout bounds (maxSurge, maxUnavailable, Recreate's
//! no-overlap) are checked at every stored version of every pod, not only at polls. Pure.
//!
//! The surge bound on pods holds once each ReplicaSet controller has acted on its last resize;
//! [`super::bounds`] judges pod samples against the ReplicaSets' sizes of the moment.
//!
//! Counting rules, as upstream's controllers count:
//! - **counted** (what `maxSurge` bounds, the ReplicaSets' `status.replicas`): the pod exists,
//!   has no `deletionTimestamp` and its phase is neither `Succeeded` nor `Failed`. A terminating
//!   pod is not counted, so during a rollout more pods than `replicas + maxSurge` may briefly
//!   exist (seed rule TM-11).
//! - **available** (what `maxUnavailable` bounds): counted, and its `Ready` condition is `True`.
//!   This holds for `minReadySeconds: 0`, the only setting the suites use with this census.
//! - **running** (what Recreate waits for, upstream `oldPodsRunning`): the pod exists (a
//!   terminating pod included) and its phase is neither `Succeeded` nor `Failed`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::tally::{Line, Stamp, Tally, Timeline, apply_event, uid};

/// The label the Deployment controller puts on every pod of a ReplicaSet it owns.
pub const HASH_LABEL: &str = "pod-template-hash";

/// What the census keeps of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub name: String,
    /// `pod-template-hash` (empty when missing).
    pub hash: String,
    pub phase: String,
    pub terminating: bool,
    pub ready: bool,
}

impl PodState {
    /// Reads a pod object.
    pub fn of(pod: &Value) -> PodState {
        let meta = &pod["metadata"];
        let ready = crate::pod_reading::is_ready(pod);
        PodState {
            name: meta["name"].as_str().unwrap_or("?").to_string(),
            hash: meta["labels"][HASH_LABEL]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            phase: pod["status"]["phase"].as_str().unwrap_or("").to_string(),
            terminating: !meta["deletionTimestamp"].is_null(),
            ready,
        }
    }

    fn terminal(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }

    /// Counted toward the surge bound.
    pub fn counted(&self) -> bool {
        !self.terminating && !self.terminal()
    }

    /// Counted toward the availability bound.
    pub fn available(&self) -> bool {
        self.counted() && self.ready
    }

    /// Still running as far as Recreate is concerned.
    pub fn running(&self) -> bool {
        !self.terminal()
    }
}

/// Counts for one template hash (or for all pods).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub counted: usize,
    pub available: usize,
    pub running: usize,
}

impl Counts {
    fn add(&mut self, p: &PodState) {
        self.counted += usize::from(p.counted());
        self.available += usize::from(p.available());
        self.running += usize::from(p.running());
    }
}

/// The pods the watch has seen and not yet seen deleted, by uid.
#[derive(Debug, Clone, Default)]
pub struct Census {
    pods: BTreeMap<String, PodState>,
}

impl Census {
    /// Applies a watch event (`ADDED`, `MODIFIED`, `DELETED`); other types change nothing.
    /// Returns whether it was a pod event.
    pub fn apply(&mut self, event: &Value) -> bool {
        apply_event(&mut self.pods, event, PodState::of)
    }

    /// Adds a pod read from a list.
    pub fn insert(&mut self, pod: &Value) {
        self.pods.insert(uid(pod), PodState::of(pod));
    }

    pub fn pods(&self) -> impl Iterator<Item = &PodState> {
        self.pods.values()
    }

    /// Counts over every pod.
    pub fn total(&self) -> Counts {
        let mut c = Counts::default();
        for p in self.pods.values() {
            c.add(p);
        }
        c
    }

    /// Counts per template hash.
    pub fn by_hash(&self) -> BTreeMap<String, Counts> {
        let mut m: BTreeMap<String, Counts> = BTreeMap::new();
        for p in self.pods.values() {
            m.entry(p.hash.clone()).or_default().add(p);
        }
        m
    }

    /// Counts of the pods with template hash `hash`.
    pub fn of_hash(&self, hash: &str) -> Counts {
        self.by_hash().get(hash).copied().unwrap_or_default()
    }

    /// The hashes that have a running pod.
    pub fn running_hashes(&self) -> Vec<String> {
        self.by_hash()
            .into_iter()
            .filter(|(_, c)| c.running > 0)
            .map(|(h, _)| h)
            .collect()
    }

    /// `counted/available/running` overall and per hash, on one line.
    pub fn summary(&self) -> String {
        let t = self.total();
        let mut s = format!(
            "counted={} available={} running={}",
            t.counted, t.available, t.running
        );
        for (h, c) in self.by_hash() {
            let _ = write!(s, " [{h}: {}/{}/{}]", c.counted, c.available, c.running);
        }
        s
    }
}

impl Tally for Census {
    type Sample = Sample;

    fn insert(&mut self, obj: &Value) {
        Census::insert(self, obj);
    }

    fn apply(&mut self, event: &Value) -> bool {
        Census::apply(self, event)
    }

    fn sample(&self, stamp: Stamp) -> Sample {
        Sample::of(stamp, self)
    }

    fn summary(&self) -> String {
        Census::summary(self)
    }
}

/// The census after one event.
#[derive(Debug, Clone)]
pub struct Sample {
    pub stamp: Stamp,
    pub total: Counts,
    pub by_hash: BTreeMap<String, Counts>,
}

impl Sample {
    pub fn of(stamp: Stamp, census: &Census) -> Sample {
        Sample {
            stamp,
            total: census.total(),
            by_hash: census.by_hash(),
        }
    }

    /// Hashes with a running pod in this sample.
    pub fn running_hashes(&self) -> Vec<&str> {
        self.by_hash
            .iter()
            .filter(|(_, c)| c.running > 0)
            .map(|(h, _)| h.as_str())
            .collect()
    }
}

impl Line for Sample {
    const LEGEND: &'static str = "pods counted=.. available=.. running=.., per hash: c/a/r";

    fn line(&self) -> String {
        let mut s = format!(
            "{} counted={} available={} running={}",
            self.stamp.line(),
            self.total.counted,
            self.total.available,
            self.total.running
        );
        for (h, c) in &self.by_hash {
            let _ = write!(s, " [{h}: {}/{}/{}]", c.counted, c.available, c.running);
        }
        s
    }
}

impl Timeline<Sample> {
    /// The first sample with the most counted pods.
    pub fn max_counted(&self) -> Option<&Sample> {
        self.samples.iter().rev().max_by_key(|s| s.total.counted)
    }

    /// The first sample with the fewest available pods.
    pub fn min_available(&self) -> Option<&Sample> {
        self.samples.iter().min_by_key(|s| s.total.available)
    }

    /// Samples in which pods of more than one template hash were running.
    pub fn overlaps(&self) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.running_hashes().len() > 1)
            .collect()
    }

    /// The hashes that ever had a pod, in order of first appearance.
    pub fn hashes(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for s in &self.samples {
            for h in s.by_hash.keys() {
                if !seen.contains(h) {
                    seen.push(h.clone());
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn pod(uid: &str, hash: &str, phase: &str, ready: bool, terminating: bool) -> Value {
        let mut p = json!({
            "metadata": {"name": format!("p-{uid}"), "uid": uid, "labels": {HASH_LABEL: hash}},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]},
        });
        if terminating {
            p["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        p
    }

    /// The stamp of test event `i` (rv 10 + i).
    fn stamp(i: usize) -> Stamp {
        let n = u64::try_from(i).unwrap();
        Stamp {
            at: Duration::from_millis(n),
            rv: 10 + n,
            event: format!("e{i}"),
        }
    }

    fn ev(kind: &str, pod: Value) -> Value {
        json!({"type": kind, "object": pod})
    }

    #[test]
    fn a_terminating_pod_is_neither_counted_nor_available_but_still_running() {
        let p = PodState::of(&pod("1", "a", "Running", true, true));
        assert!(!p.counted());
        assert!(!p.available());
        assert!(p.running());
    }

    #[test]
    fn a_finished_pod_is_not_running() {
        for phase in ["Succeeded", "Failed"] {
            let p = PodState::of(&pod("1", "a", phase, false, false));
            assert!(!p.counted() && !p.running(), "{phase}");
        }
        let pending = PodState::of(&pod("1", "a", "Pending", false, false));
        assert!(pending.counted() && pending.running() && !pending.available());
    }

    #[test]
    fn events_add_update_and_remove_pods_by_uid() {
        let mut c = Census::default();
        assert!(c.apply(&ev("ADDED", pod("1", "a", "Pending", false, false))));
        assert!(c.apply(&ev("ADDED", pod("2", "b", "Running", true, false))));
        assert_eq!(
            c.total(),
            Counts {
                counted: 2,
                available: 1,
                running: 2
            }
        );
        c.apply(&ev("MODIFIED", pod("1", "a", "Running", true, false)));
        assert_eq!(c.of_hash("a").available, 1);
        c.apply(&ev("MODIFIED", pod("2", "b", "Running", true, true)));
        assert_eq!(c.of_hash("b").counted, 0);
        assert_eq!(c.running_hashes(), ["a", "b"]);
        c.apply(&ev("DELETED", pod("2", "b", "Running", true, true)));
        assert_eq!(c.running_hashes(), ["a"]);
        assert!(!c.apply(&json!({"type": "BOOKMARK", "object": {}})));
    }

    #[test]
    fn the_timeline_reports_its_extremes_and_overlaps() {
        let mut c = Census::default();
        let mut t = Timeline::default();
        for (i, e) in [
            ev("ADDED", pod("1", "a", "Running", true, false)),
            ev("ADDED", pod("2", "b", "Pending", false, false)),
            ev("MODIFIED", pod("1", "a", "Running", true, true)),
            ev("DELETED", pod("1", "a", "Running", true, true)),
        ]
        .iter()
        .enumerate()
        {
            c.apply(e);
            t.samples.push(Sample::of(stamp(i), &c));
        }
        assert_eq!(t.max_counted().map(|s| s.stamp.event.as_str()), Some("e1"));
        assert_eq!(
            t.min_available().map(|s| s.stamp.event.as_str()),
            Some("e2")
        );
        let overlaps: Vec<&str> = t
            .overlaps()
            .iter()
            .map(|s| s.stamp.event.as_str())
            .collect();
        assert_eq!(overlaps, ["e1", "e2"]);
        assert_eq!(t.hashes(), ["a", "b"]);
        assert!(t.describe().contains("[b: 1/0/1]"), "{}", t.describe());
        assert!(t.describe().starts_with("4 samples"), "{}", t.describe());
    }
}
