//! The EndpointSlice controller (upstream's `endpointslice-controller`): keeps the
//! EndpointSlices of every Service with a selector in step with the pods it selects
//! ([`plan`], judged by [`pods`]). Keyed by Service; a pod change concerns the Services of its
//! namespace selecting it before or after, a managed slice's change its Service. The slices
//! of a deleted Service go with it (their owner reference, through the garbage collector).

pub mod plan;
pub mod pods;
pub mod routing;
#[cfg(test)]
mod tests;

use crate::delete::delete_unchanged;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{BY_LABEL, Informer, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::k8s_openapi::api::core::v1::{Pod, Service};
use berth_shared::k8s_openapi::api::discovery::v1::EndpointSlice;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{ENDPOINT_SLICES, NODES, PODS, SERVICES};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const WORKERS: usize = 2;
const RESYNC: Duration = Duration::from_secs(300);

struct Controller {
    registry: Registry,
    services: Arc<Informer>,
    pods: Arc<Informer>,
    slices: Arc<Informer>,
    nodes: Arc<Informer>,
}

impl Controller {
    /// The slices labelled with the Service's name in its namespace (any manager).
    fn observe_slices(&self, ns: &str, name: &str) -> Vec<EndpointSlice> {
        let label = format!("{}={name}", plan::SERVICE_NAME_LABEL);
        self.slices
            .by_index(BY_LABEL, &label)
            .iter()
            .filter(|s| s.namespace() == Some(ns))
            .filter_map(|s| match s.decode() {
                Ok(slice) => Some(slice),
                Err(e) => {
                    tracing::warn!(slice = %s.key(), error = %e, "ignoring a slice that does not decode");
                    None
                }
            })
            .collect()
    }

    fn apply(&self, ns: &str, plan: plan::Plan) -> Result<(), RegistryError> {
        let opts = WriteOptions::default();
        for slice in plan.create {
            let value = serde_json::to_value(&slice)?;
            self.registry
                .create(ENDPOINT_SLICES, Some(ns), value, &opts)?;
        }
        for slice in plan.update {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(&slice)?;
            // Conditional on the version read; a slice gone meanwhile is a conflict: the next
            // pass sees the state without it.
            match self
                .registry
                .update(ENDPOINT_SLICES, Some(ns), &name, value, Part::Main, &opts)
            {
                Err(RegistryError::NotFound { .. }) => {
                    return Err(RegistryError::conflict(ENDPOINT_SLICES, &name));
                }
                other => other?,
            };
        }
        for slice in plan.delete {
            let read = &slice.metadata;
            let name = read.name.as_deref().unwrap_or_default();
            delete_unchanged(&self.registry, ENDPOINT_SLICES, Some(ns), name, read)?;
        }
        Ok(())
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.services.reconcile_cached(key, |obj| {
            if obj.is_deleting() || obj.view::<routing::ServiceSelector>().0.is_none() {
                return Ok(Outcome::Done);
            }
            let Some(svc) = obj.decoded::<Service>() else {
                return Ok(Outcome::Done);
            };
            let ns = key.namespace().unwrap_or_default();
            let decoded = routing::pods_in(&self.pods, ns);
            let pods: Vec<&Pod> = decoded.iter().filter_map(|p| p.0.as_ref()).collect();
            let slices = self.observe_slices(ns, key.name());
            let zones = routing::zones(&self.nodes);
            let plan =
                plan::plan_slices(&svc, &pods, &slices, &zones, plan::MAX_ENDPOINTS_PER_SLICE);
            if !plan.is_empty() {
                tracing::debug!(
                    service = %key,
                    create = plan.create.len(),
                    update = plan.update.len(),
                    delete = plan.delete.len(),
                    "writing endpoint slices"
                );
                self.apply(ns, plan)?;
            }
            Ok(Outcome::Done)
        })
    }
}

/// Runs the EndpointSlice controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let services = ctx.informer(SERVICES);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        services: services.clone(),
        pods: ctx.informer(PODS),
        slices: ctx.informer(ENDPOINT_SLICES),
        nodes: ctx.informer(NODES),
    });
    let for_pods = services.clone();
    runtime::Controller::new("endpointslice", &ctx, SERVICES)
        .watches(PODS, move |d| routing::pod_change(&for_pods, d))
        .watches(ENDPOINT_SLICES, routing::slice_change)
        .reads(NODES)
        .resync(RESYNC)
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
