//! Table tests of the slice planner: endpoints and their conditions, port sets, the 100
//! endpoint limit, in-place rewrites, surplus and unmanaged slices, the placeholder.

use super::*;
use serde_json::{Value, json};

/// Service `web` selecting `app: web` with one named port, `extra` merged over its spec
/// (shared with the Endpoints planner's tests).
pub(crate) fn svc(extra: Value) -> Service {
    let mut spec = json!({"selector": {"app": "web"}, "clusterIP": "10.43.0.10",
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default",
        "uid": "svc-uid", "labels": {"tier": "front"}}, "spec": spec}))
    .unwrap()
}

fn pod(i: usize, ready: bool) -> Pod {
    pod_at(i, ready, &ip(i))
}

/// Pod `web-<i>` on node `n1` at `ip`, Ready or not (shared with the Endpoints planner's tests).
pub(crate) fn pod_at(i: usize, ready: bool, ip: &str) -> Pod {
    let s = if ready { "True" } else { "False" };
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{i}"), "namespace": "default",
            "uid": format!("uid-{i}"), "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
            "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": s}]}}))
    .unwrap()
}

/// `p` with `spec.hostname` and `spec.subdomain` set (shared with the Endpoints planner's
/// tests).
pub(crate) fn with_hostname(mut p: Pod, hostname: &str, subdomain: &str) -> Pod {
    if let Some(spec) = p.spec.as_mut() {
        spec.hostname = Some(hostname.into());
        spec.subdomain = Some(subdomain.into());
    }
    p
}

/// Pod `i`'s IP: three-digit octets, so that sorting the strings sorts by `i`.
fn ip(i: usize) -> String {
    format!("10.42.{}.{}", 100 + i / 100, 100 + i % 100)
}

fn pods(n: usize) -> Vec<Pod> {
    (0..n).map(|i| pod(i, true)).collect()
}

fn refs(p: &[Pod]) -> Vec<&Pod> {
    p.iter().collect()
}

fn plan(svc: &Service, pods: &[Pod], slices: &[EndpointSlice]) -> Plan {
    plan_slices(
        svc,
        &refs(pods),
        slices,
        &BTreeMap::new(),
        MAX_ENDPOINTS_PER_SLICE,
    )
}

/// `s` as the store would hold it after a create: named, versioned.
fn stored(mut s: EndpointSlice, name: &str) -> EndpointSlice {
    s.metadata.name = Some(name.to_string());
    s.metadata.generate_name = None;
    s.metadata.uid = Some(format!("uid-{name}"));
    s.metadata.resource_version = Some("7".to_string());
    s
}

/// The slice a first pass creates for `pods`, as stored under `name`.
fn stored_first(svc: &Service, pods: &[Pod], name: &str) -> EndpointSlice {
    stored(plan(svc, pods, &[]).create[0].clone(), name)
}

fn addresses(s: &EndpointSlice) -> Vec<&str> {
    s.endpoints
        .iter()
        .map(|e| e.addresses[0].as_str())
        .collect()
}

#[test]
fn two_ready_pods_make_one_slice_with_labels_owner_ports_and_endpoints() {
    let p = plan(&svc(json!({})), &pods(2), &[]);
    assert!(p.update.is_empty() && p.delete.is_empty());
    let [s] = p.create.as_slice() else {
        panic!("one slice: {p:#?}")
    };
    assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(s.address_type, "IPv4");
    let labels = s.metadata.labels.clone().unwrap();
    assert_eq!(labels[SERVICE_NAME_LABEL], "web");
    assert_eq!(labels[MANAGED_BY_LABEL], CONTROLLER_NAME);
    assert_eq!(labels["tier"], "front", "the Service's labels are copied");
    let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Service", "svc-uid")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(
        s.ports,
        Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            app_protocol: None,
        }])
    );
    assert_eq!(addresses(s), ["10.42.100.100", "10.42.100.101"]);
    let e = &s.endpoints[0];
    assert_eq!(e.node_name.as_deref(), Some("n1"));
    let target = e.target_ref.as_ref().unwrap();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref()
        ),
        (Some("Pod"), Some("web-0"), Some("uid-0"))
    );
}

