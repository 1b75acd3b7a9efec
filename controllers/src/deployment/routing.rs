//! Which Deployments a change concerns beyond the runtime's own mapping (a Deployment's own
//! changes, its ReplicaSets' controller references, and orphans through `.adopts` with the
//! [`Selector`] view): a deleted pod concerns the Deployment owning its ReplicaSet (Recreate
//! waits for old pods to be gone).

use berth_runtime::informer::{Delta, DeltaType, Informer, Object, ObjectKey, View};
use berth_shared::k8s_openapi::api::apps::v1::Deployment;
use berth_shared::selector::LabelSelector;
use std::sync::Arc;

/// A Deployment's selector, parsed once per version.
pub(super) struct Selector(pub(super) Option<LabelSelector>);

impl View for Selector {
    fn derive(obj: &Object) -> Self {
        let selector = obj
            .decode::<Deployment>()
            .ok()
            .and_then(|d| d.spec)
            .and_then(|s| LabelSelector::from_k8s(&s.selector).ok());
        Selector(selector)
    }
}

/// For a deleted pod controlled by a ReplicaSet: the Deployment controlling that ReplicaSet.
pub(super) fn deleted_pod(replica_sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind != DeltaType::Deleted {
        return Vec::new();
    }
    owner_deployment(replica_sets, &d.object)
        .into_iter()
        .collect()
}

fn owner_deployment(replica_sets: &Informer, pod: &Arc<Object>) -> Option<ObjectKey> {
    let rs = pod.controller().filter(|c| c.kind == "ReplicaSet")?;
    let rs = replica_sets.get(pod.namespace(), &rs.name)?;
    let dep = rs.controller().filter(|c| c.kind == "Deployment")?;
    Some(ObjectKey::new(pod.namespace(), &dep.name))
}
