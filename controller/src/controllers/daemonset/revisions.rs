//! The writes that settle a DaemonSet's revisions: labelling, renumbering and creating the
//! current one (a name taken by another template raises `collisionCount`), folding duplicates
//! (relabelling their pods) and deleting old ones.

use super::status;
use super::template::history_owner;
use super::view::{DaemonPod, DaemonSet, HASH_LABEL};
use super::{Controller, DaemonSetError};
use crate::controllers::history::{Current, History, Revision};
use crate::controllers::ownership::uid_of;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
use berth_shared::resource::{CONTROLLER_REVISIONS, DAEMON_SETS, PODS};
use serde_json::{Value, json};
use std::sync::Arc;

impl Controller {
    /// Settles the current revision; returns the hash new pods carry.
    pub(super) fn apply_history(
        &self,
        ds: &DaemonSet,
        history: &History,
    ) -> Result<String, DaemonSetError> {
        for r in &history.label {
            self.update_revision(ds, r, |obj| {
                obj["metadata"]["labels"][HASH_LABEL] = json!(r.name);
            })?;
        }
        match &history.current {
            Current::Found {
                revision,
                renumber: Some(n),
            } => self.update_revision(ds, revision, |obj| obj["revision"] = json!(n))?,
            Current::Found { .. } => {}
            Current::Create { hash, object } => self.create_revision(ds, hash, object)?,
        }
        Ok(history.current.hash(HASH_LABEL))
    }

    fn update_revision(
        &self,
        ds: &DaemonSet,
        r: &Revision,
        edit: impl Fn(&mut Value),
    ) -> Result<(), DaemonSetError> {
        let result = self.registry.update_with(
            CONTROLLER_REVISIONS,
            Some(&ds.namespace),
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
        );
        result.map(|_| ()).map_err(DaemonSetError::from)
    }

    /// Upstream `snapshot`: creates the revision; a revision of that name with the same
    /// template is ours already, one with another template is a hash collision.
    fn create_revision(
        &self,
        ds: &DaemonSet,
        hash: &str,
        object: &Value,
    ) -> Result<(), DaemonSetError> {
        let err = match self.registry.create(
            CONTROLLER_REVISIONS,
            Some(&ds.namespace),
            object.clone(),
            &WriteOptions::default(),
        ) {
            Ok(_) => return Ok(()),
            Err(e @ RegistryError::AlreadyExists { .. }) => e,
            Err(e) => return Err(e.into()),
        };
        let name = format!("{}-{hash}", ds.name);
        let existing = self
            .registry
            .get(CONTROLLER_REVISIONS, Some(&ds.namespace), &name)?
            .value()
            .map_err(RegistryError::from)?;
        if existing.get("data") == Some(&history_owner(ds).revision_data()) {
            return Ok(());
        }
        tracing::debug!(daemonset = %ds.name, revision = %name, error = %err, "hash collision");
        let stale = std::cell::Cell::new(false);
        let r = self.registry.update_with(
            DAEMON_SETS,
            Some(&ds.namespace),
            &ds.name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                let stored = obj
                    .pointer("/status/collisionCount")
                    .and_then(Value::as_i64)
                    .and_then(|c| i32::try_from(c).ok());
                if uid_of(&obj) != Some(ds.uid.as_str()) || stored != ds.collision_count {
                    stale.set(true);
                    return Ok::<_, RegistryError>(obj);
                }
                status::bump_collision_count(&mut obj);
                Ok(obj)
            },
        );
        r?;
        if stale.get() {
            return Err(DaemonSetError::StaleCollisionCount(ds.name.clone()));
        }
        Err(DaemonSetError::HashCollision(name))
    }

    /// Folds duplicates of the current revision into it: pods of their hash get the current
    /// hash (upstream relabels every pod of another hash; only the duplicates' pods are meant),
    /// then the duplicates go.
    pub(super) fn apply_dedup(
        &self,
        ds: &DaemonSet,
        duplicates: &[Arc<Revision>],
        pods: &[DaemonPod],
        hash: &str,
    ) -> Result<(), DaemonSetError> {
        for dup in duplicates {
            for p in pods.iter().filter(|p| {
                p.pod.labels.get(HASH_LABEL).map(String::as_str) == Some(dup.hash(HASH_LABEL))
            }) {
                let r = self.registry.update_with(
                    PODS,
                    Some(&ds.namespace),
                    &p.pod.name,
                    Part::Main,
                    &WriteOptions::default(),
                    |mut obj| {
                        if uid_of(&obj) == Some(p.pod.uid.as_str()) {
                            obj["metadata"]["labels"][HASH_LABEL] = json!(hash);
                        }
                        Ok::<_, RegistryError>(obj)
                    },
                );
                match r {
                    Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            self.apply_delete_revision(ds, dup)?;
        }
        Ok(())
    }

    pub(super) fn apply_delete_revision(
        &self,
        ds: &DaemonSet,
        r: &Revision,
    ) -> Result<(), DaemonSetError> {
        let opts = DeleteOptions {
            preconditions: Some(DeletePreconditions {
                uid: Some(r.uid.clone()),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        };
        match self
            .registry
            .delete(CONTROLLER_REVISIONS, Some(&ds.namespace), &r.name, &opts)
        {
            Ok(_) | Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
