//! The pod's QoS class (upstream's `ComputePodQOS`): written by admission into
//! `status.qosClass` and read by the agent, which places the pod's cgroup by it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

use crate::quantity::Quantity;

/// Upstream `ComputePodQOS`: Guaranteed when every container limits cpu and memory and the
/// summed requests equal the summed limits; BestEffort when nothing is requested or limited.
pub fn qos_class(spec: &PodSpec) -> &'static str {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let res = c.resources.as_ref();
        for (name, q) in res.and_then(|r| r.requests.as_ref()).into_iter().flatten() {
            let Some(name) = qos_resource(name) else {
                continue;
            };
            if let Some(v) = Quantity::parse(&q.0).ok().filter(Quantity::is_positive) {
                let sum = requests.entry(name).or_default();
                *sum = sum.saturating_add(v);
            }
        }
        let mut found = 0;
        for (name, q) in res.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
            let Some(name) = qos_resource(name) else {
                continue;
            };
            if let Some(v) = Quantity::parse(&q.0).ok().filter(Quantity::is_positive) {
                found += 1;
                let sum = limits.entry(name).or_default();
                *sum = sum.saturating_add(v);
            }
        }
        if found < 2 {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let equal = requests
        .iter()
        .all(|(k, r)| limits.get(k).is_some_and(|l| l.cmp_to(r).is_eq()));
    if guaranteed && equal && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn qos_resource(name: &str) -> Option<&'static str> {
    match name {
        "cpu" => Some("cpu"),
        "memory" => Some("memory"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

    use super::*;

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let list = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), WireQuantity(v.to_string())))
                    .collect()
            })
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_class_follows_upstreams_compute_pod_qos() {
        let guaranteed = [("cpu", "500m"), ("memory", "64Mi")];
        let cases: &[(&str, Vec<Container>, Vec<Container>, &str)] = &[
            (
                "nothing requested or limited",
                vec![container(&[], &[])],
                vec![],
                "BestEffort",
            ),
            (
                "only other resources",
                vec![container(&[("ephemeral-storage", "1Gi")], &[])],
                vec![],
                "BestEffort",
            ),
            (
                "zero requests count as none",
                vec![container(&[("cpu", "0")], &[])],
                vec![],
                "BestEffort",
            ),
            (
                "a request without limits",
                vec![container(&[("cpu", "100m")], &[])],
                vec![],
                "Burstable",
            ),
            (
                "limits equal to requests",
                vec![container(&guaranteed, &guaranteed)],
                vec![],
                "Guaranteed",
            ),
            (
                "a quantity spelled differently is equal",
                vec![container(
                    &[("cpu", "0.5"), ("memory", "64Mi")],
                    &guaranteed,
                )],
                vec![],
                "Guaranteed",
            ),
            (
                "only cpu limited",
                vec![container(&[("cpu", "1")], &[("cpu", "1")])],
                vec![],
                "Burstable",
            ),
            (
                "requests below limits",
                vec![container(
                    &[("cpu", "100m"), ("memory", "64Mi")],
                    &guaranteed,
                )],
                vec![],
                "Burstable",
            ),
            (
                "one container without limits",
                vec![container(&guaranteed, &guaranteed), container(&[], &[])],
                vec![],
                "Burstable",
            ),
            (
                "an init container counts",
                vec![container(&guaranteed, &guaranteed)],
                vec![container(&[("cpu", "1")], &[])],
                "Burstable",
            ),
        ];
        for (name, containers, init, want) in cases {
            let spec = PodSpec {
                containers: containers.clone(),
                init_containers: (!init.is_empty()).then(|| init.clone()),
                ..Default::default()
            };
            assert_eq!(qos_class(&spec), *want, "{name}");
        }
    }
}
