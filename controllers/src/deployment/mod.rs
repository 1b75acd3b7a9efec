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

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use super::workload::version_of;
use apply::Applied;
use berth_registry::events::Recorder;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, Object, ObjectKey, View};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{DEPLOYMENTS, PODS, REPLICA_SETS};
use berth_shared::selector::LabelSelector;
use plan::{Input, PodInfo};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "deployment-controller";

/// Errors of one pass; a pass that fails is retried as its [`ErrorPolicy`] says.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error("decoding {key}: {source}")]
    Decode {
        key: String,
        source: serde_json::Error,
    },
    #[error("encoding a {kind}: {source}")]
    Encode {
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// The Deployment read from the cache is gone, replaced or being deleted: it adopts
    /// nothing (upstream's `RecheckDeletionTimestamp` error).
    #[error("{0} is gone or being deleted: not adopting")]
    OwnerGone(String),
}

impl ErrorPolicy for DeploymentError {
    fn retry(&self) -> Retry {
        match self {
            DeploymentError::Api(e) => e.retry(),
            // The stored Deployment cannot be read or planned: only a change of it can help.
            DeploymentError::Decode { .. } | DeploymentError::Plan(_) => Retry::Never,
            DeploymentError::Encode { .. } | DeploymentError::OwnerGone(_) => Retry::Backoff,
        }
    }
}

/// A ReplicaSet decoded once per version, shared by every pass that reads it.
struct DecodedReplicaSet(Option<ReplicaSet>);

impl View for DecodedReplicaSet {
    fn derive(obj: &Object) -> Self {
        DecodedReplicaSet(obj.decode().ok())
    }
}

/// What a pass reads.
struct Observed {
    raw: Value,
    deployment: Deployment,
    selector: LabelSelector,
    replica_sets: Vec<ReplicaSet>,
    pods: Vec<PodInfo>,
}

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

    fn observe(&self, ns: &str, name: &str) -> Result<Option<Observed>, DeploymentError> {
        let Some(stored) = self.deployments.get(Some(ns), name) else {
            return Ok(None);
        };
        let raw = stored.value().map_err(RegistryError::from)?;
        let key = format!("deployment {ns}/{name}");
        let deployment: Deployment = serde_json::from_value(raw.clone())
            .map_err(|source| DeploymentError::Decode { key, source })?;
        let mut items = self.replica_sets.in_namespace(ns);
        items.sort_by(|a, b| a.name().cmp(b.name()));
        let mut rss = Vec::with_capacity(items.len());
        for item in items {
            match &item.view::<DecodedReplicaSet>().0 {
                Some(rs) => rss.push(rs.clone()),
                None => tracing::warn!(rs = item.name(), "skipping an undecodable ReplicaSet"),
            }
        }
        let selector = plan::selector(&deployment)?;
        let mut pods = Vec::new();
        if plan::needs_pods(&deployment, &rss) {
            let mut matching = self.pods.in_namespace(ns);
            matching.retain(|p| selector.matches(p.labels()));
            matching.sort_by(|a, b| a.name().cmp(b.name()));
            // Only the owner and the phase are needed, both decoded already.
            pods.extend(matching.iter().map(|p| PodInfo {
                controller_uid: p.controller().map(|c| c.uid.clone()),
                phase: p.field("status.phase").filter(|s| !s.is_empty()),
            }));
        }
        Ok(Some(Observed {
            raw,
            deployment,
            selector,
            replica_sets: rss,
            pods,
        }))
    }

    /// One pass over the Deployment `ns/name` at `now`. Blocking.
    pub fn reconcile_at(
        &self,
        ns: &str,
        name: &str,
        now: jiff::Timestamp,
    ) -> Result<Outcome, DeploymentError> {
        let Some(seen) = self.observe(ns, name)? else {
            return Ok(Outcome::Done);
        };
        let plan = plan::plan(
            Input {
                deployment: &seen.deployment,
                replica_sets: &seen.replica_sets,
                pods: &seen.pods,
            },
            now,
        )?;
        let mut applied = Applied {
            deployment_version: version_of(&seen.raw),
            replica_set_versions: HashMap::new(),
        };
        for action in plan.actions {
            tracing::debug!(deployment = %format!("{ns}/{name}"), ?action, "deployment");
            self.apply(ns, name, &seen, &mut applied, action, now)?;
        }
        Ok(match plan.requeue_after {
            Some(d) => Outcome::RequeueAfter(d),
            None => Outcome::Done,
        })
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = DeploymentError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, DeploymentError> {
        let ns = key.namespace().unwrap_or("default");
        self.reconcile_at(ns, key.name(), self.clock.now())
    }
}

/// Runs the Deployment controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let controller = Arc::new(Controller::new(&ctx));
    let replica_sets = ctx.informer(REPLICA_SETS);
    runtime::Controller::new("deployment", &ctx, DEPLOYMENTS)
        .owns(REPLICA_SETS)
        .adopts::<routing::Selector>(REPLICA_SETS, |s| s.0.as_ref())
        .watches(PODS, move |d| routing::deleted_pod(&replica_sets, d))
        .workers(4)
        .run(controller, shutdown)
        .await;
}
