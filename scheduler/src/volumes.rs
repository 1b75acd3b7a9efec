//! What a pod's PersistentVolumeClaims demand of a node (upstream's VolumeBinding plugin, for
//! the volumes Berth serves): a claim that is missing, being deleted, or unbound under an
//! `Immediate` class keeps the pod off every node; a bound claim's volume limits the pod to the
//! nodes its `nodeAffinity` admits ("volume node affinity conflict" on the others); an unbound
//! claim of a `WaitForFirstConsumer` class follows the pod: once a node is chosen, the claim is
//! annotated `volume.kubernetes.io/selected-node` so that it is provisioned or bound there.
//!
//! Planner: pure, no I/O (the state feeds it the claims, volumes and classes it watches).

use super::facts::PodInfo;
use berth_runtime::informer::Object;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::scheduling::RequiredNodeAffinity;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::Arc;

/// The annotation telling the volume controller where the claim's first consumer went.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// A claim, as scheduling needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ClaimFacts {
    volume_name: String,
    class: Option<String>,
    deleting: bool,
}

/// What the pod's volumes demand, worked out when it is decided on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    /// Each bound volume's node affinity (only non-empty ones).
    pub affinities: Vec<Arc<RequiredNodeAffinity>>,
    /// Unbound `WaitForFirstConsumer` claims to annotate with the chosen node.
    pub select_node: Vec<String>,
}

impl PodVolumes {
    /// Whether the node is one every bound volume admits.
    pub fn admit(&self, node: &str, labels: &super::facts::Labels) -> bool {
        self.affinities.iter().all(|a| a.matches(node, labels))
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClaimDoc {
    spec: ClaimSpecDoc,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClaimSpecDoc {
    volume_name: Option<String>,
    storage_class_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct VolumeDoc {
    spec: VolumeSpecDoc,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct VolumeSpecDoc {
    node_affinity: Option<core::VolumeNodeAffinity>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClassDoc {
    volume_binding_mode: Option<String>,
}

/// The claims, volumes and classes the scheduler watches.
#[derive(Debug, Default)]
pub struct Storage {
    /// By `namespace/name`.
    claims: HashMap<String, ClaimFacts>,
    /// Each volume's required node affinity.
    volumes: HashMap<String, Arc<RequiredNodeAffinity>>,
    /// Class name → `volumeBindingMode: WaitForFirstConsumer`.
    classes: HashMap<String, bool>,
}

/// Keeps `map` (by `namespace/name`, or name for cluster-scoped kinds) in step with one
/// watch event: the object is gone when deleted, else it is what `read` makes of its document
/// (an unreadable document reads as the default one).
fn apply_event<D: DeserializeOwned + Default, V>(
    map: &mut HashMap<String, V>,
    obj: &Object,
    deleted: bool,
    read: impl FnOnce(D) -> V,
) {
    let key = obj.key().to_string();
    if deleted {
        map.remove(&key);
        return;
    }
    let doc: D = serde_json::from_slice(obj.data()).unwrap_or_default();
    map.insert(key, read(doc));
}

impl Storage {
    pub fn apply_claim(&mut self, obj: &Object, deleted: bool) {
        let deleting = obj.is_deleting();
        apply_event(&mut self.claims, obj, deleted, |doc: ClaimDoc| ClaimFacts {
            volume_name: doc.spec.volume_name.unwrap_or_default(),
            class: doc.spec.storage_class_name,
            deleting,
        });
    }

    pub fn apply_volume(&mut self, obj: &Object, deleted: bool) {
        apply_event(&mut self.volumes, obj, deleted, |doc: VolumeDoc| {
            let required = doc.spec.node_affinity.and_then(|a| a.required);
            let affinity = core::NodeAffinity {
                required_during_scheduling_ignored_during_execution: required,
                ..Default::default()
            };
            Arc::new(RequiredNodeAffinity::new(None, Some(&affinity)))
        });
    }

    pub fn apply_class(&mut self, obj: &Object, deleted: bool) {
        apply_event(&mut self.classes, obj, deleted, |doc: ClassDoc| {
            doc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        });
    }

    /// What the pod's claims demand, or why no node can take it (upstream's PreFilter
    /// messages).
    pub fn check(&self, pod: &PodInfo) -> Result<PodVolumes, String> {
        let mut out = PodVolumes::default();
        let mut unbound_immediate = false;
        for name in &pod.claims {
            let Some(c) = self.claims.get(&format!("{}/{name}", pod.namespace)) else {
                return Err(format!("persistentvolumeclaim \"{name}\" not found"));
            };
            if c.deleting {
                return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
            }
            if !c.volume_name.is_empty() {
                let Some(a) = self.volumes.get(&c.volume_name) else {
                    return Err(format!(
                        "pvc {name} bound to non-existent pv {}",
                        c.volume_name
                    ));
                };
                if !a.is_empty() {
                    out.affinities.push(a.clone());
                }
                continue;
            }
            let wait = c
                .class
                .as_deref()
                .filter(|c| !c.is_empty())
                .and_then(|c| self.classes.get(c))
                .copied()
                .unwrap_or(false);
            if wait {
                out.select_node.push(name.clone());
            } else {
                unbound_immediate = true;
            }
        }
        if unbound_immediate {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: serde_json::Value) -> Object {
        Object::from_value(&v)
    }

    fn storage() -> Storage {
        let mut s = Storage::default();
        s.apply_class(
            &object(json!({"metadata": {"name": "local-path"},
            "provisioner": "berth.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"})),
            false,
        );
        s.apply_class(
            &object(json!({"metadata": {"name": "fast"},
            "provisioner": "x", "volumeBindingMode": "Immediate"})),
            false,
        );
        s.apply_volume(
            &object(
                json!({"metadata": {"name": "pv-a"}, "spec": {"nodeAffinity": {"required":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname",
                "operator": "In", "values": ["a"]}]}]}}}}),
            ),
            false,
        );
        s.apply_volume(
            &object(json!({"metadata": {"name": "pv-any"}, "spec": {}})),
            false,
        );
        for (name, spec) in [
            ("bound-a", json!({"volumeName": "pv-a"})),
            ("bound-any", json!({"volumeName": "pv-any"})),
            ("bound-missing", json!({"volumeName": "pv-gone"})),
            ("wait", json!({"storageClassName": "local-path"})),
            ("immediate", json!({"storageClassName": "fast"})),
            ("no-class", json!({"storageClassName": ""})),
        ] {
            s.apply_claim(
                &object(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})),
                false,
            );
        }
        s
    }

