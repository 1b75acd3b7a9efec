//! The controllers that run inside the control plane. Each is a pure planner (`plan.rs`) and a
//! [`runtime::Reconciler`] wired to the shared informers with the [`runtime::Controller`]
//! builder.

pub mod clusterrole_aggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod gc;
pub mod history;
pub mod job;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod persistentvolume;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod runtime;
pub mod serviceaccount;
pub mod statefulset;
pub mod tainteviction;
#[cfg(test)]
pub mod testing;
pub mod ttlafterfinished;
pub mod views;
pub mod workload;

use runtime::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts every controller; they stop when `shutdown` is cancelled.
pub fn start(
    ctx: &Context,
    cluster_cidr: nodeipam::plan::Cidr,
    root_ca: String,
    lifecycle: nodelifecycle::Config,
    pod_gc: podgc::Config,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(clusterrole_aggregation::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(cronjob::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(daemonset::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(serviceaccount::run(ctx.clone(), root_ca, shutdown.clone())),
        tokio::spawn(statefulset::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(deployment::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(disruption::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(endpoints::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(endpointslice::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(gc::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(job::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(namespace::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(nodeipam::run(ctx.clone(), cluster_cidr, shutdown.clone())),
        tokio::spawn(nodelifecycle::run(ctx.clone(), lifecycle, shutdown.clone())),
        tokio::spawn(persistentvolume::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(podgc::run(ctx.clone(), pod_gc, shutdown.clone())),
        tokio::spawn(tainteviction::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(ttlafterfinished::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(replicaset::run(ctx.clone(), shutdown)),
    ]
}
