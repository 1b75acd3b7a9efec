//! The two writes every workload controller makes to objects it owns, written once: an edit
//! of the object it read (the same uid: a replacement of the same name is left as it is) and a
//! deletion with a uid precondition (upstream's `DeletePod` with `Preconditions{UID}`). An
//! object gone meanwhile is no failure. Also the live read that tells an object gone from one
//! the cache has not caught up with ([`holds`]), and a pass's writes made in turn ([`in_turn`]).

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

/// Makes `write` for each of `items` in turn, going on past a failure (a pass's writes do, as
/// upstream's): the items written, and the first failure.
pub fn in_turn<'a, T, E>(
    items: impl IntoIterator<Item = &'a T>,
    mut write: impl FnMut(&T) -> Result<(), E>,
) -> (Vec<&'a T>, Option<E>)
where
    T: 'a,
{
    let mut done = Vec::new();
    let mut failure = None;
    for item in items {
        match write(item) {
            Ok(()) => done.push(item),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    (done, failure)
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_in_turn_go_on_past_a_failure_and_keep_the_first() {
        let items = [1, 2, 3, 4];
        let (done, failure) = super::in_turn(&items, |&i| if i % 2 == 0 { Err(i) } else { Ok(()) });
        assert_eq!((done, failure), (vec![&1, &3], Some(2)));
    }
}
