//! Deletion: preconditions, propagation policy (the `orphan` and `foregroundDeletion`
//! finalizers the garbage collector acts on), graceful deletion of pods on nodes, and
//! namespaces that wait for their content to go.

use super::RegistryError;
use super::meta::now_rfc3339;
use super::{Registry, object_key, store_error};
use berth_shared::resource::ResourceType;
use berth_store::Precondition;
use serde::Deserialize;
use serde_json::{Value, json};

pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

pub use berth_shared::query::Propagation;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct DeletePreconditions {
    pub uid: Option<String>,
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

/// `DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<Propagation>,
    pub orphan_dependents: Option<bool>,
    pub preconditions: Option<DeletePreconditions>,
    pub dry_run: Option<Vec<String>>,
}

/// What a delete did.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Deleted(Value),
    /// The object is terminating (finalizers or a grace period); its current state.
    Terminating(Value),
}

impl DeleteOptions {
    /// The policy asked for, else the kind's default: batch/v1 Jobs orphan their pods (as
    /// upstream keeps for compatibility; `kubectl delete` asks for Background), everything
    /// else deletes its dependents in the background.
    fn propagation(&self, rt: &ResourceType) -> Propagation {
        match (self.propagation_policy, self.orphan_dependents) {
            (Some(p), _) => p,
            (None, Some(true)) => Propagation::Orphan,
            (None, Some(false)) => Propagation::Background,
            (None, None) if rt.kind == "Job" => Propagation::Orphan,
            (None, None) => Propagation::Background,
        }
    }
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

impl Registry {
    /// Deletes (or starts the graceful deletion of) `name`. A write of the object by someone
    /// else between the read and the delete is retried from the new version, as upstream's
    /// `GuaranteedUpdate` does: a client's DELETE is 409 only when its own preconditions fail.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, RegistryError> {
        self.delete_by(rt, ns, name, opts, None)
    }

    /// [`Registry::delete`] by `requestor` (`None`: the controller itself), whom admission
    /// policies see as the request's user.
    pub fn delete_by(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        requestor: Option<&crate::identity::Identity>,
    ) -> Result<DeleteOutcome, RegistryError> {
        let mut attempts = 0;
        loop {
            match self.delete_once(rt, ns, name, opts, requestor) {
                Err(RegistryError::Conflict { detail, .. })
                    if detail == super::error::CONFLICT_DETAIL && attempts < 8 =>
                {
                    attempts += 1;
                }
                other => return other,
            }
        }
    }

    fn delete_once(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        requestor: Option<&crate::identity::Identity>,
    ) -> Result<DeleteOutcome, RegistryError> {
        if rt == berth_shared::resource::PRIORITY_CLASSES {
            crate::priority::check_delete(name)?;
        }
        let current = self.current(rt, ns, name)?;
        let mut obj = current.value()?;
        if let Some(pre) = &opts.preconditions {
            let uid = obj
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(want) = &pre.uid
                && want != uid
            {
                return Err(RegistryError::Conflict {
                    resource: rt.group_resource(),
                    group: rt.group.to_string(),
                    name: name.to_string(),
                    detail: format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                });
            }
            if let Some(want) = &pre.resource_version
                && *want != current.revision.to_string()
            {
                return Err(RegistryError::Conflict {
                    resource: rt.group_resource(),
                    group: rt.group.to_string(),
                    name: name.to_string(),
                    detail: format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        current.revision
                    ),
                });
            }
        }
        let dry_run = opts
            .dry_run
            .as_ref()
            .is_some_and(|d| d.iter().any(|s| s == "All"));
        self.admit_policies(crate::admission_policy::Attempt::delete(
            rt, ns, name, &obj, dry_run, requestor,
        ))?;
        self.admit_delete_by_webhooks(&crate::webhook::Attempt::delete(
            rt, ns, name, &obj, dry_run, requestor,
        ))?;
        let key = object_key(rt, ns, name);
        let already = obj.pointer("/metadata/deletionTimestamp").is_some();

