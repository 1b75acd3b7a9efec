//! The Deployment controller's planner (upstream `syncDeployment`): from a Deployment, the
//! ReplicaSets of its namespace and its pods, the writes of one pass: claim ReplicaSets, then
//! (deleting) only status; (paused or scaled) proportional scaling; otherwise one rollout step
//! of the strategy; then the status with its conditions, and when to look again.
//!
//! The planner simulates upstream's sequence of writes on copies: each write is an [`Action`]
//! applied in order by the loop, and later steps see the earlier ones' effect, as upstream's
//! steps see the objects its client returned. A failed write ends the pass; the next pass
//! plans again from what is stored.
//!
//! Planner: pure, no I/O.

use super::claim::{self, Claim};
use super::progress;
use super::status::{self, spec_replicas};
use super::{proportional, recreate, rolling, surge, sync};
use berth_registry::RegistryError;
use berth_registry::events::EventType;
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use berth_shared::selector::{LabelSelector, SelectorError};
use jiff::Timestamp;
use std::cmp::Ordering;
use std::time::Duration;

/// A pod of the namespace that matches the Deployment's selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// The uid of the pod's controller (a ReplicaSet), if any.
    pub controller_uid: Option<String>,
    pub phase: Option<String>,
}

/// What one pass observes.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub deployment: &'a Deployment,
    /// Its `spec.selector`, parsed ([`selector`]).
    pub selector: &'a LabelSelector,
    /// Every ReplicaSet of the Deployment's namespace.
    pub replica_sets: &'a [ReplicaSet],
    /// The pods of the namespace that match the Deployment's selector.
    pub pods: &'a [PodInfo],
}

/// One write, in the order the loop must apply them.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Add the Deployment's controller reference to an orphan ReplicaSet.
    AdoptReplicaSet {
        name: String,
        uid: String,
    },
    /// Remove the Deployment's owner reference from a ReplicaSet that stopped matching.
    ReleaseReplicaSet {
        name: String,
        uid: String,
    },
    CreateReplicaSet(Box<ReplicaSet>),
    /// Replace a ReplicaSet; conditional on the `resourceVersion` it carries (or on the one the
    /// loop's own earlier write in this pass produced).
    UpdateReplicaSet(Box<ReplicaSet>),
    DeleteReplicaSet {
        name: String,
        uid: String,
    },
    /// Set the Deployment's `deployment.kubernetes.io/revision` annotation.
    SetRevision(String),
    /// Replace the Deployment's status.
    UpdateStatus(Box<DeploymentStatus>),
    /// Record an event on the Deployment (component `deployment-controller`).
    Event {
        kind: EventType,
        reason: &'static str,
        message: String,
    },
}

/// The writes of one pass and when to run again (besides watch events).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub requeue_after: Option<Duration>,
}

/// The pass stops here (a name collision was recorded in the status).
#[derive(Debug)]
pub(super) struct Halt;

pub(super) fn name(rs: &ReplicaSet) -> &str {
    rs.metadata.name.as_deref().unwrap_or_default()
}

pub(super) fn uid(rs: &ReplicaSet) -> &str {
    rs.metadata.uid.as_deref().unwrap_or_default()
}

/// The Deployment's selector (one without a spec selects nothing).
pub fn selector(d: &Deployment) -> Result<LabelSelector, SelectorError> {
    let spec = d.spec.as_ref();
    let parsed = spec
        .map(|s| LabelSelector::from_k8s(&s.selector))
        .transpose()?;
    Ok(parsed.unwrap_or_else(LabelSelector::nothing))
}

/// Whether a pass needs the Deployment's pods: only Recreate (old pods must be gone) and the
/// history clean-up (a scaled-down ReplicaSet goes only once no pod refers to it) read them;
/// reading every pod of a large Deployment on each pass is skipped otherwise.
pub fn needs_pods(d: &Deployment, replica_sets: &[ReplicaSet]) -> bool {
    let strategy = d.spec.as_ref().and_then(|s| s.strategy.as_ref());
    let recreate = strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate");
    recreate
        || replica_sets.iter().any(|rs| {
            rs.spec.as_ref().and_then(|s| s.replicas) == Some(0)
                && rs.status.as_ref().is_none_or(|s| s.replicas == 0)
        })
}

/// Upstream `ReplicaSetsByCreationTimestamp`: older first, then by name.
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let at = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    at(a).cmp(&at(b)).then_with(|| name(a).cmp(name(b)))
}

