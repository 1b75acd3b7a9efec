//! The writes of a pass through the workload kit: creating pods in slow-start batches and
//! deleting the chosen ones, with their events.

use super::view::{Pod, Set};
use super::{Controller, SyncError, plan};
use serde_json::Value;

impl Controller {
    /// Creates `count` pods in slow-start batches, stopping after the first batch with a
    /// failure; returns that failure.
    pub(super) fn apply_create(&self, set: &Set, raw: &Value, count: usize) -> Option<SyncError> {
        if let Some(why) = plan::template_error(set) {
            return Some(SyncError::Template(why));
        }
        let pods = std::iter::repeat_n(plan::new_pod(set), count);
        let created = self.pod_control(set).create(raw, &set.namespace, pods);
        created.failure.map(SyncError::Create)
    }

    /// Deletes the chosen pods; returns the first failure.
    pub(super) fn apply_delete(
        &self,
        set: &Set,
        raw: &Value,
        victims: &[&Pod],
    ) -> Option<SyncError> {
        let pods = victims.iter().map(|p| (p.name.as_str(), p.uid.as_str()));
        let failure = self.pod_control(set).delete_all(raw, &set.namespace, pods);
        failure.map(SyncError::Delete)
    }
}
