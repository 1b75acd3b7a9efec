//! API aggregation with the real controller and kubectl: an aggregated API server run by this
//! test process (HTTPS with a certificate for `wardle-api.wardle.svc` from a CA of the test's,
//! that CA as the APIService's `caBundle`), reached through a Service whose EndpointSlice
//! names 127.0.0.1. The server trusts what a real one trusts: the front proxy CA the controller
//! publishes in the `extension-apiserver-authentication` ConfigMap, and it answers with the
//! identity the front proxy's headers carried. Checked: the local APIServices, `Available`,
//! `kubectl get --raw`, `kubectl api-resources`, the caller's identity, and a user's
//! `v1beta1.metrics.k8s.io` replacing the built-in metrics API under `kubectl top`; and
//! metrics-server's published RBAC and APIService (`tests/manifests/metrics-server/`) applied
//! over the local APIService as a user installs it.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use berth_tests::tls_server::TlsServer;
use berth_tests::wait::wait_for;
use berth_tests::{Controller, Kubectl, Table};
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use serde_json::{Value, json};

const NAMESPACE: &str = "wardle";
const SERVICE: &str = "wardle-api";
const SERVER_NAME: &str = "wardle-api.wardle.svc";
const AVAILABLE_DEADLINE: Duration = Duration::from_secs(30);

/// The test's aggregated API server and the CA its certificate is from.
struct AggregatedServer {
    server: TlsServer,
    ca_pem: String,
}

/// A serving certificate for [`SERVER_NAME`] from a new CA: (CA PEM, chain, key).
fn serving_identity() -> (
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let (mut ca_params, ca_key) = berth_tests::pki::new_ca("wardle-ca");
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap_or_else(|e| fail(e));
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut params =
        CertificateParams::new(vec![SERVER_NAME.to_string()]).unwrap_or_else(|e| fail(e));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).unwrap_or_else(|e| fail(e));
    let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .unwrap_or_else(|e| panic!("key: {e}"));
    (ca_cert.pem(), vec![cert.der().clone()], key_der)
}

/// The discovery document of `group_version`.
fn resource_list(group_version: &str) -> Value {
    let resources = if group_version.starts_with("metrics.k8s.io/") {
        json!([
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]}
        ])
    } else {
        json!([{"name": "flunders", "singularName": "flunder", "namespaced": true,
                "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]}])
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}

/// The answer to `path` for the identity `headers` carry.
fn answer(path: &str, headers: &[(String, String)]) -> (u16, Value) {
    let path = path.split('?').next().unwrap_or_default();
    let all = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    };
    match path.trim_end_matches('/') {
        "/apis/wardle.example.com/v1alpha1" => (200, resource_list("wardle.example.com/v1alpha1")),
        "/apis/metrics.k8s.io/v1beta1" => (200, resource_list("metrics.k8s.io/v1beta1")),
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders" => (
            200,
            json!({"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1",
                   "metadata": {}, "items": [{
                       "kind": "Flunder", "apiVersion": "wardle.example.com/v1alpha1",
                       "metadata": {"name": "echo", "namespace": "default"},
                       "spec": {"user": all("X-Remote-User"), "groups": all("X-Remote-Group"),
                                "authorization": all("Authorization")}}]}),
        ),
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods" => (
            200,
            json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                   "metadata": {}, "items": [{
                       "metadata": {"name": "from-the-adapter", "namespace": "default"},
                       "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
                       "containers": [{"name": "main",
                                       "usage": {"cpu": "123m", "memory": "45Mi"}}]}]}),
        ),
        _ => (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                   "reason": "NotFound", "message": "the server could not find the requested resource"}),
        ),
    }
}

