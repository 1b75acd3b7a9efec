//! The Deployment controller: watches Deployments, ReplicaSets and pods, and reconciles each
//! Deployment (`namespace/name`) with [`plan::plan`]: it creates, scales, adopts, releases and
//! deletes ReplicaSets (the ReplicaSet controller makes their pods) and writes the
//! Deployment's revision annotation, status and `ScalingReplicaSet` events.

mod apply;
mod claim;
mod history;
pub mod plan;
mod progress;
mod proportional;
mod recreate;
mod revision;
mod rolling;
mod routing;
mod status;
pub(crate) mod surge;
mod sync;
pub(crate) mod template;
mod versions;
mod view;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use super::workload::{self, Parsed, SyncError};
use berth_registry::events::Recorder;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::apps::v1::ReplicaSet;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{DEPLOYMENTS, PODS, REPLICA_SETS};
use plan::PodInfo;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use versions::Versions;
use view::{DeploymentView, Observed};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "deployment-controller";

/// The controller: the registry it writes through, the caches it reads and its recorder.
pub struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    recorder: Recorder,
    deployments: Arc<Informer>,
    replica_sets: Arc<Informer>,
    pods: Arc<Informer>,
}

impl Controller {
    pub fn new(ctx: &Context) -> Controller {
        Controller {
            registry: ctx.registry.clone(),
            clock: ctx.clock.clone(),
            recorder: ctx.recorder(COMPONENT),
            deployments: ctx.informer(DEPLOYMENTS),
            replica_sets: ctx.informer(REPLICA_SETS),
            pods: ctx.informer(PODS),
        }
    }

    /// The Deployment `key`, its namespace's ReplicaSets and, when the plan needs them, the
    /// pods its selector matches; `None` when it is gone or unreadable.
    fn observe(&self, key: &ObjectKey) -> Result<Option<Observed>, SyncError> {
        let Some((obj, owner)) =
            workload::parsed::observe::<DeploymentView>(&self.deployments, key)
        else {
            return Ok(None);
        };
        let raw = obj.value().map_err(RegistryError::from)?;
        let in_namespace = self.replica_sets.in_namespace(&owner.namespace);
        let parsed = workload::parsed::each::<ReplicaSet>(in_namespace);
        let replica_sets: Vec<ReplicaSet> = parsed.iter().map(|rs| ReplicaSet::clone(rs)).collect();
        let mut pods = Vec::new();
        if plan::needs_pods(&owner.deployment, &replica_sets) {
            let mut matching = self.pods.in_namespace(&owner.namespace);
            matching.retain(|p| owner.selector.matches(p.labels()));
            matching.sort_by(|a, b| a.name().cmp(b.name()));
            pods.extend(matching.iter().map(|p| PodInfo::of(p)));
        }
        Ok(Some(Observed {
            raw,
            owner,
            replica_sets,
            pods,
        }))
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = SyncError;

    /// One pass over one Deployment: its plan's writes in order, up to the first failure.
    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        let Some(seen) = self.observe(key)? else {
            return Ok(Outcome::Done);
        };
        let now = self.clock.now();
        let plan = plan::plan(seen.input(), now);
        let mut versions = Versions::of(&seen.raw);
        for action in plan.actions {
            tracing::debug!(deployment = %key, ?action, "deployment");
            self.apply(&seen, &mut versions, action, now)?;
        }
        Ok(plan
            .requeue_after
            .map_or(Outcome::Done, Outcome::RequeueAfter))
    }
}

/// Runs the Deployment controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let controller = Arc::new(Controller::new(&ctx));
    let replica_sets = ctx.informer(REPLICA_SETS);
    runtime::Controller::new("deployment", &ctx, DEPLOYMENTS)
        .owns(REPLICA_SETS)
        .adopts(REPLICA_SETS, Parsed::<DeploymentView>::selector)
        .watches(PODS, move |d| {
            Vec::from_iter(routing::deleted_pod(&replica_sets, d))
        })
        .workers(4)
        .run(controller, shutdown)
        .await;
}
