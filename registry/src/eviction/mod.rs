//! The `pods/eviction` subresource (policy/v1 `Eviction`, upstream `EvictionREST`): deletes a
//! pod as a `DELETE` with the Eviction's `deleteOptions` would (graceful, preconditions, dry
//! run), unless a PodDisruptionBudget forbids it ([`decide`]). The pod first gets the
//! `DisruptionTarget` condition (`EvictionByEvictionAPI`), as upstream writes it.

pub mod condition;
pub mod decide;

use super::conditions::{DISRUPTION_TARGET, set_pod_condition};
use super::{DeleteOptions, DeletePreconditions, Part, Registry, RegistryError, WriteOptions};
use berth_shared::k8s_openapi::api::policy::v1 as policy;
use berth_shared::resource::{POD_DISRUPTION_BUDGETS, PODS};
use decide::Refusal;
use serde_json::Value;

/// Why the control plane deletes a pod: the reason and message of the `DisruptionTarget`
/// condition the pod gets first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disruption {
    pub reason: &'static str,
    pub message: &'static str,
}

/// An eviction through the Eviction API.
pub const BY_EVICTION_API: Disruption = Disruption {
    reason: "EvictionByEvictionAPI",
    message: "Eviction API: evicting",
};

/// Upstream `EvictionsRetry`: conflicts are retried this many times.
const RETRIES: usize = 20;

/// Why an eviction did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EvictionError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// 429 (or 403) from the budget.
    #[error("{0}")]
    Refused(Refusal),
    /// 500: more than one budget selects the pod.
    #[error(
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )]
    MultipleBudgets,
    /// 504: the budget kept changing under the eviction.
    #[error("Timeout: couldn't update PodDisruptionBudget \"{0}\" due to conflicts")]
    Conflicts(String),
}

impl EvictionError {
    /// The message of a 429 for a refusal (the refusal itself is the cause).
    pub const TOO_MANY: &'static str =
        "Cannot evict pod as it would violate the pod's disruption budget.";
}

fn is_conflict(e: &RegistryError) -> bool {
    matches!(e, RegistryError::Conflict { .. })
}

fn dry(opts: &DeleteOptions) -> bool {
    opts.dry_run
        .as_ref()
        .is_some_and(|d| d.iter().any(|s| s == "All"))
}

fn with_version(opts: &DeleteOptions, rv: String) -> DeleteOptions {
    let mut o = opts.clone();
    let pre = o
        .preconditions
        .get_or_insert_with(DeletePreconditions::default);
    pre.resource_version = Some(rv);
    o
}

fn version_of(v: &Value) -> Option<String> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(String::from)
}

impl Registry {
    /// Evicts pod `ns/name` with the Eviction's `opts`.
    pub fn evict(&self, ns: &str, name: &str, opts: &DeleteOptions) -> Result<(), EvictionError> {
        let version_given = opts
            .preconditions
            .as_ref()
            .is_some_and(|p| p.resource_version.is_some());
        // Pods the budgets need not protect, retried on conflicts unless the caller pinned a
        // version.
        let mut attempts = 0;
        let (pod, revision) = loop {
            let current = self.current(PODS, Some(ns), name)?;
            let pod = current.value().map_err(RegistryError::from)?;
            if !decide::can_ignore_budgets(&pod) {
                break (pod, current.revision);
            }
            let o = if decide::enforce_version(&pod) && !version_given {
                with_version(opts, current.revision.to_string())
            } else {
                opts.clone()
            };
            match self.disrupt(ns, name, BY_EVICTION_API, &o) {
                Err(e) if is_conflict(&e) && !version_given && attempts < RETRIES => {
                    attempts += 1;
                }
                other => return other.map_err(EvictionError::from),
            }
        };
        let labels = crate::meta::string_map(pod.pointer("/metadata/labels"));
        let budgets: Vec<policy::PodDisruptionBudget> = self
            .list_values(POD_DISRUPTION_BUDGETS, Some(ns))?
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .filter(|b| decide::selects(b, &labels))
            .collect();
        let mut unready_goes = false;
        match budgets.as_slice() {
            [] => {}
            [budget] => {
                if !decide::is_ready(&pod) && decide::unhealthy_may_go(budget) {
                    unready_goes = true;
                } else {
                    self.spend_disruption(ns, budget, name, dry(opts))?;
                }
            }
            _ => return Err(EvictionError::MultipleBudgets),
        }
        let o = if unready_goes {
            with_version(opts, revision.to_string())
        } else {
            opts.clone()
        };
        match self.disrupt(ns, name, BY_EVICTION_API, &o) {
            Err(e) if is_conflict(&e) && unready_goes && !version_given => {
                // It changed (it may be Ready now): the client should ask again.
                let budget = budgets
                    .first()
                    .and_then(|b| b.metadata.name.clone())
                    .unwrap_or_default();
                Err(EvictionError::Refused(Refusal::Pending(budget)))
            }
            other => other.map_err(EvictionError::from),
        }
    }

