//! Admission webhooks with the real controller and kubectl, served by this test process over
//! HTTPS (a certificate for 127.0.0.1 from a CA made with rcgen, that CA as the `caBundle`)
//! and reached through `clientConfig.url`: a mutating webhook adds a label to the pods its
//! `objectSelector` matches, a validating one refuses pods with an annotation with its own
//! message and warns otherwise; with the server stopped, `failurePolicy: Fail` refuses and
//! `Ignore` admits; a webhook slower than its `timeoutSeconds` is treated by its failure
//! policy. A figure: the admission latency a webhook adds over its own handling time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use berth_tests::Controller;
use berth_tests::client::Req;
use rcgen::{CertificateParams, Issuer, KeyPair, SanType};
use serde_json::{Value, json};

const KUBECTL_1_27: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";
const REFUSE_ANNOTATION: &str = "webhook.example.com/refuse";
/// The Service the service-referenced webhook is reached through, as its TLS name.
const SERVICE_DNS_NAME: &str = "hook-svc.hooked.svc";
const REFUSAL: &str = "pods annotated webhook.example.com/refuse are not welcome";

/// A blocking HTTPS server answering AdmissionReviews by path.
struct WebhookServer {
    port: u16,
    ca_pem: String,
    stopped: Arc<AtomicBool>,
    /// Released when the test ends: `/slow` answers only then.
    release: Arc<(Mutex<bool>, Condvar)>,
    /// Time spent inside the handler for each review, from request read to answer written.
    handled: Arc<Mutex<Vec<Duration>>>,
    /// Every connection accepted, to cut them when the server stops (the API server keeps
    /// connections alive between calls).
    open: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<std::thread::JoinHandle<()>>,
}

fn tls_config() -> (Arc<rustls::ServerConfig>, String) {
    berth_tests::client::install_crypto_provider();
    let (mut ca_params, ca_key) = berth_tests::pki::new_ca("webhook-test-ca");
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .unwrap_or_else(|e| panic!("rcgen: {e}"));
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("rcgen: {e}"));
    let mut params =
        CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("rcgen: {e}"));
    params.subject_alt_names = vec![
        SanType::IpAddress([127, 0, 0, 1].into()),
        SanType::DnsName(
            SERVICE_DNS_NAME
                .try_into()
                .unwrap_or_else(|e| panic!("DNS name: {e}")),
        ),
    ];
    let cert = params
        .signed_by(&key, &issuer)
        .unwrap_or_else(|e| panic!("rcgen: {e}"));
    let chain = vec![cert.der().clone()];
    let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .unwrap_or_else(|e| panic!("key: {e}"));
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .unwrap_or_else(|e| panic!("server config: {e}"));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (Arc::new(config), ca_cert.pem())
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

/// Reads one HTTP/1.1 request (headers, then Content-Length bytes of body).
fn read_request(stream: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let path = head.split_whitespace().nth(1)?.to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((path, body))
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    release: Arc<(Mutex<bool>, Condvar)>,
    handled: Arc<Mutex<Vec<Duration>>>,
) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    while let Some((path, body)) = read_request(&mut stream) {
        let start = Instant::now();
        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let reply = answer(&path, &review, &release).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        );
        let written = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(reply.as_bytes()))
            .and_then(|()| stream.flush());
        handled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(start.elapsed());
        if written.is_err() {
            return;
        }
    }
}

impl WebhookServer {
    fn start() -> WebhookServer {
        let (config, ca_pem) = tls_config();
        let listener =
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("cannot listen: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("no address: {e}"))
            .port();
        let stopped = Arc::new(AtomicBool::new(false));
        let release = Arc::new((Mutex::new(false), Condvar::new()));
        let handled = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stopped, release, handled) = (stopped.clone(), release.clone(), handled.clone());
            let open = open.clone();
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(tcp) = tcp else { continue };
                    let _ = tcp.set_nodelay(true);
                    if let Ok(clone) = tcp.try_clone() {
                        open.lock().unwrap_or_else(|e| e.into_inner()).push(clone);
                    }
                    let (config, release, handled) =
                        (config.clone(), release.clone(), handled.clone());
                    std::thread::spawn(move || serve(tcp, config, release, handled));
                }
            })
        };
        WebhookServer {
            port,
            ca_pem,
            stopped,
            release,
            handled,
            open,
            accept: Some(accept),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn ca_bundle(&self) -> String {
        B64.encode(&self.ca_pem)
    }

    /// Closes the listener and every connection: calls are refused from now on.
    fn stop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag and drops the listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        for tcp in self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        }
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
