//! Which keys a change concerns, from views decoded once per object version: a claim change
//! the claim and the volume it names; a volume change the volume and the claim its
//! `claimRef` names; a pod change the claims its volumes name (a claim being deleted waits
//! for its pods); a class change the unbound claims of that class.

use berth_runtime::informer::{Delta, Informer, Object, ObjectKey, View};
use berth_shared::k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde::Deserialize;
use std::fmt;

/// A pass of the controller: over one claim or one volume.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    Claim(ObjectKey),
    Volume(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Claim(k) => write!(f, "pvc {k}"),
            Key::Volume(n) => write!(f, "pv {n}"),
        }
    }
}

/// A claim's `volumeName` and class, once per version.
pub struct ClaimView {
    volume: Option<String>,
    class: String,
}

impl View for ClaimView {
    fn derive(obj: &Object) -> Self {
        let claim: Option<PersistentVolumeClaim> = obj.decode().ok();
        let spec = claim.as_ref().and_then(|c| c.spec.as_ref());
        ClaimView {
            volume: spec
                .and_then(|s| s.volume_name.clone())
                .filter(|v| !v.is_empty()),
            class: spec
                .and_then(|s| s.storage_class_name.clone())
                .unwrap_or_default(),
        }
    }
}

/// The claim a volume's `claimRef` names, once per version.
pub struct ClaimRefView(Option<ObjectKey>);

impl View for ClaimRefView {
    fn derive(obj: &Object) -> Self {
        let volume: Option<PersistentVolume> = obj.decode().ok();
        ClaimRefView(
            volume
                .and_then(|v| v.spec)
                .and_then(|s| s.claim_ref)
                .and_then(|r| Some(ObjectKey::new(r.namespace.as_deref(), r.name.as_deref()?))),
        )
    }
}

/// The claims a pod's volumes name, and whether the pod still runs (not Succeeded/Failed).
pub struct PodClaims {
    claims: Vec<String>,
    active: bool,
}

/// The part of a stored pod its claims are read from: its volumes' claim names (the rest of
/// the pod is skipped, not decoded).
#[derive(Default, Deserialize)]
#[serde(default)]
struct PodDoc {
    spec: SpecDoc,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct SpecDoc {
    volumes: Option<Vec<VolumeDoc>>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct VolumeDoc {
    persistent_volume_claim: Option<ClaimSourceDoc>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClaimSourceDoc {
    claim_name: String,
}

impl View for PodClaims {
    fn derive(obj: &Object) -> Self {
        let pod: PodDoc = obj.decode().unwrap_or_default();
        let claims = pod
            .spec
            .volumes
            .into_iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim)
            .map(|c| c.claim_name)
            .filter(|name| !name.is_empty())
            .collect();
        PodClaims {
            claims,
            active: !matches!(obj.field("status.phase"), Some("Succeeded" | "Failed")),
        }
    }
}

fn push(keys: &mut Vec<Key>, key: Key) {
    if !keys.contains(&key) {
        keys.push(key);
    }
}

fn versions(d: &Delta) -> impl Iterator<Item = &std::sync::Arc<Object>> {
    std::iter::once(&d.object).chain(d.old.iter())
}

pub fn claim_change(d: &Delta) -> Vec<Key> {
    let mut keys = vec![Key::Claim(d.object.key().clone())];
    for obj in versions(d) {
        if let Some(v) = &obj.view::<ClaimView>().volume {
            push(&mut keys, Key::Volume(v.clone()));
        }
    }
    keys
}

pub fn volume_change(d: &Delta) -> Vec<Key> {
    let mut keys = vec![Key::Volume(d.object.name().to_string())];
    for obj in versions(d) {
        if let Some(k) = &obj.view::<ClaimRefView>().0 {
            push(&mut keys, Key::Claim(k.clone()));
        }
    }
    keys
}

pub fn pod_change(d: &Delta) -> Vec<Key> {
    let mut keys = Vec::new();
    for obj in versions(d) {
        for c in &obj.view::<PodClaims>().claims {
            push(&mut keys, Key::Claim(ObjectKey::new(obj.namespace(), c)));
        }
    }
    keys
}

/// A class change: the claims of that class not yet bound.
pub fn class_change(claims: &Informer, d: &Delta) -> Vec<Key> {
    let class = d.object.name();
    claims
        .list()
        .iter()
        .filter(|c| {
            let v = c.view::<ClaimView>();
            v.volume.is_none() && v.class == class
        })
        .map(|c| Key::Claim(c.key().clone()))
        .collect()
}

/// Every claim and volume, for the periodic resync.
pub fn every_key(claims: &Informer, volumes: &Informer) -> Vec<Key> {
    let mut keys: Vec<Key> = claims.keys().into_iter().map(Key::Claim).collect();
    keys.extend(
        volumes
            .keys()
            .into_iter()
            .map(|k| Key::Volume(k.name().to_string())),
    );
    keys
}

/// Whether a pod of the claim's namespace that has not finished names the claim.
pub fn claim_in_use(pods: &Informer, claim: &ObjectKey) -> bool {
    let ns = claim.namespace().unwrap_or_default();
    pods.in_namespace(ns).iter().any(|p| {
        let v = p.view::<PodClaims>();
        v.active && v.claims.iter().any(|c| c == claim.name())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pods_claims_are_its_volumes_claim_names_while_it_runs() {
        let pod = |phase: &str| {
            Object::from_value(&json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [
                    {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "b", "emptyDir": {}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "logs", "readOnly": true}}]},
                "status": {"phase": phase}}))
        };
        let running = pod("Running");
        let v = running.view::<PodClaims>();
        assert_eq!(v.claims, ["data", "logs"]);
        assert!(v.active);
        assert!(!pod("Succeeded").view::<PodClaims>().active);
        let keys = pod_change(&Delta {
            kind: berth_runtime::informer::DeltaType::Added,
            object: std::sync::Arc::new(pod("Pending")),
            old: None,
        });
        assert_eq!(keys.len(), 2, "{keys:?}");
    }
}