impl AggregatedServer {
    /// Listens on 127.0.0.1, accepting only clients whose certificate `front_proxy_ca` signed.
    fn start(front_proxy_ca: &str) -> AggregatedServer {
        berth_tests::client::install_crypto_provider();
        let (ca_pem, chain, key) = serving_identity();
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(front_proxy_ca.as_bytes()) {
            roots
                .add(cert.unwrap_or_else(|e| panic!("front proxy CA: {e}")))
                .unwrap_or_else(|e| panic!("front proxy CA: {e}"));
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .unwrap_or_else(|e| panic!("client verifier: {e}"));
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap_or_else(|e| panic!("server config: {e}"));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server = TlsServer::start(Arc::new(config), |req| answer(&req.path, &req.headers));
        AggregatedServer { server, ca_pem }
    }
}

/// A selectorless Service on 443 whose EndpointSlice names this process's server.
fn route_service_to(k: &Kubectl, port: u16) {
    let manifest = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "namespace": NAMESPACE},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": format!("{SERVICE}-1"), "namespace": NAMESPACE,
                      "labels": {"kubernetes.io/service-name": SERVICE}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]});
    k.ok_stdin(&["apply", "-f", "-"], &manifest.to_string());
}

fn api_service(group: &str, version: &str, ca_pem: &str) -> String {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": format!("{version}.{group}")},
           "spec": {"group": group, "version": version,
                    "service": {"namespace": NAMESPACE, "name": SERVICE},
                    "caBundle": B64.encode(ca_pem),
                    "groupPriorityMinimum": 100, "versionPriority": 100}})
    .to_string()
}

/// The row of `kubectl get apiservices` for `name`: (SERVICE, AVAILABLE).
fn api_service_row(k: &Kubectl, name: &str) -> Option<(String, String)> {
    let out = k.ok(&["get", "apiservices"]);
    let table = Table::parse(&out).ok()?;
    let row = table
        .rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(name))?;
    Some((row.get(1)?.clone(), row.get(2)?.clone()))
}

fn wait_available(k: &Kubectl, name: &str) {
    wait_for(
        AVAILABLE_DEADLINE,
        &format!("{name} Available"),
        || match api_service_row(k, name) {
            Some((_, a)) if a == "True" => Ok(()),
            other => Err(other),
        },
    );
}

#[test]
fn an_api_service_routes_its_group_version_to_its_server() {
    let c = Controller::start();
    let k = c.kubectl();

    // Every built-in group-version has a local APIService.
    let out = k.ok(&["get", "apiservices"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("no table ({e}): {out}"));
    assert_eq!(
        table.headers,
        ["NAME", "SERVICE", "AVAILABLE", "AGE"],
        "{out}"
    );
    for name in ["v1.", "v1.apps", "v1beta1.metrics.k8s.io"] {
        wait_for(
            AVAILABLE_DEADLINE,
            &format!("{name} Local and available"),
            || match api_service_row(&k, name) {
                Some((s, a)) if s == "Local" && a == "True" => Ok(()),
                other => Err(other),
            },
        );
    }

    // The server trusts the front proxy CA the controller publishes, as a real one does.
    let cm: Value = serde_json::from_str(&k.ok(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "json",
    ]))
    .unwrap_or_else(|e| panic!("configmap: {e}"));
    assert_eq!(
        cm["data"]["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(
        cm["data"]["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    let front_proxy_ca = cm["data"]["requestheader-client-ca-file"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestheader CA: {cm}"));
    let server = AggregatedServer::start(front_proxy_ca);

    // Without a Service the APIService is not available, and says why.
    k.ok_stdin(
        &["apply", "-f", "-"],
        &api_service("wardle.example.com", "v1alpha1", &server.ca_pem),
    );
    wait_for(
        AVAILABLE_DEADLINE,
        "ServiceNotFound",
        || match api_service_row(&k, "v1alpha1.wardle.example.com") {
            Some((s, a)) if s == "wardle/wardle-api" && a == "False (ServiceNotFound)" => Ok(()),
            other => Err(other),
        },
    );
    let refused = k.fails(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
    ]);
    assert!(
        refused.stderr.contains("service unavailable"),
        "{}",
        refused.stderr
    );

    route_service_to(&k, server.server.port);
    wait_available(&k, "v1alpha1.wardle.example.com");

    // Discovery: the group-version is the server's; the group is listed; kubectl finds it.
    let raw: Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]))
            .unwrap_or_else(|e| panic!("discovery: {e}"));
    assert_eq!(raw["resources"][0]["name"], "flunders");
    let group: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/apis/wardle.example.com"]))
        .unwrap_or_else(|e| panic!("group: {e}"));
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "wardle.example.com/v1alpha1"
    );
    let out = k.ok(&["api-resources", "--api-group", "wardle.example.com"]);
    assert!(out.contains("flunders") && out.contains("Flunder"), "{out}");
    let legacy: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/apis"]))
        .unwrap_or_else(|e| panic!("groups: {e}"));
    assert!(
        legacy["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["name"] == "wardle.example.com")),
        "{legacy}"
    );

    // A request reaches the server with the caller's identity, not its credentials.
    let list: Value =
        serde_json::from_str(&k.ok(&["get", "flunders", "-n", "default", "-o", "json"]))
            .unwrap_or_else(|e| panic!("flunders: {e}"));
    let spec = &list["items"][0]["spec"];
    assert_eq!(spec["user"], json!(["admin"]), "{list}");
    assert!(
        spec["groups"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("system:masters"))),
        "{list}"
    );
    assert_eq!(spec["authorization"], json!([]), "{list}");

    // A user's metrics APIService replaces the built-in one: kubectl top asks its server.
    k.ok_stdin(
        &["apply", "-f", "-"],
        &api_service("metrics.k8s.io", "v1beta1", &server.ca_pem),
    );
    wait_available(&k, "v1beta1.metrics.k8s.io");
    assert_eq!(
        api_service_row(&k, "v1beta1.metrics.k8s.io").map(|r| r.0),
        Some("wardle/wardle-api".to_string())
    );
    let out = k.ok(&["top", "pod", "-n", "default"]);
    assert!(
        out.contains("from-the-adapter") && out.contains("123m") && out.contains("45Mi"),
        "{out}"
    );
}

