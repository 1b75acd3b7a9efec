//! Planner: pure, no I/O.
//!
//! The `status.loadBalancer.ingress` of an Ingress of Berth's class: the InternalIPs of the
//! Ready nodes whose agent serves ingress (its Node carries the `ingress.berth.io/ports`
//! annotation, not `none`), sorted — every such agent answers for every Ingress, as k3s lists
//! its nodes for Traefik's. Ingresses of other classes are left alone.
//!
//! Which Ingresses are ours is [`is_ours`], the rule the agents' proxy serves them by.

use berth_shared::ingress_class::is_ours;
use berth_shared::k8s_openapi::api::networking::v1::{
    Ingress, IngressClass, IngressLoadBalancerIngress,
};
use core::net::Ipv4Addr;

/// The addresses the status lists now.
pub fn listed(ing: &Ingress) -> Vec<String> {
    ing.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// The status entries to write for `ing`, or `None` when its status is right as it is (or it
/// is not ours). `serving` are the serving Ready nodes' addresses, sorted.
pub fn plan_status(
    ing: &Ingress,
    classes: &[IngressClass],
    serving: &[Ipv4Addr],
) -> Option<Vec<IngressLoadBalancerIngress>> {
    if !is_ours(ing, classes) {
        return None;
    }
    let want: Vec<String> = serving.iter().map(Ipv4Addr::to_string).collect();
    if listed(ing) == want {
        return None;
    }
    Some(
        want.into_iter()
            .map(|ip| IngressLoadBalancerIngress {
                ip: Some(ip),
                ..Default::default()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::ingress_class::{
        CONTROLLER, DEFAULT_CLASS_ANNOTATION, LEGACY_CLASS_ANNOTATION,
    };
    use serde_json::{Value, json};

    fn ingress(spec: Value, annotations: Value, status: Value) -> Ingress {
        serde_json::from_value(json!({"metadata": {"name": "i", "namespace": "default",
            "annotations": annotations}, "spec": spec, "status": status}))
        .unwrap()
    }

    fn class(name: &str, controller: &str, default: bool) -> IngressClass {
        serde_json::from_value(json!({"metadata": {"name": name,
            "annotations": {DEFAULT_CLASS_ANNOTATION: default.to_string()}},
            "spec": {"controller": controller}}))
        .unwrap()
    }

    #[test]
    fn our_ingresses_list_the_serving_nodes_and_others_are_left_alone() {
        let classes = [
            class("berth", CONTROLLER, true),
            class("nginx", "k8s.io/ingress-nginx", false),
        ];
        let nodes: Vec<Ipv4Addr> = vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        let ips = |p: Option<Vec<IngressLoadBalancerIngress>>| {
            p.map(|v| v.into_iter().filter_map(|i| i.ip).collect::<Vec<_>>())
        };
        let cases = [
            (
                "named berth",
                json!({"ingressClassName": "berth"}),
                json!({}),
                json!({}),
                Some(vec!["10.0.0.1", "10.0.0.2"]),
            ),
            (
                "default class",
                json!({}),
                json!({}),
                json!({}),
                Some(vec!["10.0.0.1", "10.0.0.2"]),
            ),
            (
                "already listed",
                json!({"ingressClassName": "berth"}),
                json!({}),
                json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}}),
                None,
            ),
            (
                "one node gone",
                json!({"ingressClassName": "berth"}),
                json!({}),
                json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}]}}),
                Some(vec!["10.0.0.1", "10.0.0.2"]),
            ),
            (
                "nginx's",
                json!({"ingressClassName": "nginx"}),
                json!({}),
                json!({}),
                None,
            ),
            (
                "legacy annotation",
                json!({}),
                json!({LEGACY_CLASS_ANNOTATION: "nginx"}),
                json!({}),
                None,
            ),
        ];
        for (what, spec, annotations, status, want) in cases {
            let ing = ingress(spec, annotations, status);
            let want = want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(ips(plan_status(&ing, &classes, &nodes)), want, "{what}");
        }
        let listed_ing = ingress(
            json!({"ingressClassName": "berth"}),
            json!({}),
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}),
        );
        assert_eq!(
            ips(plan_status(&listed_ing, &classes, &[])),
            Some(vec![]),
            "no serving node: the list is emptied"
        );
    }
}
