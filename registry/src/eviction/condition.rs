//! A PodDisruptionBudget's `DisruptionAllowed` condition, written by the disruption
//! controller and by the eviction subresource when it spends a disruption; here, below both.
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::policy::v1 as policy;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use jiff::Timestamp;

/// The condition's type and reasons, as upstream.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const SUFFICIENT_PODS: &str = "SufficientPods";
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";

fn time(now: Timestamp) -> Time {
    Time(now.round(jiff::Unit::Second).unwrap_or(now))
}

/// Upstream `UpdateDisruptionAllowedCondition` (`meta.SetStatusCondition`: the transition time
/// moves only with the status).
pub fn set_allowed_condition(
    status: &mut policy::PodDisruptionBudgetStatus,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let value = if reason == SUFFICIENT_PODS {
        "True"
    } else {
        "False"
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let observed = Some(status.observed_generation.unwrap_or(0));
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = time(now);
            }
            c.status = value.into();
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: observed,
            last_transition_time: time(now),
        }),
    }
}

/// The reason the condition should have for `allowed` disruptions.
pub fn allowed_reason(allowed: i32) -> &'static str {
    if allowed > 0 {
        SUFFICIENT_PODS
    } else {
        INSUFFICIENT_PODS
    }
}
