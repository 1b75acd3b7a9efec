//! The set's status from the pods it owns (upstream's `calculateStatus`): replicas,
//! fullyLabeledReplicas, readyReplicas, availableReplicas (ready for longer than
//! minReadySeconds), the `ReplicaFailure` condition, when a write is due and when to look
//! again for pods about to become available. Pure: no I/O.
//!
//! Planner: pure, no I/O.

use super::view::{Condition, Pod, Set, Status};
use jiff::Timestamp;
use serde_json::{Map, Value, json};
use std::time::Duration;

pub const REPLICA_FAILURE: &str = "ReplicaFailure";
pub const FAILED_CREATE: &str = "FailedCreate";
pub const FAILED_DELETE: &str = "FailedDelete";

pub use crate::workload::availability::is_available;
use crate::workload::availability::next_check;
use crate::workload::status::put_counts;

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// RFC 3339 with second precision, as Kubernetes writes `metav1.Time`.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The new status. `error` is the message of the failed create or delete of this pass, if
/// any. The `ReplicaFailure` condition is added (reason by the direction of the difference)
/// only when absent, and removed after a pass without error, as upstream does;
/// `observedGeneration` is left to [`apply`].
pub fn compute(set: &Set, pods: &[&Pod], error: Option<&str>, now: Timestamp) -> Status {
    let template = berth_shared::selector::LabelSelector::from_set(&set.template_labels);
    let mut template = template.memo();
    let fully = pods.iter().filter(|p| template.matches(&p.labels)).count();
    let ready = pods.iter().filter(|p| p.ready).count();
    let available = pods
        .iter()
        .filter(|p| is_available(p, set.min_ready_seconds, now))
        .count();
    let mut conditions = set.status.conditions.clone();
    let has_failure = conditions.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match error {
        Some(message) if !has_failure => {
            let diff = pods.len() as i64 - i64::from(set.replicas);
            let reason = match diff {
                d if d < 0 => FAILED_CREATE,
                d if d > 0 => FAILED_DELETE,
                _ => "",
            };
            conditions.push(Condition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: reason.into(),
                message: message.into(),
                last_transition_time: Some(rfc3339(now)),
            });
        }
        None if has_failure => conditions.retain(|c| c.type_ != REPLICA_FAILURE),
        _ => {}
    }
    Status {
        replicas: count(pods.len()),
        fully_labeled_replicas: count(fully),
        ready_replicas: count(ready),
        available_replicas: count(available),
        observed_generation: set.status.observed_generation,
        conditions,
    }
}

/// Whether the status must be written (upstream's `updateReplicaSetStatus` steady state): any
/// count or condition differs, or the generation was not observed yet.
pub fn needs_write(set: &Set, new: &Status) -> bool {
    let old = &set.status;
    old.replicas != new.replicas
        || old.fully_labeled_replicas != new.fully_labeled_replicas
        || old.ready_replicas != new.ready_replicas
        || old.available_replicas != new.available_replicas
        || old.conditions != new.conditions
        || old.observed_generation != set.generation
}

/// Writes `new` into a stored object's `status`, with `observedGeneration` = `generation`;
/// fields upstream omits when zero are removed, others (not ours) are kept.
pub fn apply(obj: &mut Value, new: &Status, generation: i64) {
    let counts = [
        ("replicas", new.replicas.into(), false),
        (
            "fullyLabeledReplicas",
            new.fully_labeled_replicas.into(),
            true,
        ),
        ("readyReplicas", new.ready_replicas.into(), true),
        ("availableReplicas", new.available_replicas.into(), true),
        ("observedGeneration", generation, true),
    ];
    let Some(status) = put_counts(obj, &counts) else {
        return;
    };
    if new.conditions.is_empty() {
        status.remove("conditions");
    } else {
        let conds: Vec<Value> = new
            .conditions
            .iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("type".into(), json!(c.type_));
                m.insert("status".into(), json!(c.status));
                if let Some(t) = &c.last_transition_time {
                    m.insert("lastTransitionTime".into(), json!(t));
                }
                if !c.reason.is_empty() {
                    m.insert("reason".into(), json!(c.reason));
                }
                if !c.message.is_empty() {
                    m.insert("message".into(), json!(c.message));
                }
                Value::Object(m)
            })
            .collect();
        status.insert("conditions".into(), Value::Array(conds));
    }
}

