//! What the controller remembers from the watch, so events can be routed without reading the
//! store: each set's selector and controller, and which set controls each pod. A pod event
//! enqueues its controlling set (and the previous one, when that changed) or, for an orphan,
//! every set in its namespace whose selector matches it (upstream's `addPod`/`updatePod`/
//! `deletePod`). A pass also asks it for the pods a set controls, to find those whose labels no
//! longer match. No I/O: fed by the loop in `mod.rs`.

use super::view::{self, Kind, Set};
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// The queue key: one ReplicaSet or ReplicationController.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for SetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

#[derive(Debug, Clone)]
struct SetEntry {
    selector: LabelSelector,
    controller_uid: Option<String>,
}

/// The routing index.
#[derive(Debug, Default)]
pub struct Cache {
    /// Sets by namespace.
    sets: HashMap<String, BTreeMap<SetKey, SetEntry>>,
    /// Pod (namespace, name) → the set that controls it.
    pod_owner: HashMap<(String, String), SetKey>,
    /// Set → names of the pods it controls.
    owned: HashMap<SetKey, HashSet<String>>,
    /// Namespace → names of the pods no controller owns (candidates for adoption).
    orphans: HashMap<String, HashSet<String>>,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

impl Cache {
    /// Records a set's state (`None`: deleted); returns its key.
    pub fn set_event(&mut self, kind: Kind, obj: &Value, deleted: bool) -> SetKey {
        let key = SetKey {
            kind,
            namespace: str_at(obj, "/metadata/namespace").to_string(),
            name: str_at(obj, "/metadata/name").to_string(),
        };
        let in_ns = self.sets.entry(key.namespace.clone()).or_default();
        if deleted {
            in_ns.remove(&key);
            if in_ns.is_empty() {
                self.sets.remove(&key.namespace);
            }
        } else {
            let entry = match Set::from_value(kind, obj) {
                Ok(s) => SetEntry {
                    selector: s.selector,
                    controller_uid: s.controller_uid,
                },
                Err(_) => SetEntry {
                    selector: LabelSelector::nothing(),
                    controller_uid: None,
                },
            };
            in_ns.insert(key.clone(), entry);
        }
        key
    }

    /// Records a pod's state and returns the sets to look at.
    pub fn pod_event(&mut self, obj: &Value, deleted: bool) -> Vec<SetKey> {
        let namespace = str_at(obj, "/metadata/namespace").to_string();
        let name = str_at(obj, "/metadata/name").to_string();
        let controller = view::controller_of(obj);
        let owner = controller.as_ref().and_then(|c| {
            Some(SetKey {
                kind: Kind::of_owner(&c.api_version, &c.kind)?,
                namespace: namespace.clone(),
                name: c.name.clone(),
            })
        });
        let orphan = controller.is_none() && !deleted;
        let in_ns = self.orphans.entry(namespace.clone()).or_default();
        if orphan {
            in_ns.insert(name.clone());
        } else {
            in_ns.remove(&name);
            if in_ns.is_empty() {
                self.orphans.remove(&namespace);
            }
        }
        let pod_id = (namespace.clone(), name.clone());
        let previous = match (&owner, deleted) {
            (Some(o), false) => {
                self.owned
                    .entry(o.clone())
                    .or_default()
                    .insert(name.clone());
                self.pod_owner.insert(pod_id, o.clone())
            }
            _ => self.pod_owner.remove(&pod_id),
        };
        let mut keys = Vec::new();
        if let Some(p) = previous {
            if (owner.as_ref() != Some(&p) || deleted)
                && let Some(set) = self.owned.get_mut(&p)
            {
                set.remove(&name);
                if set.is_empty() {
                    self.owned.remove(&p);
                }
            }
            if owner.as_ref() != Some(&p) {
                keys.push(p);
            }
        }
        if let Some(o) = owner {
            keys.push(o);
        } else if controller.is_none()
            && !deleted
            && obj.pointer("/metadata/deletionTimestamp").is_none()
        {
            let labels = view::string_map(obj.pointer("/metadata/labels"));
            if let Some(sets) = self.sets.get(&namespace) {
                keys.extend(
                    sets.iter()
                        .filter(|(_, e)| !e.selector.is_empty() && e.selector.matches(&labels))
                        .map(|(k, _)| k.clone()),
                );
            }
        }
        keys
    }

    /// Names of the pods the watch saw `key` control.
    pub fn owned_pods(&self, key: &SetKey) -> HashSet<String> {
        self.owned.get(key).cloned().unwrap_or_default()
    }

    /// Records a pod the controller just created for `key`, before its watch event arrives, so
    /// the set's next pass counts it (the pass reads pods by these names).
    pub fn note_created(&mut self, key: &SetKey, name: &str) {
        self.owned
            .entry(key.clone())
            .or_default()
            .insert(name.to_string());
        self.pod_owner
            .insert((key.namespace.clone(), name.to_string()), key.clone());
    }

    /// Names of the pods in `namespace` that no controller owns.
    pub fn orphan_pods(&self, namespace: &str) -> HashSet<String> {
        self.orphans.get(namespace).cloned().unwrap_or_default()
    }

