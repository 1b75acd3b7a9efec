//! Applying a plan's actions through the registry: each ReplicaSet and Deployment write is
//! conditional on the `resourceVersion` read (or produced by this pass's own earlier write),
//! so a concurrent change turns into a conflict and a fresh pass.

use super::plan::{Action, EventKind};
use super::{Controller, DeploymentError, Observed, claim, progress, revision};
use crate::workload::status::{self, Target};
use crate::workload::version_of;
use berth_registry::RegistryError;
use berth_registry::events::EventType;
use berth_registry::{DeleteOptions, DeletePreconditions, Part, WriteOptions};
use berth_shared::resource::{DEPLOYMENTS, REPLICA_SETS};
use serde_json::{Value, json};
use std::collections::HashMap;

/// What the writes of one pass have produced so far: later writes are conditional on these.
pub(super) struct Applied {
    pub deployment_version: String,
    pub replica_set_versions: HashMap<String, String>,
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
        match action {
            Action::AdoptReplicaSet { name: rs, uid } => {
                // The Deployment is read again live first: one deleted or replaced since the
                // informer's copy must not adopt (the plan's later writes assume the adoption).
                let owner = claim::owner(&seen.deployment, &seen.selector);
                if !owner.can_adopt(&self.registry)? {
                    return Err(DeploymentError::OwnerGone(format!(
                        "deployment {ns}/{name}"
                    )));
                }
                match owner.adopt(&self.registry, rs_rt, &rs, &uid)? {
                    Some(v) => {
                        applied.replica_set_versions.insert(rs, version_of(&v));
                    }
                    None => return Err(RegistryError::conflict(rs_rt, &rs).into()),
                }
            }
            Action::ReleaseReplicaSet { name: rs, uid } => {
                let owner = claim::owner(&seen.deployment, &seen.selector);
                if let Some(v) = owner.release(&self.registry, rs_rt, &rs, &uid)? {
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
                            self.report_failed_create(seen, applied, &rs_name, &e, now);
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
                if let Some(v) = self.write_status(seen, &applied.deployment_version, body)? {
                    applied.deployment_version = version_of(&v);
                }
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
        seen: &Observed,
        expected: &str,
        status: Value,
    ) -> Result<Option<Value>, RegistryError> {
        let m = &seen.deployment.metadata;
        let target = Target {
            resource: DEPLOYMENTS,
            namespace: m.namespace.as_deref().unwrap_or_default(),
            name: m.name.as_deref().unwrap_or_default(),
            uid: m.uid.as_deref().unwrap_or_default(),
            expected_version: Some(expected),
        };
        status::write(&self.registry, &target, |obj| {
            obj["status"] = status.clone()
        })
    }

    /// Upstream's answer to a failed ReplicaSet creation: `ReplicaSetCreateError` in the
    /// Progressing condition and a warning event. Best effort: the pass fails anyway.
    fn report_failed_create(
        &self,
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
            let _ = self.write_status(seen, &applied.deployment_version, body);
        }
        let _ = self.recorder.record(
            &seen.raw,
            EventType::Warning,
            progress::FAILED_RS_CREATE,
            &msg,
        );
    }
}
