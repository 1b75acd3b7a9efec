//! Service, Endpoints and EndpointSlice admission: upstream's `SetDefaults_Service` and the
//! create/update strategy's carry-overs (an update that leaves out the allocated cluster IP or
//! node ports keeps them), and `ValidateService`, `ValidateEndpoints`, `ValidateEndpointSlice`
//! with upstream's paths and messages. Allocating cluster IPs and node ports is the server's
//! (it needs every other Service); this module only checks their syntax.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ClientIPConfig, EndpointAddress, EndpointPort, Endpoints, Service, ServicePort, ServiceSpec,
    SessionAffinityConfig,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::field::{FieldError, Path};
use super::meta::validate_labels;
use super::names::{dns1123_label, dns1123_subdomain, each_invalid, port_name, port_num};

pub const CLUSTER_IP: &str = "ClusterIP";
pub const NODE_PORT: &str = "NodePort";
pub const LOAD_BALANCER: &str = "LoadBalancer";
pub const EXTERNAL_NAME: &str = "ExternalName";
/// The `clusterIP` of a headless Service.
pub const HEADLESS: &str = "None";
/// Upstream's default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: i32 = 10_800;
const MAX_AFFINITY_TIMEOUT: i32 = 86_400;

/// The Service's type, `ClusterIP` when unset.
pub fn service_type(spec: &ServiceSpec) -> &str {
    spec.type_.as_deref().unwrap_or(CLUSTER_IP)
}

/// Whether the Service is headless (`clusterIP: None`).
pub fn is_headless(spec: &ServiceSpec) -> bool {
    spec.cluster_ip.as_deref() == Some(HEADLESS)
}

/// Whether the type gets a node port on every node.
pub fn wants_node_ports(spec: &ServiceSpec) -> bool {
    matches!(service_type(spec), NODE_PORT | LOAD_BALANCER)
}

/// Upstream `SetDefaults_Service` and `SetDefaults_ServicePort`, with the update strategy's
/// carry-over of what the server allocated (`old`).
pub(crate) fn default_service(svc: &mut Service, old: Option<&Service>) {
    let spec = svc.spec.get_or_insert_with(Default::default);
    spec.type_.get_or_insert_with(|| CLUSTER_IP.to_string());
    spec.session_affinity
        .get_or_insert_with(|| "None".to_string());
    if spec.session_affinity.as_deref() == Some("ClientIP") {
        let cfg = spec
            .session_affinity_config
            .get_or_insert_with(SessionAffinityConfig::default);
        let ip = cfg.client_ip.get_or_insert_with(ClientIPConfig::default);
        ip.timeout_seconds.get_or_insert(DEFAULT_AFFINITY_TIMEOUT);
    }
    for p in spec.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".to_string());
        let unset = match &p.target_port {
            None => true,
            Some(IntOrString::Int(0)) => true,
            Some(IntOrString::String(s)) => s.is_empty(),
            Some(IntOrString::Int(_)) => false,
        };
        if unset {
            p.target_port = Some(IntOrString::Int(p.port));
        }
    }
    let kind = service_type(spec).to_string();
    if kind != EXTERNAL_NAME {
        spec.internal_traffic_policy
            .get_or_insert_with(|| "Cluster".to_string());
    }
    if externally_accessible(spec) {
        spec.external_traffic_policy
            .get_or_insert_with(|| "Cluster".to_string());
    }
    if kind == LOAD_BALANCER {
        spec.allocate_load_balancer_node_ports.get_or_insert(true);
    }
    if let Some(old_spec) = old.and_then(|o| o.spec.as_ref()) {
        drop_type_dependent_fields(spec, old_spec);
        carry_allocations(spec, old_spec);
    }
    // clusterIP and clusterIPs name the same address; one given fills the other.
    match (&spec.cluster_ip, &spec.cluster_ips) {
        (Some(ip), None) if !ip.is_empty() => spec.cluster_ips = Some(vec![ip.clone()]),
        (None, Some(ips)) if !ips.is_empty() => spec.cluster_ip = Some(ips[0].clone()),
        _ => {}
    }
    if kind != EXTERNAL_NAME {
        let headless_without_selector =
            is_headless(spec) && spec.selector.as_ref().is_none_or(|s| s.is_empty());
        spec.ip_family_policy.get_or_insert_with(|| {
            if headless_without_selector {
                "RequireDualStack".to_string()
            } else {
                "SingleStack".to_string()
            }
        });
        spec.ip_families
            .get_or_insert_with(|| vec!["IPv4".to_string()]);
    }
}