/// How long until the first ready pod that is not yet available becomes available, so a pass
/// then notices it (upstream requeues after minReadySeconds; this is the exact remainder).
/// A pod whose Ready condition has no transition time never becomes available, as upstream.
pub fn next_availability_check(set: &Set, pods: &[&Pod], now: Timestamp) -> Option<Duration> {
    next_check(pods.iter().copied(), set.min_ready_seconds, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicaset::view::Kind;
    use berth_shared::selector::LabelSelector;
    use jiff::SignedDuration;
    use std::collections::BTreeMap;

    fn now() -> Timestamp {
        "2024-06-01T12:00:00Z".parse().unwrap()
    }

    fn ago(secs: i64) -> Option<Timestamp> {
        Some(now() - SignedDuration::from_secs(secs))
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn set(replicas: i32, min_ready: i32) -> Set {
        Set {
            kind: Kind::ReplicaSet,
            namespace: "default".into(),
            name: "frontend".into(),
            uid: "rs-uid".into(),
            generation: 2,
            replicas,
            min_ready_seconds: min_ready,
            selector: LabelSelector::from_set(&labels(&[("tier", "frontend")])),
            template: Value::Null,
            template_labels: labels(&[("tier", "frontend"), ("app", "guestbook")]),
            deleting: false,
            controller_uid: None,
            status: Status::default(),
        }
    }

    fn pod(name: &str, ready_for: Option<i64>, full_labels: bool) -> Pod {
        Pod {
            name: name.into(),
            uid: name.into(),
            labels: if full_labels {
                labels(&[("tier", "frontend"), ("app", "guestbook"), ("extra", "x")])
            } else {
                labels(&[("tier", "frontend")])
            }
            .into(),
            phase: "Running".into(),
            ready: ready_for.is_some(),
            ready_since: ready_for.and_then(ago),
            ..Pod::default()
        }
    }

    #[test]
    fn counts_replicas_full_labels_ready_and_available() {
        let pods = [
            pod("a", Some(100), true),
            pod("b", Some(5), true),
            pod("c", None, false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = compute(&set(3, 10), &refs, None, now());
        assert_eq!(
            (
                s.replicas,
                s.fully_labeled_replicas,
                s.ready_replicas,
                s.available_replicas
            ),
            (3, 2, 2, 1)
        );
    }

    #[test]
    fn without_min_ready_seconds_every_ready_pod_is_available() {
        let pods = [pod("a", Some(0), true), pod("b", Some(1), true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = compute(&set(2, 0), &refs, None, now());
        assert_eq!(s.available_replicas, 2);
        assert_eq!(next_availability_check(&set(2, 0), &refs, now()), None);
    }

    #[test]
    fn availability_needs_strictly_more_than_min_ready_seconds() {
        assert!(!is_available(&pod("a", Some(10), true), 10, now()));
        assert!(is_available(&pod("a", Some(11), true), 10, now()));
        let no_time = Pod {
            ready_since: None,
            ..pod("b", Some(1), true)
        };
        assert!(!is_available(&no_time, 10, now()));
        assert!(is_available(&no_time, 0, now()));
    }

    #[test]
    fn the_next_check_comes_when_the_first_ready_pod_turns_available() {
        let pods = [
            pod("a", Some(3), true),
            pod("b", Some(7), true),
            pod("c", Some(100), true),
            pod("d", None, true),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let d = next_availability_check(&set(4, 10), &refs, now()).unwrap();
        assert_eq!(d, Duration::from_secs(3) + Duration::from_millis(50));
    }

    #[test]
    fn a_failed_create_adds_the_replica_failure_condition_once() {
        let refs: Vec<&Pod> = Vec::new();
        let s = compute(&set(3, 0), &refs, Some("pods is forbidden: quota"), now());
        assert_eq!(s.conditions.len(), 1);
        let c = &s.conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("ReplicaFailure", "True", "FailedCreate")
        );
        assert_eq!(c.message, "pods is forbidden: quota");
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2024-06-01T12:00:00Z")
        );
        // A second failure keeps the first condition as it is (upstream does not update it).
        let mut again = set(3, 0);
        again.status.conditions = s.conditions.clone();
        let s2 = compute(&again, &refs, Some("another error"), now());
        assert_eq!(s2.conditions, s.conditions);
    }

    #[test]
    fn a_failed_delete_is_reported_as_failed_delete() {
        let pods = [pod("a", None, true), pod("b", None, true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = compute(&set(1, 0), &refs, Some("unable to delete pods: x"), now());
        assert_eq!(s.conditions[0].reason, "FailedDelete");
    }

    #[test]
    fn a_pass_without_error_removes_the_condition() {
        let mut s = set(0, 0);
        s.status.conditions = vec![Condition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: FAILED_CREATE.into(),
            message: "m".into(),
            last_transition_time: None,
        }];
        let new = compute(&s, &[], None, now());
        assert!(new.conditions.is_empty());
        assert!(needs_write(&s, &new));
    }

    #[test]
    fn the_steady_state_needs_no_write_but_a_new_generation_does() {
        let mut s = set(0, 0);
        s.status.observed_generation = 2;
        let new = compute(&s, &[], None, now());
        assert!(!needs_write(&s, &new));
        s.generation = 3;
        assert!(needs_write(&s, &new));
    }

    #[test]
    fn applying_writes_counts_generation_and_omits_zeros() {
        let mut obj =
            json!({"status": {"replicas": 5, "readyReplicas": 5, "terminatingReplicas": 1}});
        let new = Status {
            replicas: 0,
            ..Status::default()
        };
        apply(&mut obj, &new, 4);
        assert_eq!(
            obj["status"],
            json!({"replicas": 0, "terminatingReplicas": 1, "observedGeneration": 4})
        );
        let mut empty = json!({});
        let new = Status {
            replicas: 2,
            ready_replicas: 1,
            conditions: vec![Condition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: FAILED_CREATE.into(),
                message: "m".into(),
                last_transition_time: Some("2024-06-01T12:00:00Z".into()),
            }],
            ..Status::default()
        };
        apply(&mut empty, &new, 1);
        assert_eq!(empty["status"]["replicas"], json!(2));
        assert_eq!(empty["status"]["readyReplicas"], json!(1));
        assert_eq!(
            empty["status"]["conditions"][0]["reason"],
            json!("FailedCreate")
        );
    }
}
