//! The Endpoints controller (upstream's `endpoint-controller`): keeps the Endpoints object of
//! every Service with a selector in step with the pods it selects ([`plan`], pods judged as
//! the EndpointSlice controller judges them), and deletes the Endpoints of a Service that is
//! gone. Keyed by Service; a pod change concerns the Services of its namespace selecting it
//! before or after; a deleted Endpoints its Service (upstream recreates it).

pub mod plan;

use super::endpointslice::routing;
use crate::delete::delete_unchanged;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{DeltaType, Informer, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{ENDPOINTS, PODS, SERVICES};
use plan::Action;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const WORKERS: usize = 2;
const RESYNC: Duration = Duration::from_secs(300);

struct Controller {
    registry: Registry,
    services: Arc<Informer>,
    pods: Arc<Informer>,
    endpoints: Arc<Informer>,
}

impl Controller {
    fn apply(&self, ns: &str, name: &str, action: Action) -> Result<(), RegistryError> {
        let opts = WriteOptions::default();
        match action {
            Action::Nothing => Ok(()),
            Action::Create(ep) => {
                let value = serde_json::to_value(&ep)?;
                self.registry.create(ENDPOINTS, Some(ns), value, &opts)?;
                Ok(())
            }
            Action::Update(ep) => {
                let value = serde_json::to_value(&ep)?;
                match self
                    .registry
                    .update(ENDPOINTS, Some(ns), name, value, Part::Main, &opts)
                {
                    // Gone meanwhile: the next pass creates it again.
                    Err(RegistryError::NotFound { .. }) => {
                        Err(RegistryError::conflict(ENDPOINTS, name))
                    }
                    other => other.map(|_| ()),
                }
            }
            Action::Delete(ep) => {
                delete_unchanged(&self.registry, ENDPOINTS, Some(ns), name, &ep.metadata)
            }
        }
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let ns = key.namespace().unwrap_or_default();
        let svc_obj = self.services.get_key(key);
        let svc: Option<Service> = match &svc_obj {
            None => None,
            Some(o) if o.view::<routing::ServiceSelector>().0.is_none() => {
                return Ok(Outcome::Done);
            }
            Some(o) => match o.decode() {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(service = %key, error = %e, "ignoring a Service that does not decode");
                    return Ok(Outcome::Done);
                }
            },
        };
        let current: Option<Endpoints> = match self.endpoints.get_key(key) {
            None => None,
            Some(o) => match o.decode() {
                Ok(e) => Some(e),
                Err(e) => {
                    tracing::warn!(endpoints = %key, error = %e, "ignoring Endpoints that do not decode");
                    return Ok(Outcome::Done);
                }
            },
        };
        let decoded = match svc {
            Some(_) => routing::pods_in(&self.pods, ns),
            None => Vec::new(),
        };
        let pods: Vec<&Pod> = decoded.iter().filter_map(|p| p.0.as_ref()).collect();
        let action = plan::plan_endpoints(svc.as_ref(), &pods, current.as_ref());
        if action != Action::Nothing {
            tracing::debug!(service = %key, ?action, "writing endpoints");
        }
        self.apply(ns, key.name(), action)?;
        Ok(Outcome::Done)
    }
}

/// Runs the Endpoints controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let services = ctx.informer(SERVICES);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        services: services.clone(),
        pods: ctx.informer(PODS),
        endpoints: ctx.informer(ENDPOINTS),
    });
    let for_pods = services.clone();
    runtime::Controller::new("endpoints", &ctx, SERVICES)
        .watches(PODS, move |d| routing::pod_change(&for_pods, d))
        .watches(ENDPOINTS, |d| match d.kind {
            DeltaType::Deleted => vec![d.object.key().clone()],
            _ => Vec::new(),
        })
        .resync(RESYNC)
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
