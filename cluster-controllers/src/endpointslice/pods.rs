//! Planner: pure, no I/O.
//!
//! Which pods back a Service and how, shared by the EndpointSlice and Endpoints controllers
//! (upstream's `endpointutil` and `podutil` helpers):
//!
//! - a Service is served from pods only when it has a non-empty selector and is not
//!   `ExternalName`; it selects the pods of its own namespace whose labels match;
//! - a pod counts (`ShouldPodBeInEndpoints`) when it has an IPv4 pod IP and is not terminal
//!   (phase `Succeeded`/`Failed`); a terminating pod (`deletionTimestamp` set) only when the
//!   caller includes terminating pods;
//! - `serving` is the pod's `Ready` condition; `ready` is `serving` and not terminating, or
//!   always true with `spec.publishNotReadyAddresses`;
//! - `hostname` is the pod's `spec.hostname` when its `spec.subdomain` names the Service;
//! - each Service port resolves per pod (`FindPort`): a number is itself, a name is the
//!   `containerPort` of the pod's container port of that name and protocol; a port that does
//!   not resolve is left out of that pod's port set.

use berth_shared::k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use berth_shared::selector::LabelSelector;

/// One resolved port of a pod for a Service port. Ordered so that port sets can be keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResolvedPort {
    pub name: Option<String>,
    pub port: i32,
    pub protocol: String,
    pub app_protocol: Option<String>,
}

/// A selected pod judged for one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEndpoint {
    pub ip: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub node_name: Option<String>,
    pub hostname: Option<String>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// The Service's ports this pod resolves, in the Service's order.
    pub ports: Vec<ResolvedPort>,
}

impl PodEndpoint {
    /// The reference to the pod both Endpoints addresses and slice endpoints carry.
    pub fn target_ref(&self) -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".to_string()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..ObjectReference::default()
        }
    }
}

/// The selector a Service selects pods with: `None` for a Service without one (or an empty
/// one), or an `ExternalName` Service; their endpoints are someone else's business.
pub fn selector(svc: &Service) -> Option<LabelSelector> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector
        .as_ref()
        .filter(|s| !s.is_empty())
        .map(LabelSelector::from_set)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod's IPv4 address (`status.podIPs`, else `status.podIP`): single-stack IPv4 only.
fn ipv4(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    listed
        .chain(status.pod_ip.as_deref())
        .find(|ip| !ip.is_empty() && !ip.contains(':'))
        .map(String::from)
}

/// Upstream `FindPort`: the container port a Service port targets in this pod.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let spec = pod.spec.as_ref()?;
            spec.containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// The pod's resolved ports for every Service port that resolves.
