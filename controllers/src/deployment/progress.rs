//! The Deployment's conditions and progress deadline (upstream `progress.go` and the condition
//! helpers of `deployment_util.go`): `Progressing` with reasons `NewReplicaSetCreated`,
//! `FoundNewReplicaSet`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`,
//! `ProgressDeadlineExceeded`, `DeploymentPaused`/`DeploymentResumed`, `ReplicaSetCreateError`;
//! `ReplicaFailure` copied from the ReplicaSets (DEP-29..DEP-36).
//!
//! Time rules, as upstream: setting a condition with the same status and reason changes nothing;
//! with the same status but another reason it keeps `lastTransitionTime`; every observed
//! progress bumps `lastUpdateTime` of `ReplicaSetUpdated`, and the deadline counts from it.
//! Worked example: progress seen at 00:00:00 with `progressDeadlineSeconds: 600`; a pass at
//! 00:03:00 that sees no progress requeues for 00:10:01, and the pass then sets
//! `ProgressDeadlineExceeded`.
//!
//! Planner: pure, no I/O.

use super::surge;
use berth_shared::k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet,
};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

pub use crate::workload::status::stamp;

pub fn condition<'a>(status: &'a DeploymentStatus, kind: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == kind)
}

fn reason_of<'a>(status: &'a DeploymentStatus, kind: &str) -> Option<&'a str> {
    condition(status, kind).and_then(|c| c.reason.as_deref())
}

/// Upstream `NewDeploymentCondition`.
pub fn new_condition(
    kind: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: kind.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(stamp(now)),
        last_transition_time: Some(stamp(now)),
    }
}

/// Upstream `SetDeploymentCondition`: no change for the same status and reason; the transition
/// time survives a reason change within the same status; the condition moves to the end.
pub fn set_condition(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(status, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(status, &c.type_);
    status.conditions.get_or_insert_with(Vec::new).push(c);
}

pub fn remove_condition(status: &mut DeploymentStatus, kind: &str) {
    if let Some(cs) = status.conditions.as_mut() {
        cs.retain(|c| c.type_ != kind);
        if cs.is_empty() {
            status.conditions = None;
        }
    }
}

fn deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
}

/// Upstream `HasProgressDeadline`.
pub fn has_progress_deadline(d: &Deployment) -> bool {
    deadline(d).is_some()
}

fn n(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// Upstream `DeploymentComplete`: everything updated, available, nothing old, observed.
pub fn deployment_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let want = surge::desired(d);
    n(s.updated_replicas) == want
        && n(s.replicas) == want
        && n(s.available_replicas) == want
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Upstream `DeploymentProgressing`: more updated, fewer old, more ready or more available
/// replicas than the status the Deployment carries.
pub fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

fn last_update(c: &DeploymentCondition) -> Timestamp {
    c.last_update_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Upstream `DeploymentTimedOut`: the `Progressing` condition is older than the deadline.
pub fn timed_out(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> bool {
    let (Some(secs), Some(c)) = (deadline(d), condition(new, PROGRESSING)) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => last_update(c) + SignedDuration::from_secs(secs.into()) < now,
    }
}

fn rs_name(rs: Option<&ReplicaSet>) -> Option<&str> {
    rs.and_then(|r| r.metadata.name.as_deref())
}

fn replica_failures(all: &[&ReplicaSet], new: Option<&ReplicaSet>) -> Option<DeploymentCondition> {
    let from = |rs: &ReplicaSet| -> Option<DeploymentCondition> {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == REPLICA_FAILURE)?;
        Some(DeploymentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            last_transition_time: c.last_transition_time.clone(),
            last_update_time: c.last_transition_time.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        })
    };
    new.and_then(from)
        .or_else(|| all.iter().find_map(|rs| from(rs)))
}

/// Upstream `syncRolloutStatus` (minus the write): the Progressing and ReplicaFailure
/// conditions of `new` (the freshly calculated status) against the Deployment `d` carries.
pub fn rollout_status(
    d: &Deployment,
    mut new: DeploymentStatus,
    new_rs: Option<&ReplicaSet>,
    all: &[&ReplicaSet],
    now: Timestamp,
) -> DeploymentStatus {
    if !has_progress_deadline(d) {
        remove_condition(&mut new, PROGRESSING);
    }
    let current = d.status.as_ref().and_then(|s| condition(s, PROGRESSING));
    let complete_before = n(new.replicas) == n(new.updated_replicas)
        && current.and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let about = |what: &str| match rs_name(new_rs) {
        Some(rs) => format!("ReplicaSet {rs:?} {what}"),
        None => format!("Deployment {name:?} {what}"),
    };
    if has_progress_deadline(d) && !complete_before {
        if deployment_complete(d, &new) {
            let c = new_condition(
                PROGRESSING,
                "True",
                NEW_RS_AVAILABLE,
                about("has successfully progressed."),
                now,
            );
            set_condition(&mut new, c);
        } else if deployment_progressing(d, &new) {
            let mut c = new_condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                about("is progressing."),
                now,
            );
            if let Some(cur) = current {
                if cur.status == "True" {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove_condition(&mut new, PROGRESSING);
            }
            set_condition(&mut new, c);
        } else if timed_out(d, &new, now) {
            let c = new_condition(
                PROGRESSING,
                "False",
                TIMED_OUT,
                about("has timed out progressing."),
                now,
            );
            set_condition(&mut new, c);
        }
    }
    match replica_failures(all, new_rs) {
        Some(c) => set_condition(&mut new, c),
        None => remove_condition(&mut new, REPLICA_FAILURE),
    }
    new
}

/// Upstream `checkPausedConditions`: `DeploymentPaused` while paused, `DeploymentResumed` once
/// resumed, never over a timed-out rollout. True when the status changed.
pub fn check_paused(d: &mut Deployment, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let status = d.status.get_or_insert_with(Default::default);
    let reason = reason_of(status, PROGRESSING);
    if reason == Some(TIMED_OUT) {
        return false;
    }
    let paused_cond = reason == Some(PAUSED);
    let c = match (paused, paused_cond) {
        (true, false) => new_condition(
            PROGRESSING,
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
            now,
        ),
        (false, true) => new_condition(
            PROGRESSING,
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
            now,
        ),
        _ => return false,
    };
    set_condition(status, c);
    true
}

/// Upstream `requeueStuckDeployment`: when to look again so a stalled rollout times out on
/// time (`lastUpdateTime + progressDeadlineSeconds - now`, plus a second of slack).
pub fn requeue_after(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> Option<Duration> {
    let secs = deadline(d)?;
    let c = condition(new, PROGRESSING)?;
    if deployment_complete(d, new) || c.reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let due = last_update(c) + SignedDuration::from_secs(secs.into());
    let after = Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO);
    Some(after + Duration::from_secs(1))
}

/// The status after a failed ReplicaSet creation (`ReplicaSetCreateError`), when the
/// Deployment tracks progress.
pub fn failed_create(
    d: &Deployment,
    rs_name: &str,
    error: &str,
    now: Timestamp,
) -> Option<DeploymentStatus> {
    if !has_progress_deadline(d) {
        return None;
    }
    let mut status = d.status.clone().unwrap_or_default();
    let msg = format!("Failed to create new replica set {rs_name:?}: {error}");
    set_condition(
        &mut status,
        new_condition(PROGRESSING, "False", FAILED_RS_CREATE, msg, now),
    );
    Some(status)
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;