/// The working state of one pass: the Deployment and its ReplicaSets as the writes planned so
/// far leave them.
pub(super) struct Pass<'a> {
    pub d: Deployment,
    pub rss: Vec<ReplicaSet>,
    /// Index in `rss` of the ReplicaSet whose template is the Deployment's, once known.
    pub new: Option<usize>,
    pub namespace_rss: &'a [ReplicaSet],
    pub pods: &'a [PodInfo],
    pub now: Timestamp,
    pub actions: Vec<Action>,
}

impl Pass<'_> {
    pub fn desired(&self) -> i32 {
        surge::desired(&self.d)
    }

    /// `spec.replicas + maxSurge`, the `max-replicas` annotation.
    pub fn max_total(&self) -> i32 {
        self.desired() + surge::max_surge(&self.d)
    }

    pub fn replicas(&self, i: usize) -> i32 {
        spec_replicas(&self.rss[i])
    }

    /// Indices of every ReplicaSet but the new one.
    pub fn old(&self) -> Vec<usize> {
        (0..self.rss.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// Indices of every ReplicaSet, the new one last.
    pub fn all(&self) -> Vec<usize> {
        let mut v = self.old();
        v.extend(self.new);
        v
    }

    /// Those of `idx` with a non-zero `spec.replicas` (upstream `FilterActiveReplicaSets`).
    pub fn active(&self, idx: &[usize]) -> Vec<usize> {
        idx.iter()
            .copied()
            .filter(|i| self.replicas(*i) > 0)
            .collect()
    }

    pub fn sum(&self, idx: &[usize], f: fn(&ReplicaSet) -> i32) -> i32 {
        idx.iter().map(|i| f(&self.rss[*i])).sum()
    }

    pub fn sort(&self, idx: &mut [usize], cmp: impl Fn(&ReplicaSet, &ReplicaSet) -> Ordering) {
        idx.sort_by(|a, b| cmp(&self.rss[*a], &self.rss[*b]));
    }

    pub fn event(&mut self, kind: EventType, reason: &'static str, message: String) {
        self.actions.push(Action::Event {
            kind,
            reason,
            message,
        });
    }

    /// Upstream `scaleReplicaSet`: sets the size and the replicas annotations; an event when
    /// the size changed. True when it did.
    pub fn scale(&mut self, i: usize, to: i32, operation: &str) -> bool {
        let (desired, max) = (self.desired(), self.max_total());
        let from = self.replicas(i);
        let rs = &mut self.rss[i];
        let resize = from != to;
        if !resize && !super::revision::replicas_annotations_need_update(rs, desired, max) {
            return false;
        }
        rs.spec.get_or_insert_with(Default::default).replicas = Some(to);
        super::revision::set_replicas_annotations(rs, desired, max);
        let (update, rs_name) = (Box::new(rs.clone()), name(rs).to_string());
        self.actions.push(Action::UpdateReplicaSet(update));
        if resize {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled {operation} replica set {rs_name} to {to} from {from}"),
            );
        }
        resize
    }

    /// Upstream `scaleReplicaSetAndRecordEvent`: nothing when the size is right.
    pub fn scale_and_record(&mut self, i: usize, to: i32) -> bool {
        let from = self.replicas(i);
        if from == to {
            return false;
        }
        self.scale(i, to, if from < to { "up" } else { "down" })
    }
}

/// How a pass ends: which status sync upstream runs.
enum Finish {
    /// `syncDeploymentStatus`: counts and `Available` only.
    Status,
    /// `syncRolloutStatus`: also progress and the deadline.
    Rollout,
    /// Stopped early: write what changed in memory.
    Halted,
}

fn selects_everything(d: &Deployment) -> bool {
    d.spec.as_ref().is_none_or(|s| {
        s.selector
            .match_labels
            .as_ref()
            .is_none_or(|m| m.is_empty())
            && s.selector
                .match_expressions
                .as_ref()
                .is_none_or(|m| m.is_empty())
    })
}

