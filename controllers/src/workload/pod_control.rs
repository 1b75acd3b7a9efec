//! Pod control (upstream's `RealPodControl` and `slowStartBatch`): creates pods in slow-start
//! batches and deletes them with a uid precondition, recording upstream's events on the owner
//! (`SuccessfulCreate` "Created pod: …", `FailedCreate` "Error creating: …", `SuccessfulDelete`
//! "Deleted pod: …", `FailedDelete` "Error deleting: …"), and returns what it wrote so that a
//! pass can make its later writes conditional on it (read-your-writes). Adoption and release
//! are the claim engine's ([`super::claim`]).

use super::record;
use berth_registry::events::{EventType, Recorder};
use berth_registry::{DeleteOutcome, Registry, RegistryError, WriteOptions};
use berth_shared::resource::PODS;
use serde_json::Value;

/// The first slow-start batch (upstream's `SlowStartInitialBatchSize`).
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// Upstream's `slowStartBatch` sizes: 1, 2, 4, 8 … until `count` is reached; creation stops
/// after the first batch with a failure, so a systematic error (quota, admission) costs one
/// request instead of `count`.
///
/// Worked example: 10 → [1, 2, 4, 3]; 7 → [1, 2, 4].
pub fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let mut remaining = count;
    let mut size = remaining.min(SLOW_START_INITIAL_BATCH);
    while size > 0 {
        batches.push(size);
        remaining -= size;
        size = (2 * size).min(remaining);
    }
    batches
}

/// What a creation achieved.
#[derive(Debug, Default)]
pub struct Created {
    /// The pods created, as written (name, uid, `resourceVersion`).
    pub pods: Vec<Value>,
    /// The first failure; creation stopped after its batch.
    pub failure: Option<RegistryError>,
}

/// Creates and deletes pods of one controller, with its events.
#[derive(Clone)]
pub struct PodControl {
    registry: Registry,
    recorder: Recorder,
}

impl PodControl {
    pub fn new(registry: Registry, recorder: Recorder) -> PodControl {
        PodControl { registry, recorder }
    }

    /// Records an event about `owner` (logged when it cannot be recorded).
    pub fn record(&self, owner: &Value, t: EventType, reason: &str, message: &str) {
        record(&self.recorder, owner, t, reason, message);
    }

    /// Creates `pods` in `namespace` in slow-start batches for `owner` (its stored JSON, for
    /// the events). Nothing can be created in a terminating namespace: not a failure.
    pub fn create(
        &self,
        owner: &Value,
        namespace: &str,
        pods: impl ExactSizeIterator<Item = Value>,
    ) -> Created {
        let mut out = Created::default();
        let mut todo = pods;
        for batch in slow_start_batches(todo.len()) {
            for pod in todo.by_ref().take(batch) {
                match self
                    .registry
                    .create(PODS, Some(namespace), pod, &WriteOptions::default())
                {
                    Ok(pod) => {
                        let name = pod
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        tracing::debug!(pod = name, "created pod");
                        let msg = format!("Created pod: {name}");
                        self.record(owner, EventType::Normal, "SuccessfulCreate", &msg);
                        out.pods.push(pod);
                    }
                    Err(e) if e.is_namespace_terminating() => {}
                    Err(e) => {
                        let msg = format!("Error creating: {e}");
                        self.record(owner, EventType::Warning, "FailedCreate", &msg);
                        out.failure.get_or_insert(e);
                    }
                }
            }
            if out.failure.is_some() {
                break;
            }
        }
        out
    }

    /// Deletes the pod `name` if it is still the one of uid `uid`; its state as written
    /// (terminating or gone), or `None` when it was gone already or replaced by another pod of
    /// the same name.
    pub fn delete(
        &self,
        owner: &Value,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<Option<Value>, RegistryError> {
        match super::write::delete(&self.registry, PODS, namespace, name, uid) {
            Ok(DeleteOutcome::Deleted(v) | DeleteOutcome::Terminating(v)) => {
                let msg = format!("Deleted pod: {name}");
                self.record(owner, EventType::Normal, "SuccessfulDelete", &msg);
                Ok(Some(v))
            }
            Err(e) if super::write::gone(&e) => Ok(None),
            Err(e) => {
                let msg = format!("Error deleting: {e}");
                self.record(owner, EventType::Warning, "FailedDelete", &msg);
                Err(e)
            }
        }
    }

    /// Deletes each pod `(name, uid)` as [`PodControl::delete`] does; the first failure.
    pub fn delete_all<'a>(
        &self,
        owner: &Value,
        namespace: &str,
        pods: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Option<RegistryError> {
        let mut failure = None;
        for (name, uid) in pods {
            if let Err(e) = self.delete(owner, namespace, name, uid) {
                failure.get_or_insert(e);
            }
        }
        failure
    }
}

#[cfg(test)]
mod tests;
