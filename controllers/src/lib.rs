//! The workload controllers, each a pure planner (`plan.rs`) and a [`berth_runtime::Reconciler`]
//! wired with the [`berth_runtime::Controller`] builder, on the workload kit written once
//! ([`workload`]: claims, pod control, status; [`views`]; [`history`]): ReplicaSet/RC,
//! Deployment, DaemonSet, StatefulSet, Job, CronJob, and the controllers that read their pods'
//! views (TTL after finished, disruption budgets, node lifecycle). The cluster's other
//! controllers are berth-cluster-controllers: a change here rebuilds only this crate.

pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod history;
pub mod job;
pub mod nodelifecycle;
pub mod replicaset;
pub mod statefulset;
pub mod ttlafterfinished;
pub mod views;
pub mod workload;

use berth_runtime::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts these controllers; they stop when `shutdown` is cancelled.
pub fn start(
    ctx: &Context,
    lifecycle: nodelifecycle::Config,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(cronjob::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(daemonset::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(statefulset::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(deployment::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(disruption::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(job::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(nodelifecycle::run(ctx.clone(), lifecycle, shutdown.clone())),
        tokio::spawn(ttlafterfinished::run(ctx.clone(), shutdown.clone())),
        tokio::spawn(replicaset::run(ctx.clone(), shutdown)),
    ]
}
