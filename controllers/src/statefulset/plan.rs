//! One pass of the StatefulSet controller (upstream `updateStatefulSet` with
//! `processReplica`, `processCondemned` and `updateStatefulSetAfterInvariantEstablished`):
//! pods are slotted by ordinal into the wanted range and the condemned rest; missing pods are
//! created with their claims, finished ones deleted for re-creation, drifted identities fixed;
//! condemned pods hand their claims to the retention policy and go, highest ordinal first;
//! then the rolling update replaces pods of an old revision from the highest ordinal down to
//! the partition, at most `maxUnavailable` unavailable at a time. Under `OrderedReady` every
//! step waits for all lower ordinals to be Running and Ready (+ `minReadySeconds`) and for
//! terminating pods to be gone (STS-15); `Parallel` does not wait (STS-17).
//!
//! Planner: pure, no I/O.

use super::identity::{
    claim_names, identity_matches, new_claim, new_pod, pod_name, revision_template,
};
use super::retention::{is_stale, wanted_owners};
use super::view::{
    Claim, OwnerRef, REVISION_LABEL, Revision, SetPod, StatefulSet, Status, Strategy,
};
use crate::workload::scaled::scaled_value;
use berth_shared::k8s_openapi::api::core::v1 as core;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// It Succeeded or Failed: it comes back under the same name.
    Finished,
    /// Its ordinal is no longer wanted.
    ScaleDown,
    /// It is of an old revision.
    Update,
}

/// One write of the pass, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this claim for pod `pod` (before the pod).
    CreateClaim {
        pod: String,
        claim: Value,
    },
    CreatePod {
        ordinal: i32,
        pod: Value,
    },
    DeletePod {
        name: String,
        uid: String,
        why: Why,
    },
    /// Put the pod's identity labels back (pod-name, pod-index).
    FixPod {
        ordinal: i32,
        name: String,
        uid: String,
    },
    /// Set the claim's owner references to these (the retention policy).
    SetClaimOwners {
        claim: String,
        uid: String,
        owners: Vec<OwnerRef>,
    },
}

/// The revisions a pass works with.
#[derive(Debug, Clone)]
pub struct Revisions<'a> {
    /// The current revision's name (`status.currentRevision`, or the update revision when
    /// that names none) and its template.
    pub current: &'a str,
    pub current_template: &'a core::PodTemplateSpec,
    /// The update revision's name: the set's own template.
    pub update: &'a str,
}

/// What a pass decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    pub actions: Vec<Action>,
    pub status: Status,
    /// When a pod becomes available (`minReadySeconds`) and the set must look again.
    pub requeue_after: Option<Duration>,
}

/// Running with the Ready condition True (upstream `isRunningAndReady`).
fn running_and_ready(p: &SetPod) -> bool {
    p.pod.phase == "Running" && p.pod.ready
}

fn finished(p: &SetPod) -> bool {
    p.pod.phase == "Failed" || p.pod.phase == "Succeeded"
}

/// Pass-wide facts and the requeue they lead to.
struct Clock {
    now: Timestamp,
    min_ready: i64,
    requeue: Option<Duration>,
}

impl Clock {
    /// Running and Ready for `minReadySeconds` (upstream `isRunningAndAvailable`); remembers
    /// when a pod that is not yet will be.
    fn available(&mut self, p: &SetPod) -> bool {
        if !running_and_ready(p) {
            return false;
        }
        if self.min_ready <= 0 {
            return true;
        }
        let Some(since) = p.pod.ready_since else {
            return false;
        };
        let at = since
            .saturating_add(SignedDuration::from_secs(self.min_ready))
            .unwrap_or(since);
        if at <= self.now {
            return true;
        }
        let wait = Duration::try_from(self.now.duration_until(at)).unwrap_or_default();
        let wait = wait + Duration::from_secs(1);
        self.requeue = Some(self.requeue.map_or(wait, |r| r.min(wait)));
        false
    }
}

/// A slot of the wanted range.
#[derive(Debug, Clone)]
enum Slot {
    Missing,
    Pod(SetPod),
    /// Created in this pass.
    Created,
}

fn revision_of(p: &SetPod) -> &str {
    p.pod.labels.get(REVISION_LABEL).map_or("", String::as_str)
}

/// The current revision (upstream `getStatefulSetRevisions`): the one `status.currentRevision`
/// names while it exists and is not the update revision, with its template; else the update
/// revision with the set's own template.
pub fn current_revision(
    set: &StatefulSet,
    revisions: &[Arc<Revision>],
    update: &str,
) -> (String, core::PodTemplateSpec) {
    let named = &set.status.current_revision;
    match revisions
        .iter()
        .find(|r| !named.is_empty() && &r.name == named)
    {
        Some(r) if r.name != update => (
            r.name.clone(),
            revision_template(&r.data).unwrap_or_else(|| set.pod_template.clone()),
        ),
        _ => (update.to_string(), set.pod_template.clone()),
    }
}