    fn pod(claims: &[&str]) -> PodInfo {
        let volumes: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        PodInfo::parse(
            json!({"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                "spec": {"containers": [{"name": "c"}], "volumes": volumes}})
            .to_string()
            .as_bytes(),
        )
        .expect("pod")
    }

    fn labels(host: &str) -> super::super::facts::Labels {
        [("kubernetes.io/hostname".to_string(), host.to_string())].into()
    }

    #[test]
    fn a_bound_claims_volume_limits_the_pod_to_the_nodes_it_admits() {
        let v = storage()
            .check(&pod(&["bound-a", "bound-any"]))
            .expect("fits");
        assert_eq!(
            v.affinities.len(),
            1,
            "a volume without affinity admits every node"
        );
        assert!(v.admit("a", &labels("a")));
        assert!(!v.admit("b", &labels("b")));
        assert!(v.select_node.is_empty());
    }

    #[test]
    fn a_wait_for_first_consumer_claim_follows_the_pod() {
        let v = storage().check(&pod(&["wait"])).expect("fits");
        assert_eq!(v.select_node, ["wait"]);
        assert!(v.admit("b", &labels("b")));
    }

    #[test]
    fn missing_deleting_and_unbound_immediate_claims_keep_the_pod_off_every_node() {
        let s = storage();
        assert_eq!(
            s.check(&pod(&["nope"])),
            Err("persistentvolumeclaim \"nope\" not found".to_string())
        );
        assert_eq!(
            s.check(&pod(&["immediate"])),
            Err("pod has unbound immediate PersistentVolumeClaims".to_string())
        );
        assert_eq!(
            s.check(&pod(&["no-class"])),
            Err("pod has unbound immediate PersistentVolumeClaims".to_string())
        );
        assert!(s.check(&pod(&["bound-missing"])).is_err());
        let mut s = s;
        s.apply_claim(
            &object(json!({"metadata": {"name": "wait", "namespace": "default",
            "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}})),
            false,
        );
        assert_eq!(
            s.check(&pod(&["wait"])),
            Err("persistentvolumeclaim \"wait\" is being deleted".to_string())
        );
    }
}
