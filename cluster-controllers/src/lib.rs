//! The cluster's controllers that own no pods: garbage collection (owner references, pods),
//! namespaces, Endpoints and EndpointSlices, taint eviction, PersistentVolume binding and
//! local-path provisioning, the HorizontalPodAutoscaler, node CIDRs, ServiceAccounts,
//! load-balancer addresses and Ingress status. Each is a pure planner and a [`berth_runtime::Reconciler`]; they
//! depend on the runtime and the registry only, not on the workload controllers
//! (berth-controllers), so an edit to either crate leaves the other compiled.

mod condition;
pub mod customresourcedefinition;
mod delete;
pub mod endpoints;
pub mod endpointslice;
pub mod gc;
pub mod ingress;
mod load_balancer_status;
pub mod loadbalancer;
pub mod namespace;
pub mod nodeipam;
pub mod persistentvolume;
pub mod podautoscaler;
pub mod podgc;
pub mod serviceaccount;
pub mod tainteviction;
#[cfg(test)]
mod test_time;

use berth_runtime::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts these controllers; they stop when `shutdown` is cancelled.
pub fn start(
    ctx: &Context,
    cluster_cidr: nodeipam::plan::Cidr,
    root_ca: String,
    pod_gc: podgc::Config,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(serviceaccount::run(ctx.clone(), root_ca, shutdown.clone())),
        tokio::spawn(customresourcedefinition::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(endpoints::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(endpointslice::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(gc::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(ingress::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(namespace::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(nodeipam::run(ctx.clone(), cluster_cidr, shutdown.clone())),
        tokio::spawn(persistentvolume::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(podgc::run(ctx.clone(), pod_gc, shutdown.clone())),
        tokio::spawn(tainteviction::run(ctx.clone(), shutdown)),
    ]
}
