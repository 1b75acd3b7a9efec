//! The queue key of the two set kinds and their informers: the runtime maps a pod's change to
//! its controlling set (`.owns_as`) and a live orphan's to every set whose selector matches it
//! (`.adopts_as` with the kit's `Parsed::selector`).

use super::view::Kind;
use berth_runtime::informer::{Informer, Object, ObjectKey};
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

    /// The key in its kind's informer.
    pub fn object_key(&self) -> ObjectKey {
        ObjectKey::new(Some(&self.namespace), &self.name)
    }
}

impl fmt::Display for SetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
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
