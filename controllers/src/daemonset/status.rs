//! The DaemonSet's status (upstream `updateDaemonSetStatus`), node by node, judging each node by
//! its oldest daemon pod: desired (nodes that should run the pod), current (those of them with
//! a pod), misscheduled (nodes with a pod that should not run it), ready, available (ready for
//! longer than minReadySeconds), updated (of the current revision), unavailable (desired minus
//! available); when a write is due and when to look again for pods about to become available.
//!
//! Planner: pure, no I/O.

use super::eligibility::fit;
use super::view::{DaemonSet, Node, Status};
use crate::views::Pod;
use crate::workload::availability::{is_available, next_check};
use crate::workload::status::put_counts;
use jiff::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The counts, with `observedGeneration` set to the DaemonSet's generation.
pub fn compute(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> Status {
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for node in nodes {
        let should_run = fit(&ds.placement, node).should_run;
        // Pods arrive oldest first (see `plan::by_node`).
        let oldest = pods.get(&node.name).and_then(|p| p.first());
        match (should_run, oldest) {
            (true, None) => desired += 1,
            (true, Some(pod)) => {
                desired += 1;
                current += 1;
                if pod.ready {
                    ready += 1;
                    if is_available(pod, ds.min_ready_seconds, now) {
                        available += 1;
                    }
                }
                if ds.is_updated(pod, hash) {
                    updated += 1;
                }
            }
            (false, Some(_)) => misscheduled += 1,
            (false, None) => {}
        }
    }
    Status {
        desired_number_scheduled: count(desired),
        current_number_scheduled: count(current),
        number_misscheduled: count(misscheduled),
        number_ready: count(ready),
        updated_number_scheduled: count(updated),
        number_available: count(available),
        number_unavailable: count(desired - available),
        observed_generation: ds.generation,
    }
}

/// Upstream `storeDaemonSetStatus`'s steady state: no count differs and the generation was
/// observed.
pub fn needs_write(ds: &DaemonSet, new: &Status) -> bool {
    let old = &ds.status;
    let counts = |s: &Status| {
        [
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_misscheduled,
            s.number_ready,
            s.updated_number_scheduled,
            s.number_available,
            s.number_unavailable,
        ]
    };
    counts(old) != counts(new) || old.observed_generation < ds.generation
}

/// Writes `new` into a stored DaemonSet's `status`; fields that are not counts
/// (`collisionCount`, `conditions`) are kept. The API's optional counts are omitted when 0.
pub fn apply(obj: &mut Value, new: &Status) {
    put_counts(
        obj,
        &[
            (
                "desiredNumberScheduled",
                new.desired_number_scheduled.into(),
                false,
            ),
            (
                "currentNumberScheduled",
                new.current_number_scheduled.into(),
                false,
            ),
            ("numberMisscheduled", new.number_misscheduled.into(), false),
            ("numberReady", new.number_ready.into(), false),
            (
                "updatedNumberScheduled",
                new.updated_number_scheduled.into(),
                true,
            ),
            ("numberAvailable", new.number_available.into(), true),
            ("numberUnavailable", new.number_unavailable.into(), true),
            ("observedGeneration", new.observed_generation, true),
        ],
    );
}

/// How long until the first ready pod that is not available yet becomes available (upstream
/// requeues after minReadySeconds; this is the exact remainder).
pub fn next_availability_check(
    ds: &DaemonSet,
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    now: Timestamp,
) -> Option<Duration> {
    next_check(
        pods.values().flatten().map(|p| &**p),
        ds.min_ready_seconds,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemonset::view::HASH_LABEL;
    use berth_shared::scheduling::{Taint, TaintEffect};
    use jiff::SignedDuration;
    use serde_json::json;

    fn now() -> Timestamp {
        "2024-06-01T12:00:00Z".parse().unwrap()
    }

    fn ds(min_ready: i32) -> DaemonSet {
        DaemonSet::from_value(&json!({
            "metadata": {"name": "agent", "uid": "u", "generation": 4},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "minReadySeconds": min_ready,
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"nodeSelector": {"role": "worker"}}}},
            "status": {"observedGeneration": 3}}))
        .unwrap()
    }

    fn node(name: &str, worker: bool) -> Arc<Node> {
        let mut labels = BTreeMap::new();
        if worker {
            labels.insert("role".to_string(), "worker".to_string());
        }
        Arc::new(Node {
            name: name.into(),
            labels,
            taints: Vec::new(),
        })
    }

    fn pod(name: &str, hash: &str, ready_for: Option<i64>) -> Arc<Pod> {
        Arc::new(Pod {
            name: name.into(),
            labels: BTreeMap::from([(HASH_LABEL.to_string(), hash.to_string())]).into(),
            phase: "Running".into(),
            node_name: "set".into(),
            ready: ready_for.is_some(),
            ready_since: ready_for.map(|s| now() - SignedDuration::from_secs(s)),
            ..Pod::default()
        })
    }

    #[test]
    fn every_count_is_judged_by_each_nodes_oldest_pod() {
        let mut tainted = (*node("n5", true)).clone();
        tainted.taints = vec![Taint::new("k", "", TaintEffect::NoSchedule)];
        let nodes = vec![
            node("n1", true),
            node("n2", true),
            node("n3", true),
            node("n4", false),
            Arc::new(tainted),
            node("n6", true),
        ];
        let pods = BTreeMap::from([
            ("n1".to_string(), vec![pod("a", "new", Some(100))]),
            (
                "n2".to_string(),
                vec![pod("b", "old", Some(5)), pod("b2", "new", None)],
            ),
            ("n3".to_string(), vec![pod("c", "new", None)]),
            ("n4".to_string(), vec![pod("d", "new", Some(100))]),
            ("n5".to_string(), vec![pod("e", "old", Some(100))]),
        ]);
        let s = compute(&ds(10), &nodes, &pods, "new", now());
        assert_eq!(
            s,
            Status {
                desired_number_scheduled: 4,
                current_number_scheduled: 3,
                number_misscheduled: 2,
                number_ready: 2,
                updated_number_scheduled: 2,
                number_available: 1,
                number_unavailable: 3,
                observed_generation: 4,
            }
        );
        assert!(needs_write(&ds(10), &s));
        assert_eq!(
            next_availability_check(&ds(10), &pods, now()),
            Some(Duration::from_secs(5) + Duration::from_millis(50))
        );
    }

    #[test]
    fn the_steady_state_needs_no_write() {
        let mut d = ds(0);
        d.status.observed_generation = 4;
        let s = compute(&d, &[], &BTreeMap::new(), "h", now());
        assert!(!needs_write(&d, &s));
        d.generation = 5;
        assert!(needs_write(&d, &s));
    }

    #[test]
    fn applying_keeps_the_collision_count_and_omits_optional_zeros() {
        let mut obj = json!({"status": {"collisionCount": 2, "numberAvailable": 3}});
        let new = Status {
            desired_number_scheduled: 2,
            observed_generation: 7,
            number_unavailable: 2,
            ..Status::default()
        };
        apply(&mut obj, &new);
        assert_eq!(
            obj["status"],
            json!({"collisionCount": 2, "desiredNumberScheduled": 2, "currentNumberScheduled": 0,
                "numberMisscheduled": 0, "numberReady": 0, "numberUnavailable": 2,
                "observedGeneration": 7})
        );
    }
}