/// Whether traffic reaches the Service from outside the cluster (upstream's
/// `ExternallyAccessible`): node ports, a load balancer, or external IPs.
fn externally_accessible(spec: &ServiceSpec) -> bool {
    wants_node_ports(spec)
        || (kind_is(spec, CLUSTER_IP) && spec.external_ips.as_ref().is_some_and(|v| !v.is_empty()))
}

/// Upstream's `dropTypeDependentFields`: an update switching to a type that no longer needs a
/// field drops it, when the user left it as it was (a value the user changed is theirs, and
/// validation judges it). Runs before the old allocations are carried over.
fn drop_type_dependent_fields(spec: &mut ServiceSpec, old: &ServiceSpec) {
    let needs_cluster_ip = |s: &ServiceSpec| service_type(s) != EXTERNAL_NAME;
    if needs_cluster_ip(old) && !needs_cluster_ip(spec) {
        if spec.cluster_ip == old.cluster_ip && spec.cluster_ips == old.cluster_ips {
            spec.cluster_ip = None;
            spec.cluster_ips = None;
        }
        if spec.ip_families == old.ip_families {
            spec.ip_families = None;
        }
        if spec.ip_family_policy == old.ip_family_policy {
            spec.ip_family_policy = None;
        }
    }
    let node_ports = |s: &ServiceSpec| -> Vec<Option<i32>> {
        s.ports.iter().flatten().map(|p| p.node_port).collect()
    };
    if wants_node_ports(old) && !wants_node_ports(spec) && node_ports(spec) == node_ports(old) {
        for p in spec.ports.iter_mut().flatten() {
            p.node_port = None;
        }
    }
    let needs_health_check = |s: &ServiceSpec| {
        kind_is(s, LOAD_BALANCER) && s.external_traffic_policy.as_deref() == Some("Local")
    };
    if needs_health_check(old)
        && !needs_health_check(spec)
        && spec.health_check_node_port == old.health_check_node_port
    {
        spec.health_check_node_port = None;
    }
    if kind_is(old, LOAD_BALANCER) && !kind_is(spec, LOAD_BALANCER) {
        if spec.allocate_load_balancer_node_ports.is_some()
            && spec.allocate_load_balancer_node_ports == old.allocate_load_balancer_node_ports
        {
            spec.allocate_load_balancer_node_ports = None;
        }
        if spec.load_balancer_class == old.load_balancer_class {
            spec.load_balancer_class = None;
        }
    }
    if externally_accessible(old)
        && !externally_accessible(spec)
        && spec.external_traffic_policy == old.external_traffic_policy
    {
        spec.external_traffic_policy = None;
    }
}

/// An update that leaves out the cluster IP or a node port keeps what was allocated (upstream's
/// `patchAllocatedValues`), unless the Service becomes an ExternalName or stops wanting ports.
fn carry_allocations(spec: &mut ServiceSpec, old: &ServiceSpec) {
    let kind = service_type(spec).to_string();
    if kind != EXTERNAL_NAME && service_type(old) != EXTERNAL_NAME {
        let empty = spec.cluster_ip.as_deref().is_none_or(str::is_empty)
            && spec.cluster_ips.as_ref().is_none_or(|v| v.is_empty());
        if empty {
            spec.cluster_ip = old.cluster_ip.clone();
            spec.cluster_ips = old.cluster_ips.clone();
        }
    }
    let wants_health_check = |s: &ServiceSpec| {
        kind_is(s, LOAD_BALANCER) && s.external_traffic_policy.as_deref() == Some("Local")
    };
    if wants_health_check(spec) && spec.health_check_node_port.is_none_or(|n| n == 0) {
        spec.health_check_node_port = old.health_check_node_port;
    }
    if wants_node_ports(spec) && wants_node_ports(old) {
        for p in spec.ports.iter_mut().flatten() {
            if p.node_port.is_some_and(|n| n != 0) {
                continue;
            }
            let same = old.ports.iter().flatten().find(|o| {
                o.port == p.port && o.protocol.as_deref().unwrap_or("TCP") == p.protocol_or_tcp()
            });
            if let Some(n) = same.and_then(|o| o.node_port) {
                p.node_port = Some(n);
            }
        }
    }
}

fn kind_is(spec: &ServiceSpec, kind: &str) -> bool {
    service_type(spec) == kind
}

trait Protocol {
    fn protocol_or_tcp(&self) -> &str;
}

