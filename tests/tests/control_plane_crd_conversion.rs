//! CustomResourceDefinition conversion webhooks with the real controller and kubectl 1.33: a
//! definition whose two versions differ in shape (v1 `spec.host` + `spec.port`, v2
//! `spec.endpoint: "host:port"`) converts through a webhook served by this test process over
//! HTTPS (a CA made with rcgen as the `caBundle`), reached through `clientConfig.service`: a
//! selectorless Service whose EndpointSlice points at 127.0.0.1. Objects created through one
//! version read through the other, a patch through the non-storage version, a list and a
//! watch through it; with the webhook down, reads through the other version fail with
//! upstream's error and reads through the stored version still work. Knative's published
//! PingSource definition (two versions, a Webhook conversion) applies and becomes Established.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use berth_tests::Controller;
use berth_tests::api::Next;
use berth_tests::tls_server::{TlsServer, serving_config};
use serde_json::{Value, json};

const KUBECTL_1_33: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";
const SERVICE_DNS_NAME: &str = "conv-svc.conv.svc";
const V2: &str = "backends.v2.conv.example.com";
const V1: &str = "backends.v1.conv.example.com";

/// One object converted as the webhook converts it: v1 `host`/`port` ↔ v2 `endpoint`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut out = obj.clone();
    let spec = &obj["spec"];
    out["spec"] = if desired.ends_with("/v2") {
        json!({"endpoint": format!("{}:{}", spec["host"].as_str().unwrap_or_default(), spec["port"])})
    } else {
        let endpoint = spec["endpoint"].as_str().unwrap_or_default();
        let (host, port) = endpoint.rsplit_once(':').unwrap_or((endpoint, "0"));
        json!({"host": host, "port": port.parse::<i64>().unwrap_or(0)})
    };
    out["apiVersion"] = json!(desired);
    // Labels may change: the webhook marks what it converted.
    out["metadata"]["labels"]["converted-to"] = json!(desired.rsplit('/').next());
    out
}

/// The answer to one ConversionReview.
fn answer(review: &Value) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let converted: Vec<Value> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| convert(o, desired))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
           "response": {"uid": request["uid"], "result": {"status": "Success"},
                        "convertedObjects": converted}})
}

/// The test's conversion webhook ([`TlsServer`]), counting what it is sent.
struct ConversionServer {
    server: TlsServer,
    port: u16,
    ca_pem: String,
    /// Reviews answered and objects converted, and the review versions seen.
    reviews: Arc<AtomicUsize>,
    objects: Arc<AtomicUsize>,
    kinds: Arc<Mutex<Vec<String>>>,
}

impl ConversionServer {
    fn start() -> ConversionServer {
        let (config, ca_pem) = serving_config("conversion-test-ca", &[SERVICE_DNS_NAME]);
        let reviews = Arc::new(AtomicUsize::new(0));
        let objects = Arc::new(AtomicUsize::new(0));
        let kinds = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let (reviews, objects, kinds) = (reviews.clone(), objects.clone(), kinds.clone());
            TlsServer::start(config, move |req| {
                let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
                reviews.fetch_add(1, Ordering::SeqCst);
                let sent = review["request"]["objects"].as_array().map_or(0, Vec::len);
                objects.fetch_add(sent, Ordering::SeqCst);
                kinds
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(review["apiVersion"].as_str().unwrap_or_default().into());
                (200, answer(&review))
            })
        };
        ConversionServer {
            port: server.port,
            server,
            ca_pem,
            reviews,
            objects,
            kinds,
        }
    }

    /// Closes the listener and every connection: calls are refused from now on.
    fn stop(&mut self) {
        self.server.stop();
    }
}

fn definition(ca_bundle: &str) -> String {
    let schema = |spec: Value| json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "backends.conv.example.com"},
        "spec": {
            "group": "conv.example.com", "scope": "Namespaced",
            "names": {"plural": "backends", "singular": "backend", "kind": "Backend", "listKind": "BackendList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": schema(json!({"host": {"type": "string"}, "port": {"type": "integer"}}))},
                {"name": "v2", "served": true, "storage": false,
                 "schema": schema(json!({"endpoint": {"type": "string"}}))},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": ca_bundle,
                    "service": {"namespace": "conv", "name": "conv-svc", "path": "/convert"}}}},
        }})
    .to_string()
}

