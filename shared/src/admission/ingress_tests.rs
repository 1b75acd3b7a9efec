//! Table tests of Ingress and IngressClass admission through [`crate::admission::admit`]:
//! upstream's messages for backends, paths, hosts, TLS and classes.

use serde_json::{Value, json};

use crate::admission::{AdmissionError, Operation, admit};

fn messages(kind: &str, mut obj: Value, old: Option<&Value>) -> Vec<String> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    match admit(kind, op, &mut obj, old) {
        Ok(()) => Vec::new(),
        Err(AdmissionError::Invalid(errs)) => errs.iter().map(|e| e.message()).collect(),
        Err(e) => vec![e.to_string()],
    }
}

fn ingress(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
           "metadata": {"name": "web", "namespace": "default", "uid": "u1"}, "spec": spec})
}

fn path(path: &str, path_type: Option<&str>, backend: Value) -> Value {
    let mut p = json!({"path": path, "backend": backend});
    if let Some(t) = path_type {
        p["pathType"] = json!(t);
    }
    p
}

fn service(name: &str, port: Value) -> Value {
    json!({"service": {"name": name, "port": port}})
}

fn rule(host: &str, paths: Vec<Value>) -> Value {
    json!({"host": host, "http": {"paths": paths}})
}

#[test]
fn ingresses_are_judged_as_upstream_judges_them() {
    let web = service("web", json!({"number": 80}));
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "a realistic ingress",
            json!({"ingressClassName": "berth",
                   "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                   "rules": [rule("shop.example.com", vec![
                       path("/", Some("Prefix"), web.clone()),
                       path("/api", Some("Exact"), service("api", json!({"name": "http"}))),
                   ]), rule("*.example.com", vec![path("", Some("ImplementationSpecific"), web.clone())])]}),
            vec![],
        ),
        (
            "only a default backend",
            json!({"defaultBackend": web.clone()}),
            vec![],
        ),
        (
            "nothing to route",
            json!({}),
            vec!["spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"],
        ),
        (
            "a path without pathType",
            json!({"rules": [rule("", vec![path("/", None, web.clone())])]}),
            vec![
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            ],
        ),
        (
            "an unknown pathType",
            json!({"rules": [rule("", vec![path("/", Some("Regex"), web.clone())])]}),
            vec![
                "spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            ],
        ),
        (
            "a relative Prefix path with a bad sequence",
            json!({"rules": [rule("", vec![path("api//v1/.", Some("Prefix"), web.clone())])]}),
            vec![
                "spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/.\": must be an absolute path",
                "spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/.\": must not contain '//'",
                "spec.rules[0].http.paths[0].path: Invalid value: \"api//v1/.\": cannot end with '/.'",
            ],
        ),
        (
            "a relative ImplementationSpecific path",
            json!({"rules": [rule("", vec![path("api", Some("ImplementationSpecific"), web.clone())])]}),
            vec![
                "spec.rules[0].http.paths[0].path: Invalid value: \"api\": must be an absolute path",
            ],
        ),
        (
            "an IP as host",
            json!({"rules": [rule("10.0.0.1", vec![path("/", Some("Prefix"), web.clone())])]}),
            vec![
                "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
            ],
        ),
        (
            "a wildcard in the middle of a host",
            json!({"rules": [rule("shop.*.com", vec![path("/", Some("Prefix"), web.clone())])]}),
            vec![
                "spec.rules[0].host: Invalid value: \"shop.*.com\": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            "a backend with both port name and number",
            json!({"defaultBackend": service("web", json!({"name": "http", "number": 80}))}),
            vec![
                "spec.defaultBackend: Invalid value: \"\": cannot set both port name & port number",
            ],
        ),
        (
            "a backend without a port",
            json!({"defaultBackend": service("web", json!({}))}),
            vec!["spec.defaultBackend: Required value: port name or number is required"],
        ),
        (
            "a backend port out of range and a service name that is no DNS-1035 label",
            json!({"defaultBackend": service("1web", json!({"number": 70000}))}),
            vec![
                "spec.defaultBackend.service.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.defaultBackend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        ),
        (
            "a backend naming nothing",
            json!({"defaultBackend": {}}),
            vec![
                "spec.defaultBackend: Invalid value: \"\": resource or service backend is required",
            ],
        ),
        (
            "a backend naming both a resource and a service",
            json!({"defaultBackend": {"resource": {"kind": "Bucket", "name": "static"}, "service": {"name": "web", "port": {"number": 80}}}}),
            vec![
                "spec.defaultBackend: Invalid value: \"\": cannot set both resource and service backends",
            ],
        ),
        (
            "a resource backend without a name",
            json!({"defaultBackend": {"resource": {"apiGroup": "storage.example.com", "kind": "Bucket", "name": ""}}}),
            vec!["spec.defaultBackend.resource.name: Required value"],
        ),
        (
            "a TLS secret name that is no subdomain",
            json!({"defaultBackend": web.clone(), "tls": [{"secretName": "Shop_TLS"}]}),
            vec![
                "spec.tls[0].secretName: Invalid value: \"Shop_TLS\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            "an http rule without paths",
            json!({"rules": [{"host": "a.example.com", "http": {"paths": []}}]}),
            vec!["spec.rules[0].http.paths: Required value"],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(messages("Ingress", ingress(spec), None), want, "{name}");
    }
}

#[test]
fn the_class_annotation_must_agree_with_ingress_class_name_on_create() {
    let mut ing = ingress(json!({"ingressClassName": "berth",
        "defaultBackend": service("web", json!({"number": 80}))}));
    ing["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "nginx"});
    assert_eq!(
        messages("Ingress", ing.clone(), None),
        [
            "annotations.kubernetes.io/ingress.class: Invalid value: \"nginx\": must match `ingressClassName` when both are specified"
        ]
    );
    let mut stored = ingress(json!({"defaultBackend": service("web", json!({"number": 80}))}));
    stored["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "nginx"});
    admit("Ingress", Operation::Create, &mut stored, None).unwrap();
    assert_eq!(
        messages("Ingress", ing, Some(&stored)),
        Vec::<String>::new()
    );
}

#[test]
fn an_update_may_keep_a_stored_invalid_tls_secret_name() {
    let mut stored = ingress(
        json!({"defaultBackend": service("web", json!({"number": 80})),
        "tls": [{"secretName": "Old_Name"}]}),
    );
    stored["metadata"]["resourceVersion"] = json!("5");
    let mut updated = stored.clone();
    updated["spec"]["tls"][0]["hosts"] = json!(["a.example.com"]);
    assert_eq!(
        messages("Ingress", updated, Some(&stored)),
        Vec::<String>::new()
    );
}

fn class(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
           "metadata": {"name": "berth", "uid": "u1"}, "spec": spec})
}

#[test]
fn ingress_class_parameters_default_to_cluster_scope() {
    let mut c = class(json!({"controller": "berth.io/ingress",
        "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "lb"}}));
    admit("IngressClass", Operation::Create, &mut c, None).unwrap();
    assert_eq!(c["spec"]["parameters"]["scope"], "Cluster");
}

#[test]
fn ingress_classes_are_judged_as_upstream_judges_them() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "no controller",
            json!({}),
            vec!["spec.controller: Required value"],
        ),
        (
            "a controller without a domain",
            json!({"controller": "ingress"}),
            vec![
                "spec.controller: Invalid value: \"ingress\": must be a domain-prefixed path (such as \"acme.io/foo\")",
            ],
        ),
        (
            "a namespaced parameter without a namespace",
            json!({"controller": "berth.io/ingress",
                   "parameters": {"kind": "IngressParameters", "name": "lb", "scope": "Namespace"}}),
            vec![
                "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
            ],
        ),
        (
            "a cluster parameter with a namespace",
            json!({"controller": "berth.io/ingress",
                   "parameters": {"kind": "IngressParameters", "name": "lb", "namespace": "x"}}),
            vec!["spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'"],
        ),
        (
            "an unknown scope and a kind with a slash",
            json!({"controller": "berth.io/ingress",
                   "parameters": {"kind": "a/b", "name": "lb", "scope": "Global"}}),
            vec![
                "spec.parameters.kind: Invalid value: \"a/b\": may not contain '/'",
                "spec.parameters.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespace\"",
            ],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(messages("IngressClass", class(spec), None), want, "{name}");
    }
}

#[test]
fn an_ingress_class_controller_never_changes() {
    let mut old = class(json!({"controller": "berth.io/ingress"}));
    admit("IngressClass", Operation::Create, &mut old, None).unwrap();
    assert_eq!(
        messages(
            "IngressClass",
            class(json!({"controller": "example.com/other"})),
            Some(&old)
        ),
        ["spec.controller: Invalid value: \"example.com/other\": field is immutable"]
    );
}
