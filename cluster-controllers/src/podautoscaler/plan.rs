//! One autoscaler pass, as upstream's `reconcileAutoscaler`: from the target's current scale,
//! its pods and their usage, the replicas each resource metric asks for ([`replicas`]), the
//! largest of them normalized by the behaviour ([`behavior`]), the rescale to make and why,
//! the conditions (`AbleToScale`, `ScalingActive`, `ScalingLimited`) with upstream's reasons,
//! `status.currentMetrics`, and the events to record.
//!
//! Without a `behavior`, the default scale-up and scale-down rules apply (upstream's older
//! `normalizeDesiredReplicas` has the same 5-minute scale-down window and limits scale-up to
//! `max(2×current, 4)` per pass instead of per 15 s).
//!
//! Planner: pure, no I/O.

use super::behavior::{self, Policy, Recommended, Rules, ScaleEvent, Select};
use super::replicas::{self, CalcError, PodSample, Target};
use berth_shared::k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscalerSpec, MetricSpec,
};
use berth_shared::quantity::Quantity;
use jiff::Timestamp;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A pod of the target as the autoscaler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedPod {
    pub name: String,
    /// Ready (and so its samples count).
    pub ready: bool,
    /// Deleting or failed: left out.
    pub ignored: bool,
    /// The sum of its containers' requests by resource (millicores for cpu, bytes otherwise);
    /// `None` when a container requests none of it.
    pub requests: BTreeMap<String, Option<f64>>,
}

/// What the autoscaler remembers between passes: recent recommendations and rescales.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub recommendations: Vec<Recommended>,
    pub up_events: Vec<ScaleEvent>,
    pub down_events: Vec<ScaleEvent>,
}

/// Everything one pass reads.
pub struct Observed<'a> {
    pub spec: &'a HorizontalPodAutoscalerSpec,
    /// The target's `spec.replicas`.
    pub current: i32,
    pub pods: &'a [ObservedPod],
    /// Usage by pod, then by resource (millicores for cpu, bytes otherwise).
    pub usage: &'a BTreeMap<String, BTreeMap<String, f64>>,
    pub history: &'a History,
    pub now: Timestamp,
}

/// A condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// An event to record on the autoscaler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The pass's decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub desired: i32,
    /// Set when the target is to be rescaled to `desired`: the reason for the event.
    pub rescale: Option<String>,
    pub conditions: Vec<Condition>,
    pub current_metrics: Vec<Value>,
    pub events: Vec<Event>,
    pub history: History,
}

