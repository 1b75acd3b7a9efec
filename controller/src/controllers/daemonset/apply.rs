//! The writes of a pass: adopting and releasing pods and revisions, creating daemon pods in
//! slow-start batches and deleting pods with their events, and the status (the revisions'
//! own writes are in [`super::revisions`]).

use super::plan::{Changes, Deletion, Why};
use super::template::{controller_ref, new_pod};
use super::view::DaemonSet;
use super::{Controller, DaemonSetError, status};
use crate::controllers::replicaset::plan::slow_start_batches;
use crate::events::EventType;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
use berth_shared::resource::{DAEMON_SETS, PODS, ResourceType};
use jiff::Timestamp;
use serde_json::{Value, json};

fn namespace_terminating(e: &RegistryError) -> bool {
    matches!(e, RegistryError::Forbidden(m) if m.contains("because it is being terminated"))
}

pub(super) fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

fn controller_uid(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

fn labels_of(obj: &Value) -> std::collections::BTreeMap<String, String> {
    crate::controllers::replicaset::view::string_map(obj.pointer("/metadata/labels"))
}

impl Controller {
    /// Whether the DaemonSet is still the one planned for and not being deleted (upstream's
    /// `RecheckDeletionTimestamp` before adopting).
    fn can_adopt(&self, ds: &DaemonSet) -> Result<bool, DaemonSetError> {
        Ok(self
            .registry
            .is_live_owner(DAEMON_SETS, &ds.namespace, &ds.name, &ds.uid)?)
    }

    /// Makes the DaemonSet the controller of the orphan `name` (a pod or a revision); true
    /// when it is ours now.
    pub(super) fn apply_adopt(
        &self,
        rt: &ResourceType,
        ds: &DaemonSet,
        name: &str,
        uid: &str,
    ) -> Result<bool, DaemonSetError> {
        if !self.can_adopt(ds)? {
            return Ok(false);
        }
        let r = self.registry.update_with(
            rt,
            Some(&ds.namespace),
            name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                // Re-checked on the fresh object: it may have been adopted, relabelled, deleted.
                if uid_of(&obj) != Some(uid)
                    || obj.pointer("/metadata/deletionTimestamp").is_some()
                    || controller_uid(&obj).is_some()
                    || !ds.selector.matches(&labels_of(&obj))
                {
                    return Ok::<_, RegistryError>(obj);
                }
                let refs = &mut obj["metadata"]["ownerReferences"];
                match refs.as_array_mut() {
                    Some(list) => {
                        list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&ds.uid));
                        list.push(controller_ref(ds));
                    }
                    None => *refs = json!([controller_ref(ds)]),
                }
                Ok(obj)
            },
        );
        match r {
            Ok(obj) => Ok(controller_uid(&obj) == Some(ds.uid.as_str())),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Drops the DaemonSet's reference from `name`, which stopped matching its selector.
    pub(super) fn apply_release(
        &self,
        rt: &ResourceType,
        ds: &DaemonSet,
        name: &str,
        uid: &str,
    ) -> Result<(), DaemonSetError> {
        let r = self.registry.update_with(
            rt,
            Some(&ds.namespace),
            name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(uid) {
                    return Ok::<_, RegistryError>(obj);
                }
                crate::registry::meta::release_owner(&mut obj, &ds.uid);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

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
                    Err(e) if namespace_terminating(&e) => {}
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
