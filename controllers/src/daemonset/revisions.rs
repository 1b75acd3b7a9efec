//! The writes that settle a DaemonSet's revisions (through [`write`]) and fold duplicates
//! (relabelling their pods).

use super::template::history_owner;
use super::view::{DaemonPod, DaemonSet, HASH_LABEL};
use super::{Controller, DaemonSetError};
use crate::history::{History, Revision, write};
use crate::workload::controller_ref::uid_of;
use berth_registry::{Part, RegistryError, WriteOptions};
use berth_shared::resource::PODS;
use serde_json::json;
use std::sync::Arc;

impl Controller {
    /// Settles the current revision; returns the hash new pods carry.
    pub(super) fn apply_history(
        &self,
        ds: &DaemonSet,
        history: &History,
    ) -> Result<String, DaemonSetError> {
        write::settle(&self.registry, &history_owner(ds), history)?;
        Ok(history.current.hash(HASH_LABEL))
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
        Ok(write::delete_revision(&self.registry, &ds.namespace, r)?)
    }
}
