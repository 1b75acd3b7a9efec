//! The writes of a pass: creating daemon pods in slow-start batches and deleting pods with
//! their events, and folding duplicate revisions into the current one.

use super::plan::{Changes, Why, made_from};
use super::template::new_pod;
use super::view::{DaemonPod, DaemonSet, HASH_LABEL, Revision};
use super::{Controller, SyncError};
use crate::history::write::delete_revision;
use crate::workload::write;
use berth_shared::resource::PODS;
use jiff::Timestamp;
use serde_json::{Value, json};
use std::sync::Arc;

impl Controller {
    /// Creates and deletes pods; returns the first failure (the pass goes on to the status).
    pub(super) fn apply_changes(
        &self,
        ds: &DaemonSet,
        raw: &Value,
        changes: Changes,
        hash: &str,
        now: Timestamp,
    ) -> Option<SyncError> {
        let pods = changes.create.iter().map(|node| new_pod(ds, node, hash));
        let created = self.pods_control.create(raw, &ds.namespace, pods);
        let failure = created.failure.map(SyncError::Create);
        for d in &changes.delete {
            if let Some((t, reason, msg)) = d.event(&ds.namespace) {
                self.pods_control.record(raw, t, reason, &msg);
            }
            if let Why::Failed { key, .. } = &d.why {
                let mut backoff = self.backoff();
                backoff.forget_expired(now);
                backoff.step(key, now);
            }
        }
        let pods = changes
            .delete
            .iter()
            .map(|d| (d.pod.name.as_str(), d.pod.uid.as_str()));
        let deleted = self.pods_control.delete_all(raw, &ds.namespace, pods);
        failure.or(deleted.map(SyncError::Delete))
    }

    /// Folds duplicates of the current revision into it: their pods get the current hash,
    /// then the duplicates go.
    pub(super) fn apply_dedup(
        &self,
        ds: &DaemonSet,
        duplicates: &[Arc<Revision>],
        pods: &[DaemonPod],
        hash: &str,
    ) -> Result<(), SyncError> {
        for dup in duplicates {
            for p in made_from(dup, pods) {
                write::edit(
                    &self.registry,
                    PODS,
                    &ds.namespace,
                    &p.name,
                    &p.uid,
                    |obj| {
                        obj["metadata"]["labels"][HASH_LABEL] = json!(hash);
                    },
                )?;
            }
            delete_revision(&self.registry, &ds.namespace, dup)?;
        }
        Ok(())
    }
}
