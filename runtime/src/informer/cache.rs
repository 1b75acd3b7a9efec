//! The indexed cache behind one informer: objects by key, and index functions (by namespace, by
//! controller uid, by node name, by label, or any a controller registers) mapping each object to
//! index values. Applying a change or a whole relist returns the deltas subscribers are told.
//! Pure data: the informer's loop feeds it.
//!
//! Planner: pure, no I/O.

use super::object::{Object, ObjectKey};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Maps an object to the values it is found under in one index.
pub type IndexFn = Arc<dyn Fn(&Object) -> Vec<String> + Send + Sync>;

/// Objects by namespace (cluster-scoped objects under "").
pub const BY_NAMESPACE: &str = "namespace";
/// Objects by the uid of their controller (the owner reference with `controller: true`).
pub const BY_CONTROLLER: &str = "controller";
/// Pods by `spec.nodeName`.
pub const BY_NODE: &str = "node";
/// Objects by each of their labels, as `key=value`.
pub const BY_LABEL: &str = "label";
/// Objects without a controller (orphans a controller may adopt), by namespace.
pub const ORPHANS_BY_NAMESPACE: &str = "orphans";

/// The index function of a built-in index name.
pub fn builtin(name: &str) -> Option<IndexFn> {
    let f: IndexFn = match name {
        BY_NAMESPACE => Arc::new(|o: &Object| vec![o.namespace().unwrap_or_default().to_string()]),
        BY_CONTROLLER => {
            Arc::new(|o: &Object| o.controller().map(|c| c.uid.clone()).into_iter().collect())
        }
        BY_NODE => Arc::new(|o: &Object| {
            o.field("spec.nodeName")
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .into_iter()
                .collect()
        }),
        BY_LABEL => {
            Arc::new(|o: &Object| o.labels().iter().map(|(k, v)| format!("{k}={v}")).collect())
        }
        ORPHANS_BY_NAMESPACE => Arc::new(|o: &Object| {
            if o.controller().is_none() {
                vec![o.namespace().unwrap_or_default().to_string()]
            } else {
                Vec::new()
            }
        }),
        _ => return None,
    };
    Some(f)
}

/// One index: value → the objects found under it (held directly, so a lookup is one hash).
struct Index {
    func: IndexFn,
    values: HashMap<String, HashMap<ObjectKey, Arc<Object>>>,
}

impl Index {
    fn add(&mut self, obj: &Arc<Object>) {
        for v in (self.func)(obj) {
            self.values
                .entry(v)
                .or_default()
                .insert(obj.key().clone(), obj.clone());
        }
    }

    fn remove(&mut self, obj: &Object) {
        for v in (self.func)(obj) {
            if let Some(set) = self.values.get_mut(&v) {
                set.remove(obj.key());
                if set.is_empty() {
                    self.values.remove(&v);
                }
            }
        }
    }
}

/// What changed about one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaType {
    Added,
    Modified,
    Deleted,
}

/// One change subscribers are told about: the object (for a deletion, its last state) and
/// the version the cache held before.
#[derive(Debug, Clone)]
pub struct Delta {
    pub kind: DeltaType,
    pub object: Arc<Object>,
    pub old: Option<Arc<Object>>,
}

/// The cache.
#[derive(Default)]
pub struct Cache {
    objects: HashMap<ObjectKey, Arc<Object>>,
    indexes: HashMap<String, Index>,
}

impl Cache {
    pub fn new() -> Cache {
        let mut c = Cache::default();
        for name in [BY_NAMESPACE, BY_CONTROLLER] {
            if let Some(f) = builtin(name) {
                c.add_index(name, f);
            }
        }
        c
    }

    /// Registers an index (built over the objects already cached); a name registered before
    /// keeps its first function.
    pub fn add_index(&mut self, name: &str, func: IndexFn) {
        if self.indexes.contains_key(name) {
            return;
        }
        let mut index = Index {
            func,
            values: HashMap::new(),
        };
        for obj in self.objects.values() {
            index.add(obj);
        }
        self.indexes.insert(name.to_string(), index);
    }

