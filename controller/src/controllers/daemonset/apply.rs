//! The writes of a pass: creating daemon pods in
//! slow-start batches and deleting pods with their events, and the status (the revisions'
//! own writes are in [`super::revisions`]).

use super::plan::{Changes, Deletion, Why};
use super::template::new_pod;
use super::view::DaemonSet;
use super::{Controller, DaemonSetError, status};
use crate::controllers::ownership::uid_of;
use crate::controllers::replicaset::plan::slow_start_batches;
use crate::events::EventType;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
use berth_shared::resource::{DAEMON_SETS, PODS};
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
        let mut failure = None;
        let mut nodes = changes.create.iter();
        for batch in slow_start_batches(changes.create.len()) {
            let mut failed = false;
            for node in nodes.by_ref().take(batch) {
                match self.registry.create(
                    PODS,
                    Some(&ds.namespace),
                    new_pod(ds, node, hash),
                    &WriteOptions::default(),
                ) {
                    Ok(pod) => {
                        let name = pod
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        tracing::debug!(daemonset = %ds.name, pod = name, node, "created pod");
                        let msg = format!("Created pod: {name}");
                        self.record(raw, EventType::Normal, "SuccessfulCreate", &msg);
                    }
                    // Nothing can be created in a terminating namespace; not a failure.
                    Err(e) if e.is_namespace_terminating() => {}
                    Err(e) => {
                        let msg = format!("Error creating: {e}");
                        self.record(raw, EventType::Warning, "FailedCreate", &msg);
                        failure.get_or_insert(DaemonSetError::Create(e));
                        failed = true;
                    }
                }
            }
            // Slow start: a systematic error costs one batch, not every node.
            if failed {
                break;
            }
        }
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
        let opts = DeleteOptions {
            preconditions: Some(DeletePreconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        };
        match self
            .registry
            .delete(PODS, Some(&ds.namespace), &pod.name, &opts)
        {
            Ok(_) => {
                let msg = format!("Deleted pod: {}", pod.name);
                self.record(raw, EventType::Normal, "SuccessfulDelete", &msg);
                None
            }
            // Gone already, or replaced by another pod of the same name.
            Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => None,
            Err(e) => {
                let msg = format!("Error deleting: {e}");
                self.record(raw, EventType::Warning, "FailedDelete", &msg);
                Some(DaemonSetError::Delete(e))
            }
        }
    }

    pub(super) fn apply_status(
        &self,
        ds: &DaemonSet,
        new: &super::view::Status,
    ) -> Result<(), DaemonSetError> {
        let r = self.registry.update_with(
            DAEMON_SETS,
            Some(&ds.namespace),
            &ds.name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(ds.uid.as_str()) {
                    return Err(RegistryError::not_found(DAEMON_SETS, &ds.name));
                }
                status::apply(&mut obj, new);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