    /// `checkAndDecrement` with its status write, conditional on the budget's version and
    /// retried on conflicts with the budget read again.
    fn spend_disruption(
        &self,
        ns: &str,
        budget: &policy::PodDisruptionBudget,
        pod: &str,
        dry_run: bool,
    ) -> Result<(), EvictionError> {
        let name = budget.metadata.name.clone().unwrap_or_default();
        let mut pdb = budget.clone();
        for _ in 0..RETRIES {
            decide::check_and_decrement(&mut pdb, pod, dry_run, jiff::Timestamp::now())
                .map_err(EvictionError::Refused)?;
            if dry_run {
                return Ok(());
            }
            let body = serde_json::to_value(&pdb).map_err(RegistryError::from)?;
            match self.update(
                POD_DISRUPTION_BUDGETS,
                Some(ns),
                &name,
                body,
                Part::Status,
                &WriteOptions::default(),
            ) {
                Ok(_) => return Ok(()),
                Err(e) if is_conflict(&e) => {
                    let fresh = self.current(POD_DISRUPTION_BUDGETS, Some(ns), &name)?;
                    let v = fresh.value().map_err(RegistryError::from)?;
                    pdb = serde_json::from_value(v).map_err(RegistryError::from)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(EvictionError::Conflicts(name))
    }

    /// Upstream `addConditionAndDeletePod`: the `DisruptionTarget` condition (on the pod's
    /// latest version, checked against the preconditions), then the deletion, its version
    /// precondition moved past the condition's own write. The one path by which the control
    /// plane disrupts a pod: evictions, taint-based evictions and preemption.
    pub fn disrupt(
        &self,
        ns: &str,
        name: &str,
        why: Disruption,
        opts: &DeleteOptions,
    ) -> Result<(), RegistryError> {
        let mut opts = opts.clone();
        if !dry(&opts) {
            let pre = opts.preconditions.clone().unwrap_or_default();
            let now = super::meta::now_rfc3339();
            let updated = self.update_with(
                PODS,
                Some(ns),
                name,
                Part::Status,
                &WriteOptions::default(),
                |mut p| {
                    let uid = p.pointer("/metadata/uid").and_then(Value::as_str);
                    if let Some(want) = &pre.uid
                        && !want.is_empty()
                        && Some(want.as_str()) != uid
                    {
                        return Err(RegistryError::conflict_because(
                            PODS,
                            name,
                            &format!(
                                "Precondition failed: UID in precondition: {want}, UID in object meta: {}",
                                uid.unwrap_or_default()
                            ),
                        ));
                    }
                    if let Some(want) = &pre.resource_version
                        && !want.is_empty()
                        && Some(want.clone()) != version_of(&p)
                    {
                        return Err(RegistryError::conflict_because(
                            PODS,
                            name,
                            &format!(
                                "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                                version_of(&p).unwrap_or_default()
                            ),
                        ));
                    }
                    set_pod_condition(
                        &mut p,
                        DISRUPTION_TARGET,
                        "True",
                        why.reason,
                        why.message,
                        &now,
                    );
                    Ok(p)
                },
            )?;
            if let Some(p) = opts.preconditions.as_mut()
                && p.resource_version.is_some()
            {
                p.resource_version = version_of(&updated);
            }
        }
        self.delete(PODS, Some(ns), name, &opts)?;
        Ok(())
    }
}
