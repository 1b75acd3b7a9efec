//! Admission webhooks with the real controller and kubectl, served by this test process over
//! HTTPS (a certificate for 127.0.0.1 from a CA made with rcgen, that CA as the `caBundle`)
//! and reached through `clientConfig.url`: a mutating webhook adds a label to the pods its
//! `objectSelector` matches, a validating one refuses pods with an annotation with its own
//! message and warns otherwise; with the server stopped, `failurePolicy: Fail` refuses and
//! `Ignore` admits; a webhook slower than its `timeoutSeconds` is treated by its failure
//! policy. A figure: the admission latency a webhook adds over its own handling time.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use berth_tests::Controller;
use berth_tests::client::Req;
use berth_tests::tls_server::{TlsServer, serving_config};
use serde_json::{Value, json};

const KUBECTL_1_27: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";
const REFUSE_ANNOTATION: &str = "webhook.example.com/refuse";
/// The Service the service-referenced webhook is reached through, as its TLS name.
const SERVICE_DNS_NAME: &str = "hook-svc.hooked.svc";
const REFUSAL: &str = "pods annotated webhook.example.com/refuse are not welcome";

/// The test's webhook server ([`TlsServer`]) answering AdmissionReviews by path.
struct WebhookServer {
    server: TlsServer,
    port: u16,
    ca_pem: String,
    /// Released when the test ends: `/slow` answers only then.
    release: Arc<(Mutex<bool>, Condvar)>,
    /// Time spent inside the handler for each review, from request read to answer made.
    handled: Arc<Mutex<Vec<Duration>>>,
}

/// The answer to one review at `path`.
fn answer(path: &str, review: &Value, release: &(Mutex<bool>, Condvar)) -> Value {
    let request = &review["request"];
    let mut response = json!({"uid": request["uid"], "allowed": true});
    if path.starts_with("/mutate") {
        let ops = json!([{"op": "add", "path": "/metadata/labels/webhook-added", "value": "yes"}]);
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(B64.encode(ops.to_string()));
    } else if path.starts_with("/validate") {
        let annotated = request["object"]["metadata"]["annotations"]
            .get(REFUSE_ANNOTATION)
            .is_some();
        if annotated {
            response["allowed"] = json!(false);
            response["status"] = json!({"code": 403, "reason": "Forbidden", "message": REFUSAL});
        } else {
            let at = path.split('?').next().unwrap_or_default();
            response["warnings"] = json!([format!("checked by the test webhook at {at}")]);
        }
    } else if path.starts_with("/slow") {
        // Hangs until the test is over: longer than any timeout.
        let (lock, cvar) = release;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        drop(
            cvar.wait_while(guard, |released| !*released)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

impl WebhookServer {
    fn start() -> WebhookServer {
        let (config, ca_pem) = serving_config("webhook-test-ca", &["127.0.0.1", SERVICE_DNS_NAME]);
        let release = Arc::new((Mutex::new(false), Condvar::new()));
        let handled = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let (release, handled) = (release.clone(), handled.clone());
            TlsServer::start(config, move |req| {
                let start = Instant::now();
                let review: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let reply = answer(&req.path, &review, &release);
                handled
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(start.elapsed());
                (200, reply)
            })
        };
        WebhookServer {
            port: server.port,
            server,
            ca_pem,
            release,
            handled,
        }
    }

    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    fn ca_bundle(&self) -> String {
        B64.encode(&self.ca_pem)
    }

    /// Closes the listener and every connection: calls are refused from now on.
    fn stop(&mut self) {
        self.server.stop();
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.release;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cvar.notify_all();
        self.stop();
    }
}

fn rules() -> Value {
    json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}])
}

fn webhook(name: &str, url: &str, ca: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": rules(),
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hooked"}},
    });
    if let (Some(w), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            w.insert(k.clone(), v.clone());
        }
    }
    w
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": hooks})
    .to_string()
}

fn pod(name: &str, labels: Value, annotations: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": labels, "annotations": annotations},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.28"}]}})
    .to_string()
}

