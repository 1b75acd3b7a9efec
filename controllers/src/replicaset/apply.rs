//! The writes of a pass through the workload kit: creating pods in slow-start batches,
//! deleting the chosen ones, with their events, and writing the status.

use super::view::{self, Pod, Set};
use super::{Controller, SyncError, plan};
use crate::workload::status::{self, Target};
use serde_json::Value;

impl Controller {
    /// Creates `count` pods in slow-start batches, stopping after the first batch with a
    /// failure; returns that failure.
    pub(super) fn apply_create(
        &self,
        set: &Set,
        raw: &Value,
        count: usize,
    ) -> Result<Option<SyncError>, SyncError> {
        if let Some(why) = plan::template_error(set) {
            return Ok(Some(SyncError::Template(why)));
        }
        let pods = std::iter::repeat_n(plan::new_pod(set), count);
        let created = self.pod_control(set).create(raw, &set.namespace, pods);
        Ok(created.failure.map(SyncError::Create))
    }

    /// Deletes the chosen pods; returns the first failure.
    pub(super) fn apply_delete(
        &self,
        set: &Set,
        raw: &Value,
        victims: &[&Pod],
    ) -> Result<Option<SyncError>, SyncError> {
        let control = self.pod_control(set);
        let mut failure = None;
        for p in victims {
            if let Err(e) = control.delete(raw, &set.namespace, &p.name, &p.uid) {
                failure.get_or_insert(SyncError::Delete(e));
            }
        }
        Ok(failure)
    }

    pub(super) fn apply_status(&self, set: &Set, new: &view::Status) -> Result<(), SyncError> {
        let target = Target::of(set.kind.resource(), &set.namespace, &set.name, &set.uid);
        status::write(&self.registry, &target, |obj| {
            super::status::apply(obj, new, set.generation)
        })?;
        Ok(())
    }
}
