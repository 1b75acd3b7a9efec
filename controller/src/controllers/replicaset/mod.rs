//! The ReplicaSet controller, which also drives ReplicationControllers (upstream runs one
//! implementation for both through an adapter): keeps `spec.replicas` pods of the template,
//! adopts matching orphans and releases pods that stop matching, deletes the worst pods first
//! on scale-down, and writes the status, the `ReplicaFailure` condition and events.
//!
//! A pass reads the set and its pods from the shared informers (through the pod informer's
//! indexes: the pods the set controls and the unowned ones), plans with [`plan`] and
//! [`status`], and applies through the registry. The runtime releases a key only once the
//! informers reflect the pass's writes, so the next pass of a key (never concurrent with this
//! one) sees every pod this pass created or deleted: that is what upstream's
//! ControllerExpectations guard against, and why none are kept here.

mod apply;
pub mod plan;
pub mod rank;
pub mod routing;
pub mod status;
pub mod view;

#[cfg(test)]
mod tests;

use super::runtime::{self, Clock, Context, Reconciler};
use crate::events::{EventType, Recorder};
use crate::informer::{Informer, ORPHANS_BY_NAMESPACE};
use crate::registry::{Registry, RegistryError};
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{PODS, REPLICA_SETS, REPLICATION_CONTROLLERS, ResourceType};
use routing::{ParsedSet, SetKey, Sets};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use view::{Kind, Pod, Set};

/// Every set gets a pass this often, whatever the events.
pub const RESYNC: Duration = Duration::from_secs(300);
/// A set runs again no sooner than this many times its last pass's duration after it: a pass
/// reads every pod of the set, and with thousands of pods each reporting its status the set
/// would otherwise be reconciled back to back (see `Queue::set_pace`).
const PACE: u32 = 8;
/// Passes of different sets that may run at once.
const WORKERS: usize = 4;

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error("{0}")]
    Template(&'static str),
    /// A pod creation failed; the message is the API error, as upstream reports it.
    #[error("{0}")]
    Create(RegistryError),
    #[error("unable to delete pods: {0}")]
    Delete(RegistryError),
}

impl ErrorPolicy for SyncError {
    fn retry(&self) -> Retry {
        match self {
            SyncError::Api(e) => e.retry(),
            // A failed create or delete is retried with backoff whatever the cause, as
            // upstream's ReplicaSet controller does (a quota or a webhook may clear).
            SyncError::Create(_) | SyncError::Delete(_) => Retry::Backoff,
            SyncError::Template(_) => Retry::Never,
        }
    }
}

fn set_type(kind: Kind) -> &'static ResourceType {
    match kind {
        Kind::ReplicaSet => REPLICA_SETS,
        Kind::ReplicationController => REPLICATION_CONTROLLERS,
    }
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    sets: Sets,
    pods: Arc<Informer>,
    rs_events: Recorder,
    rc_events: Recorder,
}

impl Controller {
    fn record(&self, set: &Set, obj: &Value, t: EventType, reason: &str, message: &str) {
        let recorder = match set.kind {
            Kind::ReplicaSet => &self.rs_events,
            Kind::ReplicationController => &self.rc_events,
        };
        if let Err(e) = recorder.record(obj, t, reason, message) {
            tracing::debug!(error = %e, reason, "recording event");
        }
    }

