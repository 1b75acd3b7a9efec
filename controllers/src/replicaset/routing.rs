//! The queue key of the two set kinds and the views routing needs: the runtime maps a pod's
//! change to its controlling set (`.owns_as`) and a live orphan's to every set whose
//! [`selector`] matches it (`.adopts_as`).

use super::view::{Kind, Set};
use berth_runtime::informer::{Informer, Object, View};
use berth_shared::selector::LabelSelector;
use std::fmt;
use std::sync::Arc;

/// The queue key: one ReplicaSet or ReplicationController.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl SetKey {
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> SetKey {
        SetKey {
            kind,
            namespace: namespace.unwrap_or_default().to_string(),
            name: name.to_string(),
        }
    }

    pub fn of(kind: Kind, obj: &Object) -> SetKey {
        SetKey::new(kind, obj.namespace(), obj.name())
    }
}

impl fmt::Display for SetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// A set parsed once per version (`None`: unreadable, it matches nothing).
pub struct ParsedSet(pub Option<Set>);

impl View for ParsedSet {
    fn derive(obj: &Object) -> Self {
        let parsed = obj.value().ok().and_then(|v| {
            let api_version = v.get("apiVersion")?.as_str()?;
            let kind = Kind::of_owner(api_version, v.get("kind")?.as_str()?)?;
            Set::from_value(kind, &v).ok()
        });
        ParsedSet(parsed)
    }
}

/// The selector of a readable set (what `.adopts_as` routes orphans by).
pub fn selector(set: &ParsedSet) -> Option<&LabelSelector> {
    set.0.as_ref().map(|s| &s.selector)
}

/// The informers of the two set kinds.
pub struct Sets {
    pub replica_sets: Arc<Informer>,
    pub controllers: Arc<Informer>,
}

impl Sets {
    pub fn informer(&self, kind: Kind) -> &Arc<Informer> {
        match kind {
            Kind::ReplicaSet => &self.replica_sets,
            Kind::ReplicationController => &self.controllers,
        }
    }

    /// Every set, both kinds (for the resync).
    pub fn all(&self) -> Vec<SetKey> {
        [Kind::ReplicaSet, Kind::ReplicationController]
            .into_iter()
            .flat_map(|kind| {
                self.informer(kind)
                    .list()
                    .into_iter()
                    .map(move |o| SetKey::of(kind, &o))
            })
            .collect()
    }
}
