//! The writes of a pass (adoption and release are the kit's claim engine's): creating pods in
//! slow-start batches, deleting them (keeping the tracking finalizer when they are to be
//! counted, removing it first when not), removing the finalizer of counted pods, the status
//! (conditional on the `resourceVersion` it was computed from) and the events.

use super::plan::Change;
use super::template::new_pod;
use super::tracking::{Applied, Event};
use super::untrack::untrack;
use super::view::{Job, JobPod};
use super::{Controller, SyncError};
use crate::workload::status::{self, Target};
use crate::workload::{version_of, write};
use berth_registry::RegistryError;
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use berth_shared::resource::JOBS;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

impl Controller {
    /// Records the pass's events about the Job.
    pub(super) fn record(&self, raw: &Value, events: &[Event]) {
        for e in events {
            let t = e.event_type();
            self.pods_control.record(raw, t, &e.reason, &e.message);
        }
    }

    /// Applies the pass's pod changes; returns what they achieved and the first failure (the
    /// pass goes on to the status).
    pub(super) fn apply_change(
        &self,
        job: &Job,
        raw: &Value,
        change: &Change,
    ) -> (Applied, Option<SyncError>) {
        match change {
            Change::None => (Applied::default(), None),
            Change::Create(new) => {
                let pods = new.iter().map(|n| new_pod(job, n));
                let created = self.pods_control.create(raw, &job.namespace, pods);
                let failure = created.failure.map(SyncError::Create);
                (Applied::of_created(created.pods.len()), failure)
            }
            Change::Terminate(pods) | Change::Remove(pods) => {
                let untrack_first = matches!(change, Change::Remove(_));
                let delete = |p: &Arc<JobPod>| self.apply_delete(job, raw, p, untrack_first);
                let (deleted, failure) = write::in_turn(pods, delete);
                (Applied::of_deleted(deleted), failure)
            }
        }
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
        if untrack_first && pod.finalizer {
            self.apply_untrack(&job.namespace, pod)?;
        }
        self.pods_control
            .delete(raw, &job.namespace, &pod.name, &pod.uid)
            .map(|_| ())
            .map_err(SyncError::Delete)
    }

    /// Removes the tracking finalizer from `pod` (or it is gone).
    fn apply_untrack(&self, namespace: &str, pod: &JobPod) -> Result<(), SyncError> {
        untrack(&self.registry, namespace, &pod.name, &pod.uid)
            .map(|_| ())
            .map_err(SyncError::Untrack)
    }

    /// Removes the tracking finalizer from each pod; the UIDs it is off for, and the first
    /// failure.
    pub(super) fn apply_untrack_all(
        &self,
        job: &Job,
        pods: &[Arc<JobPod>],
    ) -> (BTreeSet<String>, Option<SyncError>) {
        let untrack = |p: &Arc<JobPod>| self.apply_untrack(&job.namespace, p);
        let (done, failure) = write::in_turn(pods, untrack);
        (done.iter().map(|p| p.uid.clone()).collect(), failure)
    }

    /// Writes the Job's status `status` unless it is `old`, on condition that the Job is still
    /// at `revision`; the revision after.
    pub(super) fn apply_status(
        &self,
        job: &Job,
        revision: u64,
        old: &batch::JobStatus,
        status: &batch::JobStatus,
    ) -> Result<u64, SyncError> {
        if status == old {
            return Ok(revision);
        }
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
