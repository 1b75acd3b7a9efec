//! The controllers that run inside the control plane. Each is a pure planner (`plan.rs`) and a
//! thin loop on the shared reconcile runtime.

pub mod deployment;
mod follow;
pub mod gc;
pub mod namespace;
pub mod nodeipam;
pub mod replicaset;

use crate::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts every controller; they stop when `shutdown` is cancelled.
pub fn start(
    registry: Registry,
    cluster_cidr: nodeipam::plan::Cidr,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
    vec![
        deployment::start(registry.clone(), shutdown.clone()),
        gc::start(registry.clone(), shutdown.clone()),
        namespace::start(registry.clone(), shutdown.clone()),
        nodeipam::start(registry.clone(), cluster_cidr, shutdown.clone()),
        replicaset::start(registry, shutdown),
    ]
}