fn condition(
    type_: &'static str,
    status: bool,
    reason: &'static str,
    message: impl Into<String>,
) -> Condition {
    Condition {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

fn rules(given: Option<&HPAScalingRules>, default: Rules) -> Rules {
    let Some(r) = given else {
        return default;
    };
    let select = match r.select_policy.as_deref() {
        Some("Min") => Select::Min,
        Some("Disabled") => Select::Disabled,
        Some(_) => Select::Max,
        None => default.select,
    };
    let policies = match &r.policies {
        Some(ps) => ps
            .iter()
            .map(|p| {
                let period_seconds = i64::from(p.period_seconds);
                if p.type_ == "Percent" {
                    Policy::Percent {
                        value: p.value,
                        period_seconds,
                    }
                } else {
                    Policy::Pods {
                        value: p.value,
                        period_seconds,
                    }
                }
            })
            .collect(),
        None => default.policies,
    };
    Rules {
        stabilization_window_seconds: r
            .stabilization_window_seconds
            .map_or(default.stabilization_window_seconds, i64::from),
        select,
        policies,
    }
}

/// A resource metric's name, target and, for the status, whether it is a utilization.
fn resource_target(m: &MetricSpec) -> Option<(String, Target)> {
    let r = m.resource.as_ref().filter(|_| m.type_ == "Resource")?;
    let t = &r.target;
    let target = match (t.average_utilization, &t.average_value) {
        (Some(u), _) => Target::Utilization(f64::from(u)),
        (None, Some(v)) => {
            let q = Quantity::parse(&v.0).ok()?;
            if r.name == "cpu" {
                Target::AverageValue(q.millis() as f64)
            } else {
                Target::AverageValue(q.value() as f64)
            }
        }
        _ => return None,
    };
    Some((r.name.clone(), target))
}

/// upstream's metric name in messages: `cpu resource utilization (percentage of request)`.
fn metric_name(resource: &str, target: Target) -> String {
    match target {
        Target::Utilization(_) => {
            format!("{resource} resource utilization (percentage of request)")
        }
        Target::AverageValue(_) => format!("{resource} resource"),
    }
}

fn average_quantity(resource: &str, average: f64) -> String {
    if resource == "cpu" {
        format!("{}m", average.round() as i64)
    } else {
        format!("{}", average.round() as i64)
    }
}

fn metric_status(resource: &str, r: &replicas::Recommendation) -> Value {
    let mut current = json!({"averageValue": average_quantity(resource, r.average)});
    if let Some(u) = r.utilization {
        current["averageUtilization"] = json!(u);
    }
    json!({"type": "Resource", "resource": {"name": resource, "current": current}})
}

/// What the metrics ask for: the largest recommendation, the metric that made it, every
/// metric's current value and the `ScalingActive` message.
struct Proposal {
    replicas: i32,
    metric: String,
    statuses: Vec<Value>,
    message: String,
}

/// No recommendation: the events to record and the `ScalingActive` condition.
type Failure = (Vec<Event>, Condition);

/// The replicas the metrics ask for (the largest), with what each measured; `Err` with the
/// conditions and events when none could be computed.
fn from_metrics(o: &Observed) -> Result<Proposal, Failure> {
    let mut best: Option<(i32, String)> = None;
    let mut statuses = Vec::new();
    let mut first_error = None;
    let mut invalid = 0;
    let metrics = o.spec.metrics.as_deref().unwrap_or_default();
    for m in metrics {
        let Some((resource, target)) = resource_target(m) else {
            invalid += 1;
            first_error.get_or_insert_with(|| {
                format!(
                    "the {} metric source type is not served by Berth (resource metrics only)",
                    m.type_
                )
            });
            continue;
        };
        let samples: Vec<PodSample> = o
            .pods
            .iter()
            .map(|p| PodSample {
                name: p.name.clone(),
                request: p.requests.get(&resource).copied().flatten(),
                ready: p.ready,
                ignored: p.ignored,
            })
            .collect();
        let usage: BTreeMap<String, f64> = o
            .usage
            .iter()
            .filter_map(|(pod, u)| u.get(&resource).map(|v| (pod.clone(), *v)))
            .collect();
        match replicas::resource_replicas(o.current, &samples, &usage, target, &resource) {
            Ok(r) => {
                statuses.push(metric_status(&resource, &r));
                let name = metric_name(&resource, target);
                if best.as_ref().is_none_or(|(n, _)| r.replicas > *n) {
                    best = Some((r.replicas, name));
                }
            }
            Err(e) => {
                invalid += 1;
                let text = match (&e, target) {
                    (
                        CalcError::NoMetrics | CalcError::NoMetricsForTargetedPods,
                        Target::Utilization(_),
                    ) => format!(
                        "failed to get {resource} utilization: unable to get metrics for resource {resource}: {e}"
                    ),
                    _ => format!("failed to get {resource} resource metric value: {e}"),
                };
                first_error.get_or_insert(text);
            }
        }
    }
    match best {
        Some((replicas, name)) if invalid == 0 || replicas > o.current => {
            let message =
                format!("the HPA was able to successfully calculate a replica count from {name}");
            Ok(Proposal {
                replicas,
                metric: name,
                statuses,
                message,
            })
        }
        _ => {
            let err = first_error
                .unwrap_or_else(|| "no metrics to compute a replica count from".to_string());
            let message = format!(
                "invalid metrics ({invalid} invalid out of {}), first error is: {err}",
                metrics.len()
            );
            Err((
                vec![
                    Event {
                        warning: true,
                        reason: "FailedGetResourceMetric",
                        message: err.clone(),
                    },
                    Event {
                        warning: true,
                        reason: "FailedComputeMetricsReplicas",
                        message: message.clone(),
                    },
                ],
                condition(
                    "ScalingActive",
                    false,
                    "FailedGetResourceMetric",
                    format!("the HPA was unable to compute the replica count: {err}"),
                ),
            ))
        }
    }
}

/// One pass.
pub fn plan(o: &Observed) -> Plan {
    let min = o.spec.min_replicas.unwrap_or(1);
    let max = o.spec.max_replicas;
    let mut conditions = vec![condition(
        "AbleToScale",
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
    )];
    let mut events = Vec::new();
    let mut history = o.history.clone();
    let mut current_metrics = Vec::new();
    let (desired, reason) = if o.current == 0 && min != 0 {
        conditions.push(condition(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
        ));
        (0, String::new())
    } else if o.current > max {
        (
            max,
            "Current number of replicas above Spec.MaxReplicas".to_string(),
        )
    } else if o.current < min {
        (
            min,
            "Current number of replicas below Spec.MinReplicas".to_string(),
        )
    } else {
        match from_metrics(o) {
            Err((evs, c)) => {
                events.extend(evs);
                conditions.push(c);
                (o.current, String::new())
            }
            Ok(Proposal {
                replicas: proposed,
                metric: name,
                statuses,
                message,
            }) => {
                current_metrics = statuses;
                conditions.push(condition(
                    "ScalingActive",
                    true,
                    "ValidMetricFound",
                    message,
                ));
                let behavior = o.spec.behavior.as_ref();
                let up = rules(
                    behavior.and_then(|b| b.scale_up.as_ref()),
                    Rules::default_up(),
                );
                let down = rules(
                    behavior.and_then(|b| b.scale_down.as_ref()),
                    Rules::default_down(),
                );
                let n = behavior::normalize(&behavior::Args {
                    current: o.current,
                    desired: proposed,
                    min,
                    max,
                    up: &up,
                    down: &down,
                    recommendations: &history.recommendations,
                    up_events: &history.up_events,
                    down_events: &history.down_events,
                    now: o.now,
                });
                history.recommendations = n.recommendations;
                conditions[0] = condition(
                    "AbleToScale",
                    true,
                    n.able_to_scale.reason,
                    n.able_to_scale.message,
                );
                conditions.push(condition(
                    "ScalingLimited",
                    n.limited,
                    n.limited_said.reason,
                    n.limited_said.message,
                ));
                let reason = if n.replicas > o.current {
                    format!("{name} above target")
                } else {
                    "All metrics below target".to_string()
                };
                (n.replicas, reason)
            }
        }
    };
    let rescale = (desired != o.current && !reason.is_empty()).then(|| reason.clone());
    if rescale.is_some() {
        let event = ScaleEvent {
            change: (desired - o.current).abs(),
            at: o.now,
        };
        if desired > o.current {
            history.up_events.push(event);
        } else {
            history.down_events.push(event);
        }
        // Events older than the longest policy period are of no further use.
        let keep = |e: &ScaleEvent| e.at > o.now - jiff::SignedDuration::from_secs(1800);
        history.up_events.retain(keep);
        history.down_events.retain(keep);
        events.push(Event {
            warning: false,
            reason: "SuccessfulRescale",
            message: format!("New size: {desired}; reason: {reason}"),
        });
        conditions[0] = condition(
            "AbleToScale",
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
    }
    if !conditions.iter().any(|c| c.type_ == "ScalingLimited") && o.current != 0 {
        let (limited, reason, message) = if desired >= max && o.current > max {
            (
                true,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        } else if desired <= min && o.current < min {
            (
                true,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        } else {
            (
                false,
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        };
        if !current_metrics.is_empty() || limited {
            conditions.push(condition("ScalingLimited", limited, reason, message));
        }
    }
    Plan {
        desired,
        rescale,
        conditions,
        current_metrics,
        events,
        history,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::k8s_openapi::api::autoscaling::v2::{
        CrossVersionObjectReference, MetricTarget, ResourceMetricSource,
    };

    fn spec(min: i32, max: i32, cpu_percent: i32) -> HorizontalPodAutoscalerSpec {
        HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            min_replicas: Some(min),
            max_replicas: max,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(cpu_percent),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            behavior: None,
        }
    }

    fn pods(n: usize) -> Vec<ObservedPod> {
        (0..n)
            .map(|i| ObservedPod {
                name: format!("p{i}"),
                ready: true,
                ignored: false,
                requests: BTreeMap::from([("cpu".to_string(), Some(100.0))]),
            })
            .collect()
    }

    fn busy(n: usize, millis: f64) -> BTreeMap<String, BTreeMap<String, f64>> {
        (0..n)
            .map(|i| {
                (
                    format!("p{i}"),
                    BTreeMap::from([("cpu".to_string(), millis)]),
                )
            })
            .collect()
    }

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn run(
        spec: &HorizontalPodAutoscalerSpec,
        current: i32,
        usage_millis: f64,
        history: &History,
    ) -> Plan {
        let pods = pods(current as usize);
        let usage = busy(current as usize, usage_millis);
        plan(&Observed {
            spec,
            current,
            pods: &pods,
            usage: &usage,
            history,
            now: now(),
        })
    }

    fn reason(p: &Plan, type_: &str) -> &'static str {
        p.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.reason)
            .unwrap_or("none")
    }

    /// Asserts the replicas a plan sets and the reason it gives for rescaling.
    fn assert_rescale(p: &Plan, desired: i32, why: &str) {
        assert_eq!(p.desired, desired);
        assert_eq!(p.rescale.as_deref(), Some(why));
    }

    #[test]
    fn pods_burning_ten_times_their_target_scale_up_by_the_default_rate_and_say_why() {
        let p = run(&spec(2, 5, 50), 2, 1000.0, &History::default());
        // 2000% of requests against 50% asks for 40; 4 pods or 100% per 15 s allows 6; max 5.
        assert_rescale(
            &p,
            5,
            "cpu resource utilization (percentage of request) above target",
        );
        assert_eq!(reason(&p, "AbleToScale"), "SucceededRescale");
        assert_eq!(reason(&p, "ScalingActive"), "ValidMetricFound");
        assert_eq!(reason(&p, "ScalingLimited"), "TooManyReplicas");
        assert_eq!(p.events[0].reason, "SuccessfulRescale");
        assert_eq!(
            p.events[0].message,
            "New size: 5; reason: cpu resource utilization (percentage of request) above target"
        );
        assert_eq!(
            p.current_metrics,
            vec![json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageValue": "1000m", "averageUtilization": 1000}}})]
        );
    }

    #[test]
    fn idle_pods_scale_down_only_after_the_stabilization_window() {
        let mut s = spec(2, 5, 50);
        let history = History {
            recommendations: vec![Recommended {
                replicas: 5,
                at: now() - jiff::SignedDuration::from_secs(60),
            }],
            ..Default::default()
        };
        // The default 300 s window still holds the recommendation of 5 made a minute ago.
        let held = run(&s, 5, 0.0, &history);
        assert_eq!(held.desired, 5);
        assert_eq!(held.rescale, None);
        assert_eq!(reason(&held, "AbleToScale"), "ScaleDownStabilized");
        // A 30 s window has let it go: down to the minimum, limited by it.
        s.behavior = Some(
            berth_shared::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior {
                scale_down: Some(HPAScalingRules {
                    stabilization_window_seconds: Some(30),
                    ..Default::default()
                }),
                scale_up: None,
            },
        );
        let down = run(&s, 5, 0.0, &history);
        assert_rescale(&down, 2, "All metrics below target");
        assert_eq!(reason(&down, "ScalingLimited"), "TooFewReplicas");
    }

    #[test]
    fn a_target_outside_the_bounds_is_brought_inside_without_metrics() {
        let p = run(&spec(2, 5, 50), 8, 50.0, &History::default());
        assert_rescale(&p, 5, "Current number of replicas above Spec.MaxReplicas");
        let p = run(&spec(3, 5, 50), 1, 50.0, &History::default());
        assert_rescale(&p, 3, "Current number of replicas below Spec.MinReplicas");
    }

    #[test]
    fn a_target_scaled_to_zero_disables_scaling() {
        let p = run(&spec(1, 5, 50), 0, 0.0, &History::default());
        assert_eq!((p.desired, p.rescale.clone()), (0, None));
        assert_eq!(reason(&p, "ScalingActive"), "ScalingDisabled");
    }

    #[test]
    fn without_metrics_nothing_is_rescaled_and_the_failure_is_said() {
        let s = spec(1, 5, 50);
        let pods = pods(2);
        let usage = BTreeMap::new();
        let p = plan(&Observed {
            spec: &s,
            current: 2,
            pods: &pods,
            usage: &usage,
            history: &History::default(),
            now: now(),
        });
        assert_eq!((p.desired, p.rescale.clone()), (2, None));
        assert_eq!(reason(&p, "ScalingActive"), "FailedGetResourceMetric");
        let reasons: Vec<&str> = p.events.iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            ["FailedGetResourceMetric", "FailedComputeMetricsReplicas"]
        );
        assert!(
            p.events[0]
                .message
                .contains("no metrics returned from resource metrics API")
        );
    }

    #[test]
    fn usage_at_the_target_keeps_the_replicas() {
        let p = run(&spec(1, 10, 50), 4, 52.0, &History::default());
        assert_eq!((p.desired, p.rescale.clone()), (4, None));
        assert_eq!(reason(&p, "AbleToScale"), "ReadyForNewScale");
        assert_eq!(reason(&p, "ScalingLimited"), "DesiredWithinRange");
    }
}
