//! A PodDisruptionBudget's status (upstream's disruption controller, `trySync`):
//!
//! - `expectedPods` and `desiredHealthy` (`getExpectedPodCount`): with `maxUnavailable`, or a
//!   percentage `minAvailable`, the expected count is the sum of the scales of the pods'
//!   controllers (a Deployment's for pods of its ReplicaSets, else the ReplicaSet's,
//!   ReplicationController's or StatefulSet's `spec.replicas`), and the percentage is rounded
//!   up: `desiredHealthy = expected - ceil(maxUnavailable% × expected)` or
//!   `ceil(minAvailable% × expected)`. An integer `minAvailable` is `desiredHealthy` itself,
//!   and the expected count is the number of selected pods.
//! - `currentHealthy`: selected pods that are Ready, not being deleted, and not in
//!   `disruptedPods` (evictions the API has granted, forgotten after 2 minutes).
//! - `disruptionsAllowed = currentHealthy - desiredHealthy`, never below 0, and 0 while nothing
//!   is expected (a budget whose pods have not appeared yet protects them when they do).
//! - condition `DisruptionAllowed`: True `SufficientPods` when a disruption is allowed, else
//!   False `InsufficientPods`; when the count cannot be made (a pod's controller has no scale),
//!   False `SyncFailed` with the reason, and no disruption allowed.
//!
//! Worked examples, 3 replicas all Ready: `minAvailable: 2` → desired 2, allowed 1;
//! `maxUnavailable: 1` → expected 3, desired 2, allowed 1; `minAvailable: 50%` → desired
//! ceil(1.5) = 2, allowed 1; `maxUnavailable: 50%` → ceil(1.5) = 2 unavailable, desired 1,
//! allowed 2.
//!
//! Planner: pure, no I/O.

use crate::deployment::surge::scaled_value;
use crate::views::{ControllerRef, Pod};
use berth_shared::k8s_openapi::api::policy::v1 as policy;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use jiff::{SignedDuration, Timestamp};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// How long a granted eviction keeps its pod out of `currentHealthy` (upstream
/// `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);
/// The condition's type and reasons, as upstream (with the eviction subresource, which
/// writes the condition too).
pub use berth_registry::eviction::condition::{
    DISRUPTION_ALLOWED, INSUFFICIENT_PODS, SUFFICIENT_PODS, allowed_reason, set_allowed_condition,
};
/// The reason when the expected count cannot be made.
pub const SYNC_FAILED: &str = "SyncFailed";

/// The scale of each controller the selected pods name, by the controller's uid: the uid and
/// `spec.replicas` of the object whose scale counts (a Deployment for its ReplicaSets), or
/// `None` when no such controller was found.
pub type Scales = HashMap<String, Option<(String, i32)>>;

/// An event the pass records on the budget (or, for `NotDeleted`, on a pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
    /// The pod it is about, if not the budget.
    pub pod: Option<String>,
}

/// What one pass does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The new status, when it differs.
    pub status: Option<policy::PodDisruptionBudgetStatus>,
    pub events: Vec<Event>,
    /// When a granted eviction expires.
    pub recheck_after: Option<Duration>,
}

/// Upstream `getExpectedScale`: the scales of the pods' controllers, each counted once; the
/// names of pods without a controller; an error for a pod whose controller has no scale.
fn expected_scale(pods: &[&Pod], scales: &Scales) -> Result<(i32, Vec<String>), String> {
    let mut counted: BTreeMap<String, i32> = BTreeMap::new();
    let mut unmanaged = Vec::new();
    for pod in pods {
        let Some(ControllerRef { uid, .. }) = &pod.controller else {
            unmanaged.push(pod.name.clone());
            continue;
        };
        match scales.get(uid) {
            Some(Some((owner, replicas))) => {
                counted.insert(owner.clone(), *replicas);
            }
            _ => return Err(format!("found no controllers for pod {:?}", pod.name)),
        }
    }
    Ok((counted.values().sum(), unmanaged))
}

/// Upstream `getExpectedPodCount`: (expected, desired healthy, unmanaged pods).
pub fn expected_and_desired(
    spec: &policy::PodDisruptionBudgetSpec,
    pods: &[&Pod],
    scales: &Scales,
) -> Result<(i32, i32, Vec<String>), String> {
    let scaled = |v: &IntOrString, total: i32| {
        scaled_value(v, total, true).map_err(|e| format!("invalid value for IntOrString: {e}"))
    };
    if let Some(max) = &spec.max_unavailable {
        let (expected, unmanaged) = expected_scale(pods, scales)?;
        let unavailable = scaled(max, expected)?;
        return Ok((expected, (expected - unavailable).max(0), unmanaged));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((pods.len() as i32, *n, Vec::new())),
        Some(pct) => {
            let (expected, unmanaged) = expected_scale(pods, scales)?;
            Ok((expected, scaled(pct, expected)?, unmanaged))
        }
        None => Ok((0, 0, Vec::new())),
    }
}