    /// Selectors of the sets in `namespace` controlled by `controller_uid` (the sets whose
    /// pods rank each other on scale-down, upstream's `getReplicaSetsWithSameController`).
    pub fn related_selectors(&self, namespace: &str, controller_uid: &str) -> Vec<LabelSelector> {
        self.sets
            .get(namespace)
            .map(|sets| {
                sets.values()
                    .filter(|e| e.controller_uid.as_deref() == Some(controller_uid))
                    .map(|e| e.selector.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every known set.
    pub fn all_sets(&self) -> Vec<SetKey> {
        self.sets.values().flat_map(|m| m.keys().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, tier: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "d", "uid": format!("uid-{name}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep",
                                     "uid": "dep-uid", "controller": true}]},
            "spec": {"selector": {"matchLabels": {"tier": tier}}}})
    }

    fn pod(name: &str, tier: &str, owner: Option<&str>) -> Value {
        let refs = owner.map(|o| {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": o, "uid": format!("uid-{o}"), "controller": true}])
        });
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "d", "labels": {"tier": tier}}});
        if let Some(r) = refs {
            p["metadata"]["ownerReferences"] = r;
        }
        p
    }

    fn key(name: &str) -> SetKey {
        SetKey {
            kind: Kind::ReplicaSet,
            namespace: "d".into(),
            name: name.into(),
        }
    }

    #[test]
    fn unowned_pods_are_indexed_until_adopted_or_deleted() {
        let mut c = Cache::default();
        c.pod_event(&pod("a", "web", None), false);
        c.pod_event(&pod("b", "web", None), false);
        c.pod_event(&pod("c", "web", Some("rs1")), false);
        let names = |c: &Cache| {
            let mut v: Vec<String> = c.orphan_pods("d").into_iter().collect();
            v.sort();
            v
        };
        assert_eq!(names(&c), ["a", "b"]);
        c.pod_event(&pod("a", "web", Some("rs1")), false);
        c.pod_event(&pod("b", "web", None), true);
        assert!(names(&c).is_empty());
        assert_eq!(
            c.owned_pods(&key("rs1")),
            HashSet::from(["a".to_string(), "c".to_string()])
        );
    }

    #[test]
    fn a_pod_noted_as_created_is_owned_before_its_event_arrives() {
        let mut c = Cache::default();
        c.note_created(&key("rs1"), "rs1-x");
        assert!(c.owned_pods(&key("rs1")).contains("rs1-x"));
        // The event, when it comes, agrees; a later deletion forgets it.
        c.pod_event(&pod("rs1-x", "web", Some("rs1")), false);
        c.pod_event(&pod("rs1-x", "web", Some("rs1")), true);
        assert!(c.owned_pods(&key("rs1")).is_empty());
    }

    #[test]
    fn an_owned_pod_enqueues_its_controller_only() {
        let mut c = Cache::default();
        c.set_event(Kind::ReplicaSet, &rs("a", "web"), false);
        c.set_event(Kind::ReplicaSet, &rs("b", "web"), false);
        assert_eq!(c.pod_event(&pod("p", "web", Some("a")), false), [key("a")]);
        assert_eq!(c.owned_pods(&key("a")), HashSet::from(["p".to_string()]));
    }

    #[test]
    fn an_orphan_enqueues_every_set_whose_selector_matches() {
        let mut c = Cache::default();
        c.set_event(Kind::ReplicaSet, &rs("a", "web"), false);
        c.set_event(Kind::ReplicaSet, &rs("b", "web"), false);
        c.set_event(Kind::ReplicaSet, &rs("c", "db"), false);
        assert_eq!(
            c.pod_event(&pod("p", "web", None), false),
            [key("a"), key("b")]
        );
    }

    #[test]
    fn losing_the_controller_enqueues_the_previous_one() {
        let mut c = Cache::default();
        c.set_event(Kind::ReplicaSet, &rs("a", "web"), false);
        c.pod_event(&pod("p", "web", Some("a")), false);
        // Released and relabelled: the old owner hears of it; no set matches the new labels.
        assert_eq!(c.pod_event(&pod("p", "debug", None), false), [key("a")]);
        assert!(c.owned_pods(&key("a")).is_empty());
    }

    #[test]
    fn a_deleted_pod_enqueues_its_controller_and_is_forgotten() {
        let mut c = Cache::default();
        c.pod_event(&pod("p", "web", Some("a")), false);
        assert_eq!(c.pod_event(&pod("p", "web", Some("a")), true), [key("a")]);
        assert!(c.owned_pods(&key("a")).is_empty());
    }

    #[test]
    fn sibling_sets_are_found_by_their_common_controller() {
        let mut c = Cache::default();
        c.set_event(Kind::ReplicaSet, &rs("a", "web"), false);
        c.set_event(Kind::ReplicaSet, &rs("b", "web2"), false);
        assert_eq!(c.related_selectors("d", "dep-uid").len(), 2);
        c.set_event(Kind::ReplicaSet, &rs("b", "web2"), true);
        assert_eq!(c.related_selectors("d", "dep-uid").len(), 1);
        assert_eq!(c.all_sets(), [key("a")]);
    }
}