#[test]
fn a_not_ready_pod_is_an_endpoint_that_is_neither_ready_nor_serving() {
    let p = plan(&svc(json!({})), &[pod(0, false)], &[]);
    let c = p.create[0].endpoints[0].conditions.clone().unwrap();
    assert_eq!(
        (c.ready, c.serving, c.terminating),
        (Some(false), Some(false), Some(false))
    );
    let p = plan(
        &svc(json!({"publishNotReadyAddresses": true})),
        &[pod(0, false)],
        &[],
    );
    let c = p.create[0].endpoints[0].conditions.clone().unwrap();
    assert_eq!(
        c.ready,
        Some(true),
        "publishNotReadyAddresses makes it ready"
    );
}

#[test]
fn a_terminating_pod_stays_as_serving_and_terminating_but_not_ready() {
    let mut t = pod(0, true);
    t.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
    let p = plan(&svc(json!({})), &[t], &[]);
    let c = p.create[0].endpoints[0].conditions.clone().unwrap();
    assert_eq!(
        (c.ready, c.serving, c.terminating),
        (Some(false), Some(true), Some(true))
    );
}

#[test]
fn pods_whose_named_port_does_not_resolve_go_to_a_slice_of_their_own_port_set() {
    let mut odd = pod(5, true);
    if let Some(spec) = odd.spec.as_mut() {
        spec.containers[0].ports = None;
    }
    let p = plan(&svc(json!({})), &[pod(0, true), odd], &[]);
    assert_eq!(p.create.len(), 2, "{p:#?}");
    let by_ports: Vec<(usize, Vec<&str>)> = p
        .create
        .iter()
        .map(|s| (s.ports.as_ref().map_or(0, Vec::len), addresses(s)))
        .collect();
    assert!(by_ports.contains(&(1, vec!["10.42.100.100"])));
    assert!(by_ports.contains(&(0, vec!["10.42.100.105"])));
}

#[test]
fn more_than_a_hundred_endpoints_are_split_into_slices_of_at_most_a_hundred() {
    let p = plan(&svc(json!({})), &pods(150), &[]);
    let sizes: Vec<usize> = p.create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, [100, 50]);
}

#[test]
fn a_settled_service_plans_nothing() {
    let s = svc(json!({}));
    let first = plan(&s, &pods(3), &[]);
    let existing = vec![stored(first.create[0].clone(), "web-abcde")];
    assert!(plan(&s, &pods(3), &existing).is_empty());
}