/// Upstream `buildDisruptedPodMap`: the granted evictions still pending (pods that exist, are
/// not being deleted yet, and were granted less than [`DELETION_TIMEOUT`] ago), the pods whose
/// grant expired, and when the next one expires.
fn disrupted(
    granted: &BTreeMap<String, Time>,
    pods: &[&Pod],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Vec<String>, Option<Timestamp>) {
    let mut kept = BTreeMap::new();
    let mut expired = Vec::new();
    let mut recheck: Option<Timestamp> = None;
    let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or(SignedDuration::ZERO);
    for pod in pods.iter().filter(|p| !p.deleting) {
        let Some(at) = granted.get(&pod.name) else {
            continue;
        };
        let expires = at.0.checked_add(timeout).unwrap_or(Timestamp::MAX);
        if expires < now {
            expired.push(pod.name.clone());
        } else {
            recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
            kept.insert(pod.name.clone(), at.clone());
        }
    }
    (kept, expired, recheck)
}

/// Upstream `ConditionsAreUpToDate`.
fn conditions_up_to_date(status: &policy::PodDisruptionBudgetStatus, generation: i64) -> bool {
    let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if status.observed_generation != Some(generation) {
        return false;
    }
    let want = if status.disruptions_allowed > 0 {
        "True"
    } else {
        "False"
    };
    c.status == want && c.reason == allowed_reason(status.disruptions_allowed)
}

/// One pass over a budget selecting `pods` (those in its namespace its selector matches).
pub fn budget(
    pdb: &policy::PodDisruptionBudget,
    pods: &[&Pod],
    scales: &Scales,
    now: Timestamp,
) -> Plan {
    let ns_name = format!(
        "{}/{}",
        pdb.metadata.namespace.as_deref().unwrap_or_default(),
        pdb.metadata.name.as_deref().unwrap_or_default()
    );
    let generation = pdb.metadata.generation.unwrap_or(0);
    let spec = pdb.spec.clone().unwrap_or_default();
    let old = pdb.status.clone().unwrap_or_default();
    let mut plan = Plan::default();
    if pods.is_empty() {
        plan.events.push(Event {
            warning: false,
            reason: "NoPods",
            message: "No matching pods found".into(),
            pod: None,
        });
    }
    let (expected, desired, unmanaged) = match expected_and_desired(&spec, pods, scales) {
        Ok(v) => v,
        Err(e) => {
            plan.events.push(Event {
                warning: true,
                reason: "CalculateExpectedPodCountFailed",
                message: format!("Failed to calculate the number of expected pods: {e}"),
                pod: None,
            });
            // Upstream `failSafe`: no disruption until the count can be made.
            let mut status = old.clone();
            status.disruptions_allowed = 0;
            set_allowed_condition(&mut status, SYNC_FAILED, &e, now);
            if status != old {
                plan.status = Some(status);
            }
            return plan;
        }
    };
    if !unmanaged.is_empty() {
        plan.events.push(Event {
            warning: true,
            reason: "UnmanagedPods",
            message: format!(
                "Pods selected by this PodDisruptionBudget (selector: {}) were found to be \
                 unmanaged. As a result, the status of the PDB cannot be calculated correctly, \
                 which may result in undefined behavior. To account for these pods please set \
                 \".spec.minAvailable\" field of the PDB to an integer value.",
                selector_text(&spec)
            ),
            pod: None,
        });
    }
    let granted = old.disrupted_pods.clone().unwrap_or_default();
    let (kept, expired, recheck) = disrupted(&granted, pods, now);
    for pod in expired {
        plan.events.push(Event {
            warning: true,
            reason: "NotDeleted",
            message: format!("Pod was expected by PDB {ns_name} to be deleted but it wasn't"),
            pod: Some(pod),
        });
    }
    let healthy = pods
        .iter()
        .filter(|p| !p.deleting && p.ready && !kept.contains_key(&p.name))
        .count() as i32;
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    plan.recheck_after = recheck.and_then(|r| {
        now.until(r)
            .ok()
            .and_then(|s| Duration::try_from(s).ok())
            .map(|d| d + Duration::from_millis(1))
    });
    let disrupted_pods = (!kept.is_empty()).then_some(kept);
    let unchanged = old.current_healthy == healthy
        && old.desired_healthy == desired
        && old.expected_pods == expected
        && old.disruptions_allowed == allowed
        && old.disrupted_pods.clone().filter(|m| !m.is_empty()) == disrupted_pods
        && old.observed_generation == Some(generation)
        && conditions_up_to_date(&old, generation);
    if unchanged {
        return plan;
    }
    let mut status = policy::PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: desired,
        expected_pods: expected,
        disruptions_allowed: allowed,
        disrupted_pods,
        observed_generation: Some(generation),
        conditions: old.conditions.clone(),
    };
    set_allowed_condition(&mut status, allowed_reason(allowed), "", now);
    plan.status = Some(status);
    plan
}

/// The selector as upstream's event prints it (Go's `%v` of the struct is unreadable; the
/// selector string says the same).
fn selector_text(spec: &policy::PodDisruptionBudgetSpec) -> String {
    spec.selector
        .as_ref()
        .and_then(|s| berth_shared::selector::LabelSelector::from_k8s(s).ok())
        .map(|s| s.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
