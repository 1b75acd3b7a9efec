//! The latest objects of the pods bound to this node, by uid: fed by the manager's list+watch
//! and by the answers to the workers' status writes, read by each worker pass and the log/exec
//! backend.

use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Pods by uid. A write never replaces a newer version with an older one.
#[derive(Default)]
pub struct PodCache {
    pods: Mutex<HashMap<String, Pod>>,
}

impl PodCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Pod>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a newer version of a pod (from the watch, or the answer to a status write).
    pub fn remember(&self, pod: Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let mut pods = self.lock();
        let newer = |old: &Pod| {
            let rv = |p: &Pod| {
                p.metadata
                    .resource_version
                    .as_deref()
                    .and_then(|r| r.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            rv(&pod) >= rv(old)
        };
        if pods.get(&uid).is_none_or(newer) {
            pods.insert(uid, pod);
        }
    }

    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub fn get(&self, uid: &str) -> Option<Pod> {
        self.lock().get(uid).cloned()
    }

    /// The pod `ns/name`, if it is bound to this node.
    pub fn find(&self, ns: &str, name: &str) -> Option<Pod> {
        self.lock()
            .values()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(ns)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    pub fn uids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(rv: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                name: Some("web".into()),
                namespace: Some("default".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            status: Some(berth_api::k8s_openapi::api::core::v1::PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one() {
        let cache = PodCache::default();
        cache.remember(pod("7", "Running"));
        cache.remember(pod("5", "Pending"));
        let kept = cache.get("u1").unwrap();
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(cache.find("default", "web"), Some(kept));
        cache.forget("u1");
        assert!(cache.uids().is_empty());
    }
}
