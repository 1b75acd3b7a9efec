//! The Ingress status controller: writes `status.loadBalancer.ingress` of every Ingress of
//! Berth's class — the addresses of the Ready nodes whose agents serve ingress ([`plan`]) —
//! and rewrites it when a node comes, goes, or changes readiness or address.

pub mod plan;

use crate::load_balancer_status::{address_changed, apply_load_balancer_status, ready_address};
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Delta, Informer, Object, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{INGRESS_CLASSES, INGRESSES, NODES};
use core::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const RESYNC: Duration = Duration::from_secs(300);

struct Controller {
    registry: Registry,
    ingresses: Arc<Informer>,
    classes: Arc<Informer>,
    nodes: Arc<Informer>,
}

/// A Ready node's InternalIP, when its agent serves ingress.
fn serving_address(node: &Object) -> Option<Ipv4Addr> {
    let v = node.value().ok()?;
    let ports = v
        .pointer("/metadata/annotations")?
        .get(berth_shared::ingress_class::PORTS_ANNOTATION)?
        .as_str()?;
    if ports == "none" {
        return None;
    }
    ready_address(node)
}

impl Controller {
    fn serving(&self) -> Vec<Ipv4Addr> {
        let mut out: Vec<Ipv4Addr> = self
            .nodes
            .list()
            .iter()
            .filter_map(|n| serving_address(n))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let Some(ing) = self
            .ingresses
            .get_key(key)
            .and_then(|o| o.decoded::<Ingress>())
        else {
            return Ok(Outcome::Done);
        };
        let classes: Vec<IngressClass> = self
            .classes
            .list()
            .iter()
            .filter_map(|o| o.decoded())
            .collect();
        let Some(entries) = plan::plan_status(&ing, &classes, &self.serving()) else {
            return Ok(Outcome::Done);
        };
        apply_load_balancer_status(&self.registry, INGRESSES, key, &ing, &entries)?;
        Ok(Outcome::Done)
    }
}

/// Every Ingress, when what a node contributes changes.
fn node_change(ingresses: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if !address_changed(d, serving_address) {
        return Vec::new();
    }
    all(ingresses)
}

fn all(ingresses: &Informer) -> Vec<ObjectKey> {
    ingresses.list().iter().map(|o| o.key().clone()).collect()
}

/// Runs the Ingress status controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let ingresses = ctx.informer(INGRESSES);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        ingresses: ingresses.clone(),
        classes: ctx.informer(INGRESS_CLASSES),
        nodes: ctx.informer(NODES),
    });
    let (for_nodes, for_classes) = (ingresses.clone(), ingresses);
    runtime::Controller::new("ingress-status", &ctx, INGRESSES)
        .watches(NODES, move |d| node_change(&for_nodes, d))
        .watches(INGRESS_CLASSES, move |_| all(&for_classes))
        .resync(RESYNC)
        .run(controller, shutdown)
        .await;
}
