use super::*;
use berth_api::ingress_class::{
    CLASS, CONTROLLER, DEFAULT_CLASS_ANNOTATION, LEGACY_CLASS_ANNOTATION,
};
use serde_json::{Value, json};

fn ingress(name: &str, created: &str, spec: Value) -> Ingress {
    serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": name, "creationTimestamp": created},
        "spec": spec,
    }))
    .unwrap()
}

fn class(name: &str, controller: &str, default: bool) -> IngressClass {
    let mut c = json!({"metadata": {"name": name}, "spec": {"controller": controller}});
    if default {
        c["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: "true"});
    }
    serde_json::from_value(c).unwrap()
}

fn service(name: &str, ports: Value) -> (String, Service) {
    let svc = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": name},
        "spec": {"ports": ports},
    }))
    .unwrap();
    (format!("default/{name}"), svc)
}

/// A slice of `service` with one port (`name`, `port`) and endpoints `(ip, ready)`.
fn slice(service: &str, port_name: Option<&str>, port: i32, eps: &[(&str, bool)]) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": format!("{service}-x"),
                     "labels": {SERVICE_NAME_LABEL: service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": eps.iter().map(|(ip, ready)| json!({
            "addresses": [ip], "conditions": {"ready": ready}})).collect::<Vec<_>>(),
    }))
    .unwrap()
}

fn backend(service: &str, port: i32) -> Value {
    json!({"service": {"name": service, "port": {"number": port}}})
}

fn rule(host: Option<&str>, paths: &[(&str, &str, &str)]) -> Value {
    let mut r = json!({"http": {"paths": paths.iter().map(|(path, kind, svc)| json!({
        "path": path, "pathType": kind, "backend": backend(svc, 80)})).collect::<Vec<_>>()}});
    if let Some(h) = host {
        r["host"] = json!(h);
    }
    r
}

/// Services `a`…`f` on port 80 (target 8080), one ready endpoint each (`10.42.0.<n>`).
fn backends_fixture() -> (BTreeMap<String, Service>, BTreeMap<String, EndpointSlice>) {
    let mut services = BTreeMap::new();
    let mut slices = BTreeMap::new();
    for (i, name) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let (k, s) = service(name, json!([{"port": 80, "targetPort": 8080}]));
        services.insert(k, s);
        let ip = format!("10.42.0.{}", i + 1);
        slices.insert(
            format!("default/{name}-x"),
            slice(name, None, 8080, &[(&ip, true)]),
        );
    }
    (services, slices)
}

/// The service each (host, path) request reaches, `-` for no route.
fn routed(table: &RouteTable, host: &str, path: &str) -> String {
    table
        .route(&normalize_host(host), path)
        .map_or("-".to_string(), |u| u.service.clone())
}

fn plan(ingresses: &[Ingress], classes: &[IngressClass]) -> RouteTable {
    let (services, slices) = backends_fixture();
    plan_routes(
        ingresses,
        classes,
        &Backends {
            services: &services,
            slices: &slices,
        },
    )
}

fn ours() -> Vec<IngressClass> {
    vec![class(CLASS, CONTROLLER, true)]
}

#[test]
fn paths_match_by_upstreams_precedence() {
    let ing = ingress(
        "web",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "berth", "rules": [rule(Some("foo.com"), &[
            ("/", "Prefix", "a"),
            ("/foo", "Prefix", "b"),
            ("/foo", "Exact", "c"),
            ("/foo/bar/", "Prefix", "d"),
            ("/img", "ImplementationSpecific", "e"),
        ])]}),
    );
    let table = plan(&[ing], &ours());
    for (path, want) in [
        ("/", "a"),
        ("/other", "a"),
        ("/foo", "c"),
        ("/foo/", "b"),
        ("/foobar", "a"),
        ("/foo/baz", "b"),
        ("/foo/bar", "d"),
        ("/foo/bar/", "d"),
        ("/foo/bar/x", "d"),
        ("/foo/barx", "b"),
        ("/img/1.png", "e"),
        ("/imgs", "a"),
    ] {
        assert_eq!(routed(&table, "foo.com", path), want, "{path}");
    }
}