fn get_json(k: &berth_tests::kubectl::Kubectl, args: &[&str]) -> Value {
    let out = k.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn a_conversion_webhook_converts_reads_writes_lists_and_watches() {
    let c = Controller::start();
    let mut server = ConversionServer::start();
    let k = c.kubectl().with_binary(Path::new(KUBECTL_1_33));
    k.ok(&["create", "namespace", "conv"]);
    k.apply_stdin(
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "conv-svc", "namespace": "conv"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}})
        .to_string(),
    );
    k.apply_stdin(
        &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "conv-svc-manual", "namespace": "conv",
                         "labels": {"kubernetes.io/service-name": "conv-svc"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]})
        .to_string(),
    );
    k.apply_stdin(&definition(&B64.encode(&server.ca_pem)));
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/backends.conv.example.com",
        "--timeout=20s",
    ]);

    // Created through the stored version, read through the other one.
    let a = json!({"apiVersion": "conv.example.com/v1", "kind": "Backend",
        "metadata": {"name": "a", "labels": {"app": "a"}}, "spec": {"host": "a.example.com", "port": 80}});
    c.wait_for(Duration::from_secs(10), "v2 served", || {
        let r = k.run_stdin(&["apply", "-f", "-"], &a.to_string());
        if r.success() {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
    let reviews_before = server.reviews.load(Ordering::SeqCst);
    let read = get_json(&k, &["get", V1, "a", "-o", "json"]);
    assert_eq!(
        read["spec"],
        json!({"host": "a.example.com", "port": 80}),
        "{read}"
    );
    assert_eq!(
        server.reviews.load(Ordering::SeqCst),
        reviews_before,
        "an object in the version asked for is not sent"
    );
    let read = get_json(&k, &["get", V2, "a", "-o", "json"]);
    assert_eq!(read["apiVersion"], "conv.example.com/v2", "{read}");
    assert_eq!(
        read["spec"],
        json!({"endpoint": "a.example.com:80"}),
        "{read}"
    );
    assert_eq!(read["metadata"]["labels"]["converted-to"], "v2", "{read}");
    assert_eq!(read["metadata"]["labels"]["app"], "a", "{read}");

    // Created through v2: stored as v1, read through both.
    let b = json!({"apiVersion": "conv.example.com/v2", "kind": "Backend",
        "metadata": {"name": "b"}, "spec": {"endpoint": "b.example.com:8080"}});
    k.ok_stdin(&["create", "-f", "-"], &b.to_string());
    let read = get_json(&k, &["get", V1, "b", "-o", "json"]);
    assert_eq!(
        read["spec"],
        json!({"host": "b.example.com", "port": 8080}),
        "{read}"
    );
    assert_eq!(read["metadata"]["labels"]["converted-to"], "v1", "{read}");
    let read = get_json(&k, &["get", V2, "b", "-o", "json"]);
    assert_eq!(
        read["spec"],
        json!({"endpoint": "b.example.com:8080"}),
        "{read}"
    );

    // A patch through v2 applies to the object in v2.
    k.ok(&[
        "patch",
        V2,
        "a",
        "--type=merge",
        "-p",
        r#"{"spec":{"endpoint":"a.example.com:81"}}"#,
    ]);
    let read = get_json(&k, &["get", V1, "a", "-o", "json"]);
    assert_eq!(
        read["spec"],
        json!({"host": "a.example.com", "port": 81}),
        "{read}"
    );

    // A list through v2: every item converted, in one review.
    let (reviews, objects) = (
        server.reviews.load(Ordering::SeqCst),
        server.objects.load(Ordering::SeqCst),
    );
    let list = get_json(&k, &["get", V2, "-o", "json"]);
    let endpoints: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| &i["spec"]["endpoint"])
        .collect();
    assert_eq!(
        endpoints,
        [&json!("a.example.com:81"), &json!("b.example.com:8080")],
        "{list}"
    );
    assert_eq!(
        (
            server.reviews.load(Ordering::SeqCst) - reviews,
            server.objects.load(Ordering::SeqCst) - objects
        ),
        (1, 2),
        "one review for the list's two objects"
    );

    // A watch through v2: each event converted.
    let api = c.admin_api();
    let listed = api.get_ok("/apis/conv.example.com/v2/namespaces/default/backends");
    assert_eq!(listed["apiVersion"], "conv.example.com/v2", "{listed}");
    assert_eq!(listed["kind"], "BackendList", "{listed}");
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut watch = api
        .watch(&format!(
            "/apis/conv.example.com/v2/namespaces/default/backends?watch=1&resourceVersion={rv}"
        ))
        .unwrap_or_else(|r| panic!("watch refused: {}", r.describe()));
    k.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "conv.example.com/v1", "kind": "Backend",
            "metadata": {"name": "c"}, "spec": {"host": "c.example.com", "port": 9}})
        .to_string(),
    );
    let event = watch.expect_event(Duration::from_secs(10), "c added");
    assert_eq!(event["type"], "ADDED", "{}", watch.describe());
    assert_eq!(event["object"]["apiVersion"], "conv.example.com/v2");
    assert_eq!(
        event["object"]["spec"],
        json!({"endpoint": "c.example.com:9"})
    );
    assert!(
        server
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .all(|v| v == "apiextensions.k8s.io/v1"),
        "ConversionReviews in v1, the version the webhook lists"
    );

    // The webhook down: the watch ends with an error, reads through v2 fail with upstream's
    // error (a 500), reads through the stored version still work.
    server.stop();
    k.ok(&["label", V1, "c", "after=stop"]);
    match watch.next(Duration::from_secs(40)) {
        Next::Event(e) => {
            assert_eq!(e["type"], "ERROR", "{e}");
            let message = e["object"]["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with("conversion webhook for conv.example.com/v1, Kind=Backend failed: Post \"https://conv-svc.conv.svc:443/convert?timeout=30s\""),
                "{e}"
            );
        }
        other => panic!(
            "expected an ERROR event, got {other:?}\n{}",
            watch.describe()
        ),
    }
    let r = k.fails(&["get", V2, "a", "-o", "json"]);
    assert!(
        r.stderr.contains(
            "Error from server: conversion webhook for conv.example.com/v1, Kind=Backend failed: Post \"https://conv-svc.conv.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:"
        ) && r.stderr.contains("connect: connection refused"),
        "{}",
        r.describe()
    );
    let r = k.fails(&["get", V2, "-o", "json"]);
    assert!(
        r.stderr
            .contains("conversion webhook for conv.example.com/v1, Kind=BackendList failed"),
        "{}",
        r.describe()
    );
    let reply = api.get("/apis/conv.example.com/v2/namespaces/default/backends/a");
    assert_eq!(reply.status, 500, "{}", reply.body);
    let status: Value = serde_json::from_str(&reply.body).unwrap_or_default();
    assert_eq!(status.get("reason"), None, "upstream's bare 500: {status}");
    let read = get_json(&k, &["get", V1, "a", "-o", "json"]);
    assert_eq!(read["spec"]["port"], 81, "{read}");
    let r = k.fails_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "conv.example.com/v2", "kind": "Backend",
            "metadata": {"name": "d"}, "spec": {"endpoint": "d:1"}})
        .to_string(),
    );
    assert!(
        r.stderr
            .contains("conversion webhook for conv.example.com/v2, Kind=Backend failed"),
        "{}",
        r.describe()
    );
}

