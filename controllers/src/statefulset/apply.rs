//! The writes of a pass, in the planner's order, with upstream's events
//! (`StatefulPodControl`, texts in [`super::events`]): claims before their pod, pods created,
//! deleted and relabelled, claims re-owned.

use super::events::{Subject, event};
use super::identity::set_identity_labels;
use super::plan::Action;
use super::retention::set_owners;
use super::view::StatefulSet;
use super::{Controller, SyncError};
use crate::workload::{record, write};
use berth_registry::{RegistryError, WriteOptions};
use berth_shared::resource::{PERSISTENT_VOLUME_CLAIMS, PODS};
use serde_json::Value;

impl Controller {
    /// Applies the actions in order; stops at the first failure (the pass goes on to the
    /// status and returns it).
    pub(super) fn apply_actions(
        &self,
        set: &StatefulSet,
        raw: &Value,
        actions: &[Action],
    ) -> Option<SyncError> {
        actions
            .iter()
            .find_map(|a| self.apply_action(set, raw, a).err())
    }

    fn apply_action(
        &self,
        set: &StatefulSet,
        raw: &Value,
        action: &Action,
    ) -> Result<(), SyncError> {
        let ns = set.namespace.as_str();
        let opts = WriteOptions::default();
        match action {
            Action::CreateClaim { pod, claim } => {
                let name = claim["metadata"]["name"].as_str().unwrap_or_default();
                let r =
                    self.registry
                        .create(PERSISTENT_VOLUME_CLAIMS, Some(ns), claim.clone(), &opts);
                let what = Subject::Claim { claim: name, pod };
                self.report(set, raw, "Create", what, r, created_or_moot)
                    .map_err(SyncError::Create)
            }
            Action::CreatePod { pod, .. } => {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                // An old pod of that name still there is moot: the next pass sees it.
                let r = self.registry.create(PODS, Some(ns), pod.clone(), &opts);
                self.report(set, raw, "Create", Subject::Pod(name), r, created_or_moot)
                    .map_err(SyncError::Create)
            }
            Action::DeletePod { name, uid, why } => {
                tracing::debug!(statefulset = %set.name, pod = %name, ?why, "deleting pod");
                let r = write::delete(&self.registry, PODS, ns, name, uid);
                self.report(set, raw, "Delete", Subject::Pod(name), r, write::gone)
                    .map_err(SyncError::Delete)
            }
            Action::FixPod { ordinal, name, uid } => {
                let r = write::edit(&self.registry, PODS, ns, name, uid, |obj| {
                    set_identity_labels(obj, name, *ordinal);
                });
                match r {
                    // Gone meanwhile: nothing to report.
                    Ok(None) => Ok(()),
                    r => self.report(set, raw, "Update", Subject::Pod(name), r, |_| false),
                }
                .map_err(SyncError::Api)
            }
            Action::SetClaimOwners { claim, uid, owners } => {
                let r = write::edit(
                    &self.registry,
                    PERSISTENT_VOLUME_CLAIMS,
                    ns,
                    claim,
                    uid,
                    |obj| set_owners(obj, owners),
                );
                Ok(r.map(|_| ())?)
            }
        }
    }

    /// Records the event of a write's `result`; an error `moot` accepts counts as done,
    /// without an event.
    fn report<T>(
        &self,
        set: &StatefulSet,
        raw: &Value,
        verb: &str,
        what: Subject<'_>,
        result: Result<T, RegistryError>,
        moot: impl Fn(&RegistryError) -> bool,
    ) -> Result<(), RegistryError> {
        let error = match result {
            Err(e) if moot(&e) => return Ok(()),
            r => r.err(),
        };
        let shown = error.as_ref().map(|e| e as &dyn std::fmt::Display);
        let (t, reason, msg) = event(&set.name, verb, what, shown);
        record(&self.recorder, raw, t, &reason, &msg);
        error.map_or(Ok(()), Err)
    }
}

/// A create that found its object there already, or its namespace going.
fn created_or_moot(e: &RegistryError) -> bool {
    matches!(e, RegistryError::AlreadyExists { .. }) || e.is_namespace_terminating()
}
