//! The writes of a pass: adopting and releasing pods, creating them in slow-start batches,
//! deleting the chosen ones, with their events, and writing the status.

use super::view::{self, Pod, Set};
use super::{Controller, SyncError, plan, set_type, status};
use crate::controllers::views;
use crate::events::EventType;
use crate::registry::RegistryError;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, WriteOptions};
use berth_shared::resource::PODS;
use serde_json::Value;

impl Controller {
    /// Whether the set is still the one planned for and not being deleted (upstream's
    /// `RecheckDeletionTimestamp` before adopting).
    fn can_adopt(&self, set: &Set) -> Result<bool, SyncError> {
        Ok(self
            .registry
            .is_live_owner(set_type(set.kind), &set.namespace, &set.name, &set.uid)?)
    }

    /// Makes the set the controller of an orphan; true when the pod is now ours.
    pub(super) fn apply_adopt(&self, set: &Set, pod: &Pod) -> Result<bool, SyncError> {
        if !self.can_adopt(set)? {
            return Ok(false);
        }
        let r = self.registry.update_with(
            PODS,
            Some(&set.namespace),
            &pod.name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                let current = Pod::from_value(&obj);
                // Re-checked on the fresh pod: someone may have adopted, relabelled or deleted it.
                if current.uid != pod.uid
                    || current.deleting
                    || current.controller.is_some()
                    || !set.selector.matches(&current.labels)
                {
                    return Ok(obj);
                }
                let ours = plan::controller_ref(set);
                let refs = &mut obj["metadata"]["ownerReferences"];
                match refs.as_array_mut() {
                    Some(list) => {
                        list.retain(|r| {
                            r.get("uid").and_then(Value::as_str) != Some(set.uid.as_str())
                        });
                        list.push(ours);
                    }
                    None => *refs = Value::Array(vec![ours]),
                }
                Ok(obj)
            },
        );
        match r {
            Ok(obj) => Ok(views::controller_of(&obj).is_some_and(|c| c.uid == set.uid)),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Drops the set's ownerReference from a pod that stopped matching.
    pub(super) fn apply_release(&self, set: &Set, pod: &Pod) -> Result<(), SyncError> {
        let r = self.registry.update_with(
            PODS,
            Some(&set.namespace),
            &pod.name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(pod.uid.as_str()) {
                    return Ok(obj);
                }
                crate::registry::meta::release_owner(&mut obj, &set.uid);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

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
        let rt = PODS;
        let template = plan::new_pod(set);
        for batch in plan::slow_start_batches(count) {
            let mut failure = None;
            for _ in 0..batch {
                match self.registry.create(
                    rt,
                    Some(&set.namespace),
                    template.clone(),
                    &WriteOptions::default(),
                ) {
                    Ok(pod) => {
                        let name = pod
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        tracing::debug!(set = %set.name, pod = name, "created pod");
                        let msg = format!("Created pod: {name}");
                        self.record(set, raw, EventType::Normal, "SuccessfulCreate", &msg);
                    }
                    // Nothing can be created in a terminating namespace; not a failure.
                    Err(e) if e.is_namespace_terminating() => {}
                    Err(e) => {
                        let msg = format!("Error creating: {e}");
                        self.record(set, raw, EventType::Warning, "FailedCreate", &msg);
                        failure.get_or_insert(SyncError::Create(e));
                    }
                }
            }
            if failure.is_some() {
                return Ok(failure);
            }
        }
        Ok(None)
    }

    /// Deletes the chosen pods; returns the first failure.
    pub(super) fn apply_delete(
        &self,
        set: &Set,
        raw: &Value,
        victims: &[&Pod],
    ) -> Result<Option<SyncError>, SyncError> {
        let rt = PODS;
        let mut failure = None;
        for pod in victims {
            let opts = DeleteOptions {
                preconditions: Some(DeletePreconditions {
                    uid: Some(pod.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteOptions::default()
            };
            match self
                .registry
                .delete(rt, Some(&set.namespace), &pod.name, &opts)
            {
                Ok(_) => {
                    let msg = format!("Deleted pod: {}", pod.name);
                    self.record(set, raw, EventType::Normal, "SuccessfulDelete", &msg);
                }
                // Gone already, or replaced by another pod of the same name.
                Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => {}
                Err(e) => {
                    let msg = format!("Error deleting: {e}");
                    self.record(set, raw, EventType::Warning, "FailedDelete", &msg);
                    failure.get_or_insert(SyncError::Delete(e));
                }
            }
        }
        Ok(failure)
    }

    pub(super) fn apply_status(&self, set: &Set, new: &view::Status) -> Result<(), SyncError> {
        let rt = set_type(set.kind);
        let r = self.registry.update_with(
            rt,
            Some(&set.namespace),
            &set.name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(set.uid.as_str()) {
                    return Err(RegistryError::not_found(rt, &set.name));
                }
                status::apply(&mut obj, new, set.generation);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
