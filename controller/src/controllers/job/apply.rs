//! The writes of a pass: adopting and releasing pods, creating pods in slow-start batches,
//! deleting them (keeping the tracking finalizer when they are to be counted, removing it first
//! when not), removing the finalizer of counted pods, the status (conditional on the
//! `resourceVersion` it was computed from) and the events.

use super::plan::{Change, NewPod};
use super::template::{controller_ref, new_pod};
use super::tracking::{Applied, Event};
use super::view::{Job, JobPod, TRACKING_FINALIZER};
use super::{Controller, JobError};
use crate::controllers::ownership::{controller_uid, uid_of};
use crate::controllers::replicaset::plan::slow_start_batches;
use crate::events::EventType;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use berth_shared::resource::{JOBS, PODS};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// `obj`'s finalizers without the tracking finalizer (the list removed when it empties).
fn drop_tracking(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let empty = match meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        Some(list) => {
            list.retain(|f| f.as_str() != Some(TRACKING_FINALIZER));
            list.is_empty()
        }
        None => false,
    };
    if empty {
        meta.remove("finalizers");
    }
}

impl Controller {
    pub(super) fn record(&self, raw: &Value, e: &Event) {
        let t = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        if let Err(err) = self.recorder.record(raw, t, &e.reason, &e.message) {
            tracing::debug!(error = %err, reason = %e.reason, "recording event");
        }
    }

    fn note(&self, raw: &Value, warning: bool, reason: &str, message: String) {
        self.record(
            raw,
            &Event {
                warning,
                reason: reason.into(),
                message,
            },
        );
    }

    /// Whether the Job is still the one planned for and not being deleted (upstream's
    /// `RecheckDeletionTimestamp` before adopting).
    fn can_adopt(&self, job: &Job) -> Result<bool, JobError> {
        Ok(self
            .registry
            .is_live_owner(JOBS, &job.namespace, &job.name, &job.uid)?)
    }

