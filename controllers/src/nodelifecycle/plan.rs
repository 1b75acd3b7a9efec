//! One node's pass (upstream `tryUpdateNodeHealth`, `doNoScheduleTaintingPass`,
//! `processTaintBaseEviction` and `MarkPodsNotReady`), one step at a time:
//!
//! 1. No heartbeat for the grace period (the startup grace while the node has never posted a
//!    Ready condition) → Ready, MemoryPressure, DiskPressure and PIDPressure become Unknown
//!    (`NodeStatusUnknown`, "Kubelet stopped posting node status."; a condition never posted is
//!    added as `NodeStatusNeverUpdated`). That status is the whole pass.
//! 2. The conditions' `NoSchedule` taints (TaintNodesByCondition): Ready False → `not-ready`,
//!    Unknown → `unreachable`, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True →
//!    their taints, and `spec.unschedulable` → `unschedulable`; the readiness `NoExecute` taint
//!    (`not-ready` or `unreachable`, never both) as the zone allows ([`super::zones`]). A taint
//!    goes when its condition clears; taints of other keys are never touched. New taints carry
//!    `timeAdded`, from which taint-based eviction counts tolerationSeconds.
//! 3. While Ready is not True, the node's pods are not Ready either.
//!
//! Worked example, grace 40 s: Lease renewed at 10:00:00 (seen then) and never again → the pass
//! due at 10:00:40 finds it 40 s old, not more, and asks to run 1 ms later; at 10:00:40.001 the
//! node goes Unknown; the next pass adds `unreachable:NoSchedule` and `unreachable:NoExecute`.
//!
//! Planner: pure, no I/O.

use super::health::Health;
use super::zones::Tainting;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use jiff::Timestamp;
use std::time::Duration;

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// The conditions a silent node's are set Unknown (NetworkUnavailable is the network's).
const MONITORED: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Upstream `nodeConditionToTaintKeyStatusMap`: (condition, status) → `NoSchedule` taint key.
const CONDITION_TAINTS: &[(&str, &str, &str)] = &[
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
];

/// How long a node may stay silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    /// `--node-monitor-grace-period` (default 40 s).
    pub monitor: Duration,
    /// For a node that has never posted a Ready condition (upstream's node startup grace
    /// period, 60 s).
    pub startup: Duration,
}

impl Default for Grace {
    fn default() -> Grace {
        Grace {
            monitor: Duration::from_secs(40),
            startup: Duration::from_secs(60),
        }
    }
}

/// What one pass does to a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePlan {
    /// The node's new conditions (it went silent); nothing else happens in this pass.
    pub conditions: Option<Vec<core::NodeCondition>>,
    /// Ready was True before this pass set it Unknown (a `NodeNotReady` event).
    pub became_not_ready: bool,
    /// The node's new taints.
    pub taints: Option<Vec<core::Taint>>,
    /// `taints` adds a `NoExecute` readiness taint (the zone verdict it was planned with
    /// should be fresh).
    pub adds_no_execute: bool,
    /// Ready is not True: its pods are not Ready either.
    pub pods_not_ready: bool,
    /// When the node goes Unknown if no heartbeat comes first.
    pub requeue_after: Option<Duration>,
}

fn status_of<'a>(conditions: &'a [core::NodeCondition], type_: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// `now` to the second, as the API's timestamps are written.
fn time(now: Timestamp) -> Time {
    Time(now.round(jiff::Unit::Second).unwrap_or(now))
}

/// Step 1: the conditions of a node silent past its grace period, or when to look again.
fn silence(
    node: &core::Node,
    conditions: &[core::NodeCondition],
    health: &Health,
    grace: &Grace,
    now: Timestamp,
) -> Result<Option<Vec<core::NodeCondition>>, Duration> {
    let period = if status_of(conditions, "Ready").is_none() {
        grace.startup
    } else {
        grace.monitor
    };
    let deadline = health.probe + period;
    if now <= deadline {
        let left = now
            .until(deadline)
            .ok()
            .and_then(|s| Duration::try_from(s).ok());
        return Err(left.unwrap_or_default() + Duration::from_millis(1));
    }
    let mut out = conditions.to_vec();
    let mut changed = false;
    for type_ in MONITORED {
        match out.iter_mut().find(|c| c.type_ == *type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(time(now));
                changed = true;
            }
            None => {
                out.push(core::NodeCondition {
                    type_: (*type_).into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                    last_transition_time: Some(time(now)),
                });
                changed = true;
            }
        }
    }
    Ok(changed.then_some(out))
}

