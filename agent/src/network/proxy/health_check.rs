//! What the health check node ports of `externalTrafficPolicy: Local` LoadBalancers answer
//! (kube-proxy's service health server): on `spec.healthCheckNodePort`, 200 with the count of
//! this node's ready endpoints of the Service when it has any, 503 otherwise, so an external
//! balancer sends traffic only to nodes that keep it local.
//!
//! Planner: pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use crate::network::service_state::named_spec;

/// One health check port's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub namespace: String,
    pub name: String,
    /// This node's ready endpoint addresses of the Service.
    pub local_endpoints: usize,
}

/// The health check ports this node serves: every LoadBalancer with `externalTrafficPolicy:
/// Local` and a `healthCheckNodePort`.
pub fn health_checks(
    node: &str,
    services: &[Service],
    slices: &[EndpointSlice],
) -> BTreeMap<u16, HealthCheck> {
    let mut out = BTreeMap::new();
    for svc in services {
        let Some((ns, name, spec)) = named_spec(svc) else {
            continue;
        };
        if spec.type_.as_deref() != Some("LoadBalancer")
            || spec.external_traffic_policy.as_deref() != Some("Local")
        {
            continue;
        }
        let Some(port) = spec
            .health_check_node_port
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
        else {
            continue;
        };
        let local: BTreeSet<&String> = slices
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                    .map(String::as_str)
                    == Some(name)
            })
            .flat_map(|s| &s.endpoints)
            .filter(|e| e.node_name.as_deref() == Some(node))
            .filter(|e| {
                let c = e.conditions.as_ref();
                c.and_then(|c| c.ready).unwrap_or(true)
                    && !c.and_then(|c| c.terminating).unwrap_or(false)
            })
            .flat_map(|e| &e.addresses)
            .collect();
        out.insert(
            port,
            HealthCheck {
                namespace: ns.to_string(),
                name: name.to_string(),
                local_endpoints: local.len(),
            },
        );
    }
    out
}

/// The HTTP response (head and body) for `check`, as kube-proxy's.
pub fn response(check: &HealthCheck) -> String {
    let body = json!({
        "service": {"namespace": check.namespace, "name": check.name},
        "localEndpoints": check.local_endpoints,
        "serviceProxyHealthy": true,
    })
    .to_string();
    let status = if check.local_endpoints > 0 {
        "200 OK"
    } else {
        "503 Service Unavailable"
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        check.local_endpoints,
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(policy: &str, port: Option<i32>) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                     "healthCheckNodePort": port, "ports": [{"port": 80}]}
        }))
        .unwrap()
    }

    fn slice() -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.42.1.5"], "nodeName": "n1", "conditions": {"ready": true}},
                {"addresses": ["10.42.1.6"], "nodeName": "n1", "conditions": {"ready": false}},
                {"addresses": ["10.42.2.5"], "nodeName": "n2", "conditions": {"ready": true}}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn local_load_balancers_count_this_nodes_ready_endpoints() {
        let checks = health_checks("n1", &[svc("Local", Some(31000))], &[slice()]);
        assert_eq!(
            checks[&31000],
            HealthCheck {
                namespace: "shop".into(),
                name: "web".into(),
                local_endpoints: 1
            }
        );
        let checks = health_checks("n3", &[svc("Local", Some(31000))], &[slice()]);
        assert_eq!(checks[&31000].local_endpoints, 0);
    }

    #[test]
    fn cluster_policy_or_no_port_serves_nothing() {
        assert!(health_checks("n1", &[svc("Cluster", Some(31000))], &[slice()]).is_empty());
        assert!(health_checks("n1", &[svc("Local", None)], &[slice()]).is_empty());
    }

    #[test]
    fn the_answer_is_200_with_endpoints_and_503_without() {
        let mut check = HealthCheck {
            namespace: "shop".into(),
            name: "web".into(),
            local_endpoints: 2,
        };
        let ok = response(&check);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        let body = ok.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["service"], json!({"namespace": "shop", "name": "web"}));
        assert_eq!(v["localEndpoints"], 2);
        check.local_endpoints = 0;
        assert!(response(&check).starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
    }
}
