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

use super::workload::status::Target;
use super::workload::{self, Parsed, PodControl, SyncError};
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::Informer;
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{PODS, REPLICA_SETS, REPLICATION_CONTROLLERS};
use routing::{SetKey, Sets};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use view::{Kind, Pod, Set};

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    sets: Sets,
    pods: Arc<Informer>,
    rs_pods: PodControl,
    rc_pods: PodControl,
}

impl Controller {
    /// Pod control with the events of the set's kind.
    fn pod_control(&self, set: &Set) -> &PodControl {
        match set.kind {
            Kind::ReplicaSet => &self.rs_pods,
            Kind::ReplicationController => &self.rc_pods,
        }
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
            .filter_map(|o| {
                o.view::<Parsed<Set>>()
                    .0
                    .as_ref()
                    .ok()
                    .map(|s| s.selector.clone())
            })
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

    /// One pass over one set.
    fn reconcile(&self, key: &SetKey) -> Result<Outcome, SyncError> {
        let _span = tracing::debug_span!("reconcile", controller = "replicaset", %key).entered();
        let informer = self.sets.informer(key.kind);
        let Some((obj, set)) = workload::parsed::observe::<Set>(informer, &key.object_key()) else {
            return Ok(Outcome::Done);
        };
        let now = self.clock.now();
        // Claimed through the kit: released, adopted (the set re-read live first).
        let pods: Vec<Arc<Pod>> = plan::owner(&set).claim_views(&self.registry, &self.pods)?;
        let claimed: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
        let per_node = if claimed.len() > usize::try_from(set.replicas).unwrap_or(0) {
            self.observe_pods_per_node(&set, &claimed)
        } else {
            HashMap::new()
        };
        let failure = match plan::scale(&set, &claimed, &per_node, now) {
            plan::Scale::Steady => None,
            // The set's JSON (its template) is read only when pods are made or removed.
            plan::Scale::Create(n) => {
                let raw = obj.value().map_err(RegistryError::from)?;
                self.apply_create(&set, &raw, n)
            }
            plan::Scale::Delete(victims) => {
                let raw = obj.value().map_err(RegistryError::from)?;
                self.apply_delete(&set, &raw, &victims)
            }
        };
        let message = failure.as_ref().map(ToString::to_string);
        let new = status::compute(&set, &claimed, message.as_deref(), now);
        if status::needs_write(&set, &new) {
            let target = Target::of(set.kind.resource(), &set.namespace, &set.name, &set.uid);
            workload::status::write(&self.registry, &target, |obj| {
                status::apply(obj, &new, set.generation)
            })?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(status::next_availability_check(&set, &claimed, now)
            .map_or(Outcome::Done, Outcome::RequeueAfter))
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
        rs_pods: PodControl::new(
            ctx.registry.clone(),
            ctx.recorder(Kind::ReplicaSet.component()),
        ),
        rc_pods: PodControl::new(
            ctx.registry.clone(),
            ctx.recorder(Kind::ReplicationController.component()),
        ),
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        sets: sets(),
        pods,
    });
    let all = sets();
    let mut wiring = runtime::Controller::keyed("replicaset", &ctx);
    for kind in [Kind::ReplicaSet, Kind::ReplicationController] {
        let rt = kind.resource();
        wiring = wiring
            .watches(rt, move |d| vec![SetKey::of(kind, &d.object)])
            .owns_as(PODS, rt, move |ns, name| SetKey::new(kind, ns, name))
            .adopts_as(PODS, rt, Parsed::<Set>::selector, move |o| {
                SetKey::of(kind, o)
            });
    }
    wiring
        .resync_with(workload::RESYNC, move || all.all())
        .paced(workload::PACE)
        .workers(workload::WORKERS)
        .run(controller, shutdown)
        .await;
}
