//! The writes that settle an owner's revisions: labelling, renumbering and creating the
//! current one (a name taken by another template raises the owner's `status.collisionCount`,
//! upstream `snapshot`/`createControllerRevision`), and deleting old ones.

use super::{Current, History, Owner, Revision};
use crate::workload::controller_ref::uid_of;
use crate::workload::write;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::reconcile::{ErrorPolicy, Retry};
use berth_shared::resource::CONTROLLER_REVISIONS;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Why the history could not be settled.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    /// The revision name of the template is taken by another template: `collisionCount` was
    /// raised, so the next pass hashes to another name.
    #[error("ControllerRevision {0} holds another template; collisionCount raised")]
    HashCollision(String),
    /// The collision count the hash was computed from is no longer the stored one.
    #[error("found a stale collision count of {0}; will retry")]
    StaleCollisionCount(String),
}

impl ErrorPolicy for HistoryError {
    fn retry(&self) -> Retry {
        match self {
            HistoryError::Api(e) => e.retry(),
            HistoryError::HashCollision(_) | HistoryError::StaleCollisionCount(_) => Retry::Now,
        }
    }
}

/// Sets `status.collisionCount` one higher (a revision name collided).
pub fn bump_collision_count(obj: &mut Value) {
    let next = obj
        .pointer("/status/collisionCount")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        + 1;
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = Value::Object(Map::new());
    }
    obj["status"]["collisionCount"] = json!(next);
}

/// Labels unlabelled revisions with their name, renumbers or creates the current one.
pub fn settle(
    registry: &Registry,
    owner: &Owner<'_>,
    history: &History,
) -> Result<(), HistoryError> {
    for r in &history.label {
        update_revision(registry, owner, r, |obj| {
            obj["metadata"]["labels"][owner.hash_label] = json!(r.name);
        })?;
    }
    match &history.current {
        Current::Found {
            revision,
            renumber: Some(n),
        } => update_revision(registry, owner, revision, |obj| obj["revision"] = json!(n)),
        Current::Found { .. } => Ok(()),
        Current::Create { hash, object } => create_revision(registry, owner, hash, object),
    }
}

fn update_revision(
    registry: &Registry,
    owner: &Owner<'_>,
    r: &Revision,
    edit: impl Fn(&mut Value),
) -> Result<(), HistoryError> {
    registry.update_with(
        CONTROLLER_REVISIONS,
        Some(owner.namespace),
        &r.name,
        Part::Main,
        &WriteOptions::default(),
        |mut obj| {
            if uid_of(&obj) != Some(r.uid.as_str()) {
                return Err(RegistryError::conflict(CONTROLLER_REVISIONS, &r.name));
            }
            edit(&mut obj);
            Ok(obj)
        },
    )?;
    Ok(())
}

/// Upstream `snapshot`: creates the revision; a revision of that name with the same template
/// is ours already, one with another template is a hash collision.
fn create_revision(
    registry: &Registry,
    owner: &Owner<'_>,
    hash: &str,
    object: &Value,
) -> Result<(), HistoryError> {
    let err = match registry.create(
        CONTROLLER_REVISIONS,
        Some(owner.namespace),
        object.clone(),
        &WriteOptions::default(),
    ) {
        Ok(_) => return Ok(()),
        Err(e @ RegistryError::AlreadyExists { .. }) => e,
        Err(e) => return Err(e.into()),
    };
    let name = owner.revision_name(hash);
    let existing = registry
        .get(CONTROLLER_REVISIONS, Some(owner.namespace), &name)?
        .value()
        .map_err(RegistryError::from)?;
    if existing.get("data") == Some(&owner.revision_data()) {
        return Ok(());
    }
    tracing::debug!(owner = %owner.name, revision = %name, error = %err, "hash collision");
    let stale = std::cell::Cell::new(false);
    registry.update_with(
        owner.resource,
        Some(owner.namespace),
        owner.name,
        Part::Status,
        &WriteOptions::default(),
        |mut obj| {
            let stored = obj
                .pointer("/status/collisionCount")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok());
            if uid_of(&obj) != Some(owner.uid) || stored != owner.collision_count {
                stale.set(true);
                return Ok::<_, RegistryError>(obj);
            }
            bump_collision_count(&mut obj);
            Ok(obj)
        },
    )?;
    if stale.get() {
        return Err(HistoryError::StaleCollisionCount(owner.name.to_string()));
    }
    Err(HistoryError::HashCollision(name))
}

/// Deletes a revision (gone or replaced already is fine).
pub fn delete_revision(
    registry: &Registry,
    namespace: &str,
    r: &Revision,
) -> Result<(), RegistryError> {
    match write::delete(registry, CONTROLLER_REVISIONS, namespace, &r.name, &r.uid) {
        Err(e) if !write::gone(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Deletes the old revisions past the owner's history limit that `live` does not keep
/// ([`super::cleanup`], upstream `truncateHistory`).
pub fn trim(
    registry: &Registry,
    owner: &Owner<'_>,
    old: &[Arc<Revision>],
    live: impl Fn(&Revision) -> bool,
) -> Result<(), RegistryError> {
    for r in super::cleanup(owner, old, live) {
        delete_revision(registry, owner.namespace, &r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumping_the_collision_count_starts_at_one_and_keeps_the_rest() {
        let mut obj = json!({"status": {"collisionCount": 2, "numberAvailable": 3}});
        bump_collision_count(&mut obj);
        assert_eq!(
            obj["status"],
            json!({"collisionCount": 3, "numberAvailable": 3})
        );
        let mut fresh = json!({});
        bump_collision_count(&mut fresh);
        assert_eq!(fresh["status"]["collisionCount"], 1);
    }
}
