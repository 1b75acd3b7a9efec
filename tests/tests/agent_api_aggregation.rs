//! Issue 34, item 7 on a real agent: an aggregated API server in a pod (the python image's
//! `https_server.py` with `tests/python/aggregated_api.py`, a certificate for its Service's
//! name from a CA the test makes, that CA as the APIService's `caBundle`) behind a Service
//! with a selector. The controller reaches the pod's address itself: the agent runs in this
//! machine's network namespace, so the pod network is routed here. Checked with kubectl 1.33:
//! the APIService becomes `Available`, `kubectl get --raw` and `kubectl api-resources` see
//! the group, a list reaches the pod with the caller's identity, and a
//! `v1beta1.metrics.k8s.io` served by the pod replaces the built-in metrics API under
//! `kubectl top`.

use std::path::Path;
use std::time::Duration;

use berth_tests::fixtures::python::{
    HTTPS_SERVER_FILE, HTTPS_SERVER_PY, https_server_pod, push_python_image, tls_secret,
};
use berth_tests::objects::{configmap, namespace};
use berth_tests::pki::serving_certificate;
use berth_tests::{Cluster, Kubectl};
use serde_json::{Value, json};

const KUBECTL_1_33: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";
const HANDLERS_PY: &str = include_str!("../python/aggregated_api.py");
const NS: &str = "wardle";
const SERVICE_DNS_NAME: &str = "wardle-api.wardle.svc";
const SERVER_PORT: u16 = 8443;
const STARTUP: Duration = Duration::from_secs(120);
const AVAILABLE: Duration = Duration::from_secs(60);

fn api_service(group: &str, version: &str, ca_bundle: &str) -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": format!("{version}.{group}")},
           "spec": {"group": group, "version": version,
                    "service": {"namespace": NS, "name": "wardle-api"},
                    "caBundle": ca_bundle, "groupPriorityMinimum": 100, "versionPriority": 100}})
}

/// `kubectl get apiservice NAME`'s AVAILABLE column once it reads `True`.
fn wait_available(c: &Cluster, k: &Kubectl, name: &str) {
    c.wait_for(AVAILABLE, &format!("{name} Available"), || {
        let out = k.ok(&["get", "apiservice", name, "--no-headers"]);
        match out.split_whitespace().nth(2) {
            Some("True") => Ok(()),
            _ => Err(out),
        }
    });
}

#[test]
fn an_api_service_served_by_a_pod_answers_kubectl_and_replaces_the_metrics_api() {
    let c = Cluster::start(1);
    push_python_image(c.registry(), c.scratch());
    let api = c.api();
    let k = c.kubectl().with_binary(Path::new(KUBECTL_1_33));
    api.create("/api/v1/namespaces", &namespace(NS));
    let cert = serving_certificate("wardle-test-ca", &[SERVICE_DNS_NAME]);
    let in_ns = |kind: &str| format!("/api/v1/namespaces/{NS}/{kind}");
    api.create(
        &in_ns("secrets"),
        &tls_secret("wardle-tls", &cert.cert_pem, &cert.key_pem),
    );
    api.create(
        &in_ns("configmaps"),
        &configmap(
            "wardle-server",
            &[
                (HTTPS_SERVER_FILE, HTTPS_SERVER_PY),
                ("aggregated_api.py", HANDLERS_PY),
            ],
        ),
    );
    api.create(
        &in_ns("pods"),
        &https_server_pod(
            "wardle-server",
            &json!({"app": "wardle"}),
            "wardle-server",
            "wardle-tls",
            "aggregated_api",
            SERVER_PORT,
        ),
    );
    api.create(
        &in_ns("services"),
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "wardle-api"},
                "spec": {"selector": {"app": "wardle"},
                         "ports": [{"name": "https", "port": 443, "targetPort": SERVER_PORT}]}}),
    );
    c.wait_for_pod_ready(NS, "wardle-server", STARTUP);

    c.apply(&api_service(
        "wardle.example.com",
        "v1alpha1",
        &cert.ca_bundle(),
    ));
    wait_available(&c, &k, "v1alpha1.wardle.example.com");
    let discovery: Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]))
            .unwrap_or_else(|e| panic!("discovery: {e}"));
    assert_eq!(discovery["resources"][0]["kind"], "Flunder", "{discovery}");
    let out = k.ok(&["api-resources", "--api-group", "wardle.example.com"]);
    assert!(out.contains("flunders"), "{out}");
    let list: Value =
        serde_json::from_str(&k.ok(&["get", "flunders", "-n", "default", "-o", "json"]))
            .unwrap_or_else(|e| panic!("flunders: {e}"));
    let caller = &list["items"][0]["spec"];
    assert_eq!(caller["user"], "admin", "{list}");
    assert!(
        caller["groups"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("system:masters"))),
        "{list}"
    );

    c.apply(&api_service("metrics.k8s.io", "v1beta1", &cert.ca_bundle()));
    wait_available(&c, &k, "v1beta1.metrics.k8s.io");
    let out = k.ok(&["top", "pod", "-n", "default"]);
    assert!(
        out.contains("from-the-pod") && out.contains("321m") && out.contains("54Mi"),
        "{out}"
    );

    // With the server's pod gone, the APIService says why and requests are refused.
    k.ok(&["delete", "pod", "-n", NS, "wardle-server", "--wait=false"]);
    c.wait_for(AVAILABLE, "MissingEndpoints", || {
        let out = k.ok(&[
            "get",
            "apiservice",
            "v1alpha1.wardle.example.com",
            "--no-headers",
        ]);
        if out.contains("False (MissingEndpoints)") {
            Ok(())
        } else {
            Err(out)
        }
    });
    let refused = k.fails(&["get", "flunders", "-n", "default"]);
    assert!(
        refused.stderr.contains("service unavailable")
            || refused
                .stderr
                .contains("the server is currently unable to handle the request"),
        "{}",
        refused.stderr
    );
}