#[test]
fn exact_hosts_come_before_wildcards_which_match_one_label() {
    let ing = ingress(
        "web",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "berth", "rules": [
            rule(Some("*.foo.com"), &[("/", "Prefix", "a")]),
            rule(Some("bar.foo.com"), &[("/", "Prefix", "b")]),
            rule(None, &[("/", "Prefix", "c")]),
        ]}),
    );
    let table = plan(&[ing], &ours());
    for (host, want) in [
        ("bar.foo.com", "b"),
        ("BAR.foo.com:8443", "b"),
        ("baz.foo.com", "a"),
        ("baz.foo.com.", "a"),
        ("x.baz.foo.com", "c"),
        ("foo.com", "c"),
        ("10.0.0.1", "c"),
    ] {
        assert_eq!(routed(&table, host, "/"), want, "{host}");
    }
}

#[test]
fn the_oldest_ingress_wins_a_conflict_and_gives_the_default_backend() {
    let mut spec = json!({"ingressClassName": "berth",
        "rules": [rule(Some("foo.com"), &[("/api", "Prefix", "b")])],
        "defaultBackend": backend("c", 80)});
    let newer = ingress("newer", "2024-02-01T00:00:00Z", spec.clone());
    spec["rules"] = json!([rule(Some("foo.com"), &[("/api", "Prefix", "a")])]);
    spec["defaultBackend"] = backend("d", 80);
    let older = ingress("older", "2024-01-01T00:00:00Z", spec);
    let table = plan(&[newer, older], &ours());
    assert_eq!(routed(&table, "foo.com", "/api/x"), "a");
    assert_eq!(table.route("foo.com", "/api").unwrap().ingress, "older");
    // Unmatched paths and hosts: the oldest Ingress's default backend.
    assert_eq!(routed(&table, "foo.com", "/other"), "d");
    assert_eq!(routed(&table, "bar.com", "/"), "d");
}

#[test]
fn without_a_default_backend_an_unmatched_request_has_no_route() {
    let ing = ingress(
        "web",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "berth", "rules": [rule(Some("foo.com"), &[("/x", "Exact", "a")])]}),
    );
    let table = plan(&[ing], &ours());
    assert_eq!(routed(&table, "foo.com", "/x"), "a");
    assert_eq!(routed(&table, "foo.com", "/x/"), "-");
    assert_eq!(routed(&table, "bar.com", "/x"), "-");
}

/// Which Ingresses are ours is `ingress_class::is_ours` (its table tests are beside it); the
/// route table serves exactly those.
#[test]
fn only_ingresses_of_berths_class_are_served() {
    let spec = |class: Value| {
        let mut s = json!({"rules": [rule(None, &[("/", "Prefix", "a")])]});
        if !class.is_null() {
            s["ingressClassName"] = class;
        }
        s
    };
    let legacy = |value: &str| {
        let mut i = ingress("legacy", "2024-01-01T00:00:00Z", spec(Value::Null));
        i.metadata.annotations =
            Some([(LEGACY_CLASS_ANNOTATION.to_string(), value.to_string())].into());
        i
    };
    let theirs_default = vec![
        class(CLASS, CONTROLLER, false),
        class("nginx", "k8s.io/ingress-nginx", true),
    ];
    let cases: Vec<(&str, Ingress, &[IngressClass], bool)> = vec![
        (
            "named berth",
            ingress("i", "2024-01-01T00:00:00Z", spec(json!("berth"))),
            &theirs_default,
            true,
        ),
        (
            "named nginx",
            ingress("i", "2024-01-01T00:00:00Z", spec(json!("nginx"))),
            &theirs_default,
            false,
        ),
        (
            "unset, nginx is default",
            ingress("i", "2024-01-01T00:00:00Z", spec(Value::Null)),
            &theirs_default,
            false,
        ),
        (
            "legacy annotation berth",
            legacy("berth"),
            &theirs_default,
            true,
        ),
    ];
    for (what, ing, classes, want) in cases {
        let table = plan(&[ing], classes);
        assert_eq!(routed(&table, "x", "/") == "a", want, "{what}: routed");
    }
}