    pub fn has_index(&self, name: &str) -> bool {
        self.indexes.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.objects.get(key).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Object>> {
        self.objects.values().cloned().collect()
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.objects.keys().cloned().collect()
    }

    /// The objects found under `value` in index `name` (none for an unknown index).
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        let Some(index) = self.indexes.get(name) else {
            return Vec::new();
        };
        index
            .values
            .get(value)
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    fn insert(&mut self, obj: Arc<Object>) -> Option<Arc<Object>> {
        let old = self.remove(obj.key());
        for index in self.indexes.values_mut() {
            index.add(&obj);
        }
        self.objects.insert(obj.key().clone(), obj);
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Object>> {
        let old = self.objects.remove(key)?;
        for index in self.indexes.values_mut() {
            index.remove(&old);
        }
        Some(old)
    }

    /// Applies one watched change. A change older than the cached version (a watch replaying
    /// history a relist already covered) changes nothing but is still reported, so
    /// subscribers see every event.
    pub fn apply(&mut self, kind: DeltaType, obj: Arc<Object>) -> Delta {
        match kind {
            DeltaType::Deleted => {
                let old = self.remove(obj.key());
                Delta {
                    kind,
                    object: obj,
                    old,
                }
            }
            _ => {
                let old = match self.objects.get(obj.key()) {
                    Some(cur) if cur.revision() > obj.revision() => Some(cur.clone()),
                    _ => self.insert(obj.clone()),
                };
                let kind = if old.is_some() {
                    DeltaType::Modified
                } else {
                    DeltaType::Added
                };
                Delta {
                    kind,
                    object: obj,
                    old,
                }
            }
        }
    }

    /// Replaces the contents with a fresh list; returns what changed (objects listed at a new
    /// version as added or modified, cached objects missing from the list as deleted).
    pub fn replace(&mut self, listed: Vec<Arc<Object>>) -> Vec<Delta> {
        let mut deltas = Vec::new();
        let mut seen: HashSet<ObjectKey> = HashSet::with_capacity(listed.len());
        for obj in listed {
            seen.insert(obj.key().clone());
            if self
                .objects
                .get(obj.key())
                .is_some_and(|cur| cur.revision() == obj.revision())
            {
                continue;
            }
            let old = self.insert(obj.clone());
            deltas.push(Delta {
                kind: if old.is_some() {
                    DeltaType::Modified
                } else {
                    DeltaType::Added
                },
                object: obj,
                old,
            });
        }
        let gone: Vec<ObjectKey> = self
            .objects
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(old) = self.remove(&key) {
                deltas.push(Delta {
                    kind: DeltaType::Deleted,
                    object: old.clone(),
                    old: Some(old),
                });
            }
        }
        deltas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, rv: u64, owner: Option<&str>) -> Arc<Object> {
        let mut v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
                "resourceVersion": rv.to_string(), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1"}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": o, "controller": true}]);
        }
        Arc::new(Object::from_value(&v))
    }

    fn names(objs: Vec<Arc<Object>>) -> Vec<String> {
        let mut v: Vec<String> = objs.iter().map(|o| o.name().to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn indexes_follow_adds_changes_and_deletions() {
        let mut c = Cache::new();
        c.add_index(BY_NODE, builtin(BY_NODE).unwrap());
        c.apply(DeltaType::Added, pod("a", 1, Some("rs1")));
        c.apply(DeltaType::Added, pod("b", 2, None));
        assert_eq!(names(c.by_index(BY_CONTROLLER, "rs1")), ["a"]);
        assert_eq!(names(c.by_index(BY_NAMESPACE, "ns")), ["a", "b"]);
        assert_eq!(names(c.by_index(BY_NODE, "n1")), ["a", "b"]);
        // Released by its controller: it leaves that index.
        let d = c.apply(DeltaType::Modified, pod("a", 3, None));
        assert_eq!(d.kind, DeltaType::Modified);
        assert!(c.by_index(BY_CONTROLLER, "rs1").is_empty());
        c.apply(DeltaType::Deleted, pod("b", 4, None));
        assert_eq!(names(c.by_index(BY_NAMESPACE, "ns")), ["a"]);
        // Registered late: built over what is cached.
        c.add_index(BY_LABEL, builtin(BY_LABEL).unwrap());
        assert_eq!(names(c.by_index(BY_LABEL, "app=web")), ["a"]);
    }

    #[test]
    fn a_relist_reports_new_changed_and_vanished_objects_only() {
        let mut c = Cache::new();
        c.replace(vec![pod("a", 1, None), pod("b", 2, None)]);
        let deltas = c.replace(vec![
            pod("a", 1, None),
            pod("b", 5, None),
            pod("c", 6, None),
        ]);
        let kinds: Vec<(String, DeltaType)> = deltas
            .iter()
            .map(|d| (d.object.name().to_string(), d.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("b".to_string(), DeltaType::Modified),
                ("c".to_string(), DeltaType::Added)
            ]
        );
        let deltas = c.replace(vec![pod("c", 6, None)]);
        assert_eq!(deltas.len(), 2);
        assert!(deltas.iter().all(|d| d.kind == DeltaType::Deleted));
    }
}
