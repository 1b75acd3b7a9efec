//! The eviction subresource's decisions (upstream `EvictionREST.Create`): which pods skip the
//! budgets, which budgets select a pod, and `checkAndDecrement` on the one that does.
//!
//! - A pod that is Succeeded, Failed or Pending, or already being deleted, has nothing left to
//!   protect: it is deleted without looking at budgets.
//! - More than one budget selecting the pod: 500, unsupported. None: the pod is deleted.
//! - A pod that is not Ready does not count toward `currentHealthy`: with
//!   `unhealthyPodEvictionPolicy: AlwaysAllow`, or when the budget is met without it
//!   (`IfHealthyBudget`, the default: `currentHealthy >= desiredHealthy > 0`), it is deleted
//!   without spending a disruption, provided it is still not Ready (the deletion is
//!   conditional on the version that was judged).
//! - Otherwise the budget must allow a disruption: its status must reflect its spec
//!   (`observedGeneration`), `disruptionsAllowed` must be positive; the grant is spent
//!   (`disruptionsAllowed - 1`, and the pod into `disruptedPods`, so the disruption controller
//!   does not count it healthy while it goes) by a status write conditional on the budget's
//!   version, so two evictions racing for the last disruption cannot both win.
//!
//! Planner: pure, no I/O.

use super::condition::{allowed_reason, set_allowed_condition};
use berth_shared::k8s_openapi::api::policy::v1 as policy;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use berth_shared::selector::LabelSelector;
use jiff::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;

/// Upstream `MaxDisruptedPodSize`.
pub const MAX_DISRUPTED_PODS: usize = 2000;

/// Why a budget refuses an eviction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 429: no disruption allowed now.
    #[error(
        "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
    )]
    Exhausted {
        name: String,
        desired: i32,
        current: i32,
    },
    /// 429 with `Retry-After: 10`: the status does not reflect the spec yet.
    #[error("The disruption budget {0} is still being processed by the server.")]
    Pending(String),
    /// 403.
    #[error("poddisruptionbudget.policy \"{0}\" is forbidden: pdb disruptions allowed is negative")]
    Negative(String),
    /// 403.
    #[error(
        "poddisruptionbudget.policy \"{0}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
    )]
    TooManyDisrupted(String),
}