    /// Makes the Job the controller of the orphan `pod`, adding the tracking finalizer; the
    /// pod as it is now, when it is ours.
    pub(super) fn apply_adopt(
        &self,
        job: &Job,
        pod: &JobPod,
    ) -> Result<Option<Arc<JobPod>>, JobError> {
        if !self.can_adopt(job)? {
            return Ok(None);
        }
        let r = self.registry.update_with(
            PODS,
            Some(&job.namespace),
            &pod.name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                let labels = crate::controllers::views::string_map(
                    obj.pointer("/metadata/labels"),
                );
                // Re-checked on the fresh object: it may have been adopted, relabelled, deleted.
                if uid_of(&obj) != Some(pod.uid.as_str())
                    || obj.pointer("/metadata/deletionTimestamp").is_some()
                    || controller_uid(&obj).is_some()
                    || !job.selector.matches(&labels)
                {
                    return Ok::<_, RegistryError>(obj);
                }
                let refs = &mut obj["metadata"]["ownerReferences"];
                match refs.as_array_mut() {
                    Some(list) => list.push(controller_ref(job)),
                    None => *refs = json!([controller_ref(job)]),
                }
                let fins = &mut obj["metadata"]["finalizers"];
                match fins.as_array_mut() {
                    Some(list) if !list.iter().any(|f| f == TRACKING_FINALIZER) => {
                        list.push(json!(TRACKING_FINALIZER));
                    }
                    Some(_) => {}
                    None => *fins = json!([TRACKING_FINALIZER]),
                }
                Ok(obj)
            },
        );
        match r {
            Ok(obj) if controller_uid(&obj) == Some(job.uid.as_str()) => {
                Ok(Some(Arc::new(JobPod::from_value(&obj))))
            }
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Drops the Job's reference (and the tracking finalizer) from a pod that stopped matching
    /// its selector.
    pub(super) fn apply_release(&self, job: &Job, pod: &JobPod) -> Result<(), JobError> {
        let r = self.registry.update_with(
            PODS,
            Some(&job.namespace),
            &pod.name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(pod.uid.as_str()) {
                    return Ok::<_, RegistryError>(obj);
                }
                drop_tracking(&mut obj);
                crate::registry::meta::release_owner(&mut obj, &job.uid);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Applies the pass's pod changes; returns what they achieved and the first failure (the
    /// pass goes on to the status).
    pub(super) fn apply_change(
        &self,
        job: &Job,
        raw: &Value,
        change: &Change,
    ) -> (Applied, Option<JobError>) {
        let mut applied = Applied::default();
        let mut failure = None;
        match change {
            Change::None => {}
            Change::Create(new) => {
                let (created, e) = self.apply_create(job, raw, new);
                applied.created = created;
                failure = e;
            }
            Change::Terminate(pods) | Change::Remove(pods) => {
                let untrack_first = matches!(change, Change::Remove(_));
                for pod in pods {
                    match self.apply_delete(job, raw, pod, untrack_first) {
                        Ok(()) => {
                            applied.deleted += 1;
                            if pod.ready {
                                applied.deleted_ready += 1;
                            }
                        }
                        Err(e) => {
                            failure.get_or_insert(e);
                        }
                    }
                }
            }
        }
        (applied, failure)
    }

    fn apply_create(&self, job: &Job, raw: &Value, new: &[NewPod]) -> (i32, Option<JobError>) {
        let mut created = 0;
        let mut failure = None;
        let mut todo = new.iter();
        for batch in slow_start_batches(new.len()) {
            let mut failed = false;
            for n in todo.by_ref().take(batch) {
                let r = self.registry.create(
                    PODS,
                    Some(&job.namespace),
                    new_pod(job, n),
                    &WriteOptions::default(),
                );
                match r {
                    Ok(pod) => {
                        created += 1;
                        let name = pod
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        tracing::debug!(job = %job.name, pod = name, "created pod");
                        self.note(
                            raw,
                            false,
                            "SuccessfulCreate",
                            format!("Created pod: {name}"),
                        );
                    }
                    // Nothing can be created in a terminating namespace; not a failure.
                    Err(e) if e.is_namespace_terminating() => {}
                    Err(e) => {
                        self.note(raw, true, "FailedCreate", format!("Error creating: {e}"));
                        failure.get_or_insert(JobError::Create(e));
                        failed = true;
                    }
                }
            }
            // Slow start: a systematic error costs one batch, not every pod.
            if failed {
                break;
            }
        }
        (created, failure)
    }

    /// Deletes a pod; with `untrack_first` its tracking finalizer goes before (a pod removed,
    /// not failed, is never counted).
    fn apply_delete(
        &self,
        job: &Job,
        raw: &Value,
        pod: &JobPod,
        untrack_first: bool,
    ) -> Result<(), JobError> {
        if untrack_first && pod.finalizer && !self.apply_untrack(&job.namespace, pod)? {
            return Ok(());
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
            .delete(PODS, Some(&job.namespace), &pod.name, &opts)
        {
            Ok(_) => {
                self.note(
                    raw,
                    false,
                    "SuccessfulDelete",
                    format!("Deleted pod: {}", pod.name),
                );
                Ok(())
            }
            // Gone already, or replaced by another pod of the same name.
            Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => Ok(()),
            Err(e) => {
                self.note(raw, true, "FailedDelete", format!("Error deleting: {e}"));
                Err(JobError::Delete(e))
            }
        }
    }

    /// Removes the tracking finalizer from `pod`; true when it is off (or the pod gone).
    pub(super) fn apply_untrack(&self, namespace: &str, pod: &JobPod) -> Result<bool, JobError> {
        let r = self.registry.update_with(
            PODS,
            Some(namespace),
            &pod.name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) == Some(pod.uid.as_str()) {
                    drop_tracking(&mut obj);
                }
                Ok::<_, RegistryError>(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(true),
            Err(e) => Err(JobError::Untrack(e)),
        }
    }

    /// Removes the tracking finalizer from each pod; the UIDs it is off for, and the first
    /// failure.
    pub(super) fn apply_untrack_all(
        &self,
        job: &Job,
        pods: &[Arc<JobPod>],
    ) -> (BTreeSet<String>, Option<JobError>) {
        let mut done = BTreeSet::new();
        let mut failure = None;
        for pod in pods {
            match self.apply_untrack(&job.namespace, pod) {
                Ok(_) => {
                    done.insert(pod.uid.clone());
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        (done, failure)
    }

    /// Writes the Job's status, on condition that the Job is still at `revision`; the new
    /// revision.
    pub(super) fn apply_status(
        &self,
        job: &Job,
        revision: u64,
        status: &batch::JobStatus,
    ) -> Result<u64, JobError> {
        let value = serde_json::to_value(status).map_err(RegistryError::from)?;
        let obj = self.registry.update_with(
            JOBS,
            Some(&job.namespace),
            &job.name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(job.uid.as_str()) {
                    return Err(RegistryError::not_found(JOBS, &job.name));
                }
                obj["metadata"]["resourceVersion"] = json!(revision.to_string());
                obj["status"] = value.clone();
                Ok(obj)
            },
        )?;
        Ok(obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(revision))
    }
}
