//! Which DaemonSets a change concerns (judged by the views of [`super::view`], each derived
//! once per object version and shared). A DaemonSet's own change, and its pods' and revisions' through
//! their controller reference, are wired by the runtime (`Controller::new`, `.owns`), and so
//! are live orphans (`.adopts` with the kit's `Parsed::selector`: upstream `addPod`/`updatePod`,
//! `addHistory`); here: a node concerns the DaemonSets whose
//! verdict on it changes (upstream `addNode`/`updateNode`: a heartbeat or a cordon concerns
//! none), or, when it goes, every DaemonSet (their pods there must go too).

use super::view::{DaemonSet, Node};
use crate::workload::Parsed;
use berth_runtime::informer::{Delta, DeltaType, Informer, ObjectKey};

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
            let parsed = s.view::<Parsed<DaemonSet>>();
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
