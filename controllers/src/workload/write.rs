//! The two writes every workload controller makes to objects it owns, written once: an edit
//! of the object it read (the same uid: a replacement of the same name is left as it is) and a
//! deletion with a uid precondition (upstream's `DeletePod` with `Preconditions{UID}`). An
//! object gone meanwhile is no failure. Also the live read that tells an object gone from one
//! the cache has not caught up with ([`holds`]).

use super::controller_ref::uid_of;
use berth_registry::{
    DeleteOptions, DeleteOutcome, DeletePreconditions, Part, Registry, RegistryError, WriteOptions,
};
use berth_shared::resource::ResourceType;
use serde_json::Value;

/// Rewrites `name` of uid `uid` with `change` (not called for another object of that name);
/// the object as written, `None` when it is gone.
pub fn edit(
    registry: &Registry,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    uid: &str,
    mut change: impl FnMut(&mut Value),
) -> Result<Option<Value>, RegistryError> {
    let r = registry.update_with(
        rt,
        Some(namespace),
        name,
        Part::Main,
        &WriteOptions::default(),
        |mut obj| {
            if uid_of(&obj) == Some(uid) {
                change(&mut obj);
            }
            Ok::<_, RegistryError>(obj)
        },
    );
    match r {
        Ok(obj) => Ok(Some(obj)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes `name` if it is still the object of uid `uid`: the registry's answer (a
/// replacement of the same name is a conflict; one gone, not found).
pub fn delete(
    registry: &Registry,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<DeleteOutcome, RegistryError> {
    let opts = DeleteOptions {
        preconditions: Some(DeletePreconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    registry.delete(rt, Some(namespace), name, &opts)
}

/// Whether a deletion with a uid precondition failed only because the object is gone, or
/// was replaced by another of its name: nothing is left to delete.
pub fn gone(e: &RegistryError) -> bool {
    matches!(
        e,
        RegistryError::NotFound { .. } | RegistryError::Conflict { .. }
    )
}

/// Whether the API (read live, not the cache) still holds `name` as the object of uid `uid`.
pub fn holds(
    registry: &Registry,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<bool, RegistryError> {
    match registry.get(rt, Some(namespace), name) {
        Ok(o) => Ok(uid_of(&o.value()?) == Some(uid)),
        Err(RegistryError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
