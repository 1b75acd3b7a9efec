//! The replica count a resource metric asks for, as upstream's `ReplicaCalculator`
//! (`GetResourceReplicas`, `calcPlainMetricReplicas`): the ready pods' usage against their
//! requests, a 10% tolerance, pods without metrics counted as at the target when scaling down
//! and as idle when scaling up, and not-ready pods counted as idle only when scaling up.
//!
//! Planner: pure, no I/O.

use std::collections::BTreeMap;

/// Upstream's default `--horizontal-pod-autoscaler-tolerance`.
pub const TOLERANCE: f64 = 0.1;

/// A pod as the calculation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSample {
    pub name: String,
    /// The sum of its containers' requests for the resource (millicores or bytes); `None` when
    /// a container requests none (utilization cannot be computed then).
    pub request: Option<f64>,
    /// Ready, and past its CPU initialization period (upstream's not-yet-ready rule).
    pub ready: bool,
    /// Deleted or failed pods are left out altogether.
    pub ignored: bool,
}

/// What the resource is measured against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Percent of the pods' requests (`type: Utilization`).
    Utilization(f64),
    /// Per-pod usage (`type: AverageValue`), in the metric's unit.
    AverageValue(f64),
}

/// The recommendation and what it was computed from (for `status.currentMetrics`).
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    pub replicas: i32,
    /// Current utilization in percent of requests (Utilization targets).
    pub utilization: Option<i32>,
    /// Current average usage per pod (the raw value).
    pub average: f64,
}

/// Why no recommendation could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    #[error("no metrics returned from resource metrics API")]
    NoMetrics,
    #[error("missing request for {resource} in container of pod {pod}")]
    MissingRequest { resource: String, pod: String },
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoMetricsForTargetedPods,
}

/// Usage ratio against the target, the utilization (percent) and the raw average, over the
/// pods in `usage`.
fn ratio(
    usage: &BTreeMap<String, f64>,
    pods: &BTreeMap<&str, &PodSample>,
    target: Target,
) -> Result<(f64, Option<i32>, f64), CalcError> {
    let total: f64 = usage.values().sum();
    let n = usage.len() as f64;
    if n == 0.0 {
        return Err(CalcError::NoMetricsForTargetedPods);
    }
    match target {
        Target::Utilization(want) => {
            let mut requests = 0.0;
            for name in usage.keys() {
                requests += pods
                    .get(name.as_str())
                    .and_then(|p| p.request)
                    .unwrap_or(0.0);
            }
            if requests <= 0.0 {
                return Err(CalcError::NoMetricsForTargetedPods);
            }
            let utilization = total * 100.0 / requests;
            Ok((utilization / want, Some(utilization as i32), total / n))
        }
        Target::AverageValue(want) => Ok(((total / n) / want, None, total / n)),
    }
}

