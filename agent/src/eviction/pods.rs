//! The pod manager as the eviction manager's [`NodePods`] port.

use super::{NodePods, NodeReclaim, ReclaimError};
use crate::pod::manager::PodManager;
use crate::pod::model::Eviction;
use berth_api::k8s_openapi::api::core::v1::Pod;
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

/// The node-level reclaim the eviction manager calls: the agent's garbage collector, attached
/// once it is made (after the pod manager); until then every step is unavailable.
#[derive(Default)]
pub struct Reclaimer {
    gc: std::sync::OnceLock<crate::gc::GarbageCollector>,
}

impl Reclaimer {
    pub fn attach(&self, gc: crate::gc::GarbageCollector) {
        let _ = self.gc.set(gc);
    }
}

fn failed(e: crate::gc::GcError) -> ReclaimError {
    ReclaimError::Failed(e.to_string())
}

impl NodeReclaim for Reclaimer {
    fn delete_dead_containers(&self) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        Box::pin(async move {
            match self.gc.get() {
                Some(gc) => gc
                    .delete_dead_containers()
                    .await
                    .map(|f| f.bytes)
                    .map_err(failed),
                None => super::reclaim::Unavailable.delete_dead_containers().await,
            }
        })
    }

    fn free_image_space(&self, bytes: u64) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        Box::pin(async move {
            match self.gc.get() {
                Some(gc) => gc.free_image_space(bytes).await.map_err(failed),
                None => super::reclaim::Unavailable.free_image_space(bytes).await,
            }
        })
    }
}
