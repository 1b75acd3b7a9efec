//! Table tests of the Endpoints planner: ready and not-ready addresses, repacking by port
//! set, terminating pods, headless Services, labels, and when nothing is written.

use super::*;
use crate::endpointslice::plan::tests::{pod_at, svc, with_hostname};
use serde_json::json;

/// Pod `web-<i>`, its IP falling as `i` grows (sorting must not follow the pods' order).
fn pod(i: usize, ready: bool) -> Pod {
    pod_at(i, ready, &format!("10.42.0.{}", 10 - i))
}

fn created(a: Action) -> Endpoints {
    match a {
        Action::Create(e) => e,
        other => panic!("expected a create: {other:#?}"),
    }
}

fn ips(list: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
    list.iter().flatten().map(|a| a.ip.as_str()).collect()
}

#[test]
fn ready_pods_are_addresses_sorted_by_ip_with_node_and_target() {
    let p = [pod(0, true), pod(1, true)];
    let ep = created(plan_endpoints(Some(&svc(json!({}))), &[&p[0], &p[1]], None));
    assert_eq!(ep.metadata.name.as_deref(), Some("web"));
    assert_eq!(ep.metadata.labels.as_ref().unwrap()["tier"], "front");
    let [s] = ep.subsets.as_deref().unwrap() else {
        panic!("one subset: {ep:#?}")
    };
    assert_eq!(ips(&s.addresses), ["10.42.0.10", "10.42.0.9"]);
    assert_eq!(s.not_ready_addresses, None);
    let a = &s.addresses.as_ref().unwrap()[0];
    assert_eq!(a.node_name.as_deref(), Some("n1"));
    assert_eq!(
        a.target_ref.as_ref().and_then(|t| t.name.as_deref()),
        Some("web-0")
    );
    assert_eq!(
        s.ports,
        Some(vec![EndpointPort {
            name: Some("http".into()),
            port: 8080,
            protocol: Some("TCP".into()),
            app_protocol: None,
        }])
    );
}

#[test]
fn a_not_ready_pod_is_listed_under_not_ready_addresses_unless_published() {
    let p = [pod(0, true), pod(1, false)];
    let ep = created(plan_endpoints(Some(&svc(json!({}))), &[&p[0], &p[1]], None));
    let s = &ep.subsets.unwrap()[0];
    assert_eq!(ips(&s.addresses), ["10.42.0.10"]);
    assert_eq!(ips(&s.not_ready_addresses), ["10.42.0.9"]);
    let publish = svc(json!({"publishNotReadyAddresses": true}));
    let ep = created(plan_endpoints(Some(&publish), &[&p[0], &p[1]], None));
    let s = &ep.subsets.unwrap()[0];
    assert_eq!(ips(&s.addresses), ["10.42.0.10", "10.42.0.9"]);
}

#[test]
fn terminating_pods_are_left_out_unless_not_ready_addresses_are_published() {
    let mut t = pod(0, true);
    t.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
    let ep = created(plan_endpoints(Some(&svc(json!({}))), &[&t], None));
    assert_eq!(ep.subsets, None);
    let publish = svc(json!({"publishNotReadyAddresses": true}));
    let ep = created(plan_endpoints(Some(&publish), &[&t], None));
    assert_eq!(ips(&ep.subsets.unwrap()[0].addresses), ["10.42.0.10"]);
}

#[test]
fn pods_are_repacked_by_port_set_and_a_pod_resolving_no_port_is_left_out() {
    let s = svc(json!({"ports": [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": 9100, "protocol": "TCP"}]}));
    let mut other = pod(1, true);
    if let Some(spec) = other.spec.as_mut() {
        spec.containers[0].ports = None;
    }
    let ep = created(plan_endpoints(Some(&s), &[&pod(0, true), &other], None));
    let subsets = ep.subsets.unwrap();
    assert_eq!(subsets.len(), 2, "{subsets:#?}");
    let summary: Vec<(Vec<i32>, Vec<&str>)> = subsets
        .iter()
        .map(|s| {
            let ports = s.ports.iter().flatten().map(|p| p.port).collect();
            (ports, ips(&s.addresses))
        })
        .collect();
    assert!(summary.contains(&(vec![8080, 9100], vec!["10.42.0.10"])));
    assert!(summary.contains(&(vec![9100], vec!["10.42.0.9"])));

    let named_only = svc(json!({}));
    let ep = created(plan_endpoints(Some(&named_only), &[&other], None));
    assert_eq!(ep.subsets, None, "no port resolves: the pod is left out");
}

#[test]
fn a_headless_service_without_ports_lists_its_pods_with_no_ports() {
    let s = svc(json!({"clusterIP": "None", "ports": []}));
    let ep = created(plan_endpoints(Some(&s), &[&pod(0, true)], None));
    assert_eq!(ep.metadata.labels.as_ref().unwrap()[HEADLESS_LABEL], "");
    let sub = &ep.subsets.unwrap()[0];
    assert_eq!(ips(&sub.addresses), ["10.42.0.10"]);
    assert_eq!(sub.ports, None);
}

#[test]
fn hostname_is_set_when_the_pods_subdomain_is_the_service() {
    let p = with_hostname(pod(0, true), "web-0", "web");
    let ep = created(plan_endpoints(Some(&svc(json!({}))), &[&p], None));
    let a = &ep.subsets.unwrap()[0].addresses.clone().unwrap()[0];
    assert_eq!(a.hostname.as_deref(), Some("web-0"));
}

#[test]
fn an_unchanged_endpoints_is_left_alone_and_a_changed_one_rewritten_in_place() {
    let s = svc(json!({}));
    let p = [pod(0, true), pod(1, true)];
    let mut current = created(plan_endpoints(Some(&s), &[&p[0], &p[1]], None));
    current.metadata.resource_version = Some("7".into());
    assert_eq!(
        plan_endpoints(Some(&s), &[&p[0], &p[1]], Some(&current)),
        Action::Nothing
    );
    match plan_endpoints(Some(&s), &[&p[0]], Some(&current)) {
        Action::Update(e) => {
            assert_eq!(e.metadata.resource_version.as_deref(), Some("7"));
            assert_eq!(ips(&e.subsets.unwrap()[0].addresses), ["10.42.0.10"]);
        }
        other => panic!("expected an update: {other:#?}"),
    }
}

#[test]
fn services_without_a_selector_are_left_alone_and_a_gone_service_loses_its_endpoints() {
    let user: Endpoints = serde_json::from_value(json!({"metadata": {"name": "web",
        "namespace": "default"}, "subsets": [{"addresses": [{"ip": "192.0.2.1"}]}]}))
    .unwrap();
    let no_selector = svc(json!({"selector": null}));
    assert_eq!(
        plan_endpoints(Some(&no_selector), &[&pod(0, true)], Some(&user)),
        Action::Nothing
    );
    assert_eq!(
        plan_endpoints(None, &[], Some(&user)),
        Action::Delete(user.clone())
    );
    let mut leader = user;
    leader.metadata.annotations = Some(BTreeMap::from([(
        LEADER_ANNOTATION.to_string(),
        "{}".to_string(),
    )]));
    assert_eq!(plan_endpoints(None, &[], Some(&leader)), Action::Nothing);
    assert_eq!(plan_endpoints(None, &[], None), Action::Nothing);
}