/// Upstream `canIgnorePDB`: a finished, pending or terminating pod.
pub fn can_ignore_budgets(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    matches!(phase, Some("Succeeded" | "Failed" | "Pending"))
        || pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// Upstream `shouldEnforceResourceVersion`: unless finished or terminating, the deletion is
/// conditional on the version judged (it must not have become Ready meanwhile).
pub fn enforce_version(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    !matches!(phase, Some("Succeeded" | "Failed"))
        && pod.pointer("/metadata/deletionTimestamp").is_none()
}

/// The pod's Ready condition is True.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Whether the budget selects pods with `labels` (as the eviction subresource judges: a nil
/// or empty selector selects nothing here, an invalid one nothing).
pub fn selects(pdb: &policy::PodDisruptionBudget, labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    match LabelSelector::from_k8s(sel) {
        Ok(s) => !s.is_empty() && s.matches(labels),
        Err(_) => false,
    }
}

/// An unready pod the budget lets go without spending a disruption.
pub fn unhealthy_may_go(pdb: &policy::PodDisruptionBudget) -> bool {
    let policy = pdb
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
    let status = pdb.status.clone().unwrap_or_default();
    policy == Some("AlwaysAllow")
        || (status.current_healthy >= status.desired_healthy && status.desired_healthy > 0)
}

/// Upstream `checkAndDecrement`: spends one disruption of `pdb` on `pod` (recorded in
/// `disruptedPods` unless a dry run), or says why not.
pub fn check_and_decrement(
    pdb: &mut policy::PodDisruptionBudget,
    pod: &str,
    dry_run: bool,
    now: Timestamp,
) -> Result<(), Refusal> {
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    let status = pdb.status.get_or_insert_with(Default::default);
    if status.observed_generation.unwrap_or(0) < generation {
        return Err(Refusal::Pending(name));
    }
    if status.disruptions_allowed < 0 {
        return Err(Refusal::Negative(name));
    }
    if status.disrupted_pods.as_ref().map_or(0, BTreeMap::len) > MAX_DISRUPTED_PODS {
        return Err(Refusal::TooManyDisrupted(name));
    }
    if status.disruptions_allowed == 0 {
        return Err(Refusal::Exhausted {
            name,
            desired: status.desired_healthy,
            current: status.current_healthy,
        });
    }
    status.disruptions_allowed -= 1;
    if status.disruptions_allowed == 0 {
        set_allowed_condition(status, allowed_reason(0), "", now);
    }
    if !dry_run {
        status
            .disrupted_pods
            .get_or_insert_with(BTreeMap::new)
            .insert(pod.to_string(), Time(now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pdb(spec: Value, status: Value) -> policy::PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default",
            "generation": 2}, "spec": spec, "status": status}))
        .unwrap()
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn pods_with_nothing_left_to_protect_skip_the_budgets() {
        let in_phase = |phase: &str| json!({"status": {"phase": phase}});
        let cases = [
            ("running", in_phase("Running"), false, true),
            ("pending", in_phase("Pending"), true, true),
            ("succeeded", in_phase("Succeeded"), true, false),
            ("failed", in_phase("Failed"), true, false),
            (
                "terminating",
                json!({"metadata": {"deletionTimestamp": "t"}, "status": {"phase": "Running"}}),
                true,
                false,
            ),
        ];
        for (name, pod, ignore, enforce) in cases {
            assert_eq!(can_ignore_budgets(&pod), ignore, "{name}");
            assert_eq!(enforce_version(&pod), enforce, "{name}");
        }
    }

    #[test]
    fn a_budget_allowing_one_disruption_allows_exactly_one() {
        let mut b = pdb(
            json!({"minAvailable": 2}),
            json!({"observedGeneration": 2, "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2}),
        );
        assert_eq!(check_and_decrement(&mut b, "web-1", false, at(0)), Ok(()));
        let s = b.status.clone().unwrap();
        assert_eq!(s.disruptions_allowed, 0);
        assert_eq!(
            s.disrupted_pods.unwrap().get("web-1").map(|t| t.0),
            Some(at(0))
        );
        let c = &s.conditions.unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InsufficientPods")
        );
        let refused = check_and_decrement(&mut b, "web-2", false, at(1));
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("The disruption budget web needs 2 healthy pods and has 3 currently".into())
        );
    }

    #[test]
    fn budgets_refuse_as_upstream_does() {
        let cases = [
            (
                "a status behind its spec",
                json!({"observedGeneration": 1, "disruptionsAllowed": 1}),
                Refusal::Pending("web".into()),
            ),
            (
                "a negative allowance",
                json!({"observedGeneration": 2, "disruptionsAllowed": -1}),
                Refusal::Negative("web".into()),
            ),
            (
                "no disruption allowed",
                json!({"observedGeneration": 2, "disruptionsAllowed": 0, "desiredHealthy": 2, "currentHealthy": 2}),
                Refusal::Exhausted {
                    name: "web".into(),
                    desired: 2,
                    current: 2,
                },
            ),
        ];
        for (name, status, want) in cases {
            let mut b = pdb(json!({}), status);
            assert_eq!(
                check_and_decrement(&mut b, "p", false, at(0)),
                Err(want),
                "{name}"
            );
        }
    }

    #[test]
    fn a_dry_run_spends_nothing_on_record() {
        let mut b = pdb(
            json!({}),
            json!({"observedGeneration": 2, "disruptionsAllowed": 2}),
        );
        assert_eq!(check_and_decrement(&mut b, "p", true, at(0)), Ok(()));
        assert_eq!(b.status.unwrap().disrupted_pods, None);
    }

    #[test]
    fn unready_pods_go_freely_by_policy_or_when_the_budget_is_met() {
        let cases = [
            (
                "IfHealthyBudget, met",
                json!({}),
                json!({"currentHealthy": 2, "desiredHealthy": 2}),
                true,
            ),
            (
                "IfHealthyBudget, not met",
                json!({}),
                json!({"currentHealthy": 1, "desiredHealthy": 2}),
                false,
            ),
            (
                "nothing desired",
                json!({}),
                json!({"currentHealthy": 0, "desiredHealthy": 0}),
                false,
            ),
            (
                "AlwaysAllow, not met",
                json!({"unhealthyPodEvictionPolicy": "AlwaysAllow"}),
                json!({"currentHealthy": 1, "desiredHealthy": 2}),
                true,
            ),
        ];
        for (name, spec, status, want) in cases {
            assert_eq!(unhealthy_may_go(&pdb(spec, status)), want, "{name}");
        }
    }

    #[test]
    fn the_eviction_subresource_lets_no_empty_selector_select_everything() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let cases = [
            (
                "matching",
                json!({"selector": {"matchLabels": {"app": "web"}}}),
                true,
            ),
            (
                "other labels",
                json!({"selector": {"matchLabels": {"app": "db"}}}),
                false,
            ),
            ("empty", json!({"selector": {}}), false),
            ("nil", json!({}), false),
        ];
        for (name, spec, want) in cases {
            assert_eq!(selects(&pdb(spec, json!({})), &labels), want, "{name}");
        }
    }
}
