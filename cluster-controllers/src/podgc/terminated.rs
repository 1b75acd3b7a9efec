//! Which finished pods the collector deletes once there are too many (upstream's
//! `gcTerminated`, `--terminated-pod-gc-threshold`): when more pods than the threshold are
//! Succeeded or Failed, the surplus goes, evicted pods first, then the oldest by creation time
//! (then by namespace and name, so the choice is stable). A threshold of 0 turns it off.
//!
//! Planner: pure, no I/O.

use berth_runtime::informer::ObjectKey;

/// Upstream's default `--terminated-pod-gc-threshold`.
pub const DEFAULT_THRESHOLD: usize = 12_500;

/// A finished pod as the sweep sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub key: ObjectKey,
    /// Failed with reason `Evicted` (upstream's `PodIsEvicted`).
    pub evicted: bool,
    /// `metadata.creationTimestamp` in RFC 3339 (second precision, so it orders as text).
    pub created: String,
}

/// The finished pods to delete so that at most `threshold` remain (none when `threshold` is 0).
pub fn surplus(mut finished: Vec<Finished>, threshold: usize) -> Vec<ObjectKey> {
    if threshold == 0 || finished.len() <= threshold {
        return Vec::new();
    }
    let count = finished.len() - threshold;
    finished.sort_by(|a, b| {
        b.evicted
            .cmp(&a.evicted)
            .then_with(|| a.created.cmp(&b.created))
            .then_with(|| a.key.cmp(&b.key))
    });
    finished.into_iter().take(count).map(|f| f.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, created: &str, evicted: bool) -> Finished {
        Finished {
            key: ObjectKey::new(Some("default"), name),
            evicted,
            created: created.into(),
        }
    }

    fn names(keys: &[ObjectKey]) -> Vec<&str> {
        keys.iter().map(ObjectKey::name).collect()
    }

    #[test]
    fn the_surplus_goes_evicted_first_then_oldest() {
        let pods = || {
            vec![
                pod("new", "2026-01-03T00:00:00Z", false),
                pod("old", "2026-01-01T00:00:00Z", false),
                pod("evicted-new", "2026-01-04T00:00:00Z", true),
                pod("mid-b", "2026-01-02T00:00:00Z", false),
                pod("mid-a", "2026-01-02T00:00:00Z", false),
            ]
        };
        let cases: Vec<(&str, usize, Vec<&str>)> = vec![
            ("under the threshold nothing goes", 5, vec![]),
            ("threshold 0 turns the sweep off", 0, vec![]),
            (
                "one over: the evicted pod goes first",
                4,
                vec!["evicted-new"],
            ),
            (
                "then the oldest, ties by name",
                1,
                vec!["evicted-new", "old", "mid-a", "mid-b"],
            ),
        ];
        for (what, threshold, want) in cases {
            assert_eq!(names(&surplus(pods(), threshold)), want, "{what}");
        }
    }
}
