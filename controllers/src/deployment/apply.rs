//! Applying a plan's actions through the registry: each ReplicaSet and Deployment write is
//! conditional on the `resourceVersion` read (or produced by this pass's own earlier write),
//! so a concurrent change turns into a conflict and a fresh pass.

use super::plan::{self, Action};
use super::{Controller, Observed, Versions, claim, revision};
use crate::workload::status::{self, Target};
use crate::workload::{SyncError, record, version_of, write};
use berth_registry::{Part, RegistryError, WriteOptions};
use berth_shared::resource::{DEPLOYMENTS, REPLICA_SETS};
use serde::Serialize;
use serde_json::{Value, json};

/// `value` as JSON, or the encoding error about a `kind`.
fn encode(kind: &'static str, value: &impl Serialize) -> Result<Value, SyncError> {
    serde_json::to_value(value).map_err(|source| SyncError::Encode { kind, source })
}

impl Controller {
    /// Applies one action; a failed create is reported as the planner says (best effort: the
    /// pass fails anyway).
    pub(super) fn apply(
        &self,
        seen: &Observed,
        versions: &mut Versions,
        action: Action,
        now: jiff::Timestamp,
    ) -> Result<(), SyncError> {
        let opts = WriteOptions::default();
        let d = &*seen.owner;
        let (ns, name) = (d.namespace.as_str(), d.name.as_str());
        match action {
            Action::AdoptReplicaSet { name: rs, uid } => {
                // The Deployment is read again live first: one deleted or replaced since the
                // informer's copy must not adopt (the plan's later writes assume the adoption).
                let owner = claim::owner(&d.deployment, &d.selector);
                let v = owner.adopt_planned(&self.registry, REPLICA_SETS, &rs, &uid)?;
                versions.wrote_replica_set(rs, &v);
            }
            Action::ReleaseReplicaSet { name: rs, uid } => {
                let owner = claim::owner(&d.deployment, &d.selector);
                if let Some(v) = owner.release(&self.registry, REPLICA_SETS, &rs, &uid)? {
                    versions.wrote_replica_set(rs, &v);
                }
            }
            Action::CreateReplicaSet(rs) => {
                let rs_name = plan::name(&rs).to_string();
                let body = encode("ReplicaSet", &rs)?;
                match self.registry.create(REPLICA_SETS, Some(ns), body, &opts) {
                    Ok(v) => versions.wrote_replica_set(rs_name, &v),
                    Err(e) => {
                        for report in plan::failed_create(&d.deployment, &rs_name, &e, now) {
                            let _ = self.apply(seen, versions, report, now);
                        }
                        return Err(e.into());
                    }
                }
            }
            Action::UpdateReplicaSet(rs) => {
                let rs_name = plan::name(&rs).to_string();
                let mut body = encode("ReplicaSet", &rs)?;
                versions.condition_replica_set(&rs_name, &mut body);
                let v = self.registry.update(
                    REPLICA_SETS,
                    Some(ns),
                    &rs_name,
                    body,
                    Part::Main,
                    &opts,
                )?;
                versions.wrote_replica_set(rs_name, &v);
            }
            Action::DeleteReplicaSet { name: rs, uid } => {
                match write::delete(&self.registry, REPLICA_SETS, ns, &rs, &uid) {
                    Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Action::SetRevision(rev) => {
                let expected = json!(versions.deployment);
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
                versions.deployment = version_of(&v);
            }
            Action::UpdateStatus(status) => {
                let body = encode("DeploymentStatus", &status)?;
                let target = Target {
                    expected_version: Some(&versions.deployment),
                    ..Target::of(DEPLOYMENTS, ns, name, &d.uid)
                };
                let v = status::write(&self.registry, &target, |obj| obj["status"] = body.clone())?;
                if let Some(v) = v {
                    versions.deployment = version_of(&v);
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
}
