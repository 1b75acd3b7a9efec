//! The writes of a pass: creating daemon pods in
//! slow-start batches and deleting pods with their events, and the status (the revisions'
//! own writes are in [`super::revisions`]).

use super::plan::{Changes, Deletion, Why};
use super::template::new_pod;
use super::view::DaemonSet;
use super::{Controller, DaemonSetError};
use crate::workload::status::{self, Target};
use berth_registry::events::EventType;
use berth_shared::resource::DAEMON_SETS;
use jiff::Timestamp;
use serde_json::Value;

impl Controller {
    /// Creates and deletes pods; returns the first failure (the pass goes on to the status).
    pub(super) fn apply_changes(
        &self,
        ds: &DaemonSet,
        raw: &Value,
        changes: Changes,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<DaemonSetError>, DaemonSetError> {
        let pods = changes.create.iter().map(|node| new_pod(ds, node, hash));
        let mut failure = self
            .pods_control
            .create(raw, &ds.namespace, pods)
            .failure
            .map(DaemonSetError::Create);
        for d in &changes.delete {
            if let Some(e) = self.apply_delete_pod(ds, raw, d, now) {
                failure.get_or_insert(e);
            }
        }
        Ok(failure)
    }

    fn apply_delete_pod(
        &self,
        ds: &DaemonSet,
        raw: &Value,
        d: &Deletion,
        now: Timestamp,
    ) -> Option<DaemonSetError> {
        let pod = &d.pod;
        match &d.why {
            Why::Failed { node, key } => {
                let msg = format!(
                    "Found failed daemon pod {}/{} on node {node}, will try to kill it",
                    ds.namespace, pod.name
                );
                self.record(raw, EventType::Warning, "FailedDaemonPod", &msg);
                let mut backoff = self.backoff();
                backoff.forget_expired(now);
                backoff.step(key, now);
            }
            Why::Succeeded { node } => {
                let msg = format!(
                    "Found succeeded daemon pod {}/{} on node {node}, will try to delete it",
                    ds.namespace, pod.name
                );
                self.record(raw, EventType::Normal, "SucceededDaemonPod", &msg);
            }
            _ => {}
        }
        self.pods_control
            .delete(raw, &ds.namespace, &pod.name, &pod.uid)
            .err()
            .map(DaemonSetError::Delete)
    }

    pub(super) fn apply_status(
        &self,
        ds: &DaemonSet,
        new: &super::view::Status,
    ) -> Result<(), DaemonSetError> {
        let target = Target::of(DAEMON_SETS, &ds.namespace, &ds.name, &ds.uid);
        status::write(&self.registry, &target, |obj| {
            super::status::apply(obj, new)
        })?;
        Ok(())
    }
}