/// Knative Eventing's PingSource definition, as published (two versions of different shapes,
/// `conversion: {strategy: Webhook}` to a Service in `knative-eventing`), applies unchanged and
/// becomes Established; an object through its storage version needs no webhook, one read
/// through the other version fails, as upstream, while the webhook's Service is absent.
#[test]
fn a_published_definition_with_a_conversion_webhook_is_established() {
    let c = Controller::start();
    let k = c.kubectl().with_binary(Path::new(KUBECTL_1_33));
    let file = berth_tests::controller::workspace_root()
        .join("tests/manifests/crds/knative-eventing/pingsource.yaml");
    let out = k.ok(&["apply", "-f", file.to_str().unwrap_or_default()]);
    assert!(
        out.contains("pingsources.sources.knative.dev created"),
        "{out}"
    );
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/pingsources.sources.knative.dev",
        "--timeout=20s",
    ]);
    let crd = get_json(
        &k,
        &[
            "get",
            "crd",
            "pingsources.sources.knative.dev",
            "-o",
            "json",
        ],
    );
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook", "{crd}");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"], 443,
        "{crd}"
    );
    let ping = json!({"apiVersion": "sources.knative.dev/v1beta2", "kind": "PingSource",
        "metadata": {"name": "ping"},
        "spec": {"schedule": "*/2 * * * *", "contentType": "application/json",
                 "data": "{\"message\": \"hi\"}", "sink": {"uri": "http://example.com"}}});
    c.wait_for(Duration::from_secs(10), "PingSource served", || {
        let r = k.run_stdin(&["create", "-f", "-"], &ping.to_string());
        if r.success() {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
    let read = get_json(
        &k,
        &[
            "get",
            "pingsources.v1beta2.sources.knative.dev",
            "ping",
            "-o",
            "json",
        ],
    );
    assert_eq!(read["spec"]["schedule"], "*/2 * * * *", "{read}");
    let r = k.fails(&["get", "pingsources.v1beta1.sources.knative.dev", "ping"]);
    assert!(
        r.stderr.contains(
            "conversion webhook for sources.knative.dev/v1beta2, Kind=PingSource failed: Post \"https://eventing-webhook.knative-eventing.svc:443/?timeout=30s\""
        ),
        "{}",
        r.describe()
    );
}
