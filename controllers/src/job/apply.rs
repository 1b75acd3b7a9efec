//! The writes of a pass (adoption and release are the kit's claim engine's): creating pods in
//! slow-start batches, deleting them (keeping the tracking finalizer when they are to be counted, removing it first
//! when not), removing the finalizer of counted pods, the status (conditional on the
//! `resourceVersion` it was computed from) and the events.

use super::plan::{Change, NewPod};
use super::template::new_pod;
use super::tracking::{Applied, Event};
use super::view::{Job, JobPod, TRACKING_FINALIZER};
use super::{Controller, SyncError};
use crate::workload::claim::drop_finalizer;
use crate::workload::status::{self, Target};
use crate::workload::{version_of, write};
use berth_registry::RegistryError;
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use berth_shared::resource::{JOBS, PODS};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

impl Controller {
    pub(super) fn record(&self, raw: &Value, e: &Event) {
        let t = e.event_type();
        self.pods_control.record(raw, t, &e.reason, &e.message);
    }

    /// Applies the pass's pod changes; returns what they achieved and the first failure (the
    /// pass goes on to the status).
    pub(super) fn apply_change(
        &self,
        job: &Job,
        raw: &Value,
        change: &Change,
    ) -> (Applied, Option<SyncError>) {
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

    fn apply_create(&self, job: &Job, raw: &Value, new: &[NewPod]) -> (i32, Option<SyncError>) {
        let pods = new.iter().map(|n| new_pod(job, n));
        let created = self.pods_control.create(raw, &job.namespace, pods);
        let count = i32::try_from(created.pods.len()).unwrap_or(i32::MAX);
        (count, created.failure.map(SyncError::Create))
    }

    /// Deletes a pod; with `untrack_first` its tracking finalizer goes before (a pod removed,
    /// not failed, is never counted).
    fn apply_delete(
        &self,
        job: &Job,
        raw: &Value,
        pod: &JobPod,
        untrack_first: bool,
    ) -> Result<(), SyncError> {
        if untrack_first && pod.finalizer && !self.apply_untrack(&job.namespace, pod)? {
            return Ok(());
        }
        self.pods_control
            .delete(raw, &job.namespace, &pod.name, &pod.uid)
            .map(|_| ())
            .map_err(SyncError::Delete)
    }

    /// Removes the tracking finalizer from `pod`; true when it is off (or the pod gone).
    pub(super) fn apply_untrack(&self, namespace: &str, pod: &JobPod) -> Result<bool, SyncError> {
        write::edit(
            &self.registry,
            PODS,
            namespace,
            &pod.name,
            &pod.uid,
            |obj| drop_finalizer(obj, TRACKING_FINALIZER),
        )
        .map(|_| true)
        .map_err(SyncError::Untrack)
    }

    /// Removes the tracking finalizer from each pod; the UIDs it is off for, and the first
    /// failure.
    pub(super) fn apply_untrack_all(
        &self,
        job: &Job,
        pods: &[Arc<JobPod>],
    ) -> (BTreeSet<String>, Option<SyncError>) {
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
    ) -> Result<u64, SyncError> {
        let value = serde_json::to_value(status).map_err(RegistryError::from)?;
        let expected = revision.to_string();
        let target = Target {
            expected_version: Some(&expected),
            ..Target::of(JOBS, &job.namespace, &job.name, &job.uid)
        };
        let written = status::write(&self.registry, &target, |obj| obj["status"] = value.clone())?
            .ok_or_else(|| RegistryError::not_found(JOBS, &job.name))?;
        Ok(version_of(&written).parse().unwrap_or(revision))
    }
}
