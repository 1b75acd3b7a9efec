//! The node-pressure eviction manager, as the kubelet's: every housekeeping interval it
//! observes the eviction signals and what each pod uses ([`observe`]), judges the thresholds
//! ([`thresholds`]; the node's pressure conditions follow), evicts pods over their local
//! storage limits ([`local_storage`]), and for the most urgent threshold met (memory first)
//! reclaims at node level ([`reclaim`]: dead containers, then unused images) and, if that did
//! not free enough, evicts the first non-critical pod in upstream's order ([`rank`]) — one pod
//! per interval, then it waits (up to 30 s) for that pod to stop. The pod's own worker kills
//! it and reports it `Failed`/`Evicted` ([`crate::pod::model::Eviction`]).
//!
//! The manager reaches the host, the pods and the garbage collector only through the ports
//! below, so its passes are tested against fakes (`manager/tests.rs`).

pub mod config;
pub mod local_storage;
pub mod manager;
pub mod message;
pub mod observe;
pub mod pods;
pub mod rank;
pub mod reclaim;
pub mod thresholds;
pub mod usage;

pub use config::Settings;
pub use manager::Manager;
pub use reclaim::{NodeReclaim, ReclaimError};

use crate::pod::model::Eviction;
use berth_api::k8s_openapi::api::core::v1::Pod;
use futures::future::BoxFuture;
use thresholds::Observations;
use usage::Usages;

/// The signals at one moment, and whether the image filesystem is its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    pub observed: Observations,
    pub dedicated_imagefs: bool,
}

/// The host, as the manager reads it.
pub trait Observer: Send + Sync {
    fn signals(&self) -> BoxFuture<'_, Signals>;
    /// What each of `pods` uses, by uid (a pod that could not be read is left out).
    fn usage<'a>(&'a self, pods: &'a [Pod]) -> BoxFuture<'a, Usages>;
}

/// The pods of this node, as the manager acts on them.
pub trait NodePods: Send + Sync {
    /// Pods that run or will: not finished, not being deleted, not already evicted.
    fn active_pods(&self) -> Vec<Pod>;
    /// Orders the pod evicted (its worker kills it and reports it).
    fn evict<'a>(&'a self, uid: &'a str, eviction: Eviction) -> BoxFuture<'a, ()>;
    /// Whether none of the pod's containers runs any more.
    fn stopped<'a>(&'a self, uid: &'a str) -> BoxFuture<'a, bool>;
}
