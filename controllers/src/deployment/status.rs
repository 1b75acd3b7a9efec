//! The Deployment's status from its ReplicaSets' statuses (upstream `calculateStatus`; the
//! ReplicaSet controller writes those from the pods) and the `Available` condition (DEP-36,
//! DEP-38).
//!
//! Worked example (T-DEP-05): the old ReplicaSet at 3/3 available and a bad new one at 1 desired,
//! 1 created, 0 available give `replicas: 4, updatedReplicas: 1, availableReplicas: 3,
//! unavailableReplicas: 1` (4 desired in the ReplicaSets' specs minus 3 available), which
//! `kubectl describe` prints as `3 desired | 1 updated | 4 total | 3 available | 1 unavailable`;
//! 3 available ≥ 3 − 0 allowed unavailable keeps `Available=True`.
//!
//! Planner: pure, no I/O.

use super::progress::{self, AVAILABLE, MIN_AVAILABLE, MIN_UNAVAILABLE};
use super::surge;
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use jiff::Timestamp;

/// `spec.replicas` of a ReplicaSet, defaulted as the API does.
pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `status.replicas` (pods created).
pub fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

/// `status.availableReplicas`.
pub fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// `status.readyReplicas`.
pub fn ready(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// Zero counts are left out, as Go's `omitempty` leaves them out.
fn count(v: i32) -> Option<i32> {
    (v != 0).then_some(v)
}

/// Upstream `calculateStatus`: counts summed over the ReplicaSets (`updatedReplicas` from the
/// new one), `unavailableReplicas` = desired in the specs − available (never negative), the
/// conditions the Deployment carries with `Available` set from `maxUnavailable`.
pub fn calculate(
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let sum = |f: fn(&ReplicaSet) -> i32| all.iter().map(|rs| f(rs)).sum::<i32>();
    let available_replicas = sum(available);
    let total = sum(spec_replicas);
    let current = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation.filter(|g| *g != 0),
        replicas: count(sum(status_replicas)),
        updated_replicas: count(new.map_or(0, status_replicas)),
        ready_replicas: count(sum(ready)),
        available_replicas: count(available_replicas),
        unavailable_replicas: count((total - available_replicas).max(0)),
        collision_count: current.collision_count,
        conditions: current.conditions.clone(),
        terminating_replicas: None,
    };
    let minimum = surge::desired(d) - surge::max_unavailable(d);
    let c = if available_replicas >= minimum {
        progress::new_condition(
            AVAILABLE,
            "True",
            MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        progress::new_condition(
            AVAILABLE,
            "False",
            MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    progress::set_condition(&mut status, c);
    status
}

/// A status in the shape [`calculate`] produces (zero counts left out), for comparing a stored
/// status with a computed one.
pub fn canonical(s: &DeploymentStatus) -> DeploymentStatus {
    let z = |v: Option<i32>| v.filter(|x| *x != 0);
    DeploymentStatus {
        observed_generation: s.observed_generation.filter(|g| *g != 0),
        replicas: z(s.replicas),
        updated_replicas: z(s.updated_replicas),
        ready_replicas: z(s.ready_replicas),
        available_replicas: z(s.available_replicas),
        unavailable_replicas: z(s.unavailable_replicas),
        collision_count: s.collision_count,
        conditions: s.conditions.clone().filter(|c| !c.is_empty()),
        terminating_replicas: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn status_sums_the_replica_sets_and_counts_unavailable_from_their_specs() {
        let d = deployment(3, "25%", "25%");
        let old = rs("web-old", 1, 3).with_status(3, 3, 3);
        let new = rs("web-new", 3, 1).with_status(1, 0, 0);
        let s = calculate(&[&old, &new], Some(&new), &d, t(100));
        assert_eq!(s.replicas, Some(4));
        assert_eq!(s.updated_replicas, Some(1));
        assert_eq!(s.ready_replicas, Some(3));
        assert_eq!(s.available_replicas, Some(3));
        assert_eq!(s.unavailable_replicas, Some(1));
        assert_eq!(s.observed_generation, Some(1));
        let c = progress::condition(&s, AVAILABLE).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some(MIN_AVAILABLE))
        );
    }

    #[test]
    fn availability_follows_max_unavailable() {
        let cases = [
            (
                "rolling 25% of 4: 3 available is enough",
                "RollingUpdate",
                4,
                3,
                "True",
            ),
            (
                "rolling 25% of 4: 2 available is not",
                "RollingUpdate",
                4,
                2,
                "False",
            ),
            (
                "rolling 25% of 3 (0 unavailable): 2 is not",
                "RollingUpdate",
                3,
                2,
                "False",
            ),
            ("recreate needs all", "Recreate", 3, 2, "False"),
            ("recreate with all", "Recreate", 3, 3, "True"),
        ];
        for (name, strategy, replicas, avail, want) in cases {
            let mut d = deployment(replicas, "25%", "25%");
            if strategy == "Recreate" {
                d = recreate(d);
            }
            let r = rs("web-a", 1, replicas).with_status(replicas, avail, avail);
            let s = calculate(&[&r], Some(&r), &d, t(5));
            let c = progress::condition(&s, AVAILABLE).unwrap();
            assert_eq!(c.status, want, "{name}");
            let msg = if want == "True" {
                "Deployment has minimum availability."
            } else {
                "Deployment does not have minimum availability."
            };
            assert_eq!(c.message.as_deref(), Some(msg), "{name}");
        }
    }

    #[test]
    fn surplus_availability_never_makes_unavailable_negative() {
        let d = deployment(1, "25%", "25%");
        let r = rs("web-a", 1, 1).with_status(3, 3, 3);
        let s = calculate(&[&r], Some(&r), &d, t(5));
        assert_eq!(s.unavailable_replicas, None);
    }
}