#[test]
fn service_ports_resolve_by_number_or_name_to_ready_endpoints() {
    let mut services = BTreeMap::new();
    let (k, s) = service(
        "web",
        json!([{"name": "http", "port": 80, "targetPort": "web"},
               {"name": "admin", "port": 9000, "targetPort": 9090}]),
    );
    services.insert(k, s);
    let (k, s) = service("down", json!([{"port": 80}]));
    services.insert(k, s);
    let mut slices = BTreeMap::new();
    let mut web = slice(
        "web",
        Some("http"),
        8080,
        &[
            ("10.42.1.5", true),
            ("10.42.2.5", true),
            ("10.42.3.5", false),
        ],
    );
    let mut ports = web.ports.clone().unwrap();
    ports.push(serde_json::from_value(json!({"name": "admin", "port": 9090})).unwrap());
    web.ports = Some(ports);
    slices.insert("default/web-x".to_string(), web);
    slices.insert(
        "default/down-x".to_string(),
        slice("down", None, 80, &[("10.42.1.6", false)]),
    );
    let ing = ingress(
        "web",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "berth", "rules": [{"http": {"paths": [
            {"path": "/num", "pathType": "Prefix", "backend": backend("web", 80)},
            {"path": "/named", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"name": "admin"}}}},
            {"path": "/down", "pathType": "Prefix", "backend": backend("down", 80)},
            {"path": "/missing", "pathType": "Prefix", "backend": backend("missing", 80)},
            {"path": "/badport", "pathType": "Prefix", "backend": backend("web", 81)},
        ]}}]}),
    );
    let table = plan_routes(
        &[ing],
        &ours(),
        &Backends {
            services: &services,
            slices: &slices,
        },
    );
    let eps = |path: &str| {
        let up = table.route("x", path).unwrap();
        up.endpoints
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(eps("/num"), ["10.42.1.5:8080", "10.42.2.5:8080"]);
    assert_eq!(eps("/named"), ["10.42.1.5:9090", "10.42.2.5:9090"]);
    assert_eq!(table.route("x", "/named").unwrap().port, "admin");
    for none in ["/down", "/missing", "/badport"] {
        assert!(eps(none).is_empty(), "{none}");
    }
    assert_eq!(table.route("x", "/num").unwrap().key(), "default/web:80");
}

#[test]
fn tls_hosts_pick_a_secret_exact_before_wildcard() {
    let ing = ingress(
        "web",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "berth",
               "tls": [{"hosts": ["*.foo.com"], "secretName": "wild"},
                       {"hosts": ["a.foo.com", "b.com"], "secretName": "exact"},
                       {"hosts": ["nosecret.com"]}]}),
    );
    let other = ingress(
        "other",
        "2024-01-01T00:00:00Z",
        json!({"ingressClassName": "nginx", "tls": [{"hosts": ["c.com"], "secretName": "theirs"}]}),
    );
    let classes = vec![
        class(CLASS, CONTROLLER, true),
        class("nginx", "k8s.io/ingress-nginx", false),
    ];
    let table = plan(&[ing.clone(), other.clone()], &classes);
    let secret = |sni: &str| {
        tls_route(&table.tls, sni).map(|t| {
            t.secret
                .as_ref()
                .map_or("default".to_string(), |s| s.name.clone())
        })
    };
    assert_eq!(secret("a.foo.com").as_deref(), Some("exact"));
    assert_eq!(secret("A.FOO.COM.").as_deref(), Some("exact"));
    assert_eq!(secret("z.foo.com").as_deref(), Some("wild"));
    assert_eq!(secret("x.z.foo.com"), None);
    assert_eq!(secret("foo.com"), None);
    assert_eq!(secret("nosecret.com").as_deref(), Some("default"));
    assert_eq!(secret("c.com"), None);
    let names: Vec<String> = tls_secrets(&[ing, other], &classes)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["exact", "wild"]);
}

#[test]
fn hosts_are_normalized_for_matching() {
    for (given, want) in [
        ("Foo.COM", "foo.com"),
        ("foo.com:8080", "foo.com"),
        ("foo.com.", "foo.com"),
        ("[::1]:80", "::1"),
        ("10.0.0.1:80", "10.0.0.1"),
    ] {
        assert_eq!(normalize_host(given), want, "{given}");
    }
}