        // Propagation finalizers: the garbage collector finishes the job.
        let mut fins = finalizers(&obj);
        let wanted = match opts.propagation(rt) {
            Propagation::Orphan => Some(ORPHAN_FINALIZER),
            Propagation::Foreground => Some(FOREGROUND_FINALIZER),
            Propagation::Background => None,
        };
        let mut changed = false;
        if let Some(f) = wanted
            && !fins.iter().any(|x| x == f)
            && !(already && rt.kind == "Pod")
        {
            fins.push(f.to_string());
            changed = true;
        }
        let namespace_pending = rt.kind == "Namespace"
            && obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());

        // Pods on a node get a grace period for their agent to stop them.
        let grace = if rt.kind == "Pod" && obj.pointer("/spec/nodeName").is_some() {
            let spec_grace = obj
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30);
            Some(opts.grace_period_seconds.unwrap_or(spec_grace).max(0))
        } else {
            None
        };
        let graceful = grace.is_some_and(|g| g > 0);

        if fins.is_empty() && !namespace_pending && !graceful {
            if dry_run {
                return Ok(DeleteOutcome::Deleted(obj));
            }
            let mut last = obj.clone();
            if !already {
                last["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
                last["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            }
            let stored = self
                .store
                .delete(&key, Precondition::Revision(current.revision), Some(last))
                .map_err(|e| store_error(rt, name, e))?;
            return Ok(DeleteOutcome::Deleted(stored.value()?));
        }

        if already && !changed {
            // A shorter grace period may still be requested for a terminating pod.
            let shorten = grace.is_some_and(|g| {
                obj.pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_none_or(|cur| g < cur)
            });
            if !shorten {
                return Ok(DeleteOutcome::Terminating(obj));
            }
        }
        let meta = &mut obj["metadata"];
        meta["finalizers"] = json!(fins);
        if fins.is_empty()
            && let Some(m) = meta.as_object_mut()
        {
            m.remove("finalizers");
        }
        let g = grace.unwrap_or(0);
        if !already || grace.is_some() {
            meta["deletionTimestamp"] = json!(deletion_timestamp(jiff::Timestamp::now(), g));
            meta["deletionGracePeriodSeconds"] = json!(g);
        }
        if rt.kind == "Namespace" {
            obj["status"]["phase"] = json!("Terminating");
        }
        if dry_run {
            return Ok(DeleteOutcome::Terminating(obj));
        }
        if super::meta::is_finalized(rt, &obj) {
            let stored = self
                .store
                .delete(&key, Precondition::Revision(current.revision), Some(obj))
                .map_err(|e| store_error(rt, name, e))?;
            return Ok(DeleteOutcome::Deleted(stored.value()?));
        }
        let stored = self
            .store
            .put(&key, obj, Precondition::Revision(current.revision))
            .map_err(|e| store_error(rt, name, e))?;
        Ok(DeleteOutcome::Terminating(stored.value()?))
    }
}

/// `deletionTimestamp` for a grace period of `grace` seconds from `now`, saturating at the
/// largest time the clock represents (`gracePeriodSeconds=9223372036854775807` once panicked the
/// delete).
fn deletion_timestamp(now: jiff::Timestamp, grace: i64) -> String {
    let at = now
        .checked_add(jiff::SignedDuration::from_secs(grace))
        .unwrap_or(if grace < 0 {
            jiff::Timestamp::MIN
        } else {
            jiff::Timestamp::MAX
        });
    at.round(jiff::Unit::Second)
        .unwrap_or(at)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_timestamps_saturate_instead_of_overflowing() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
        assert_eq!(deletion_timestamp(now, 30), "2026-01-01T00:00:30Z");
        assert_eq!(deletion_timestamp(now, i64::MAX), "9999-12-30T22:00:00Z");
    }
}
