//! The pod manager as the eviction manager's [`NodePods`] port.

use super::NodePods;
use crate::pod::manager::PodManager;
use crate::pod::model::Eviction;
use berth_shared::k8s_openapi::api::core::v1::Pod;
use futures::future::BoxFuture;

impl NodePods for PodManager {
    fn active_pods(&self) -> Vec<Pod> {
        PodManager::active_pods(self)
    }

    fn evict<'a>(&'a self, uid: &'a str, eviction: Eviction) -> BoxFuture<'a, ()> {
        Box::pin(PodManager::evict(self, uid, eviction))
    }

    fn stopped<'a>(&'a self, uid: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(PodManager::stopped(self, uid))
    }
}

/// The node-level reclaim the eviction manager calls: the agent's garbage collector, once it
/// has one; until then every step is unavailable and pods are evicted instead.
pub fn node_reclaim(_runtime: &crate::runtime::Runtime) -> std::sync::Arc<dyn super::NodeReclaim> {
    std::sync::Arc::new(super::reclaim::Unavailable)
}