/// metrics-server's published RBAC and APIService, applied as a user installs them.
const METRICS_SERVER: &str = concat!(
    include_str!("../manifests/metrics-server/rbac.yaml"),
    include_str!("../manifests/metrics-server/apiservice.yaml")
);

#[test]
fn installing_metrics_server_replaces_the_built_in_metrics_api_instead_of_colliding() {
    let c = Controller::start();
    let k = c.kubectl();
    wait_for(
        AVAILABLE_DEADLINE,
        "the local metrics APIService",
        || match api_service_row(&k, "v1beta1.metrics.k8s.io") {
            Some((s, a)) if s == "Local" && a == "True" => Ok(()),
            other => Err(other),
        },
    );
    let out = k.ok_stdin(&["apply", "-f", "-"], METRICS_SERVER);
    assert!(
        out.contains("apiservice.apiregistration.k8s.io/v1beta1.metrics.k8s.io configured"),
        "{out}"
    );
    // Its RoleBinding names the Role the aggregator publishes for reading the ConfigMap.
    let can = k.ok(&[
        "auth",
        "can-i",
        "get",
        "configmap/extension-apiserver-authentication",
        "-n",
        "kube-system",
        "--as",
        "system:serviceaccount:kube-system:metrics-server",
    ]);
    assert_eq!(can.trim(), "yes");
    // Until metrics-server runs, the metrics API is its (unavailable) one, and says why.
    wait_for(
        AVAILABLE_DEADLINE,
        "ServiceNotFound",
        || match api_service_row(&k, "v1beta1.metrics.k8s.io") {
            Some((s, a)) if s == "kube-system/metrics-server" && a == "False (ServiceNotFound)" => {
                Ok(())
            }
            other => Err(other),
        },
    );
    let refused = k.fails(&["top", "pod", "-n", "default"]);
    assert!(
        refused.stderr.contains("service unavailable")
            || refused.stderr.contains("Metrics API not available"),
        "{}",
        refused.stderr
    );
    // Deleting it brings back the built-in metrics API (served in process, not listed again).
    k.ok(&["delete", "apiservice", "v1beta1.metrics.k8s.io"]);
    wait_for(AVAILABLE_DEADLINE, "the built-in metrics API back", || {
        let r = k.run(&[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        ]);
        if r.status.is_some_and(|s| s.success()) {
            Ok(())
        } else {
            Err(r.stderr)
        }
    });
}
