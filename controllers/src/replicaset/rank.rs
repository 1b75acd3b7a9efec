//! Which pods go first on scale-down: upstream's `ActivePodsWithRanks` order (with
//! `PodDeletionCost` and `LogarithmicScaleDown` on, their defaults), as a sort key.
//!
//! Earlier in the order = deleted first:
//! 1. unassigned before assigned;
//! 2. phase Pending < Unknown < Running;
//! 3. not ready before ready;
//! 4. lower `controller.kubernetes.io/pod-deletion-cost` first;
//! 5. pods on nodes with more related replicas first (the rank);
//! 6. for ready pods: no ready time, then ready more recently (log2 buckets of the age);
//! 7. higher restart count first (regular containers, then sidecars);
//! 8. no creation time, then created more recently (log2 buckets of the age);
//! 9. uid, standing in for upstream's "random".
//!
//! Upstream compares pairwise and, when two times fall in the same log2 bucket, decides at once
//! by uid. A pairwise rule like that is not a total order, which Rust's sort requires; here the
//! same-bucket case goes on to the later criteria and ends at the uid. Both are "arbitrary but
//! stable" inside a bucket, which is all upstream promises.
//!
//! Planner: pure, no I/O.

use super::view::Pod;
use jiff::Timestamp;
use std::cmp::Reverse;
use std::collections::HashMap;

/// Upstream's `podPhaseToOrdinal`; phases outside the map (and an unset phase) are 0.
fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// The log2 bucket of `now - t` in nanoseconds (-1 when `t` is not in the past); `None` (no
/// time) sorts before every bucket, as upstream's `afterOrZero` puts the zero time first.
///
/// Worked example: a pod 1 s old has age 10⁹ ns, bucket ⌊log₂ 10⁹⌋ = 29; one 2 s old is in
/// bucket 30, one 1.5 s old also in 30 — so 1 s before 1.5 s, but 1.5 s ties with 2 s.
fn age_bucket(t: Option<Timestamp>, now: Timestamp) -> Option<i64> {
    let t = t?;
    let nanos = now.duration_since(t).as_nanos();
    Some(if nanos > 0 {
        i64::from(127 - nanos.leading_zeros())
    } else {
        -1
    })
}

/// The sort key of a pod: smaller keys are deleted first. Fields compare in order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct DeletionKey<'a> {
    assigned: bool,
    phase: u8,
    ready: bool,
    cost: i32,
    rank: Reverse<usize>,
    ready_age: Option<i64>,
    restarts: Reverse<i32>,
    sidecar_restarts: Reverse<i32>,
    age: Option<i64>,
    uid: &'a str,
}

fn key(pod: &Pod, rank: usize, now: Timestamp) -> DeletionKey<'_> {
    DeletionKey {
        assigned: !pod.node_name.is_empty(),
        phase: phase_ordinal(&pod.phase),
        ready: pod.ready,
        cost: pod.deletion_cost,
        rank: Reverse(rank),
        // Only compared between two ready pods: not-ready pods have no ready time.
        ready_age: if pod.ready {
            age_bucket(pod.ready_since, now)
        } else {
            None
        },
        restarts: Reverse(pod.restarts),
        sidecar_restarts: Reverse(pod.sidecar_restarts),
        age: age_bucket(pod.created, now),
        uid: &pod.uid,
    }
}

/// Active related pods per node name (upstream's `getPodsRankedByRelatedPodsOnSameNode`).
pub fn pods_per_node<'a>(related: impl IntoIterator<Item = &'a Pod>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for p in related.into_iter().filter(|p| p.is_active()) {
        *counts.entry(p.node_name.clone()).or_insert(0) += 1;
    }
    counts
}

