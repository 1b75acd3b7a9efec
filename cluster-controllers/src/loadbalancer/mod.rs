//! The load-balancer address controller (Berth's answer to a cloud's service controller on
//! bare metal, as MetalLB's controller and k3s ServiceLB are): gives every `type: LoadBalancer`
//! Service of Berth's class an address from the `--service-lb-pool` pools (or, without pools,
//! the Ready nodes' addresses) in `status.loadBalancer.ingress` ([`plan`]). The agents' proxies
//! answer on those addresses and one elected agent announces each on its segment.
//!
//! Nothing is kept but the Services' status: every pass rebuilds who holds what from the
//! informer, and one worker makes passes one at a time (the runtime waits for the cache to
//! show a pass's write before the next), so two Services never get one address. A released
//! address (a Service deleted, or no longer a LoadBalancer) re-enqueues the Services still
//! waiting for one.

pub mod plan;
pub mod pool;
#[cfg(test)]
mod tests;

use crate::load_balancer_status::{address_changed, apply_load_balancer_status, ready_address};
use berth_registry::events::{self, Recorder};
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Delta, DeltaType, Informer, Object, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::k8s_openapi::api::core::v1::Service;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{NODES, SERVICES};
use core::net::Ipv4Addr;
use pool::Pool;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const COMPONENT: &str = "service-lb-controller";
const RESYNC: Duration = Duration::from_secs(300);

struct Controller {
    registry: Registry,
    services: Arc<Informer>,
    nodes: Arc<Informer>,
    pools: Arc<Vec<Pool>>,
    recorder: Recorder,
}

/// Whether a stored Service lists any ingress.
fn has_ingress(o: &Object) -> bool {
    o.value().ok().is_some_and(|v| {
        v.pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .is_some_and(|i| !i.is_empty())
    })
}

/// The keys of our LoadBalancers that have no address yet.
fn pending(services: &Informer) -> Vec<ObjectKey> {
    services
        .list()
        .iter()
        .filter(|o| !has_ingress(o))
        .filter(|o| o.decode::<Service>().is_ok_and(|s| plan::is_ours(&s)))
        .map(|o| o.key().clone())
        .collect()
}

/// The keys of every LoadBalancer of ours.
fn all_ours(services: &Informer) -> Vec<ObjectKey> {
    services
        .list()
        .iter()
        .filter(|o| o.decode::<Service>().is_ok_and(|s| plan::is_ours(&s)))
        .map(|o| o.key().clone())
        .collect()
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        // Gone: what it held is free, as no status lists it any more.
        let Some(obj) = self.services.get_key(key) else {
            return Ok(Outcome::Done);
        };
        let Some(svc) = obj.decoded::<Service>() else {
            return Ok(Outcome::Done);
        };
        let all: Vec<Service> = self
            .services
            .list()
            .iter()
            .filter(|o| has_ingress(o))
            .filter_map(|o| o.decoded())
            .collect();
        let held = plan::holders(&all, &self.pools);
        let mut ready_nodes: Vec<Ipv4Addr> = self
            .nodes
            .list()
            .iter()
            .filter_map(|n| ready_address(n))
            .collect();
        ready_nodes.sort();
        ready_nodes.dedup();
        let decided = plan::plan_service(
            &svc,
            plan::Inputs {
                pools: &self.pools,
                held: &held,
                ready_nodes: &ready_nodes,
            },
        );
        if let Some(ips) = &decided.ingress {
            apply_load_balancer_status(
                &self.registry,
                SERVICES,
                key,
                &svc,
                &plan::ingress_of(ips),
            )?;
        }
        if let Some(e) = &decided.event {
            let mut v = serde_json::to_value(&svc)?;
            v["apiVersion"] = "v1".into();
            v["kind"] = "Service".into();
            events::record(
                &self.recorder,
                &v,
                events::event_type(e.warning),
                e.reason,
                &e.message,
            );
        }
        Ok(Outcome::Done)
    }
}

/// Node changes matter only without pools, and only when a node's readiness or address does.
fn node_change(services: &Informer, pools: &[Pool], d: &Delta) -> Vec<ObjectKey> {
    if !pools.is_empty() {
        return Vec::new();
    }
    if !address_changed(d, ready_address) {
        return Vec::new();
    }
    all_ours(services)
}

/// A Service that held addresses and is gone or changed may have freed one.
fn service_change(services: &Informer, d: &Delta) -> Vec<ObjectKey> {
    let freed = match d.kind {
        DeltaType::Deleted => has_ingress(&d.object),
        _ => d.old.as_deref().is_some_and(has_ingress),
    };
    if freed { pending(services) } else { Vec::new() }
}

/// Parses the `--service-lb-pool` values.
pub fn parse_pools(given: &[String]) -> Result<Vec<Pool>, pool::PoolError> {
    given.iter().map(|p| Pool::parse(p)).collect()
}

/// Runs the load-balancer address controller until `shutdown`.
pub async fn run(ctx: Context, pools: Vec<Pool>, shutdown: CancellationToken) {
    let services = ctx.informer(SERVICES);
    let pools = Arc::new(pools);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        services: services.clone(),
        nodes: ctx.informer(NODES),
        pools: pools.clone(),
        recorder: ctx.recorder(COMPONENT),
    });
    let for_nodes = services.clone();
    let for_services = services.clone();
    // One worker: two passes at once could hand out one address twice.
    runtime::Controller::new("service-lb", &ctx, SERVICES)
        .watches(SERVICES, move |d| service_change(&for_services, d))
        .watches(NODES, move |d| node_change(&for_nodes, &pools, d))
        .resync(RESYNC)
        .workers(1)
        .run(controller, shutdown)
        .await;
}
