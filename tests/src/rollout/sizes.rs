//! The sizes a Deployment controller gives its ReplicaSets, kept from a ReplicaSet watch: after
//! every event, `spec.replicas` per template hash and their sum. The sum is what upstream's
//! rolling update bounds by `replicas + maxSurge` (`GetReplicaCountForReplicaSets`); pods follow
//! it once each ReplicaSet controller has acted. Pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::census::HASH_LABEL;
use super::tally::{Line, Stamp, Tally, Timeline, apply_event, uid};

/// `spec.replicas` of each ReplicaSet seen and not deleted, by uid, with its hash.
#[derive(Debug, Clone, Default)]
pub struct Sizes {
    sets: BTreeMap<String, (String, i64)>,
}

impl Sizes {
    /// `spec.replicas` per template hash.
    pub fn by_hash(&self) -> BTreeMap<String, i64> {
        self.sets.values().cloned().collect()
    }

    /// The sum of `spec.replicas`.
    pub fn total(&self) -> i64 {
        self.sets.values().map(|(_, n)| n).sum()
    }

    /// `spec.replicas` of the ReplicaSet with template hash `hash` (0 when there is none).
    pub fn of_hash(&self, hash: &str) -> i64 {
        self.by_hash().get(hash).copied().unwrap_or(0)
    }
}

/// A ReplicaSet's template hash and `spec.replicas`.
fn entry(rs: &Value) -> (String, i64) {
    let hash = rs["metadata"]["labels"][HASH_LABEL]
        .as_str()
        .unwrap_or("")
        .to_string();
    (hash, rs["spec"]["replicas"].as_i64().unwrap_or(0))
}

impl Tally for Sizes {
    type Sample = SizeSample;

    fn insert(&mut self, obj: &Value) {
        self.sets.insert(uid(obj), entry(obj));
    }

    fn apply(&mut self, event: &Value) -> bool {
        apply_event(&mut self.sets, event, entry)
    }

    fn sample(&self, stamp: Stamp) -> SizeSample {
        SizeSample {
            stamp,
            total: self.total(),
            by_hash: self.by_hash(),
        }
    }

    fn summary(&self) -> String {
        format!("total={} {:?}", self.total(), self.by_hash())
    }
}

/// The sizes after one event.
#[derive(Debug, Clone)]
pub struct SizeSample {
    pub stamp: Stamp,
    pub total: i64,
    pub by_hash: BTreeMap<String, i64>,
}

impl Line for SizeSample {
    const LEGEND: &'static str = "sum of spec.replicas, per hash";

    fn line(&self) -> String {
        let mut s = format!("{} total={}", self.stamp.line(), self.total);
        for (h, n) in &self.by_hash {
            let _ = write!(s, " [{h}: {n}]");
        }
        s
    }
}

impl Timeline<SizeSample> {
    /// The first sample with the largest sum of `spec.replicas`.
    pub fn max_total(&self) -> Option<&SizeSample> {
        self.samples.iter().rev().max_by_key(|s| s.total)
    }

    /// The distinct `(old, new)` sizes of the ReplicaSets with hashes `old` and `new`, in
    /// order (a missing ReplicaSet counts 0).
    pub fn pairs(&self, old: &str, new: &str) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = self
            .samples
            .iter()
            .map(|s| {
                let n = |h: &str| s.by_hash.get(h).copied().unwrap_or(0);
                (n(old), n(new))
            })
            .collect();
        out.dedup();
        out
    }

    /// The distinct `(hash → spec.replicas)` states in order, consecutive repeats dropped
    /// (status-only updates do not change sizes).
    pub fn steps(&self) -> Vec<BTreeMap<String, i64>> {
        let mut out: Vec<BTreeMap<String, i64>> = Vec::new();
        for s in &self.samples {
            if out.last() != Some(&s.by_hash) {
                out.push(s.by_hash.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, uid: &str, hash: &str, replicas: i64) -> Value {
        json!({"type": kind, "object": {
            "metadata": {"uid": uid, "labels": {HASH_LABEL: hash}},
            "spec": {"replicas": replicas},
        }})
    }

    #[test]
    fn sizes_follow_resizes_and_deletions_and_the_timeline_keeps_the_largest_sum() {
        let mut sizes = Sizes::default();
        let mut t = Timeline::default();
        for (i, e) in [
            ev("ADDED", "1", "old", 3),
            ev("ADDED", "2", "new", 1),
            ev("MODIFIED", "2", "new", 1),
            ev("MODIFIED", "1", "old", 2),
            ev("DELETED", "1", "old", 2),
        ]
        .iter()
        .enumerate()
        {
            assert!(sizes.apply(e));
            let rv = 10 + u64::try_from(i).unwrap();
            let event = format!("e{i}");
            let at = std::time::Duration::ZERO;
            t.samples.push(sizes.sample(Stamp { at, rv, event }));
        }
        assert!(!sizes.apply(&json!({"type": "BOOKMARK", "object": {}})));
        assert_eq!(sizes.of_hash("new"), 1);
        assert_eq!(sizes.of_hash("old"), 0);
        assert_eq!(t.max_total().map(|s| s.stamp.event.as_str()), Some("e1"));
        let steps = t.steps();
        assert_eq!(steps.len(), 4, "{steps:?}");
        assert_eq!(
            steps[1],
            BTreeMap::from([("new".into(), 1), ("old".into(), 3)])
        );
        assert!(
            t.describe().contains("total=4 [new: 1] [old: 3]"),
            "{}",
            t.describe()
        );
    }
}