/// The revisions a pod or the status still names: the history clean-up keeps them whatever
/// its limit (upstream `truncateHistory`).
pub fn live_revisions<'a>(
    pods: &'a [SetPod],
    current: &'a str,
    update: &'a str,
) -> BTreeSet<&'a str> {
    pods.iter()
        .filter_map(|p| p.pod.labels.get(REVISION_LABEL).map(String::as_str))
        .chain([current, update])
        .collect()
}

/// Plans one pass.
pub fn plan(
    set: &StatefulSet,
    revisions: &Revisions<'_>,
    pods: &[SetPod],
    claims: &BTreeMap<String, Arc<Claim>>,
    now: Timestamp,
) -> Pass {
    let mut clock = Clock {
        now,
        min_ready: i64::from(set.min_ready_seconds),
        requeue: None,
    };
    let mut status = status(set, revisions, pods, &mut clock);
    complete_rolling_update(set, &mut status);
    let mut actions = Vec::new();
    if set.deleting {
        return Pass {
            actions,
            status,
            requeue_after: clock.requeue,
        };
    }
    let width = usize::try_from(set.replicas.max(0)).unwrap_or(0);
    let mut replicas: Vec<Slot> = vec![Slot::Missing; width];
    let mut condemned: Vec<(i32, SetPod)> = Vec::new();
    for p in pods {
        let Some(ord) = super::identity::ordinal_of(&set.name, &p.pod.name) else {
            continue;
        };
        if set.in_range(ord) {
            let i = usize::try_from(ord - set.start).unwrap_or(0);
            replicas[i] = Slot::Pod(p.clone());
        } else {
            condemned.push((ord, p.clone()));
        }
    }
    // Highest ordinal first.
    condemned.sort_by_key(|c| std::cmp::Reverse(c.0));
    let first_unhealthy: Option<String> = replicas
        .iter()
        .find_map(|s| match s {
            Slot::Pod(p) if running_and_ready(p) && !p.pod.deleting => None,
            Slot::Pod(p) => Some(p.pod.uid.clone()),
            _ => Some(String::new()),
        })
        .or_else(|| {
            condemned
                .iter()
                .rev()
                .find(|(_, p)| !running_and_ready(p) || p.pod.deleting)
                .map(|(_, p)| p.pod.uid.clone())
        });
    let monotonic = !set.parallel;
    let mut exit = false;
    for (i, slot) in replicas.iter_mut().enumerate() {
        let ord = set.start + i32::try_from(i).unwrap_or(i32::MAX);
        let stop = process_replica(set, revisions, claims, ord, slot, &mut clock, &mut actions);
        if stop {
            exit = true;
            if monotonic {
                break;
            }
        }
    }
    if exit {
        return Pass {
            actions,
            status,
            requeue_after: clock.requeue,
        };
    }
    // The condemned pods' claims follow the retention policy before the pods go (STS-25).
    for (_, p) in &condemned {
        fix_claim_owners(set, claims, p, true, &mut actions);
    }
    for (_, p) in &condemned {
        if p.pod.deleting {
            if monotonic {
                exit = true;
                break;
            }
            continue;
        }
        let is_first = first_unhealthy.as_deref() == Some(p.pod.uid.as_str());
        if monotonic && !is_first && !clock.available(p) {
            exit = true;
            break;
        }
        actions.push(Action::DeletePod {
            name: p.pod.name.clone(),
            uid: p.pod.uid.clone(),
            why: Why::ScaleDown,
        });
        if monotonic {
            exit = true;
            break;
        }
    }
    if !exit
        && let Strategy::RollingUpdate {
            partition,
            max_unavailable,
        } = &set.strategy
    {
        let max = scaled_value(max_unavailable, set.replicas, true)
            .unwrap_or(1)
            .max(1);
        let unavailable = replicas
            .iter()
            .filter(|s| match s {
                Slot::Pod(p) => p.pod.deleting || !clock.available(p),
                _ => true,
            })
            .count();
        let mut room = usize::try_from(max)
            .unwrap_or(1)
            .saturating_sub(unavailable);
        let update_min = usize::try_from((*partition).max(0)).unwrap_or(0);
        for slot in replicas.iter().skip(update_min).rev() {
            if room == 0 {
                break;
            }
            if let Slot::Pod(p) = slot
                && revision_of(p) != revisions.update
                && !p.pod.deleting
            {
                actions.push(Action::DeletePod {
                    name: p.pod.name.clone(),
                    uid: p.pod.uid.clone(),
                    why: Why::Update,
                });
                room -= 1;
            }
        }
    }
    Pass {
        actions,
        status,
        requeue_after: clock.requeue,
    }
}