fn resolve_ports(svc: &Service, pod: &Pod) -> Vec<ResolvedPort> {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref());
    ports
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            Some(ResolvedPort {
                name: sp.name.clone().filter(|n| !n.is_empty()),
                port: find_port(pod, sp)?,
                protocol: sp.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// Upstream `ShouldSetHostname`: the pod's hostname, when its subdomain is the Service.
fn hostname(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let host = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    let same_ns = pod.metadata.namespace == svc.metadata.namespace;
    (same_ns && spec.subdomain.is_some() && spec.subdomain == svc.metadata.name)
        .then(|| host.to_string())
}

/// The pods among `pods` that back `svc` (its namespace, its selector, an IPv4 address, not
/// terminal; terminating ones only if `include_terminating`), judged, sorted by IP then name.
/// Empty for a Service without a selector.
pub fn endpoints_of(svc: &Service, pods: &[&Pod], include_terminating: bool) -> Vec<PodEndpoint> {
    let Some(sel) = selector(svc) else {
        return Vec::new();
    };
    let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let mut out: Vec<PodEndpoint> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or_default() == ns)
        .filter(|p| sel.matches_opt(p.metadata.labels.as_ref()))
        .filter_map(|pod| {
            let ip = ipv4(pod)?;
            let terminating = pod.metadata.deletion_timestamp.is_some();
            if is_terminal(pod) || (terminating && !include_terminating) {
                return None;
            }
            let serving = is_ready(pod);
            Some(PodEndpoint {
                ip,
                name: pod.metadata.name.clone().unwrap_or_default(),
                namespace: ns.to_string(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                node_name: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty()),
                hostname: hostname(svc, pod),
                ready: publish || (serving && !terminating),
                serving,
                terminating,
                ports: resolve_ports(svc, pod),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.ip, &a.name).cmp(&(&b.ip, &b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn svc(spec: Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": spec}))
        .unwrap()
    }

    fn pod(name: &str, ns: &str, labels: Value, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": status}))
        .unwrap()
    }

    fn running(ip: &str, ready: bool) -> Value {
        let s = if ready { "True" } else { "False" };
        json!({"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": s}]})
    }

    fn names(eps: &[PodEndpoint]) -> Vec<&str> {
        eps.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn a_service_selects_matching_pods_of_its_own_namespace_only() {
        let s = svc(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        let a = pod(
            "a",
            "default",
            json!({"app": "web"}),
            running("10.42.0.2", true),
        );
        let b = pod(
            "b",
            "other",
            json!({"app": "web"}),
            running("10.42.0.3", true),
        );
        let c = pod(
            "c",
            "default",
            json!({"app": "db"}),
            running("10.42.0.4", true),
        );
        let eps = endpoints_of(&s, &[&a, &b, &c], true);
        assert_eq!(names(&eps), ["a"]);
    }

    #[test]
    fn services_without_a_selector_or_of_type_external_name_select_nothing() {
        let a = pod(
            "a",
            "default",
            json!({"app": "web"}),
            running("10.42.0.2", true),
        );
        let none = svc(json!({"ports": [{"port": 80}]}));
        let empty = svc(json!({"selector": {}, "ports": [{"port": 80}]}));
        let external = svc(
            json!({"type": "ExternalName", "externalName": "example.com",
            "selector": {"app": "web"}}),
        );
        for s in [none, empty, external] {
            assert!(endpoints_of(&s, &[&a], true).is_empty());
        }
    }

    #[test]
    fn pods_without_an_ip_or_in_a_terminal_phase_are_left_out() {
        let s = svc(json!({"selector": {"app": "web"}}));
        let l = json!({"app": "web"});
        let no_ip = pod("no-ip", "default", l.clone(), json!({"phase": "Pending"}));
        let done = pod(
            "done",
            "default",
            l.clone(),
            json!({"phase": "Succeeded", "podIP": "10.42.0.5"}),
        );
        let failed = pod(
            "failed",
            "default",
            l.clone(),
            json!({"phase": "Failed", "podIP": "10.42.0.6"}),
        );
        let v6 = pod("v6", "default", l.clone(), running("fd00::1", true));
        let ok = pod("ok", "default", l, running("10.42.0.7", false));
        let eps = endpoints_of(&s, &[&no_ip, &done, &failed, &v6, &ok], true);
        assert_eq!(names(&eps), ["ok"]);
    }

    #[test]
    fn readiness_follows_the_ready_condition_unless_not_ready_addresses_are_published() {
        let l = json!({"app": "web"});
        let ready = pod("r", "default", l.clone(), running("10.42.0.2", true));
        let not = pod("n", "default", l, running("10.42.0.3", false));
        let s = svc(json!({"selector": {"app": "web"}}));
        let eps = endpoints_of(&s, &[&ready, &not], true);
        assert_eq!(
            eps.iter().map(|e| (e.ready, e.serving)).collect::<Vec<_>>(),
            [(true, true), (false, false)]
        );
        let publish = svc(json!({"selector": {"app": "web"}, "publishNotReadyAddresses": true}));
        let eps = endpoints_of(&publish, &[&ready, &not], true);
        assert!(eps.iter().all(|e| e.ready));
        assert!(!eps[1].serving, "serving stays the pod's own readiness");
    }

    #[test]
    fn a_terminating_pod_serves_but_is_not_ready_and_only_when_asked_for() {
        let mut p = pod(
            "t",
            "default",
            json!({"app": "web"}),
            running("10.42.0.2", true),
        );
        p.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
        let s = svc(json!({"selector": {"app": "web"}}));
        let eps = endpoints_of(&s, &[&p], true);
        assert_eq!(
            (eps[0].ready, eps[0].serving, eps[0].terminating),
            (false, true, true)
        );
        assert!(endpoints_of(&s, &[&p], false).is_empty());
    }

    #[test]
    fn a_named_target_port_resolves_per_pod_and_is_left_out_where_it_does_not() {
        let s = svc(json!({"selector": {"app": "web"}, "ports": [
            {"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"},
            {"name": "udp", "port": 53, "targetPort": "http", "protocol": "UDP"},
            {"name": "metrics", "port": 9090, "targetPort": 9100, "protocol": "TCP"}]}));
        let with = pod(
            "with",
            "default",
            json!({"app": "web"}),
            running("10.42.0.2", true),
        );
        let mut without = with.clone();
        without.metadata.name = Some("without".into());
        if let Some(spec) = without.spec.as_mut() {
            spec.containers[0].ports = None;
        }
        let eps = endpoints_of(&s, &[&with, &without], true);
        let ports = |e: &PodEndpoint| e.ports.iter().map(|p| p.port).collect::<Vec<_>>();
        assert_eq!(ports(&eps[0]), [8080, 9100], "no UDP port is named http");
        assert_eq!(ports(&eps[1]), [9100]);
    }

    #[test]
    fn the_hostname_is_set_only_when_the_pods_subdomain_is_the_service() {
        let s = svc(json!({"selector": {"app": "web"}}));
        let mut p = pod(
            "a",
            "default",
            json!({"app": "web"}),
            running("10.42.0.2", true),
        );
        if let Some(spec) = p.spec.as_mut() {
            spec.hostname = Some("a-0".into());
        }
        assert_eq!(endpoints_of(&s, &[&p], true)[0].hostname, None);
        if let Some(spec) = p.spec.as_mut() {
            spec.subdomain = Some("other".into());
        }
        assert_eq!(endpoints_of(&s, &[&p], true)[0].hostname, None);
        if let Some(spec) = p.spec.as_mut() {
            spec.subdomain = Some("web".into());
        }
        assert_eq!(
            endpoints_of(&s, &[&p], true)[0].hostname.as_deref(),
            Some("a-0")
        );
    }
}