#[test]
fn a_pod_going_away_rewrites_its_slice_in_place() {
    let s = svc(json!({}));
    let existing = vec![stored_first(&s, &pods(3), "web-abcde")];
    let p = plan(&s, &pods(2), &existing);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:#?}");
    let [u] = p.update.as_slice() else {
        panic!("one update: {p:#?}")
    };
    assert_eq!(u.metadata.name.as_deref(), Some("web-abcde"));
    assert_eq!(u.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(addresses(u), ["10.42.100.100", "10.42.100.101"]);
}

#[test]
fn a_pod_turning_ready_is_updated_in_place_and_a_new_pod_fills_the_same_slice() {
    let s = svc(json!({}));
    let before = [pod(0, false)];
    let existing = vec![stored_first(&s, &before, "web-abcde")];
    let p = plan(&s, &[pod(0, true), pod(1, true)], &existing);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:#?}");
    assert_eq!(addresses(&p.update[0]), ["10.42.100.100", "10.42.100.101"]);
    let c = p.update[0].endpoints[0].conditions.clone().unwrap();
    assert_eq!(c.ready, Some(true));
}

#[test]
fn surplus_slices_are_deleted_and_slices_of_stale_port_sets_are_reused() {
    let s = svc(json!({}));
    let full = plan(&s, &pods(150), &[]);
    let existing = vec![
        stored(full.create[0].clone(), "web-aaaaa"),
        stored(full.create[1].clone(), "web-bbbbb"),
    ];
    // Down to 10 pods, all in the first slice: the second goes.
    let p = plan(&s, &pods(10), &existing);
    assert!(p.create.is_empty());
    assert_eq!(p.update.len(), 1);
    assert_eq!(p.update[0].endpoints.len(), 10);
    let deleted: Vec<_> = p.delete.iter().map(|d| d.metadata.name.clone()).collect();
    assert_eq!(deleted, [Some("web-bbbbb".to_string())]);

    // The port changes: the old slice is rewritten rather than deleted and created.
    let changed = svc(json!({"ports": [{"name": "http", "port": 80, "targetPort": 9090}]}));
    let one = vec![stored_first(&s, &pods(2), "web-aaaaa")];
    let p = plan(&changed, &pods(2), &one);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:#?}");
    assert_eq!(p.update[0].metadata.name.as_deref(), Some("web-aaaaa"));
    assert_eq!(p.update[0].ports.as_ref().unwrap()[0].port, Some(9090));
}

#[test]
fn slices_not_managed_by_this_controller_are_never_touched() {
    let s = svc(json!({}));
    let mut foreign = stored_first(&s, &pods(1), "web-mine0");
    foreign.metadata.labels = Some(BTreeMap::from([
        (SERVICE_NAME_LABEL.to_string(), "web".to_string()),
        (MANAGED_BY_LABEL.to_string(), "someone-else".to_string()),
    ]));
    foreign.endpoints.clear();
    let p = plan(&s, &pods(1), std::slice::from_ref(&foreign));
    assert_eq!(p.create.len(), 1);
    assert!(p.update.is_empty() && p.delete.is_empty(), "{p:#?}");
}

#[test]
fn a_service_without_endpoints_keeps_one_empty_placeholder_slice() {
    let s = svc(json!({}));
    let p = plan(&s, &[], &[]);
    let [placeholder] = p.create.as_slice() else {
        panic!("a placeholder: {p:#?}")
    };
    assert!(placeholder.endpoints.is_empty());
    assert_eq!(placeholder.ports, Some(vec![]));
    // Kept as it is on the next pass.
    let existing = vec![stored(placeholder.clone(), "web-empty")];
    assert!(plan(&s, &[], &existing).is_empty());
    // The last pod going away turns the slice into the placeholder, in place.
    let existing = vec![stored_first(&s, &pods(1), "web-abcde")];
    let p = plan(&s, &[], &existing);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:#?}");
    assert!(p.update[0].endpoints.is_empty());
}

#[test]
fn the_placeholder_makes_way_for_the_first_endpoints() {
    let s = svc(json!({}));
    let existing = vec![stored_first(&s, &[], "web-empty")];
    let p = plan(&s, &pods(1), &existing);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:#?}");
    assert_eq!(p.update[0].metadata.name.as_deref(), Some("web-empty"));
    assert_eq!(addresses(&p.update[0]), ["10.42.100.100"]);
}

#[test]
fn hostname_is_published_when_the_pod_subdomain_names_the_service() {
    let p0 = with_hostname(pod(0, true), "web-0", "web");
    let p = plan(&svc(json!({})), &[p0], &[]);
    assert_eq!(p.create[0].endpoints[0].hostname.as_deref(), Some("web-0"));
}

#[test]
fn the_zone_comes_from_the_node_label() {
    let zones = BTreeMap::from([("n1".to_string(), "z1".to_string())]);
    let p = plan_slices(
        &svc(json!({})),
        &refs(&pods(1)),
        &[],
        &zones,
        MAX_ENDPOINTS_PER_SLICE,
    );
    assert_eq!(p.create[0].endpoints[0].zone.as_deref(), Some("z1"));
}

#[test]
fn a_change_of_the_services_labels_rewrites_its_slices() {
    let s = svc(json!({}));
    let existing = vec![stored_first(&s, &pods(1), "web-abcde")];
    let mut relabelled = s.clone();
    relabelled.metadata.labels = Some(BTreeMap::from([("tier".into(), "back".into())]));
    let p = plan(&relabelled, &pods(1), &existing);
    assert_eq!(p.update.len(), 1, "{p:#?}");
    assert_eq!(
        p.update[0].metadata.labels.as_ref().unwrap()["tier"],
        "back"
    );
}

#[test]
fn an_unnamed_port_is_written_with_an_empty_name_and_its_app_protocol() {
    let service = svc(json!({"ports": [{"port": 80, "targetPort": 8080, "appProtocol": "http"}]}));
    let p = plan(&service, &pods(1), &[]);
    let [s] = p.create.as_slice() else {
        panic!("one slice: {p:#?}")
    };
    assert_eq!(
        s.ports,
        Some(vec![EndpointPort {
            name: Some(String::new()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            app_protocol: Some("http".into()),
        }])
    );
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["ports"][0]["name"], "", "serialized, not left out");
}