impl Protocol for ServicePort {
    fn protocol_or_tcp(&self) -> &str {
        self.protocol.as_deref().unwrap_or("TCP")
    }
}

/// Upstream `ValidateService` (and `ValidateServiceUpdate` with `old`).
pub(crate) fn validate_service(svc: &Service, old: Option<&Service>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let empty = ServiceSpec::default();
    let spec = svc.spec.as_ref().unwrap_or(&empty);
    let kind = service_type(spec);
    const TYPES: &[&str] = &[CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT];
    if !TYPES.contains(&kind) {
        errs.push(FieldError::not_supported(&sp.child("type"), kind, TYPES));
    }
    errs.extend(validate_cluster_ips(spec, kind, &sp));
    if kind == EXTERNAL_NAME {
        match spec.external_name.as_deref().unwrap_or_default() {
            "" => errs.push(FieldError::required(&sp.child("externalName"), "")),
            name => {
                let name = name.strip_suffix('.').unwrap_or(name);
                errs.extend(each_invalid(
                    &sp.child("externalName"),
                    name,
                    dns1123_subdomain(name),
                ));
            }
        }
    }
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() && kind != EXTERNAL_NAME && !is_headless(spec) {
        errs.push(FieldError::required(&sp.child("ports"), ""));
    }
    errs.extend(validate_ports(ports, kind, &sp.child("ports")));
    if let Some(sel) = &spec.selector {
        errs.extend(validate_labels(sel, &sp.child("selector")));
    }
    let affinity = spec.session_affinity.as_deref().unwrap_or("None");
    const AFFINITIES: &[&str] = &["ClientIP", "None"];
    if !AFFINITIES.contains(&affinity) {
        errs.push(FieldError::not_supported(
            &sp.child("sessionAffinity"),
            affinity,
            AFFINITIES,
        ));
    }
    let timeout = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds);
    match (affinity, timeout) {
        ("ClientIP", Some(t)) if !(1..=MAX_AFFINITY_TIMEOUT).contains(&t) => {
            errs.push(FieldError::invalid(
                &sp.child("sessionAffinityConfig")
                    .child("clientIP")
                    .child("timeoutSeconds"),
                t,
                format!("must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT}"),
            ))
        }
        ("None", _) if spec.session_affinity_config.is_some() => errs.push(FieldError::invalid(
            &sp.child("sessionAffinityConfig"),
            serde_json::to_value(&spec.session_affinity_config).unwrap_or_default(),
            "must not be set when session affinity is None",
        )),
        _ => {}
    }
    if let Some(p) = spec.external_traffic_policy.as_deref() {
        let path = sp.child("externalTrafficPolicy");
        if !externally_accessible(spec) {
            errs.push(FieldError::invalid(
                &path,
                p,
                "may only be set for externally-accessible services",
            ));
        } else if !["Cluster", "Local"].contains(&p) {
            errs.push(FieldError::not_supported(&path, p, &["Cluster", "Local"]));
        }
    }
    if let Some(p) = spec.internal_traffic_policy.as_deref()
        && !["Cluster", "Local"].contains(&p)
    {
        errs.push(FieldError::not_supported(
            &sp.child("internalTrafficPolicy"),
            p,
            &["Cluster", "Local"],
        ));
    }
    if let Some(old_spec) = old.and_then(|o| o.spec.as_ref()) {
        errs.extend(validate_cluster_ip_update(spec, old_spec, &sp));
    }
    errs
}