    /// One pass over one set.
    fn sync(&self, key: &SetKey) -> Result<Outcome, SyncError> {
        let _span = tracing::debug_span!("reconcile", controller = "replicaset", %key).entered();
        let Some(obj) = self
            .sets
            .informer(key.kind)
            .get(Some(&key.namespace), &key.name)
        else {
            return Ok(Outcome::Done);
        };
        let raw = obj.value().map_err(RegistryError::from)?;
        let set = match Set::from_value(key.kind, &raw) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%key, error = %e, "ignoring set");
                return Ok(Outcome::Done);
            }
        };
        let now = self.clock.now();
        let pods = self.observe_pods(&set);
        let claim = plan::claim(&set, &pods);
        for pod in &claim.release {
            self.apply_release(&set, pod)?;
        }
        let mut claimed = claim.owned.clone();
        for pod in claim.adopt {
            if self.apply_adopt(&set, pod)? {
                claimed.push(pod);
            }
        }
        let per_node = if claimed.len() > usize::try_from(set.replicas).unwrap_or(0) {
            self.observe_pods_per_node(&set, &claimed)
        } else {
            HashMap::new()
        };
        let failure = match plan::scale(&set, &claimed, &per_node, now) {
            plan::Scale::Steady => None,
            plan::Scale::Create(n) => self.apply_create(&set, &raw, n)?,
            plan::Scale::Delete(victims) => self.apply_delete(&set, &raw, &victims)?,
        };
        let message = failure.as_ref().map(ToString::to_string);
        let new = status::compute(&set, &claimed, message.as_deref(), now);
        if status::needs_write(&set, &new) {
            self.apply_status(&set, &new)?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(status::next_availability_check(&set, &claimed, now)
            .map_or(Outcome::Done, Outcome::RequeueAfter))
    }

    /// The pods the set controls and the unowned pods of its namespace its selector matches
    /// (what claiming needs: pods of other controllers are never touched), from the pod
    /// informer's indexes rather than a scan of every pod in the namespace.
    fn observe_pods(&self, set: &Set) -> Vec<Arc<Pod>> {
        let owned = self.pods.controlled_by(&set.uid);
        let orphans = self.pods.by_index(ORPHANS_BY_NAMESPACE, &set.namespace);
        // The parsed views are shared with the cache, not copied.
        let mut pods: Vec<Arc<Pod>> = owned
            .iter()
            .chain(orphans.iter().filter(|p| set.selector.matches(p.labels())))
            .map(|p| p.view::<Pod>())
            .collect();
        // In name order, as a list would give them: plans must not depend on hash order.
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }

    /// Active pods per node among the pods of the sets sharing this set's controller
    /// (upstream's `getIndirectlyRelatedPods`); for a set without a controller, its own pods
    /// (upstream would rank them all equal; the documented rule — more replicas on the node
    /// go first, RS-16 — is applied instead).
    fn observe_pods_per_node(&self, set: &Set, claimed: &[&Pod]) -> HashMap<String, usize> {
        let Some(uid) = &set.controller_uid else {
            return rank::pods_per_node(claimed.iter().copied());
        };
        let selectors: Vec<_> = [Kind::ReplicaSet, Kind::ReplicationController]
            .into_iter()
            .flat_map(|k| self.sets.informer(k).controlled_by(uid))
            .filter(|o| o.namespace() == Some(set.namespace.as_str()))
            .filter_map(|o| o.view::<ParsedSet>().0.as_ref().map(|s| s.selector.clone()))
            .collect();
        let related: Vec<Arc<Pod>> = self
            .pods
            .in_namespace(&set.namespace)
            .iter()
            .filter(|p| selectors.iter().any(|s| s.matches(p.labels())))
            .map(|p| p.view::<Pod>())
            .collect();
        rank::pods_per_node(related.iter().map(|p| &**p))
    }
}

impl Reconciler for Controller {
    type Key = SetKey;
    type Error = SyncError;

    fn reconcile(&self, key: &SetKey) -> Result<Outcome, SyncError> {
        self.sync(key)
    }
}

/// Runs the ReplicaSet / ReplicationController controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let pods = ctx.informer(PODS);
    let sets = || Sets {
        replica_sets: ctx.informer(REPLICA_SETS),
        controllers: ctx.informer(REPLICATION_CONTROLLERS),
    };
    let controller = Arc::new(Controller {
        rs_events: ctx.recorder(Kind::ReplicaSet.component()),
        rc_events: ctx.recorder(Kind::ReplicationController.component()),
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        sets: sets(),
        pods,
    });
    let (routes, all) = (sets(), sets());
    runtime::Controller::keyed("replicaset", &ctx)
        .watches(REPLICA_SETS, |d| {
            vec![SetKey::of(Kind::ReplicaSet, &d.object)]
        })
        .watches(REPLICATION_CONTROLLERS, |d| {
            vec![SetKey::of(Kind::ReplicationController, &d.object)]
        })
        .watches(PODS, move |d| routing::pod_change(&routes, d))
        .resync_with(RESYNC, move || all.all())
        .paced(PACE)
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
