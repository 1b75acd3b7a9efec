//! Applying a plan's actions through the registry: each ReplicaSet and Deployment write is
//! conditional on the `resourceVersion` read (or produced by this pass's own earlier write),
//! so a concurrent change turns into a conflict and a fresh pass.

use super::plan::{self, Action};
use super::{Controller, DeploymentError, Observed, claim, progress, revision};
use crate::workload::status::{self, Target};
use crate::workload::{record, version_of, write};
use berth_registry::events::EventType;
use berth_registry::{Part, RegistryError, WriteOptions};
use berth_shared::resource::{DEPLOYMENTS, REPLICA_SETS};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;

/// What the writes of one pass have produced so far: later writes are conditional on these.
pub(super) struct Applied {
    pub deployment_version: String,
    pub replica_set_versions: HashMap<String, String>,
}

/// `value` as JSON, or the encoding error about a `kind`.
fn encode(kind: &'static str, value: &impl Serialize) -> Result<Value, DeploymentError> {
    serde_json::to_value(value).map_err(|source| DeploymentError::Encode { kind, source })
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
        let versions = &mut applied.replica_set_versions;
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
                let v = owner.adopt(&self.registry, REPLICA_SETS, &rs, &uid)?;
                let v = v.ok_or_else(|| RegistryError::conflict(REPLICA_SETS, &rs))?;
                versions.insert(rs, version_of(&v));
            }
            Action::ReleaseReplicaSet { name: rs, uid } => {
                let owner = claim::owner(&seen.deployment, &seen.selector);
                if let Some(v) = owner.release(&self.registry, REPLICA_SETS, &rs, &uid)? {
                    versions.insert(rs, version_of(&v));
                }
            }
            Action::CreateReplicaSet(rs) => {
                let rs_name = plan::name(&rs).to_string();
                let body = encode("ReplicaSet", &rs)?;
                match self.registry.create(REPLICA_SETS, Some(ns), body, &opts) {
                    Ok(v) => {
                        versions.insert(rs_name, version_of(&v));
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
                let rs_name = plan::name(&rs).to_string();
                let mut body = encode("ReplicaSet", &rs)?;
                if let Some(v) = versions.get(&rs_name) {
                    body["metadata"]["resourceVersion"] = json!(v);
                }
                let v = self.registry.update(
                    REPLICA_SETS,
                    Some(ns),
                    &rs_name,
                    body,
                    Part::Main,
                    &opts,
                )?;
                versions.insert(rs_name, version_of(&v));
            }
            Action::DeleteReplicaSet { name: rs, uid } => {
                match write::delete(&self.registry, REPLICA_SETS, ns, &rs, &uid) {
                    Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Action::SetRevision(rev) => {
                let expected = json!(applied.deployment_version);
                let v = self.registry.update_with(
                    DEPLOYMENTS,
                    Some(ns),
                    name,
                    Part::Main,
                    &opts,
                    |mut obj| {
                        obj["metadata"]["resourceVersion"] = expected.clone();
                        revision::annotate(&mut obj, &rev);
                        Ok::<_, RegistryError>(obj)
                    },
                )?;
                applied.deployment_version = version_of(&v);
            }
            Action::UpdateStatus(status) => {
                let body = encode("DeploymentStatus", &status)?;
                if let Some(v) = self.write_status(seen, &applied.deployment_version, body)? {
                    applied.deployment_version = version_of(&v);
                }
            }
            Action::Event {
                kind,
                reason,
                message,
            } => record(&self.recorder, &seen.raw, kind, reason, &message),
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
        fn text(f: &Option<String>) -> &str {
            f.as_deref().unwrap_or_default()
        }
        let target = Target {
            expected_version: Some(expected),
            ..Target::of(DEPLOYMENTS, text(&m.namespace), text(&m.name), text(&m.uid))
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
        let (t, reason) = (EventType::Warning, progress::FAILED_RS_CREATE);
        record(&self.recorder, &seen.raw, t, reason, &msg);
    }
}