fn is_readiness(t: &core::Taint) -> bool {
    t.effect == NO_EXECUTE && (t.key == NOT_READY || t.key == UNREACHABLE)
}

fn is_condition_taint(t: &core::Taint) -> bool {
    t.effect == NO_SCHEDULE
        && (t.key == UNSCHEDULABLE || CONDITION_TAINTS.iter().any(|(_, _, k)| *k == t.key))
}

/// Step 2: the taints the node should carry, keeping the order and `timeAdded` of those it
/// keeps; `None` when they are right already.
fn taints(
    node: &core::Node,
    conditions: &[core::NodeCondition],
    tainting: Tainting,
    now: Timestamp,
) -> Option<(Vec<core::Taint>, bool)> {
    let spec = node.spec.clone().unwrap_or_default();
    let current = spec.taints.unwrap_or_default();
    let mut want_no_schedule: Vec<&str> = CONDITION_TAINTS
        .iter()
        .filter(|(c, s, _)| status_of(conditions, c) == Some(*s))
        .map(|(_, _, k)| *k)
        .collect();
    if spec.unschedulable == Some(true) {
        want_no_schedule.push(UNSCHEDULABLE);
    }
    let by_ready = match status_of(conditions, "Ready") {
        Some("False") => Some(NOT_READY),
        Some("Unknown") => Some(UNREACHABLE),
        _ => None,
    };
    let has_readiness = current.iter().any(is_readiness);
    let want_no_execute = match tainting {
        Tainting::Suspended => None,
        // Held: nothing new, but a present taint follows the condition (upstream swaps
        // not-ready and unreachable at once, outside the rate limits).
        Tainting::Held if !has_readiness => None,
        Tainting::Held | Tainting::Allowed => by_ready,
    };
    let mut next: Vec<core::Taint> = current
        .iter()
        .filter(|t| {
            if is_condition_taint(t) {
                want_no_schedule.contains(&t.key.as_str())
            } else if is_readiness(t) {
                want_no_execute == Some(t.key.as_str())
            } else {
                true
            }
        })
        .cloned()
        .collect();
    let added = |key: &str, effect: &str| core::Taint {
        key: key.into(),
        effect: effect.into(),
        time_added: Some(time(now)),
        value: None,
    };
    for key in want_no_schedule {
        if !next.iter().any(|t| t.key == key && t.effect == NO_SCHEDULE) {
            next.push(added(key, NO_SCHEDULE));
        }
    }
    let mut adds_no_execute = false;
    if let Some(key) = want_no_execute
        && !next.iter().any(|t| t.key == key && t.effect == NO_EXECUTE)
    {
        next.push(added(key, NO_EXECUTE));
        adds_no_execute = !has_readiness;
    }
    (next != current).then_some((next, adds_no_execute))
}

/// One pass over `node`, seen with `health`, in a zone that allows `tainting`.
pub fn node(
    node: &core::Node,
    health: &Health,
    grace: &Grace,
    tainting: Tainting,
    now: Timestamp,
) -> NodePlan {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let requeue_after = match silence(node, &conditions, health, grace, now) {
        Ok(Some(new)) => {
            return NodePlan {
                became_not_ready: status_of(&conditions, "Ready") == Some("True"),
                conditions: Some(new),
                ..NodePlan::default()
            };
        }
        Ok(None) => None,
        Err(wait) => Some(wait),
    };
    let (taints, adds_no_execute) = match taints(node, &conditions, tainting, now) {
        Some((t, adds)) => (Some(t), adds),
        None => (None, false),
    };
    NodePlan {
        taints,
        adds_no_execute,
        pods_not_ready: status_of(&conditions, "Ready").is_some_and(|s| s != "True"),
        requeue_after,
        ..NodePlan::default()
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
