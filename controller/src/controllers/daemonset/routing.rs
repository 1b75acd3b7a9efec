//! Which DaemonSets a change concerns, and the views they are judged by (each derived once per
//! object version and shared). A DaemonSet's own change, and its pods' and revisions' through
//! their controller reference, are wired by the runtime (`Controller::new`, `.owns`); here: a
//! live orphan pod or revision concerns every DaemonSet of its namespace whose selector matches
//! it (upstream `addPod`/`updatePod`, `addHistory`), and a node concerns the DaemonSets whose
//! verdict on it changes (upstream `addNode`/`updateNode`: a heartbeat or a cordon concerns
//! none), or, when it goes, every DaemonSet (their pods there must go too).

use super::view::{DaemonSet, Node, ViewError, pinned_node};
use crate::informer::{Delta, DeltaType, Informer, Object, ObjectKey, View};

/// A DaemonSet parsed once per version.
pub struct ParsedDaemonSet(pub Result<DaemonSet, ViewError>);

impl View for ParsedDaemonSet {
    fn derive(obj: &Object) -> Self {
        ParsedDaemonSet(
            obj.value()
                .map_err(ViewError::from)
                .and_then(|v| DaemonSet::from_value(&v)),
        )
    }
}

impl View for Node {
    fn derive(obj: &Object) -> Self {
        obj.value()
            .map(|v| Node::from_value(&v))
            .unwrap_or_default()
    }
}

/// The node a daemon pod is meant for (see [`super::view::DaemonPod::node`]).
pub struct TargetNode(pub Option<String>);

impl View for TargetNode {
    fn derive(obj: &Object) -> Self {
        if let Some(n) = obj.field("spec.nodeName").filter(|n| !n.is_empty()) {
            return TargetNode(Some(n));
        }
        TargetNode(obj.value().ok().and_then(|v| pinned_node(v.get("spec"))))
    }
}

/// The DaemonSets of `namespace` whose selector matches an orphan's labels.
fn matching(sets: &Informer, obj: &Object) -> Vec<ObjectKey> {
    sets.in_namespace(obj.namespace().unwrap_or_default())
        .into_iter()
        .filter(|s| {
            s.view::<ParsedDaemonSet>().0.as_ref().is_ok_and(|ds| {
                !ds.deleting && !ds.selector.is_empty() && ds.selector.matches(obj.labels())
            })
        })
        .map(|s| s.key().clone())
        .collect()
}

/// A change of a pod or a ControllerRevision without a controller: the DaemonSets that may
/// adopt it.
pub fn orphan(sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind == DeltaType::Deleted || d.object.controller().is_some() || d.object.is_deleting() {
        return Vec::new();
    }
    matching(sets, &d.object)
}

/// A node change: the DaemonSets it concerns.
pub fn node_change(sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    // Heartbeats of every node pass here: with no DaemonSet, nothing is parsed.
    if sets.is_empty() {
        return Vec::new();
    }
    if d.kind == DeltaType::Deleted {
        return sets.keys();
    }
    let new = d.object.view::<Node>();
    let old = d.old.as_ref().map(|o| o.view::<Node>());
    if old.as_deref() == Some(&*new) {
        return Vec::new();
    }
    sets.list()
        .into_iter()
        .filter(|s| {
            let parsed = s.view::<ParsedDaemonSet>();
            let Ok(ds) = &parsed.0 else { return false };
            let now = super::eligibility::fit(&ds.placement, &new);
            match &old {
                Some(old) => super::eligibility::fit(&ds.placement, old) != now,
                None => now.should_run,
            }
        })
        .map(|s| s.key().clone())
        .collect()
}
