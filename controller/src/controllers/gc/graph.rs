//! The garbage collector's ownership graph: every object by uid (shared with the informers'
//! caches) and, per owner uid, the uids of its dependents. Fed with informer changes; answers
//! which owners a change concerns and what the planner needs to know about one owner. No I/O.
//!
//! Planner: pure, no I/O.

use super::plan;
use crate::informer::{DeltaType, Object};
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
        match kind {
            DeltaType::Deleted => {
                self.remove(uid);
                if self.dependents.contains_key(uid) {
                    touched.push(uid.to_string());
                }
            }
            _ => {
                let interesting = obj.is_deleting() || self.dependents.contains_key(uid);
                self.insert(Node {
                    rt,
                    object: obj.clone(),
                });
                if interesting {
                    touched.push(uid.to_string());
                }
            }
        }
        touched
    }

    /// What the planner needs to know about owner `uid`.
    pub fn plan_input(&self, uid: &str) -> (Option<plan::Owner>, Vec<plan::Dependent>) {
        let owner = self.nodes.get(uid).map(|n| plan::Owner {
            deleting: n.object.is_deleting(),
            finalizers: n.object.finalizers().to_vec(),
        });
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
    fn a_dependent_touches_its_owner_and_a_deleted_owner_leaves_it_orphaned() {
        let mut g = Graph::default();
        assert!(
            g.apply(REPLICA_SETS, DeltaType::Added, &obj("rs", None, false))
                .is_empty()
        );
        assert_eq!(
            g.apply(PODS, DeltaType::Added, &obj("p", Some("rs"), false)),
            ["rs"]
        );
        let (owner, deps) = g.plan_input("rs");
        assert!(owner.is_some_and(|o| !o.deleting));
        assert_eq!(deps.len(), 1);
        assert!(deps[0].blocks_owner && !deps[0].has_other_live_owner);
        assert_eq!(
            g.apply(REPLICA_SETS, DeltaType::Deleted, &obj("rs", None, false)),
            ["rs"]
        );
        let (owner, deps) = g.plan_input("rs");
        assert!(owner.is_none());
        assert_eq!(deps.len(), 1);
    }
}