/// Waits until a server-side dry run of `probe` succeeds, or is refused by a webhook.
fn wait_until(c: &Controller, what: &str, probe: &str, succeeds: bool) {
    c.wait_for(Duration::from_secs(10), what, || {
        let r = c.kubectl().run_stdin(
            &["create", "--dry-run=server", "-n", "hooked", "-f", "-"],
            probe,
        );
        // A refusal counts only when a webhook made it (not a server still starting).
        let by_webhook =
            r.stderr.contains("admission webhook") || r.stderr.contains("calling webhook");
        if r.success() == succeeds && (succeeds || by_webhook) {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
}

#[test]
fn webhooks_mutate_and_validate_pods_and_failures_follow_the_failure_policy() {
    let c = Controller::start();
    let mut server = WebhookServer::start();
    c.kubectl_ok(&["create", "namespace", "hooked"]);
    c.kubectl_ok(&["create", "namespace", "elsewhere"]);
    let ca = server.ca_bundle();

    c.apply_stdin(&configuration(
        "MutatingWebhookConfiguration",
        "add-label",
        vec![webhook(
            "label.webhooks.example.com",
            &server.url("/mutate"),
            &ca,
            json!({"objectSelector": {"matchLabels": {"inject": "yes"}}}),
        )],
    ));
    c.apply_stdin(&configuration(
        "ValidatingWebhookConfiguration",
        "refuse-annotated",
        vec![webhook(
            "refuse.webhooks.example.com",
            &server.url("/validate"),
            &ca,
            json!({}),
        )],
    ));
    let listed = c.kubectl_ok(&["get", "validatingwebhookconfigurations"]);
    assert!(
        listed.contains("NAME")
            && listed.contains("WEBHOOKS")
            && listed.contains("refuse-annotated"),
        "{listed}"
    );
    let refused = pod("refused", json!({}), json!({REFUSE_ANNOTATION: "please"}));
    wait_until(&c, "the validating webhook", &refused, false);

    // The validating webhook's refusal, as kubectl prints it (the default, 1.27 and 1.20).
    for kubectl in [
        c.kubectl(),
        c.kubectl().with_binary(Path::new(KUBECTL_1_27)),
        c.kubectl()
            .with_binary(&berth_tests::kubectl::kubectl_1_20()),
    ] {
        let r = kubectl.fails_stdin(&["create", "-n", "hooked", "-f", "-"], &refused);
        assert!(
            r.stderr.contains(&format!(
                "admission webhook \"refuse.webhooks.example.com\" denied the request: {REFUSAL}"
            )),
            "{}",
            r.describe()
        );
    }
    // Outside the namespace selector, the same pod is admitted.
    c.kubectl()
        .ok_stdin(&["create", "-n", "elsewhere", "-f", "-"], &refused);

    // The mutating webhook labels the pods its object selector matches, and only those; the
    // validating webhook's warning reaches kubectl.
    let r = c.kubectl().run_stdin(
        &["create", "-n", "hooked", "-f", "-"],
        &pod("injected", json!({"inject": "yes"}), json!({})),
    );
    assert!(r.success(), "{}", r.describe());
    assert!(
        r.stderr.contains("Warning: checked by the test webhook"),
        "{}",
        r.describe()
    );
    c.kubectl().ok_stdin(
        &["create", "-n", "hooked", "-f", "-"],
        &pod("plain", json!({"inject": "no"}), json!({})),
    );
    let label = |name: &str| {
        c.kubectl_ok(&[
            "get",
            "pod",
            name,
            "-n",
            "hooked",
            "-o",
            "jsonpath={.metadata.labels.webhook-added}",
        ])
    };
    assert_eq!(label("injected"), "yes");
    assert_eq!(label("plain"), "");

    // A webhook slower than its timeout: Fail refuses with upstream's internal error, Ignore
    // admits.
    c.apply_stdin(&configuration(
        "ValidatingWebhookConfiguration",
        "slow",
        vec![
            webhook(
                "slow-fail.webhooks.example.com",
                &server.url("/slow"),
                &ca,
                json!({"timeoutSeconds": 1, "failurePolicy": "Fail",
                       "objectSelector": {"matchLabels": {"slow": "fail"}}}),
            ),
            webhook(
                "slow-ignore.webhooks.example.com",
                &server.url("/slow"),
                &ca,
                json!({"timeoutSeconds": 1, "failurePolicy": "Ignore",
                       "objectSelector": {"matchLabels": {"slow": "ignore"}}}),
            ),
        ],
    ));
    let slow_fail = pod("slow-fail", json!({"slow": "fail"}), json!({}));
    wait_until(&c, "the slow webhook", &slow_fail, false);
    let start = Instant::now();
    let r = c
        .kubectl()
        .fails_stdin(&["create", "-n", "hooked", "-f", "-"], &slow_fail);
    let waited = start.elapsed();
    assert!(
        r.stderr.contains(
            "Internal error occurred: failed calling webhook \"slow-fail.webhooks.example.com\""
        ) && r.stderr.contains("context deadline exceeded"),
        "{}",
        r.describe()
    );
    assert!(waited < Duration::from_secs(5), "refused after {waited:?}");
    c.kubectl().ok_stdin(
        &["create", "-n", "hooked", "-f", "-"],
        &pod("slow-ignore", json!({"slow": "ignore"}), json!({})),
    );
    c.kubectl_ok(&[
        "delete",
        "validatingwebhookconfiguration",
        "slow",
        "refuse-annotated",
    ]);

    // The server stopped: Fail refuses, Ignore admits.
    c.apply_stdin(&configuration(
        "ValidatingWebhookConfiguration",
        "down",
        vec![
            webhook(
                "down-fail.webhooks.example.com",
                &server.url("/validate-down"),
                &ca,
                json!({"failurePolicy": "Fail", "objectSelector": {"matchLabels": {"down": "fail"}}}),
            ),
            webhook(
                "down-ignore.webhooks.example.com",
                &server.url("/validate-down"),
                &ca,
                json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"down": "ignore"}}}),
            ),
        ],
    ));
    let down_fail = pod("down-fail", json!({"down": "fail"}), json!({}));
    // Wait until the configuration is in force (the server still answers: its warning shows).
    c.wait_for(Duration::from_secs(10), "the down configuration", || {
        let r = c.kubectl().run_stdin(
            &["create", "--dry-run=server", "-n", "hooked", "-f", "-"],
            &pod("probe", json!({"down": "ignore"}), json!({})),
        );
        if r.stderr
            .contains("checked by the test webhook at /validate-down")
        {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
    server.stop();
    let r = c
        .kubectl()
        .fails_stdin(&["create", "-n", "hooked", "-f", "-"], &down_fail);
    assert!(
        r.stderr.contains(
            "Internal error occurred: failed calling webhook \"down-fail.webhooks.example.com\": failed to call webhook: Post"
        ) && r.stderr.contains("connection refused"),
        "{}",
        r.describe()
    );
    c.kubectl().ok_stdin(
        &["create", "-n", "hooked", "-f", "-"],
        &pod("down-ignore", json!({"down": "ignore"}), json!({})),
    );
}

#[test]
fn a_webhook_adds_little_admission_latency_over_its_own_handling() {
    let c = Controller::start();
    let server = WebhookServer::start();
    c.kubectl_ok(&["create", "namespace", "hooked"]);
    c.apply_stdin(&configuration(
        "ValidatingWebhookConfiguration",
        "timed",
        vec![webhook(
            "timed.webhooks.example.com",
            &server.url("/validate"),
            &server.ca_bundle(),
            json!({"objectSelector": {"matchLabels": {"timed": "yes"}}}),
        )],
    ));
    let api = c.admin_api();
    let dry_run = |labels: Value| {
        let body: Value =
            serde_json::from_str(&pod("timed", labels, json!({}))).unwrap_or(Value::Null);
        let start = Instant::now();
        let reply = api.send(Req::post(
            "/api/v1/namespaces/hooked/pods?dryRun=All",
            &body,
        ));
        assert_eq!(reply.status, 201, "{}", reply.describe());
        start.elapsed()
    };
    c.wait_for(Duration::from_secs(10), "the webhook to be called", || {
        dry_run(json!({"timed": "yes"}));
        let n = server
            .handled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        if n > 0 { Ok(()) } else { Err(n) }
    });
    const N: usize = 200;
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    // Interleaved, so drift affects both alike.
    let (mut with, mut without) = (Vec::new(), Vec::new());
    server
        .handled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    for _ in 0..N {
        with.push(dry_run(json!({"timed": "yes"})));
        without.push(dry_run(json!({"timed": "no"})));
    }
    let calls = server
        .handled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // The webhook saw exactly the labelled half: the comparison is with and without it.
    assert_eq!(calls.len(), N);
    let handled = median(calls);
    let (with, without) = (median(with), median(without));
    let added = with.saturating_sub(without);
    println!(
        "admission webhook: dry-run pod create median {with:?} with the webhook, {without:?} \
         without; the webhook's own handling {handled:?}; added over its handling {:?} \
         ({N} requests each)",
        added.saturating_sub(handled)
    );
}

/// `clientConfig.service`: the webhook is reached at a ready endpoint of the Service's
/// EndpointSlices (here a selectorless Service whose slice points at this test's server),
/// its certificate checked for the Service's DNS name; the configuration objects themselves
/// are validated as upstream validates them.
#[test]
fn a_service_webhook_is_reached_through_its_endpoint_slices() {
    let c = Controller::start();
    let server = WebhookServer::start();
    c.kubectl_ok(&["create", "namespace", "hooked"]);
    c.apply_stdin(
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "hook-svc", "namespace": "hooked"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}})
        .to_string(),
    );
    c.apply_stdin(
        &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "hook-svc-manual", "namespace": "hooked",
                         "labels": {"kubernetes.io/service-name": "hook-svc"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]})
        .to_string(),
    );
    let mut hook = webhook(
        "service.webhooks.example.com",
        "unused",
        &server.ca_bundle(),
        json!({}),
    );
    hook["clientConfig"] = json!({
        "service": {"namespace": "hooked", "name": "hook-svc", "path": "/validate"},
        "caBundle": server.ca_bundle(),
    });
    c.apply_stdin(&configuration(
        "ValidatingWebhookConfiguration",
        "by-service",
        vec![hook.clone()],
    ));
    let refused = pod("refused", json!({}), json!({REFUSE_ANNOTATION: "please"}));
    wait_until(&c, "the service webhook", &refused, false);
    let r = c
        .kubectl()
        .fails_stdin(&["create", "-n", "hooked", "-f", "-"], &refused);
    assert!(
        r.stderr.contains(&format!(
            "admission webhook \"service.webhooks.example.com\" denied the request: {REFUSAL}"
        )),
        "{}",
        r.describe()
    );
    let r = c.kubectl().run_stdin(
        &["create", "-n", "hooked", "-f", "-"],
        &pod("welcome", json!({}), json!({})),
    );
    assert!(
        r.success()
            && r.stderr
                .contains("checked by the test webhook at /validate"),
        "{}",
        r.describe()
    );

    // A restarted controller calls the stored webhooks again from its first writes on.
    let mut c = c;
    c.restart();
    wait_until(&c, "the service webhook after a restart", &refused, false);

    // Upstream's validation of the configuration itself.
    let mut invalid = hook;
    invalid["name"] = json!("two.segments");
    invalid["sideEffects"] = json!("Some");
    let r = c.kubectl().fails_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "invalid", vec![invalid]),
    );
    for want in [
        "webhooks[0].name: Invalid value: \"two.segments\": should be a domain with at least three segments separated by dots",
        "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
    ] {
        assert!(r.stderr.contains(want), "{want}\n{}", r.describe());
    }
}
