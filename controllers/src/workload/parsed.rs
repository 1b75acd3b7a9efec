//! The owner object of a workload controller, parsed once per stored version and shared by
//! every pass ([`observe`], and [`each`] for the objects a pass lists) and by the runtime's
//! orphan routing (`.adopts` with [`Parsed::selector`]).

use berth_runtime::informer::{Informer, Object, ObjectKey, View};
use berth_shared::reconcile::Outcome;
use berth_shared::selector::{LabelSelector, SelectorError};
use serde_json::Value;
use std::fmt::Display;
use std::sync::Arc;

/// Why a stored owner could not be read (only a change of it can help).
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("object has no metadata.uid")]
    NoUid,
    #[error("decoding: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("invalid selector: {0}")]
    Selector(#[from] SelectorError),
    /// An `apiVersion` and `kind` the controller does not read.
    #[error("not a kind this controller reads: {0}")]
    Kind(String),
}

/// The uid in an owner's metadata: an owner without one cannot own anything.
pub fn required_uid(uid: Option<&String>) -> Result<String, ViewError> {
    uid.filter(|u| !u.is_empty())
        .cloned()
        .ok_or(ViewError::NoUid)
}

/// The pod template of a stored owner (`spec.template`) as stored, for hashing and copying.
pub fn stored_template(obj: &Value) -> Value {
    obj.pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null)
}

/// An object as its controller reads it.
pub trait Stored: Sized + Send + Sync + 'static {
    /// Why a stored object cannot be read.
    type Error: Display + From<serde_json::Error> + Send + Sync + 'static;
    /// Reads the stored object.
    fn from_value(v: &Value) -> Result<Self, Self::Error>;
}

/// An owner of pods (or revisions) it claims by a selector.
pub trait Workload: Stored {
    /// The selector of what it controls.
    fn selector(&self) -> &LabelSelector;
    /// Whether it is being deleted.
    fn deleting(&self) -> bool;
}

/// Implements [`Stored`] and [`Workload`] for an owner view with an inherent
/// `from_value(&Value) -> Result<Self, ViewError>` and `selector` and `deleting` fields (trait
/// impls, which a function cannot write).
macro_rules! owner_view {
    ($t:ty) => {
        impl $crate::workload::Stored for $t {
            type Error = $crate::workload::parsed::ViewError;
            fn from_value(v: &serde_json::Value) -> Result<$t, Self::Error> {
                <$t>::from_value(v)
            }
        }

        impl $crate::workload::Workload for $t {
            fn selector(&self) -> &berth_shared::selector::LabelSelector {
                &self.selector
            }
            fn deleting(&self) -> bool {
                self.deleting
            }
        }
    };
}
pub(crate) use owner_view;

/// An object parsed once per version.
pub struct Parsed<T: Stored>(pub Result<Arc<T>, T::Error>);

impl<T: Stored> View for Parsed<T> {
    fn derive(obj: &Object) -> Self {
        let parsed = obj
            .value()
            .map_err(T::Error::from)
            .and_then(|v| T::from_value(&v));
        Parsed(parsed.map(Arc::new))
    }
}

impl<T: Workload> Parsed<T> {
    /// The selector by which the owner adopts orphans (`.adopts`); none while it is
    /// unreadable or being deleted.
    pub fn selector(&self) -> Option<&LabelSelector> {
        self.0
            .as_ref()
            .ok()
            .filter(|w| !w.deleting())
            .map(|w| w.selector())
    }
}

/// A view read from the stored JSON by `parse`; the default when the bytes are not JSON.
pub fn or_default<T: Default>(obj: &Object, parse: impl FnOnce(&Value) -> T) -> T {
    obj.value().map(|v| parse(&v)).unwrap_or_default()
}

/// A view read from the stored JSON by `parse`; `fallback`'s when the bytes are not JSON.
pub fn or_else<T>(
    obj: &Object,
    parse: impl FnOnce(&Value) -> T,
    fallback: impl FnOnce() -> T,
) -> T {
    obj.value()
        .map(|v| parse(&v))
        .unwrap_or_else(|_| fallback())
}

/// The owner `key` as stored and parsed; `None` when it is gone or unreadable (logged: only a
/// change of it can help).
pub fn observe<T: Stored>(informer: &Informer, key: &ObjectKey) -> Option<(Arc<Object>, Arc<T>)> {
    let obj = informer.get_key(key)?;
    match &obj.view::<Parsed<T>>().0 {
        Ok(w) => Some((obj.clone(), w.clone())),
        Err(e) => {
            tracing::warn!(%key, kind = informer.resource().kind, error = %e, "ignoring object");
            None
        }
    }
}

/// A reconciler's pass over the owner `key` as stored and parsed ([`observe`]): `pass` while
/// it is cached and readable, [`Outcome::Done`] once it is gone or unreadable.
pub fn reconcile_observed<T: Stored, E>(
    informer: &Informer,
    key: &ObjectKey,
    pass: impl FnOnce(Arc<Object>, Arc<T>) -> Result<Outcome, E>,
) -> Result<Outcome, E> {
    observe(informer, key).map_or(Ok(Outcome::Done), |(obj, t)| pass(obj, t))
}

/// The readable ones of `objects`, parsed, in name order (plans must not depend on hash
/// order); an unreadable one is skipped (logged: only a change of it can help).
pub fn each<T: Stored>(mut objects: Vec<Arc<Object>>) -> Vec<Arc<T>> {
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    let parsed = objects
        .iter()
        .filter_map(|obj| match &obj.view::<Parsed<T>>().0 {
            Ok(t) => Some(t.clone()),
            Err(e) => {
                tracing::warn!(key = %obj.key(), error = %e, "ignoring an unreadable object");
                None
            }
        });
    parsed.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A view of `spec.name`, unreadable without one.
    struct Named(String);

    impl Stored for Named {
        type Error = serde_json::Error;
        fn from_value(v: &Value) -> Result<Named, serde_json::Error> {
            serde_json::from_value(v["spec"]["name"].clone()).map(Named)
        }
    }

    #[test]
    fn each_reads_in_name_order_and_skips_the_unreadable() {
        let obj = |name: &str, spec: Value| {
            let meta = json!({"name": name, "namespace": "ns", "uid": name});
            Arc::new(Object::from_value(&json!({"metadata": meta, "spec": spec})))
        };
        let objects = vec![
            obj("b", json!({"name": "B"})),
            obj("c", json!(7)),
            obj("a", json!({"name": "A"})),
        ];
        let names: Vec<String> = each::<Named>(objects).iter().map(|n| n.0.clone()).collect();
        assert_eq!(names, ["A", "B"]);
    }
}
