//! Which StatefulSets a change concerns (judged by the views of [`super::view`], each derived
//! once per object version and shared). A StatefulSet's own change, and its pods' and revisions'
//! through their controller reference, are wired by the runtime, and so are live orphans
//! (`.adopts` with the kit's `Parsed::selector`: upstream `addPod`/`updatePod`); here: a claim
//! concerns every StatefulSet of its namespace whose selector matches it (claims carry the
//! selector's labels, and their owner references are not controller references).

use super::view::StatefulSet;
use crate::workload::Parsed;
use berth_runtime::informer::{Delta, Informer, Object, ObjectKey};

/// The StatefulSets of `obj`'s namespace whose selector matches its labels.
fn matching(sets: &Informer, obj: &Object) -> Vec<ObjectKey> {
    sets.in_namespace(obj.namespace().unwrap_or_default())
        .into_iter()
        .filter(|s| {
            s.view::<Parsed<StatefulSet>>().0.as_ref().is_ok_and(|set| {
                !set.deleting && !set.selector.is_empty() && set.selector.matches(obj.labels())
            })
        })
        .map(|s| s.key().clone())
        .collect()
}

/// A claim change (one created, re-owned or gone): the sets whose pods may mount it.
pub fn claim_change(sets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    matching(sets, &d.object)
}
