//! Table tests for proxy path parsing and backend resolution.

use super::*;
use serde_json::json;

#[test]
fn proxy_paths_name_the_kind_the_id_and_the_rest() {
    let cases = [
        (
            "/api/v1/namespaces/ns/services/web:80/proxy/",
            Some((Through::Service, "ns", "web:80", "/")),
        ),
        (
            "/api/v1/namespaces/ns/services/https:web:443/proxy/a/b",
            Some((Through::Service, "ns", "https:web:443", "/a/b")),
        ),
        (
            "/api/v1/namespaces/ns/services/web%3A80/proxy",
            Some((Through::Service, "ns", "web:80", "")),
        ),
        (
            "/api/v1/namespaces/ns/pods/web-0/proxy/x",
            Some((Through::Pod, "ns", "web-0", "/x")),
        ),
        ("/api/v1/namespaces/ns/pods/web-0/proxyx", None),
        ("/api/v1/namespaces/ns/pods/web-0/log", None),
        ("/api/v1/namespaces/ns/configmaps/c/proxy/", None),
        ("/api/v1/nodes/n/proxy/metrics", None),
        ("/api/v1/namespaces/ns/services//proxy/", None),
    ];
    for (path, want) in cases {
        let got = parse_path(path);
        assert_eq!(
            got.as_ref().map(|p| (
                p.through,
                p.namespace.as_str(),
                p.id.as_str(),
                p.rest.as_str()
            )),
            want,
            "{path}"
        );
    }
}

#[test]
fn ids_split_into_scheme_name_and_port_as_upstream_splits_them() {
    let id = |scheme, name: &str, port: &str| {
        Some(ProxyId {
            scheme,
            name: name.into(),
            port: port.into(),
        })
    };
    assert_eq!(split_id("web"), id(Scheme::Http, "web", ""));
    assert_eq!(split_id("web:80"), id(Scheme::Http, "web", "80"));
    assert_eq!(split_id("web:http"), id(Scheme::Http, "web", "http"));
    assert_eq!(split_id("https:web:443"), id(Scheme::Https, "web", "443"));
    assert_eq!(split_id("http:web:"), id(Scheme::Http, "web", ""));
    assert_eq!(split_id("ftp:web:21"), None);
    assert_eq!(split_id(":80"), None);
    assert_eq!(split_id("a:b:c:d"), None);
}

fn service() -> Value {
    json!({"spec": {"ports": [
        {"name": "http", "port": 80, "targetPort": 8080},
        {"name": "metrics", "port": 9100, "targetPort": "metrics"},
    ]}})
}

#[test]
fn a_port_number_names_the_service_port_declaring_it() {
    let id = |port: &str| split_id(&format!("web:{port}")).expect("id");
    assert_eq!(
        service_port_name(&service(), &id("80")).expect("80"),
        "http"
    );
    assert_eq!(
        service_port_name(&service(), &id("metrics")).expect("by name"),
        "metrics"
    );
    let unnamed = json!({"spec": {"ports": [{"port": 80}]}});
    assert_eq!(service_port_name(&unnamed, &id("80")).expect("80"), "");
    let err = service_port_name(&service(), &id("81")).expect_err("no port 81");
    assert_eq!(
        err.to_string(),
        "no service port 81 found for service \"web\""
    );
}

#[test]
fn endpoint_candidates_are_pod_addresses_serving_the_named_port() {
    let endpoints = json!({"subsets": [
        {
            "addresses": [
                {"ip": "10.42.0.5", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-0"}},
                {"ip": "10.42.0.6"},
                {"ip": "10.42.0.7", "targetRef": {"kind": "Pod", "namespace": "other", "name": "x"}},
            ],
            "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}],
        },
        {
            "addresses": [{"ip": "10.42.1.5", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-1"}}],
            "ports": [{"name": "metrics", "port": 9100}],
        },
    ]});
    let got = endpoint_candidates(&endpoints, "ns", "http");
    assert_eq!(
        got,
        [Backend {
            ip: "10.42.0.5".parse().expect("ip"),
            port: 8080,
            pod: "web-0".into()
        }]
    );
    let got = endpoint_candidates(&endpoints, "ns", "metrics");
    assert_eq!(
        got.iter().map(|b| b.pod.as_str()).collect::<Vec<_>>(),
        ["web-0", "web-1"]
    );
    assert!(endpoint_candidates(&endpoints, "ns", "").is_empty());
    assert!(endpoint_candidates(&json!({}), "ns", "http").is_empty());
}

#[test]
fn an_endpoint_is_valid_only_while_its_pod_has_the_address() {
    let pod = json!({"status": {"podIP": "10.42.0.5", "podIPs": [{"ip": "10.42.0.5"}]}});
    assert!(pod_has_ip(&pod, "10.42.0.5".parse().expect("ip")));
    assert!(!pod_has_ip(&pod, "10.42.0.9".parse().expect("ip")));
    assert!(!pod_has_ip(&json!({}), "10.42.0.5".parse().expect("ip")));
}

#[test]
fn a_pod_backend_is_its_ip_and_the_given_declared_or_default_port() {
    let pod = json!({
        "spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": 8080}]}]},
        "status": {"podIP": "10.42.0.5"},
    });
    let backend = |id: &str| pod_backend(&pod, &split_id(id).expect("id"));
    assert_eq!(backend("web-0:81").expect("81").port, 81);
    assert_eq!(backend("web-0").expect("declared").port, 8080);
    let bare = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"podIP": "10.42.0.5"}});
    let id = split_id("https:web-0:").expect("id");
    assert_eq!(pod_backend(&bare, &id).expect("default").port, 443);
    assert!(backend("web-0:http").is_err(), "only numbers are ports");
    let pending = json!({"spec": {"containers": []}, "status": {}});
    let err = pod_backend(&pending, &split_id("p:80").expect("id")).expect_err("no IP");
    assert_eq!(err.to_string(), "address not allowed");
    let host = json!({"status": {"podIP": "127.0.0.1"}});
    assert!(pod_backend(&host, &split_id("p:80").expect("id")).is_err());
}

#[test]
fn verbs_follow_the_method() {
    assert_eq!(verb(&Method::GET), "get");
    assert_eq!(verb(&Method::HEAD), "get");
    assert_eq!(verb(&Method::POST), "create");
    assert_eq!(verb(&Method::PUT), "update");
    assert_eq!(verb(&Method::PATCH), "patch");
    assert_eq!(verb(&Method::DELETE), "delete");
    assert_eq!(verb(&Method::OPTIONS), "");
}

#[test]
fn backend_paths_are_cleaned_and_keep_a_trailing_slash() {
    let cases = [
        ("", ""),
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/b/", "/a/b/"),
        ("//a//./b/../c", "/a/c"),
        ("/../../etc", "/etc"),
        ("/a/..", "/"),
    ];
    for (rest, want) in cases {
        assert_eq!(backend_path(rest), want, "{rest:?}");
    }
}
