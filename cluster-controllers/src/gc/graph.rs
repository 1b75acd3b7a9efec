//! The garbage collector's ownership graph: every object by uid (shared with the informers'
//! caches) and, per owner uid, the uids of its dependents. Fed with informer changes; answers
//! which owners a change concerns and what the planner needs to know about one owner. No I/O.
//!
//! Planner: pure, no I/O.

use super::plan;
use berth_runtime::informer::{DeltaType, Object, OwnerRef};
use berth_shared::resource::ResourceType;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One object in the graph: its type (to address writes) and its latest version.
#[derive(Debug, Clone)]
pub struct Node {
    pub rt: &'static ResourceType,
    pub object: Arc<Object>,
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub fn node(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for o in node.object.owners() {
            if let Some(set) = self.dependents.get_mut(&o.uid) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(node)
    }

    fn insert(&mut self, node: Node) {
        let uid = node.object.uid().to_string();
        self.remove(&uid);
        for o in node.object.owners() {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
        }
        self.nodes.insert(uid, node);
    }

    /// Whether a pass for owner `uid` can act: its object is gone or being deleted. A live
    /// owner's pass plans nothing, so its dependents' changes do not concern it.
    fn may_act(&self, uid: &str) -> bool {
        self.nodes.get(uid).is_none_or(|n| n.object.is_deleting())
    }

    /// How a dependent names owner `uid` (to look the owner up), and the dependent's namespace.
    pub fn owner_ref(&self, uid: &str) -> Option<(OwnerRef, Option<String>)> {
        let dep = self.dependents.get(uid)?.iter().next()?;
        let obj = &self.nodes.get(dep)?.object;
        let r = obj.owners().iter().find(|o| o.uid == uid)?;
        Some((r.clone(), obj.namespace().map(str::to_string)))
    }

    /// Applies a change; returns the owner uids whose plans may have changed.
    pub fn apply(
        &mut self,
        rt: &'static ResourceType,
        kind: DeltaType,
        obj: &Arc<Object>,
    ) -> Vec<String> {
        let uid = obj.uid();
        if uid.is_empty() {
            return Vec::new();
        }
        let mut touched: Vec<String> = obj.owners().iter().map(|o| o.uid.clone()).collect();
        if let Some(old) = self.nodes.get(uid) {
            touched.extend(old.object.owners().iter().map(|o| o.uid.clone()));
        }
        touched.retain(|owner| self.may_act(owner));
        match kind {
            DeltaType::Deleted => {
                self.remove(uid);
                if self.dependents.contains_key(uid) {
                    touched.push(uid.to_string());
                }
            }
            _ => {
                self.insert(Node {
                    rt,
                    object: obj.clone(),
                });
                // Only a deleting object's own pass can act (a live one plans nothing).
                if obj.is_deleting() {
                    touched.push(uid.to_string());
                }
            }
        }
        touched.sort();
        touched.dedup();
        touched
    }

    /// What the planner needs to know about owner `uid`.
    pub fn plan_input(&self, uid: &str) -> (Option<plan::Owner>, Vec<plan::Dependent>) {
        let owner = self.nodes.get(uid).map(|n| plan::Owner {
            deleting: n.object.is_deleting(),
            finalizers: n.object.finalizers().to_vec(),
        });
        if owner.as_ref().is_some_and(|o| !o.deleting) {
            // A live owner's plan is empty whatever its dependents: skip listing them.
            return (owner, Vec::new());
        }
        let deps = self
            .dependents
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter_map(|d| {
                        let n = self.nodes.get(d)?;
                        let owners = n.object.owners();
                        let this = owners.iter().find(|o| o.uid == uid)?;
                        Some(plan::Dependent {
                            uid: d.clone(),
                            blocks_owner: this.block_owner_deletion == Some(true),
                            has_other_live_owner: owners
                                .iter()
                                .any(|o| o.uid != uid && self.nodes.contains_key(&o.uid)),
                            deleting: n.object.is_deleting(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        (owner, deps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::resource::{PODS, REPLICA_SETS};
    use serde_json::json;

    fn obj(uid: &str, owner: Option<&str>, deleting: bool) -> Arc<Object> {
        let mut v = json!({"metadata": {"name": uid, "namespace": "d", "uid": uid}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": o,
                        "blockOwnerDeletion": true}]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(Object::from_value(&v))
    }

    #[test]
    fn only_owners_that_may_need_action_are_touched() {
        let mut g = Graph::default();
        assert!(
            g.apply(REPLICA_SETS, DeltaType::Added, &obj("rs", None, false))
                .is_empty()
        );
        // A live owner's pass would plan nothing: its dependent's change does not concern it.
        assert!(
            g.apply(PODS, DeltaType::Added, &obj("p", Some("rs"), false))
                .is_empty()
        );
        let (owner, deps) = g.plan_input("rs");
        assert!(owner.is_some_and(|o| !o.deleting));
        assert!(deps.is_empty(), "a live owner's dependents are not listed");
        // An owner not seen (gone, or not delivered yet) is concerned.
        assert_eq!(
            g.apply(PODS, DeltaType::Added, &obj("q", Some("ghost"), false)),
            ["ghost"]
        );
        let (owner, deps) = g.plan_input("ghost");
        assert!(owner.is_none());
        assert_eq!(deps.len(), 1);
        assert!(deps[0].blocks_owner && !deps[0].has_other_live_owner);
        let (r, ns) = g.owner_ref("ghost").unwrap();
        assert_eq!((r.kind.as_str(), ns.as_deref()), ("ReplicaSet", Some("d")));
        // A deleting owner is concerned by its dependents' changes.
        g.apply(REPLICA_SETS, DeltaType::Modified, &obj("rs", None, true));
        assert_eq!(
            g.apply(PODS, DeltaType::Modified, &obj("p", Some("rs"), true)),
            ["p", "rs"],
            "and the deleting dependent itself"
        );
        // The owner deleted: its dependents are left for it.
        assert_eq!(
            g.apply(REPLICA_SETS, DeltaType::Deleted, &obj("rs", None, false)),
            ["rs"]
        );
        assert_eq!(g.plan_input("rs").1.len(), 1);
    }
}