/// Sorts `pods` into deletion order.
pub fn sort_for_deletion(pods: &mut Vec<&Pod>, per_node: &HashMap<String, usize>, now: Timestamp) {
    let rank = |p: &Pod| per_node.get(&p.node_name).copied().unwrap_or(0);
    let mut keyed: Vec<(DeletionKey<'_>, &Pod)> =
        pods.iter().map(|p| (key(p, rank(p), now), *p)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    *pods = keyed.into_iter().map(|(_, p)| p).collect();
}

/// The `diff` pods to delete (upstream's `getPodsToDelete`): all of them need no sorting.
pub fn pods_to_delete<'a>(
    pods: &[&'a Pod],
    diff: usize,
    per_node: &HashMap<String, usize>,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let mut pods = pods.to_vec();
    if diff < pods.len() {
        sort_for_deletion(&mut pods, per_node, now);
    }
    pods.truncate(diff);
    pods
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-06-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn ago(secs: i64) -> Option<Timestamp> {
        Some(now() - jiff::SignedDuration::from_secs(secs))
    }

    /// A scheduled, running, ready pod created an hour ago, ready for 50 minutes.
    fn base(uid: &str) -> Pod {
        Pod {
            name: uid.into(),
            uid: uid.into(),
            node_name: "n1".into(),
            phase: "Running".into(),
            ready: true,
            ready_since: ago(3000),
            created: ago(3600),
            ..Pod::default()
        }
    }

    /// Asserts that `first` is deleted before `second`, whichever order they come in.
    fn first_goes_first(first: Pod, second: Pod, per_node: &HashMap<String, usize>) {
        for flip in [false, true] {
            let mut pods = if flip {
                vec![&second, &first]
            } else {
                vec![&first, &second]
            };
            sort_for_deletion(&mut pods, per_node, now());
            assert_eq!(pods[0].uid, first.uid, "flip={flip}");
        }
    }

    fn none() -> HashMap<String, usize> {
        HashMap::new()
    }

    /// [`base`] pod `uid` with one edit.
    fn with(uid: &str, edit: impl FnOnce(&mut Pod)) -> Pod {
        let mut p = base(uid);
        edit(&mut p);
        p
    }

    #[test]
    fn an_unassigned_pod_goes_before_an_assigned_one() {
        let a = with("unassigned", |p| p.node_name = String::new());
        first_goes_first(a, base("assigned"), &none());
    }

    #[test]
    fn pending_goes_before_unknown_before_running() {
        let pending = with("pending", |p| p.phase = "Pending".into());
        let unknown = with("unknown", |p| p.phase = "Unknown".into());
        first_goes_first(pending.clone(), unknown.clone(), &none());
        first_goes_first(unknown, base("running"), &none());
        let unset = with("unset", |p| p.phase = String::new());
        first_goes_first(unset, base("running2"), &none());
    }

    #[test]
    fn a_pod_that_is_not_ready_goes_before_a_ready_one() {
        let a = with("not-ready", |p| {
            p.ready = false;
            p.ready_since = None;
        });
        first_goes_first(a, base("ready"), &none());
    }

    #[test]
    fn the_lower_deletion_cost_goes_first_and_negative_costs_count() {
        let cheap = with("cheap", |p| p.deletion_cost = -10);
        let dear = with("dear", |p| p.deletion_cost = 5);
        first_goes_first(cheap, base("zero"), &none());
        first_goes_first(base("zero2"), dear, &none());
    }

    #[test]
    fn the_deletion_cost_outranks_node_doubling_and_age() {
        let cheap_old = with("cheap-old", |p| {
            p.deletion_cost = -1;
            p.created = ago(100_000);
            p.node_name = "lonely".into();
        });
        let per_node = HashMap::from([("n1".to_string(), 5)]);
        first_goes_first(cheap_old, base("young"), &per_node);
    }

    #[test]
    fn a_pod_on_a_node_with_more_replicas_goes_first() {
        let crowded = with("crowded", |p| p.node_name = "crowded".into());
        let per_node = HashMap::from([("crowded".to_string(), 3), ("n1".to_string(), 1)]);
        first_goes_first(crowded, base("alone"), &per_node);
    }

    /// Asserts that a pod whose time (put by `set`) is `secs` ago goes before the base pod,
    /// and so does one without that time.
    fn recent_or_unset_goes_first(set: fn(&mut Pod, Option<Timestamp>), secs: i64) {
        first_goes_first(
            with("recent", |p| set(p, ago(secs))),
            base("older"),
            &none(),
        );
        first_goes_first(with("no-time", |p| set(p, None)), base("timed"), &none());
    }

    #[test]
    fn the_pod_ready_more_recently_goes_first_by_log_bucket() {
        recent_or_unset_goes_first(|p, t| p.ready_since = t, 10);
    }

    #[test]
    fn the_pod_with_more_restarts_goes_first() {
        let crashy = with("crashy", |p| p.restarts = 4);
        first_goes_first(crashy, base("steady"), &none());
        let sidecar = with("sidecar", |p| p.sidecar_restarts = 2);
        first_goes_first(sidecar, base("steady2"), &none());
    }

    #[test]
    fn the_newer_pod_goes_before_the_older() {
        recent_or_unset_goes_first(|p, t| p.created = t, 60);
    }

    #[test]
    fn creation_times_in_one_log_bucket_tie_and_fall_to_the_uid() {
        // 2000 s and 2100 s are both in bucket 40 (2⁴⁰ ns ≈ 1100 s, 2⁴¹ ns ≈ 2199 s): the
        // newer "b" does not go first; the uid decides.
        let a = with("a", |p| p.created = ago(2100));
        let b = with("b", |p| p.created = ago(2000));
        first_goes_first(a, b, &none());
    }

    #[test]
    fn age_buckets_are_floor_log2_of_nanoseconds() {
        assert_eq!(age_bucket(ago(1), now()), Some(29));
        assert_eq!(age_bucket(ago(2), now()), Some(30));
        assert_eq!(age_bucket(Some(now()), now()), Some(-1));
        assert_eq!(age_bucket(None, now()), None);
    }

    #[test]
    fn earlier_criteria_win_over_later_ones() {
        // Unassigned but long-lived and costly still goes before an assigned, crashing newcomer.
        let unassigned = Pod {
            node_name: String::new(),
            deletion_cost: 100,
            created: ago(100_000),
            ..base("unassigned")
        };
        let crashing = Pod {
            restarts: 10,
            created: ago(1),
            ..base("crashing")
        };
        first_goes_first(unassigned, crashing, &none());
    }

    #[test]
    fn deleting_all_pods_needs_no_order_and_fewer_take_the_front() {
        let pods = [
            base("old"),
            Pod {
                phase: "Pending".into(),
                node_name: String::new(),
                ready: false,
                ..base("pending")
            },
            Pod {
                deletion_cost: -1,
                ..base("cheap")
            },
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let got: Vec<&str> = pods_to_delete(&refs, 2, &none(), now())
            .iter()
            .map(|p| p.uid.as_str())
            .collect();
        assert_eq!(got, ["pending", "cheap"]);
        assert_eq!(pods_to_delete(&refs, 3, &none(), now()).len(), 3);
    }

    #[test]
    fn pods_per_node_counts_only_active_pods() {
        let pods = [
            base("a"),
            base("b"),
            Pod {
                deleting: true,
                ..base("c")
            },
            Pod {
                node_name: "n2".into(),
                ..base("d")
            },
        ];
        let counts = pods_per_node(&pods);
        assert_eq!(counts.get("n1"), Some(&2));
        assert_eq!(counts.get("n2"), Some(&1));
    }
}
