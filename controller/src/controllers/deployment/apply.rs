//! Applying a plan's actions through the registry: each ReplicaSet and Deployment write is
//! conditional on the `resourceVersion` read (or produced by this pass's own earlier write),
//! so a concurrent change turns into a conflict and a fresh pass.

use super::plan::{Action, EventKind};
use super::{Controller, DeploymentError, Observed, claim, controller_ref, progress, revision};
use crate::events::EventType;
use crate::registry::RegistryError;
use crate::registry::{DeleteOptions, DeletePreconditions, Part, WriteOptions};
use berth_shared::resource::{DEPLOYMENTS, REPLICA_SETS};
use serde_json::{Value, json};
use std::collections::HashMap;

/// What the writes of one pass have produced so far: later writes are conditional on these.
pub(super) struct Applied {
    pub deployment_version: String,
    pub replica_set_versions: HashMap<String, String>,
}

pub(super) fn version_of(v: &Value) -> String {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn ignore_not_found<T>(r: Result<T, RegistryError>) -> Result<Option<T>, RegistryError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Controller {
    pub(super) fn apply(
        &self,
        ns: &str,
        name: &str,
        seen: &Observed,
        applied: &mut Applied,
        action: Action,
        now: jiff::Timestamp,
    ) -> Result<(), DeploymentError> {
        let opts = WriteOptions::default();
        let rs_rt = REPLICA_SETS;
        let d_uid = seen.deployment.metadata.uid.clone().unwrap_or_default();
        match action {
            Action::AdoptReplicaSet { name: rs, uid } => {
                let owner = serde_json::to_value(claim::controller_ref(&seen.deployment)).map_err(
                    |source| DeploymentError::Encode {
                        kind: "OwnerReference",
                        source,
                    },
                )?;
                let r = self.registry.update_with(
                    rs_rt,
                    Some(ns),
                    &rs,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(&uid)
                            || controller_ref(&obj).is_some()
                        {
                            return Err(RegistryError::conflict(rs_rt, &rs));
                        }
                        let refs = &mut obj["metadata"]["ownerReferences"];
                        if !refs.is_array() {
                            *refs = json!([]);
                        }
                        if let Some(a) = refs.as_array_mut() {
                            a.push(owner.clone());
                        }
                        Ok(obj)
                    },
                );
                if let Some(v) = ignore_not_found(r)? {
                    applied.replica_set_versions.insert(rs, version_of(&v));
                }
            }
            Action::ReleaseReplicaSet { name: rs, uid } => {
                let r = self.registry.update_with(
                    rs_rt,
                    Some(ns),
                    &rs,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(&uid) {
                            return Err(RegistryError::conflict(rs_rt, &rs));
                        }
                        if let Some(a) = obj
                            .pointer_mut("/metadata/ownerReferences")
                            .and_then(Value::as_array_mut)
                        {
                            a.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&d_uid));
                        }
                        Ok(obj)
                    },
                );
                if let Some(v) = ignore_not_found(r)? {
                    applied.replica_set_versions.insert(rs, version_of(&v));
                }
            }
            Action::CreateReplicaSet(rs) => {
                let rs_name = rs.metadata.name.clone().unwrap_or_default();
                let body =
                    serde_json::to_value(&*rs).map_err(|source| DeploymentError::Encode {
                        kind: "ReplicaSet",
                        source,
                    })?;
                match self.registry.create(rs_rt, Some(ns), body, &opts) {
                    Ok(v) => {
                        applied.replica_set_versions.insert(rs_name, version_of(&v));
                    }
                    Err(e) => {
                        if !matches!(
                            e,
                            RegistryError::AlreadyExists { .. } | RegistryError::Forbidden(_)
                        ) {
                            self.report_failed_create(ns, name, seen, applied, &rs_name, &e, now);
                        }
                        return Err(e.into());
                    }
                }
            }
            Action::UpdateReplicaSet(rs) => {
                let rs_name = rs.metadata.name.clone().unwrap_or_default();
                let mut body =
                    serde_json::to_value(&*rs).map_err(|source| DeploymentError::Encode {
                        kind: "ReplicaSet",
                        source,
                    })?;
                if let Some(v) = applied.replica_set_versions.get(&rs_name) {
                    body["metadata"]["resourceVersion"] = json!(v);
                }
                let v = self
                    .registry
                    .update(rs_rt, Some(ns), &rs_name, body, Part::Main, &opts)?;
                applied.replica_set_versions.insert(rs_name, version_of(&v));
            }
            Action::DeleteReplicaSet { name: rs, uid } => {
                let opts = DeleteOptions {
                    preconditions: Some(DeletePreconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteOptions::default()
                };
                ignore_not_found(self.registry.delete(rs_rt, Some(ns), &rs, &opts))?;
            }
            Action::SetRevision(rev) => {
                let expected = applied.deployment_version.clone();
                let v = self.registry.update_with(
                    DEPLOYMENTS,
                    Some(ns),
                    name,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        obj["metadata"]["resourceVersion"] = json!(expected);
                        let a = &mut obj["metadata"]["annotations"];
                        if !a.is_object() {
                            *a = json!({});
                        }
                        a[revision::REVISION] = json!(rev);
                        Ok::<_, RegistryError>(obj)
                    },
                )?;
                applied.deployment_version = version_of(&v);
            }
            Action::UpdateStatus(status) => {
                let body =
                    serde_json::to_value(&*status).map_err(|source| DeploymentError::Encode {
                        kind: "DeploymentStatus",
                        source,
                    })?;
                let v = self.write_status(ns, name, &applied.deployment_version, body)?;
                applied.deployment_version = version_of(&v);
            }
            Action::Event {
                kind,
                reason,
                message,
            } => {
                let t = match kind {
                    EventKind::Normal => EventType::Normal,
                    EventKind::Warning => EventType::Warning,
                };
                if let Err(e) = self.recorder.record(&seen.raw, t, reason, &message) {
                    tracing::warn!(error = %e, reason, "recording a deployment event");
                }
            }
        }
        Ok(())
    }

    fn write_status(
        &self,
        ns: &str,
        name: &str,
        expected: &str,
        status: Value,
    ) -> Result<Value, RegistryError> {
        self.registry.update_with(
            DEPLOYMENTS,
            Some(ns),
            name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                obj["metadata"]["resourceVersion"] = json!(expected);
                obj["status"] = status.clone();
                Ok(obj)
            },
        )
    }

    /// Upstream's answer to a failed ReplicaSet creation: `ReplicaSetCreateError` in the
    /// Progressing condition and a warning event. Best effort: the pass fails anyway.
    #[allow(clippy::too_many_arguments)]
    fn report_failed_create(
        &self,
        ns: &str,
        name: &str,
        seen: &Observed,
        applied: &Applied,
        rs_name: &str,
        error: &RegistryError,
        now: jiff::Timestamp,
    ) {
        let msg = format!("Failed to create new replica set {rs_name:?}: {error}");
        if let Some(status) =
            progress::failed_create(&seen.deployment, rs_name, &error.to_string(), now)
            && let Ok(body) = serde_json::to_value(&status)
        {
            let _ = self.write_status(ns, name, &applied.deployment_version, body);
        }
        let _ = self.recorder.record(
            &seen.raw,
            EventType::Warning,
            progress::FAILED_RS_CREATE,
            &msg,
        );
    }
}
