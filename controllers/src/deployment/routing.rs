//! Which Deployments a change concerns beyond the runtime's own mapping (a Deployment's own
//! changes, its ReplicaSets' controller references, and orphans through `.adopts` with the
//! kit's `Parsed::selector`): a deleted pod concerns the Deployment owning its ReplicaSet
//! (Recreate waits for old pods to be gone).

use berth_runtime::informer::{Delta, DeltaType, Informer, ObjectKey};

/// For a deleted pod controlled by a ReplicaSet: the Deployment controlling that ReplicaSet.
pub(super) fn deleted_pod(replica_sets: &Informer, d: &Delta) -> Option<ObjectKey> {
    if d.kind != DeltaType::Deleted {
        return None;
    }
    let pod = &d.object;
    let rs = pod.controller().filter(|c| c.kind == "ReplicaSet")?;
    let rs = replica_sets.get(pod.namespace(), &rs.name)?;
    let dep = rs.controller().filter(|c| c.kind == "Deployment")?;
    Some(ObjectKey::new(pod.namespace(), &dep.name))
}
