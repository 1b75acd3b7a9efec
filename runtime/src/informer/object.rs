//! One cached object as every controller sees it: the stored bytes and selector index (shared
//! with the store, not copied), the metadata every controller routes by, decoded once
//! (namespace, name, uid, owner references, finalizers, deletion), and views a controller
//! derives from it, each computed at most once per object version and shared.

use berth_store::{LabelSet, ObjectIndex, StoredObject};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A store revision (an object's `resourceVersion`).
pub type Revision = u64;

/// Namespace (for namespaced kinds) and name of an object of a known kind. Cheap to clone
/// (shared strings): the cache and each of its indexes hold one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    namespace: Option<Arc<str>>,
    name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: namespace.filter(|n| !n.is_empty()).map(Arc::from),
            name: Arc::from(name),
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub controller: Option<bool>,
    #[serde(default)]
    pub block_owner_deletion: Option<bool>,
}

impl OwnerRef {
    pub fn is_controller(&self) -> bool {
        self.controller == Some(true)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaHead {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<OwnerRef>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    metadata: MetaHead,
}

/// A view of an object a controller derives once per object version (for example a parsed
/// pod); see [`Object::view`].
pub trait View: Send + Sync + 'static {
    fn derive(obj: &Object) -> Self;
}

/// One version of one object.
pub struct Object {
    stored: StoredObject,
    key: ObjectKey,
    uid: String,
    owners: Vec<OwnerRef>,
    finalizers: Vec<String>,
    deleting: bool,
    views: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("key", &self.key)
            .field("revision", &self.stored.revision)
            .field("uid", &self.uid)
            .finish()
    }
}

impl Object {
    /// Decodes the metadata of a stored object.
    pub fn from_stored(stored: StoredObject) -> Object {
        // An object the store accepted is JSON with metadata; a head that does not decode
        // (never expected) leaves the metadata empty rather than losing the object.
        let head: Head = serde_json::from_slice(&stored.data).unwrap_or(Head {
            metadata: MetaHead::default(),
        });
        let key = ObjectKey::new(
            stored.index.field("metadata.namespace"),
            stored.index.field("metadata.name").unwrap_or_default(),
        );
        Object {
            key,
            uid: head.metadata.uid,
            owners: head.metadata.owner_references,
            finalizers: head.metadata.finalizers,
            deleting: head.metadata.deletion_timestamp.is_some(),
            stored,
            views: Mutex::new(Vec::new()),
        }
    }

    /// An object from its JSON (tests, and objects a controller just wrote).
    pub fn from_value(value: &Value) -> Object {
        let revision = value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let data = serde_json::to_vec(value).unwrap_or_default();
        Object::from_stored(StoredObject {
            revision,
            data: data.into(),
            index: Arc::new(ObjectIndex::of(value)),
        })
    }

    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace()
    }

    pub fn name(&self) -> &str {
        self.key.name()
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    pub fn revision(&self) -> Revision {
        self.stored.revision
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.stored.index.labels
    }

    /// The labels as the store holds them, shared with every object that has the same ones:
    /// a view that keeps the labels clones this instead of copying the map.
    pub fn label_set(&self) -> &LabelSet {
        &self.stored.index.labels
    }

    /// A selectable field (`spec.nodeName`, `status.phase`, …).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.stored.index.field(name)
    }

    pub fn owners(&self) -> &[OwnerRef] {
        &self.owners
    }

    /// The owner reference with `controller: true`.
    pub fn controller(&self) -> Option<&OwnerRef> {
        self.owners.iter().find(|o| o.is_controller())
    }

    pub fn finalizers(&self) -> &[String] {
        &self.finalizers
    }

    /// Whether `metadata.deletionTimestamp` is set.
    pub fn is_deleting(&self) -> bool {
        self.deleting
    }

    /// The object's JSON bytes.
    pub fn data(&self) -> &[u8] {
        &self.stored.data
    }

    /// The object as JSON.
    pub fn value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.stored.data)
    }

    /// The object decoded into a typed struct (for example a `k8s-openapi` kind).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.stored.data)
    }

    /// The object decoded as [`Object::decode`] does; `None` when it does not decode (logged:
    /// only a change of the object can help, so a reconciler skips it).
    pub fn decoded<T: DeserializeOwned>(&self) -> Option<T> {
        match self.decode() {
            Ok(t) => Some(t),
            Err(e) => {
                let kind = std::any::type_name::<T>()
                    .rsplit("::")
                    .next()
                    .unwrap_or_default();
                tracing::warn!(key = %self.key(), kind, error = %e, "ignoring an object that does not decode");
                None
            }
        }
    }

    /// The view `V` of this version, derived on first use and shared by every later caller
    /// (a new version of the object is a new `Object`, so a view is never stale).
    pub fn view<V: View>(&self) -> Arc<V> {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        for v in views.iter() {
            if let Ok(found) = v.clone().downcast::<V>() {
                return found;
            }
        }
        let derived = Arc::new(V::derive(self));
        views.push(derived.clone());
        derived
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DERIVED: AtomicUsize = AtomicUsize::new(0);

    struct Phase(String);
    impl View for Phase {
        fn derive(obj: &Object) -> Self {
            DERIVED.fetch_add(1, Ordering::SeqCst);
            Phase(obj.field("status.phase").unwrap_or_default().to_string())
        }
    }

    #[test]
    fn metadata_is_decoded_once_and_a_view_is_derived_once_per_version() {
        let obj = Object::from_value(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "u0", "controller": true}]},
            "status": {"phase": "Running"}}));
        assert_eq!(obj.key().to_string(), "ns/p");
        assert_eq!((obj.uid(), obj.revision()), ("u1", 7));
        assert!(obj.is_deleting());
        assert_eq!(obj.finalizers(), ["f"]);
        assert_eq!(obj.controller().map(|c| c.name.as_str()), Some("rs"));
        let before = DERIVED.load(Ordering::SeqCst);
        assert_eq!(obj.view::<Phase>().0, "Running");
        assert_eq!(obj.view::<Phase>().0, "Running");
        assert_eq!(DERIVED.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn an_object_that_does_not_decode_as_asked_is_none() {
        #[derive(serde::Deserialize)]
        struct Named {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            name: String,
        }
        let obj = Object::from_value(&json!({"metadata": {"name": "p", "namespace": "ns"}}));
        assert_eq!(
            obj.decoded::<Named>().map(|n| n.metadata.name),
            Some("p".into())
        );
        let obj = Object::from_value(&json!({"metadata": {"name": 7}}));
        assert!(obj.decoded::<Named>().is_none());
    }
}
