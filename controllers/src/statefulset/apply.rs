//! The writes of a pass, in the planner's order, with upstream's events
//! (`StatefulPodControl`): claims before their pod, pods created, deleted and relabelled,
//! claims re-owned; then the status.

use super::plan::Action;
use super::view::{OwnerRef, POD_INDEX_LABEL, POD_NAME_LABEL, StatefulSet, Status};
use super::{Controller, StatefulSetError};
use crate::workload::controller_ref::uid_of;
use crate::workload::status::{self, Target};
use berth_registry::events::EventType;
use berth_registry::{DeleteOptions, DeletePreconditions, Part, RegistryError, WriteOptions};
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
                let r = self
                    .registry
                    .create(PERSISTENT_VOLUME_CLAIMS, ns, claim.clone(), &opts);
                let what = Subject::Claim { claim: name, pod };
                self.report(set, raw, "Create", what, r, created_or_moot)
                    .map_err(StatefulSetError::Create)
            }
            Action::CreatePod { pod, .. } => {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                // An old pod of that name still there is moot: the next pass sees it.
                let r = self.registry.create(PODS, ns, pod.clone(), &opts);
                self.report(set, raw, "Create", Subject::Pod(name), r, created_or_moot)
                    .map_err(StatefulSetError::Create)
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
                let r = self.registry.delete(PODS, ns, name, &opts);
                let gone = |e: &RegistryError| {
                    matches!(
                        e,
                        RegistryError::NotFound { .. } | RegistryError::Conflict { .. }
                    )
                };
                self.report(set, raw, "Delete", Subject::Pod(name), r, gone)
                    .map_err(StatefulSetError::Delete)
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
                let gone = |e: &RegistryError| matches!(e, RegistryError::NotFound { .. });
                self.report(set, raw, "Update", Subject::Pod(name), r, gone)
                    .map_err(StatefulSetError::Api)
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

    /// Upstream's `recordPodEvent`/`recordClaimEvent`: `Successful<Verb>` or `Failed<Verb>`
    /// with their texts; an error `moot` accepts counts as done, without an event.
    fn report<T>(
        &self,
        set: &StatefulSet,
        raw: &Value,
        verb: &str,
        what: Subject<'_>,
        result: Result<T, RegistryError>,
        moot: impl Fn(&RegistryError) -> bool,
    ) -> Result<(), RegistryError> {
        let lower = verb.to_lowercase();
        let set = &set.name;
        match result {
            Ok(_) => {
                let msg = match what {
                    Subject::Pod(p) => format!("{lower} Pod {p} in StatefulSet {set} successful"),
                    Subject::Claim { claim, pod } => {
                        format!("{lower} Claim {claim} Pod {pod} in StatefulSet {set} success")
                    }
                };
                self.record(raw, EventType::Normal, &format!("Successful{verb}"), &msg);
                Ok(())
            }
            Err(e) if moot(&e) => Ok(()),
            Err(e) => {
                let what = match what {
                    Subject::Pod(p) => format!("Pod {p}"),
                    Subject::Claim { claim, pod } => format!("Claim {claim} for Pod {pod}"),
                };
                let msg = format!("{lower} {what} in StatefulSet {set} failed error: {e}");
                self.record(raw, EventType::Warning, &format!("Failed{verb}"), &msg);
                Err(e)
            }
        }
    }

    pub(super) fn apply_status(
        &self,
        set: &StatefulSet,
        new: &Status,
    ) -> Result<(), StatefulSetError> {
        let target = Target::of(STATEFUL_SETS, &set.namespace, &set.name, &set.uid);
        status::write(&self.registry, &target, |obj| {
            super::status::apply(obj, new)
        })?;
        Ok(())
    }
}

/// What an event is about.
#[derive(Clone, Copy)]
enum Subject<'a> {
    Pod(&'a str),
    Claim { claim: &'a str, pod: &'a str },
}

/// A create that found its object there already, or its namespace going.
fn created_or_moot(e: &RegistryError) -> bool {
    matches!(e, RegistryError::AlreadyExists { .. }) || e.is_namespace_terminating()
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