fn validate_cluster_ips(spec: &ServiceSpec, kind: &str, sp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ips = spec.cluster_ips.as_deref().unwrap_or_default();
    let ip = spec.cluster_ip.as_deref().unwrap_or_default();
    let path = sp.child("clusterIPs");
    if kind == EXTERNAL_NAME {
        if !ip.is_empty() || !ips.is_empty() {
            errs.push(FieldError::forbidden(
                &path,
                "may not be set for ExternalName services",
            ));
        }
        return errs;
    }
    if !ip.is_empty() && ips.first().is_some_and(|f| f != ip) {
        errs.push(FieldError::invalid(
            &path,
            serde_json::json!(ips),
            "first value must match `clusterIP`",
        ));
    }
    if ips.len() > 1 {
        errs.push(FieldError::invalid(
            &path,
            serde_json::json!(ips),
            "may only hold one address: this cluster is single-stack IPv4",
        ));
    }
    for (i, v) in ips.iter().enumerate() {
        if v == HEADLESS {
            if i == 0 && matches!(kind, NODE_PORT | LOAD_BALANCER) {
                errs.push(FieldError::invalid(
                    &path.index(0),
                    v.as_str(),
                    format!("may not be set to 'None' for {kind} services"),
                ));
            }
            continue;
        }
        if v.parse::<IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                &path.index(i),
                v.as_str(),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    errs
}

fn validate_cluster_ip_update(spec: &ServiceSpec, old: &ServiceSpec, sp: &Path) -> Vec<FieldError> {
    let (new_kind, old_kind) = (service_type(spec), service_type(old));
    if new_kind == EXTERNAL_NAME || old_kind == EXTERNAL_NAME {
        return Vec::new();
    }
    let old_ip = old.cluster_ip.as_deref().unwrap_or_default();
    let new_ip = spec.cluster_ip.as_deref().unwrap_or_default();
    if !old_ip.is_empty() && new_ip != old_ip {
        return vec![FieldError::invalid(
            &sp.child("clusterIPs").index(0),
            new_ip,
            "may not change once set",
        )];
    }
    Vec::new()
}

/// A Service's or Endpoints' port name: a DNS label, required when there are several ports.
fn validate_port_name(name: &str, ports: usize, path: &Path) -> Vec<FieldError> {
    match name {
        "" if ports > 1 => vec![FieldError::required(path, "")],
        "" => Vec::new(),
        name => each_invalid(path, name, dns1123_label(name)),
    }
}

fn validate_ports(ports: &[ServicePort], kind: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = path.index(i);
        let name = p.name.as_deref().unwrap_or_default();
        errs.extend(validate_port_name(name, ports.len(), &pp.child("name")));
        if !name.is_empty() && !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(&pp.child("name"), name));
        }
        for m in port_num(i64::from(p.port)) {
            errs.push(FieldError::invalid(&pp.child("port"), p.port, m));
        }
        let protocol = p.protocol_or_tcp();
        const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
        if !PROTOCOLS.contains(&protocol) {
            errs.push(FieldError::not_supported(
                &pp.child("protocol"),
                protocol,
                PROTOCOLS,
            ));
        }
        match &p.target_port {
            Some(IntOrString::Int(n)) => {
                for m in port_num(i64::from(*n)) {
                    errs.push(FieldError::invalid(&pp.child("targetPort"), *n, m));
                }
            }
            Some(IntOrString::String(s)) => {
                errs.extend(each_invalid(&pp.child("targetPort"), s, port_name(s)))
            }
            None => {}
        }
        if let Some(n) = p.node_port.filter(|n| *n != 0) {
            if kind == CLUSTER_IP {
                errs.push(FieldError::forbidden(
                    &pp.child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
            for m in port_num(i64::from(n)) {
                errs.push(FieldError::invalid(&pp.child("nodePort"), n, m));
            }
        }
        if !seen.insert((p.port, protocol.to_string())) {
            errs.push(FieldError::duplicate(
                &pp,
                serde_json::json!({"port": p.port, "protocol": protocol}),
            ));
        }
    }
    errs
}

/// Upstream `ValidateEndpoints`: each subset's addresses are IPs, its ports valid and named
/// when there are several.
pub(crate) fn validate_endpoints(ep: &Endpoints) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in ep.subsets.iter().flatten().enumerate() {
        let sp = Path::new("subsets").index(i);
        let addrs = |list: &Option<Vec<EndpointAddress>>, field: &str, errs: &mut Vec<_>| {
            for (j, a) in list.iter().flatten().enumerate() {
                if a.ip.parse::<IpAddr>().is_err() {
                    errs.push(FieldError::invalid(
                        &sp.child(field).index(j).child("ip"),
                        a.ip.as_str(),
                        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                    ));
                }
            }
        };
        addrs(&s.addresses, "addresses", &mut errs);
        addrs(&s.not_ready_addresses, "notReadyAddresses", &mut errs);
        errs.extend(validate_endpoint_ports(
            s.ports.as_deref().unwrap_or_default(),
            &sp.child("ports"),
        ));
    }
    errs
}

fn validate_endpoint_ports(ports: &[EndpointPort], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = path.index(i);
        errs.extend(validate_port_name(
            p.name.as_deref().unwrap_or_default(),
            ports.len(),
            &pp.child("name"),
        ));
        for m in port_num(i64::from(p.port)) {
            errs.push(FieldError::invalid(&pp.child("port"), p.port, m));
        }
    }
    errs
}