/// The replicas `target` asks for, given the scale's current replicas, its pods and the
/// usage reported for them (by pod name), as upstream computes them.
pub fn resource_replicas(
    current: i32,
    pods: &[PodSample],
    usage: &BTreeMap<String, f64>,
    target: Target,
    resource: &str,
) -> Result<Recommendation, CalcError> {
    if usage.is_empty() {
        return Err(CalcError::NoMetrics);
    }
    let by_name: BTreeMap<&str, &PodSample> = pods.iter().map(|p| (p.name.as_str(), p)).collect();
    if let Target::Utilization(_) = target
        && let Some(p) = pods.iter().find(|p| !p.ignored && p.request.is_none())
    {
        return Err(CalcError::MissingRequest {
            resource: resource.to_string(),
            pod: p.name.clone(),
        });
    }
    let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
    let (mut ready, mut unready, mut missing) = (0usize, Vec::new(), Vec::new());
    for p in pods.iter().filter(|p| !p.ignored) {
        match usage.get(&p.name) {
            None => missing.push(p),
            Some(_) if !p.ready => unready.push(p),
            Some(u) => {
                ready += 1;
                metrics.insert(p.name.clone(), *u);
            }
        }
    }
    let (usage_ratio, utilization, average) = ratio(&metrics, &by_name, target)?;
    let scale_up_with_unready = !unready.is_empty() && usage_ratio > 1.0;
    if !scale_up_with_unready && missing.is_empty() {
        if (1.0 - usage_ratio).abs() <= TOLERANCE {
            return Ok(Recommendation {
                replicas: current,
                utilization,
                average,
            });
        }
        return Ok(Recommendation {
            replicas: (usage_ratio * ready as f64).ceil() as i32,
            utilization,
            average,
        });
    }
    for p in &missing {
        let assumed = if usage_ratio < 1.0 {
            // Scaling down: a pod without metrics is taken to use exactly the target.
            match target {
                Target::Utilization(want) => p.request.unwrap_or(0.0) * want / 100.0,
                Target::AverageValue(want) => want,
            }
        } else {
            // Scaling up: it is taken to use nothing.
            0.0
        };
        if usage_ratio != 1.0 {
            metrics.insert(p.name.clone(), assumed);
        }
    }
    if scale_up_with_unready {
        for p in &unready {
            metrics.insert(p.name.clone(), 0.0);
        }
    }
    let (new_ratio, _, _) = ratio(&metrics, &by_name, target)?;
    let keep = Recommendation {
        replicas: current,
        utilization,
        average,
    };
    if (1.0 - new_ratio).abs() <= TOLERANCE
        || (usage_ratio < 1.0 && new_ratio > 1.0)
        || (usage_ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(keep);
    }
    let replicas = (new_ratio * metrics.len() as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(keep);
    }
    Ok(Recommendation {
        replicas,
        utilization,
        average,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, request: f64, ready: bool) -> PodSample {
        PodSample {
            name: name.into(),
            request: Some(request),
            ready,
            ignored: false,
        }
    }

    /// A case: its name, the usage by pod and the replicas wanted.
    type Case<'a> = (&'a str, &'a [(&'a str, f64)], i32);

    fn usage(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(n, u)| (n.to_string(), *u)).collect()
    }

    fn replicas(current: i32, pods: &[PodSample], u: &[(&str, f64)], target: Target) -> i32 {
        resource_replicas(current, pods, &usage(u), target, "cpu")
            .expect("a recommendation")
            .replicas
    }

    /// Three ready pods requesting 100m each.
    fn three_ready() -> [PodSample; 3] {
        [
            pod("a", 100.0, true),
            pod("b", 100.0, true),
            pod("c", 100.0, true),
        ]
    }

    /// Checks each case against `pods` at `target`, with one current replica per pod.
    fn check(pods: &[PodSample], target: Target, cases: &[Case]) {
        let current = i32::try_from(pods.len()).expect("a few pods");
        for (name, u, want) in cases {
            assert_eq!(replicas(current, pods, u, target), *want, "{name}");
        }
    }

    #[test]
    fn the_recommendation_is_the_ratio_times_the_ready_pods_with_a_ten_percent_tolerance() {
        let cases: &[Case] = &[
            (
                "at the target: stay",
                &[("a", 50.0), ("b", 50.0), ("c", 50.0)],
                3,
            ),
            (
                "within 10% above: stay",
                &[("a", 54.0), ("b", 54.0), ("c", 54.0)],
                3,
            ),
            (
                "within 10% below: stay",
                &[("a", 46.0), ("b", 46.0), ("c", 46.0)],
                3,
            ),
            (
                "twice the target: double",
                &[("a", 100.0), ("b", 100.0), ("c", 100.0)],
                6,
            ),
            (
                "each burning a core of 100m: 20x",
                &[("a", 1000.0), ("b", 1000.0), ("c", 1000.0)],
                60,
            ),
            ("idle: one", &[("a", 1.0), ("b", 1.0), ("c", 1.0)], 1),
            (
                "a quarter: ceil(0.5 * 3) = 2",
                &[("a", 25.0), ("b", 25.0), ("c", 25.0)],
                2,
            ),
        ];
        check(&three_ready(), Target::Utilization(50.0), cases);
    }

    #[test]
    fn pods_without_metrics_count_as_at_the_target_down_and_idle_up() {
        let cases: &[Case] = &[
            // Down: a, b at 10% and c assumed at 50% → (10+10+50)/300 = 23% → ratio 0.47 → 2.
            (
                "scaling down, the missing pod at the target",
                &[("a", 10.0), ("b", 10.0)],
                2,
            ),
            // Up: a, b at 100% and c assumed idle → 200/300 = 67% → ratio 1.33 → 4.
            (
                "scaling up, the missing pod idle",
                &[("a", 100.0), ("b", 100.0)],
                4,
            ),
            // Up only a little: with c idle the ratio falls below 1 → no change.
            (
                "a small rise the missing pod cancels",
                &[("a", 60.0), ("b", 60.0)],
                3,
            ),
        ];
        check(&three_ready(), Target::Utilization(50.0), cases);
    }

    #[test]
    fn not_ready_pods_count_as_idle_only_when_scaling_up() {
        let pods = [pod("a", 100.0, true), pod("b", 100.0, false)];
        let cases: &[Case] = &[
            // Up: a at 200%, b not ready counted idle → 200/200 = 100% → ratio 2 → 4.
            ("scaling up, b idle", &[("a", 200.0), ("b", 500.0)], 4),
            // Down: b left out; a at 10% → ratio 0.2 → ceil(0.2 * 1) = 1.
            ("scaling down, b left out", &[("a", 10.0), ("b", 500.0)], 1),
        ];
        check(&pods, Target::Utilization(50.0), cases);
    }

    #[test]
    fn average_value_targets_divide_the_mean_usage() {
        let pods = [pod("a", 0.0, true), pod("b", 0.0, true)];
        let cases: &[Case] = &[("300m each", &[("a", 300.0), ("b", 300.0)], 6)];
        check(&pods, Target::AverageValue(100.0), cases);
    }

    #[test]
    fn a_pod_without_a_request_or_no_metrics_at_all_is_an_error() {
        let mut no_request = pod("a", 0.0, true);
        no_request.request = None;
        assert_eq!(
            resource_replicas(
                1,
                &[no_request],
                &usage(&[("a", 5.0)]),
                Target::Utilization(50.0),
                "cpu"
            ),
            Err(CalcError::MissingRequest {
                resource: "cpu".into(),
                pod: "a".into()
            })
        );
        assert_eq!(
            resource_replicas(
                1,
                &[pod("a", 100.0, true)],
                &usage(&[]),
                Target::Utilization(50.0),
                "cpu"
            ),
            Err(CalcError::NoMetrics)
        );
    }
}
