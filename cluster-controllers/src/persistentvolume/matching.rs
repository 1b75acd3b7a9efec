//! Planner: pure, no I/O.
//!
//! Which volume an unbound claim may bind to (upstream `findMatchingVolume` and
//! `checkVolumeSatisfyClaim`): same class, every requested access mode offered, capacity at
//! least the request, same volume mode, labels selected by the claim's selector, not bound to
//! another claim, not being deleted and, once a node is chosen, node affinity admitting it.
//! Among the candidates the smallest wins (ties by name); a volume pre-bound to the claim by
//! its `claimRef` wins over any other that fits.

use berth_shared::admission::storage::claim_request;
use berth_shared::k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use berth_shared::quantity::Quantity;
use berth_shared::scheduling::node_affinity::NodeSelectorTerm;
use berth_shared::selector::LabelSelector;

/// A claim's or volume's class: `spec.storageClassName`, `""` for none.
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

pub fn volume_class(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// The volume mode, `Filesystem` when unset.
fn mode(m: Option<&String>) -> &str {
    m.map(String::as_str).unwrap_or("Filesystem")
}

/// The volume's `capacity.storage`, parsed.
pub fn volume_capacity(volume: &PersistentVolume) -> Option<Quantity> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
}

fn claim_size(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    claim
        .spec
        .as_ref()
        .and_then(claim_request)
        .and_then(|q| Quantity::parse(&q.0).ok())
}

/// Whether the volume's `claimRef` names this claim (by namespace and name, and by uid when
/// the reference carries one).
pub fn is_bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.namespace == claim.metadata.namespace
        && r.name == claim.metadata.name
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

/// Why the volume cannot serve the claim (upstream's messages), or `None` when it can.
pub fn mismatch(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<&'static str> {
    let empty = PersistentVolumeSpec::default();
    let vs = volume.spec.as_ref().unwrap_or(&empty);
    let Some(cs) = claim.spec.as_ref() else {
        return Some("incompatible accessMode");
    };
    match (volume_capacity(volume), claim_size(claim)) {
        (Some(have), Some(want)) if have.cmp_to(&want).is_ge() => {}
        _ => return Some("requested PV is too small"),
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match");
    }
    if mode(vs.volume_mode.as_ref()) != mode(cs.volume_mode.as_ref()) {
        return Some("incompatible volumeMode");
    }
    let offered = vs.access_modes.as_deref().unwrap_or_default();
    let wanted = cs.access_modes.as_deref().unwrap_or_default();
    if !wanted.iter().all(|m| offered.contains(m)) {
        return Some("incompatible accessMode");
    }
    None
}

/// Whether the volume's node affinity admits `node` (no affinity admits every node).
pub fn admits_node(volume: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    required
        .node_selector_terms
        .iter()
        .any(|t| NodeSelectorTerm::from_k8s(t).matches(name, &labels))
}

fn selected_by_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(sel) = claim.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return true;
    };
    let labels = volume.metadata.labels.clone().unwrap_or_default();
    LabelSelector::from_k8s(sel).is_ok_and(|s| s.matches(&labels))
}

/// The volume the claim should bind to, if any fits. `node` is the node chosen for the
/// claim's first consumer (WaitForFirstConsumer classes), whose labels a volume's node
/// affinity must admit.
pub fn best_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    node: Option<&Node>,
) -> Option<&'a PersistentVolume> {
    let fits = |v: &&PersistentVolume| {
        v.metadata.deletion_timestamp.is_none()
            && mismatch(v, claim).is_none()
            && node.is_none_or(|n| admits_node(v, n))
    };
    let pre_bound = volumes.iter().filter(|v| is_bound_to(v, claim)).find(fits);
    if pre_bound.is_some() {
        return pre_bound;
    }
    volumes
        .iter()
        .filter(|v| v.spec.as_ref().is_none_or(|s| s.claim_ref.is_none()))
        .filter(|v| selected_by_claim(v, claim))
        .filter(fits)
        .min_by(|a, b| {
            let size = |v: &PersistentVolume| volume_capacity(v).unwrap_or_default();
            size(a)
                .cmp_to(&size(b))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}
