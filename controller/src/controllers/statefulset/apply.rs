//! The writes of a pass, in the planner's order, with upstream's events
//! (`StatefulPodControl`): claims before their pod, pods created, deleted and relabelled,
//! claims re-owned; then the status.

use super::plan::Action;
use super::view::{OwnerRef, POD_INDEX_LABEL, POD_NAME_LABEL, StatefulSet, Status};
use super::{Controller, StatefulSetError, status};
use crate::controllers::ownership::uid_of;
use crate::events::EventType;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
use berth_shared::resource::{PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS};
use serde_json::{Value, json};

impl Controller {
    /// Applies the actions in order; stops at the first failure (the pass goes on to the
    /// status and returns it).
    pub(super) fn apply_actions(
        &self,
        set: &StatefulSet,
        raw: &Value,
        actions: &[Action],
    ) -> Option<StatefulSetError> {
        for a in actions {
            if let Err(e) = self.apply_action(set, raw, a) {
                return Some(e);
            }
        }
        None
    }

    fn apply_action(
        &self,
        set: &StatefulSet,
        raw: &Value,
        action: &Action,
    ) -> Result<(), StatefulSetError> {
        let ns = Some(set.namespace.as_str());
        let opts = WriteOptions::default();
        match action {
            Action::CreateClaim { pod, claim } => {
                let name = claim["metadata"]["name"].as_str().unwrap_or_default();
                match self
                    .registry
                    .create(PERSISTENT_VOLUME_CLAIMS, ns, claim.clone(), &opts)
                {
                    Ok(_) => {
                        let msg = format!(
                            "create Claim {name} Pod {pod} in StatefulSet {} success",
                            set.name
                        );
                        self.record(raw, EventType::Normal, "SuccessfulCreate", &msg);
                        Ok(())
                    }
                    Err(RegistryError::AlreadyExists { .. }) => Ok(()),
                    Err(e) if e.is_namespace_terminating() => Ok(()),
                    Err(e) => {
                        let msg = format!(
                            "create Claim {name} for Pod {pod} in StatefulSet {} failed error: {e}",
                            set.name
                        );
                        self.record(raw, EventType::Warning, "FailedCreate", &msg);
                        Err(StatefulSetError::Create(e))
                    }
                }
            }
            Action::CreatePod { pod, .. } => {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                match self.registry.create(PODS, ns, pod.clone(), &opts) {
                    Ok(_) => {
                        let msg =
                            format!("create Pod {name} in StatefulSet {} successful", set.name);
                        self.record(raw, EventType::Normal, "SuccessfulCreate", &msg);
                        Ok(())
                    }
                    // The old pod of that name is still there: the next pass sees it.
                    Err(RegistryError::AlreadyExists { .. }) => Ok(()),
                    Err(e) if e.is_namespace_terminating() => Ok(()),
                    Err(e) => {
                        let msg = format!(
                            "create Pod {name} in StatefulSet {} failed error: {e}",
                            set.name
                        );
                        self.record(raw, EventType::Warning, "FailedCreate", &msg);
                        Err(StatefulSetError::Create(e))
                    }
                }
            }
            Action::DeletePod { name, uid, why } => {
                let opts = DeleteOptions {
                    preconditions: Some(DeletePreconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteOptions::default()
                };
                tracing::debug!(statefulset = %set.name, pod = %name, ?why, "deleting pod");
                match self.registry.delete(PODS, ns, name, &opts) {
                    Ok(_) => {
                        let msg =
                            format!("delete Pod {name} in StatefulSet {} successful", set.name);
                        self.record(raw, EventType::Normal, "SuccessfulDelete", &msg);
                        Ok(())
                    }
                    Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => Ok(()),
                    Err(e) => {
                        let msg = format!(
                            "delete Pod {name} in StatefulSet {} failed error: {e}",
                            set.name
                        );
                        self.record(raw, EventType::Warning, "FailedDelete", &msg);
                        Err(StatefulSetError::Delete(e))
                    }
                }
            }
            Action::FixPod { ordinal, name, uid } => {
                let r = self
                    .registry
                    .update_with(PODS, ns, name, Part::Main, &opts, |mut obj| {
                        if uid_of(&obj) != Some(uid.as_str()) {
                            return Ok::<_, RegistryError>(obj);
                        }
                        if !obj["metadata"]["labels"].is_object() {
                            obj["metadata"]["labels"] = json!({});
                        }
                        obj["metadata"]["labels"][POD_NAME_LABEL] = json!(name);
                        obj["metadata"]["labels"][POD_INDEX_LABEL] = json!(ordinal.to_string());
                        Ok(obj)
                    });
                match r {
                    Ok(_) => {
                        let msg =
                            format!("update Pod {name} in StatefulSet {} successful", set.name);
                        self.record(raw, EventType::Normal, "SuccessfulUpdate", &msg);
                        Ok(())
                    }
                    Err(RegistryError::NotFound { .. }) => Ok(()),
                    Err(e) => {
                        let msg = format!(
                            "update Pod {name} in StatefulSet {} failed error: {e}",
                            set.name
                        );
                        self.record(raw, EventType::Warning, "FailedUpdate", &msg);
                        Err(StatefulSetError::Api(e))
                    }
                }
            }
            Action::SetClaimOwners { claim, uid, owners } => {
                let r = self.registry.update_with(
                    PERSISTENT_VOLUME_CLAIMS,
                    ns,
                    claim,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        if uid_of(&obj) != Some(uid.as_str()) {
                            return Ok::<_, RegistryError>(obj);
                        }
                        set_owners(&mut obj, owners);
                        Ok(obj)
                    },
                );
                match r {
                    Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
                    Err(e) => Err(StatefulSetError::Api(e)),
                }
            }
        }
    }

    pub(super) fn apply_status(
        &self,
        set: &StatefulSet,
        new: &Status,
    ) -> Result<(), StatefulSetError> {
        let r = self.registry.update_with(
            STATEFUL_SETS,
            Some(&set.namespace),
            &set.name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(set.uid.as_str()) {
                    return Err(RegistryError::not_found(STATEFUL_SETS, &set.name));
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

/// Replaces the object's owner references (none: the field goes).
fn set_owners(obj: &mut Value, owners: &[OwnerRef]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if owners.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert(
            "ownerReferences".into(),
            Value::Array(owners.iter().map(OwnerRef::to_value).collect()),
        );
    }
}
