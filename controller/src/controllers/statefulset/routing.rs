//! Which StatefulSets a change concerns, and the views they are judged by (each derived once
//! per object version and shared). A StatefulSet's own change, and its pods' and revisions'
//! through their controller reference, are wired by the runtime; here: a live orphan pod or
//! revision concerns every StatefulSet of its namespace whose selector matches it (upstream
//! `addPod`/`updatePod`), and so does a claim (claims carry the selector's labels, and their
//! owner references are not controller references).

use super::view::{Claim, PodVolumes, StatefulSet, ViewError};
use crate::informer::{Delta, DeltaType, Informer, Object, ObjectKey, View};

/// A StatefulSet parsed once per version.
pub struct ParsedSet(pub Result<StatefulSet, ViewError>);

impl View for ParsedSet {
    fn derive(obj: &Object) -> Self {
        ParsedSet(
            obj.value()
                .map_err(ViewError::from)
                .and_then(|v| StatefulSet::from_value(&v)),
        )
    }
}

impl View for PodVolumes {
    fn derive(obj: &Object) -> Self {
        obj.value()
            .map(|v| PodVolumes::from_value(&v))
            .unwrap_or_default()
    }
}

impl View for Claim {
    fn derive(obj: &Object) -> Self {
        obj.value()
            .map(|v| Claim::from_value(&v))
            .unwrap_or_default()
    }
}

/// The StatefulSets of `obj`'s namespace whose selector matches its labels.
fn matching(sets: &Informer, obj: &Object) -> Vec<ObjectKey> {
    sets.in_namespace(obj.namespace().unwrap_or_default())
        .into_iter()
        .filter(|s| {
            s.view::<ParsedSet>().0.as_ref().is_ok_and(|set| {
                !set.deleting && !set.selector.is_empty() && set.selector.matches(obj.labels())
            })
        })
        .map(|s| s.key().clone())
        .collect()
}

/// A change of a pod or a ControllerRevision without a controller: the sets that may adopt it.
pub fn orphan(sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind == DeltaType::Deleted || d.object.controller().is_some() || d.object.is_deleting() {
        return Vec::new();
    }
    matching(sets, &d.object)
}

/// A claim change (one created, re-owned or gone): the sets whose pods may mount it.
pub fn claim_change(sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    matching(sets, &d.object)
}