/// Plans one pass for `input.deployment` at `now`.
pub fn plan(input: Input<'_>, now: Timestamp) -> Plan {
    let d = input.deployment;
    if selects_everything(d) {
        return selecting_all(d);
    }
    let mut pass = Pass {
        d: d.clone(),
        rss: Vec::new(),
        new: None,
        namespace_rss: input.replica_sets,
        pods: input.pods,
        now,
        actions: Vec::new(),
    };
    claim_replica_sets(&mut pass, input.selector);
    // The status as stored, as far as this plan knows: later writes compare against it.
    let mut stored = status::canonical(&d.status.clone().unwrap_or_default());
    let finish = if d.metadata.deletion_timestamp.is_some() {
        sync::sync_status_only(&mut pass);
        Ok(Finish::Status)
    } else {
        // Upstream writes the paused/resumed condition at once, so it is seen even when the
        // rest of the pass replaces it.
        if progress::check_paused(&mut pass.d, now) {
            stored = status::canonical(&pass.d.status.clone().unwrap_or_default());
            pass.actions
                .push(Action::UpdateStatus(Box::new(stored.clone())));
        }
        let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused || sync::is_scaling_event(&mut pass) {
            proportional::sync(&mut pass).map(|()| Finish::Status)
        } else if surge::is_recreate(d) {
            recreate::rollout(&mut pass).map(|()| Finish::Rollout)
        } else {
            rolling::rollout(&mut pass).map(|()| Finish::Rollout)
        }
    };
    finish_pass(pass, &stored, finish.unwrap_or(Finish::Halted))
}

/// Upstream's answer to an empty selector: a warning, and the generation observed.
fn selecting_all(d: &Deployment) -> Plan {
    let mut actions = vec![Action::Event {
        kind: EventType::Warning,
        reason: "SelectingAll",
        message: "This deployment is selecting all pods. A non-empty selector is required.".into(),
    }];
    let mut status = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        status.observed_generation = Some(generation);
        actions.push(Action::UpdateStatus(Box::new(status)));
    }
    Plan {
        actions,
        requeue_after: None,
    }
}

/// Upstream's answer to a failed creation of the ReplicaSet `rs_name`: `ReplicaSetCreateError`
/// in the Progressing condition (with a progress deadline), then a warning event; nothing when
/// it exists already or creating it is forbidden (a quota or a terminating namespace).
pub fn failed_create(
    d: &Deployment,
    rs_name: &str,
    error: &RegistryError,
    now: Timestamp,
) -> Vec<Action> {
    if matches!(
        error,
        RegistryError::AlreadyExists { .. } | RegistryError::Forbidden(_)
    ) {
        return Vec::new();
    }
    let status = progress::failed_create(d, rs_name, &error.to_string(), now);
    let event = Action::Event {
        kind: EventType::Warning,
        reason: progress::FAILED_RS_CREATE,
        message: format!("Failed to create new replica set {rs_name:?}: {error}"),
    };
    let status = status.map(|s| Action::UpdateStatus(Box::new(s)));
    status.into_iter().chain([event]).collect()
}

/// Claims the namespace's ReplicaSets into `pass.rss`, planning adoptions and releases first.
fn claim_replica_sets(pass: &mut Pass<'_>, selector: &LabelSelector) {
    let mut rss = Vec::new();
    for rs in pass.namespace_rss {
        match claim::claim(&pass.d, selector, rs) {
            Claim::Owned => rss.push(rs.clone()),
            Claim::Adopt => {
                pass.actions.push(Action::AdoptReplicaSet {
                    name: name(rs).into(),
                    uid: uid(rs).into(),
                });
                let mut adopted = rs.clone();
                adopted
                    .metadata
                    .owner_references
                    .get_or_insert_with(Vec::new)
                    .push(claim::controller_ref(&pass.d));
                rss.push(adopted);
            }
            Claim::Release => pass.actions.push(Action::ReleaseReplicaSet {
                name: name(rs).into(),
                uid: uid(rs).into(),
            }),
            Claim::Ignore => {}
        }
    }
    pass.rss = rss;
}

fn finish_pass(mut pass: Pass<'_>, stored: &DeploymentStatus, finish: Finish) -> Plan {
    let all: Vec<&ReplicaSet> = pass.all().into_iter().map(|i| &pass.rss[i]).collect();
    let new_rs = pass.new.map(|i| &pass.rss[i]);
    let (new_status, requeue_after) = match finish {
        // After a collision the bumped count is written; look again soon.
        Finish::Halted => (
            pass.d.status.clone().unwrap_or_default(),
            Some(Duration::from_secs(1)),
        ),
        Finish::Status => (status::calculate(&all, new_rs, &pass.d, pass.now), None),
        Finish::Rollout => {
            let calculated = status::calculate(&all, new_rs, &pass.d, pass.now);
            let s = progress::rollout_status(&pass.d, calculated, new_rs, &all, pass.now);
            let after = progress::requeue_after(&pass.d, &s, pass.now);
            (s, after)
        }
    };
    let new_status = status::canonical(&new_status);
    if new_status != *stored {
        pass.actions
            .push(Action::UpdateStatus(Box::new(new_status)));
    }
    Plan {
        actions: pass.actions,
        requeue_after,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