/// Upstream `ValidateEndpointSlice`: the address type, each endpoint's 1–100 addresses of that
/// type, and the ports.
pub(crate) fn validate_endpoint_slice(
    slice: &EndpointSlice,
    old: Option<&EndpointSlice>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    const TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
    let kind = slice.address_type.as_str();
    if !TYPES.contains(&kind) {
        errs.push(FieldError::not_supported(
            &Path::new("addressType"),
            kind,
            TYPES,
        ));
    }
    if let Some(o) = old
        && o.address_type != slice.address_type
    {
        errs.push(FieldError::immutable(&Path::new("addressType"), kind));
    }
    for (i, e) in slice.endpoints.iter().enumerate() {
        let path = Path::new("endpoints").index(i).child("addresses");
        if e.addresses.is_empty() || e.addresses.len() > 100 {
            errs.push(FieldError::invalid(
                &path,
                e.addresses.len(),
                "must contain at least 1 and at most 100 addresses",
            ));
        }
        for (j, a) in e.addresses.iter().enumerate() {
            let ok = match kind {
                "IPv4" => a.parse::<std::net::Ipv4Addr>().is_ok(),
                "IPv6" => a.parse::<std::net::Ipv6Addr>().is_ok(),
                _ => dns1123_subdomain(a).is_empty(),
            };
            if !ok {
                errs.push(FieldError::invalid(
                    &path.index(j),
                    a.as_str(),
                    format!("must be a valid {kind} address"),
                ));
            }
        }
    }
    for (i, p) in slice.ports.iter().flatten().enumerate() {
        let pp = Path::new("ports").index(i);
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            errs.extend(each_invalid(&pp.child("name"), name, dns1123_label(name)));
        }
        if let Some(n) = p.port {
            for m in port_num(i64::from(n)) {
                errs.push(FieldError::invalid(&pp.child("port"), n, m));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Operation, admit};
    use serde_json::{Value, json};

    fn service(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
               "spec": spec})
    }

    fn invalid(spec: Value) -> Vec<String> {
        let mut obj = service(spec);
        match admit("Service", Operation::Create, &mut obj, None) {
            Err(crate::admission::AdmissionError::Invalid(errs)) => {
                errs.iter().map(FieldError::message).collect()
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_service_gets_upstreams_defaults() {
        let mut obj = service(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        admit("Service", Operation::Create, &mut obj, None).unwrap();
        let spec = &obj["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert!(spec.get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn node_ports_and_client_ip_affinity_get_their_defaults() {
        let mut obj = service(json!({"type": "NodePort", "sessionAffinity": "ClientIP",
            "ports": [{"port": 80, "targetPort": "http"}]}));
        admit("Service", Operation::Create, &mut obj, None).unwrap();
        let spec = &obj["spec"];
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(
            spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
        assert_eq!(spec["ports"][0]["targetPort"], "http");
    }

    #[test]
    fn a_headless_service_without_a_selector_requires_dual_stack_like_upstream() {
        let mut obj = service(json!({"clusterIP": "None"}));
        admit("Service", Operation::Create, &mut obj, None).unwrap();
        assert_eq!(obj["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(obj["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn bad_services_are_refused_with_upstreams_paths() {
        assert_eq!(invalid(json!({})), vec!["spec.ports: Required value"]);
        assert_eq!(
            invalid(json!({"ports": [{"port": 80}, {"port": 81}]})),
            vec![
                "spec.ports[0].name: Required value",
                "spec.ports[1].name: Required value"
            ]
        );
        assert_eq!(
            invalid(json!({"ports": [{"port": 0}]})),
            vec![
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                // The target port defaults to the port, as upstream's does.
                "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive"
            ]
        );
        assert_eq!(
            invalid(json!({"type": "Foo", "ports": [{"port": 80}]})),
            vec![
                "spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ]
        );
        assert_eq!(
            invalid(json!({"ports": [{"port": 80, "nodePort": 30080}]})),
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        assert_eq!(
            invalid(json!({"clusterIP": "abc", "ports": [{"port": 80}]})),
            vec![
                "spec.clusterIPs[0]: Invalid value: \"abc\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            ]
        );
        assert_eq!(
            invalid(json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]})),
            vec![
                "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"
            ]
        );
        assert_eq!(
            invalid(json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]})),
            vec![
                "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"
            ]
        );
        assert_eq!(
            invalid(json!({"type": "ExternalName"})),
            vec!["spec.externalName: Required value"]
        );
    }

    #[test]
    fn service_names_are_dns_1035_labels() {
        let mut obj = service(json!({"ports": [{"port": 80}]}));
        obj["metadata"]["name"] = json!("1web");
        let err = admit("Service", Operation::Create, &mut obj, None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("metadata.name: Invalid value: \"1web\": a DNS-1035 label"),
            "{err}"
        );
    }

    #[test]
    fn an_update_keeps_the_allocated_cluster_ip_and_node_ports_and_may_not_change_the_ip() {
        let old = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                         "resourceVersion": "5"},
            "spec": {"type": "NodePort", "clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"],
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080,
                                "targetPort": 80}]}});
        let mut new = service(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        admit("Service", Operation::Update, &mut new, Some(&old)).unwrap();
        assert_eq!(new["spec"]["clusterIP"], "10.43.0.9");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
        let mut moved = service(json!({"type": "NodePort", "clusterIP": "10.43.0.10",
                                       "ports": [{"port": 80}]}));
        let err = admit("Service", Operation::Update, &mut moved, Some(&old)).unwrap_err();
        assert!(
            err.to_string().contains(
                "spec.clusterIPs[0]: Invalid value: \"10.43.0.10\": may not change once set"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_type_change_drops_what_only_the_old_type_needed_unless_the_user_changed_it() {
        let old = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                         "resourceVersion": "5"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.43.0.9",
                     "clusterIPs": ["10.43.0.9"], "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack", "externalTrafficPolicy": "Local",
                     "healthCheckNodePort": 31000, "allocateLoadBalancerNodePorts": true,
                     "loadBalancerClass": "berth.dev/load-balancer",
                     "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080,
                                "targetPort": 80}]}});
        // What `kubectl patch -p '{"spec":{"type":"ClusterIP"}}'` sends: the rest unchanged.
        let mut to_cluster_ip = old.clone();
        to_cluster_ip["spec"]["type"] = json!("ClusterIP");
        admit("Service", Operation::Update, &mut to_cluster_ip, Some(&old)).unwrap();
        let spec = &to_cluster_ip["spec"];
        assert_eq!(spec["clusterIP"], "10.43.0.9", "{spec}");
        assert_eq!(spec["ports"][0].get("nodePort"), None, "{spec}");
        for gone in [
            "healthCheckNodePort",
            "allocateLoadBalancerNodePorts",
            "loadBalancerClass",
            "externalTrafficPolicy",
        ] {
            assert_eq!(spec.get(gone), None, "{gone}: {spec}");
        }

        // To NodePort: node ports stay (still needed), the load balancer's fields go.
        let mut to_node_port = old.clone();
        to_node_port["spec"]["type"] = json!("NodePort");
        to_node_port["spec"]["externalTrafficPolicy"] = json!("Cluster");
        admit("Service", Operation::Update, &mut to_node_port, Some(&old)).unwrap();
        let spec = &to_node_port["spec"];
        assert_eq!(spec["ports"][0]["nodePort"], 30080, "{spec}");
        assert_eq!(spec["externalTrafficPolicy"], "Cluster", "{spec}");
        assert_eq!(spec.get("healthCheckNodePort"), None, "{spec}");
        assert_eq!(spec.get("loadBalancerClass"), None, "{spec}");

        // To ExternalName: the cluster IP and its families go too.
        let mut to_name = old.clone();
        to_name["spec"]["type"] = json!("ExternalName");
        to_name["spec"]["externalName"] = json!("db.example.com");
        admit("Service", Operation::Update, &mut to_name, Some(&old)).unwrap();
        let spec = &to_name["spec"];
        for gone in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            assert_eq!(spec.get(gone), None, "{gone}: {spec}");
        }

        // A node port the user changed while switching is theirs to be refused for.
        let mut changed = old.clone();
        changed["spec"]["type"] = json!("ClusterIP");
        changed["spec"]["ports"][0]["nodePort"] = json!(30081);
        let err = admit("Service", Operation::Update, &mut changed, Some(&old)).unwrap_err();
        assert!(err.to_string().contains("nodePort"), "{err}");
    }

    #[test]
    fn endpoint_slices_check_their_addresses_against_the_address_type() {
        let mut obj = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "u2"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.42.0.5"]}, {"addresses": ["fe80::1"]}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]});
        let err = admit("EndpointSlice", Operation::Create, &mut obj, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "endpoints[1].addresses[0]: Invalid value: \"fe80::1\": must be a valid IPv4 address"
        );
    }
}