/// Upstream `processReplica` for one slot; true when the pass must stop (under
/// `OrderedReady`) or report that it could not finish (under `Parallel`).
fn process_replica(
    set: &StatefulSet,
    revisions: &Revisions<'_>,
    claims: &BTreeMap<String, Arc<Claim>>,
    ord: i32,
    slot: &mut Slot,
    clock: &mut Clock,
    actions: &mut Vec<Action>,
) -> bool {
    let monotonic = !set.parallel;
    match slot {
        Slot::Pod(p) if finished(p) => {
            if !p.pod.deleting {
                actions.push(Action::DeletePod {
                    name: p.pod.name.clone(),
                    uid: p.pod.uid.clone(),
                    why: Why::Finished,
                });
            }
            // The new pod comes once the old one is gone.
            true
        }
        Slot::Missing => {
            let name = pod_name(set, ord);
            // A claim being deleted, or about to be as an earlier pod's: wait for it to go.
            let blocked = claim_names(set, ord).iter().any(|(_, c)| {
                claims
                    .get(c)
                    .is_some_and(|c| c.deleting || is_stale(c, &name, ""))
            });
            if blocked {
                return true;
            }
            create_missing_claims(set, claims, ord, actions);
            // Ordinals below the partition are made at the current revision (STS-20).
            let (template, revision) = match &set.strategy {
                Strategy::RollingUpdate { partition, .. }
                    if ord < set.start.saturating_add(*partition) =>
                {
                    (revisions.current_template, revisions.current)
                }
                _ => (&set.pod_template, revisions.update),
            };
            actions.push(Action::CreatePod {
                ordinal: ord,
                pod: new_pod(set, template, ord, revision),
            });
            *slot = Slot::Created;
            monotonic
        }
        Slot::Created => monotonic,
        Slot::Pod(p) => {
            if p.pod.phase == "Pending" || p.pod.phase.is_empty() {
                create_missing_claims(set, claims, ord, actions);
            }
            if monotonic && (p.pod.deleting || !clock.available(p)) {
                return true;
            }
            fix_claim_owners(set, claims, p, false, actions);
            // Only labels can change on a pod; its volumes and hostname cannot.
            if !identity_matches(set, ord, p) {
                actions.push(Action::FixPod {
                    ordinal: ord,
                    name: p.pod.name.clone(),
                    uid: p.pod.uid.clone(),
                });
            }
            false
        }
    }
}

fn create_missing_claims(
    set: &StatefulSet,
    claims: &BTreeMap<String, Arc<Claim>>,
    ord: i32,
    actions: &mut Vec<Action>,
) {
    let name = pod_name(set, ord);
    for t in &set.claim_templates {
        let mut claim = new_claim(set, t, ord);
        let claim_name = claim["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if claims.contains_key(&claim_name) {
            continue;
        }
        if let Some(owners) = wanted_owners(set, &Claim::default(), &name, "", false)
            && !owners.is_empty()
        {
            claim["metadata"]["ownerReferences"] =
                Value::Array(owners.iter().map(OwnerRef::to_value).collect());
        }
        actions.push(Action::CreateClaim {
            pod: name.clone(),
            claim,
        });
    }
}

fn fix_claim_owners(
    set: &StatefulSet,
    claims: &BTreeMap<String, Arc<Claim>>,
    p: &SetPod,
    condemned: bool,
    actions: &mut Vec<Action>,
) {
    let Some(ord) = super::identity::ordinal_of(&set.name, &p.pod.name) else {
        return;
    };
    for (_, c) in claim_names(set, ord) {
        let Some(claim) = claims.get(&c) else {
            continue;
        };
        if claim.deleting {
            continue;
        }
        if let Some(owners) = wanted_owners(set, claim, &p.pod.name, &p.pod.uid, condemned) {
            actions.push(Action::SetClaimOwners {
                claim: c,
                uid: claim.uid.clone(),
                owners,
            });
        }
    }
}

/// The counts of the observed pods (upstream `computeReplicaStatus`).
fn status(
    set: &StatefulSet,
    revisions: &Revisions<'_>,
    pods: &[SetPod],
    clock: &mut Clock,
) -> Status {
    let mut s = Status {
        observed_generation: set.generation,
        current_revision: revisions.current.to_string(),
        update_revision: revisions.update.to_string(),
        ..Status::default()
    };
    for p in pods {
        s.replicas += 1;
        if running_and_ready(p) {
            s.ready_replicas += 1;
            if clock.available(p) {
                s.available_replicas += 1;
            }
        }
        if !p.pod.deleting {
            if revision_of(p) == revisions.current {
                s.current_replicas += 1;
            }
            if revision_of(p) == revisions.update {
                s.updated_replicas += 1;
            }
        }
    }
    s
}

/// Upstream `completeRollingUpdate`: once every pod is updated and ready, the update revision
/// becomes the current one.
fn complete_rolling_update(set: &StatefulSet, s: &mut Status) {
    if matches!(set.strategy, Strategy::RollingUpdate { .. })
        && s.updated_replicas == s.replicas
        && s.ready_replicas == s.replicas
    {
        s.current_replicas = s.updated_replicas;
        s.current_revision = s.update_revision.clone();
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
