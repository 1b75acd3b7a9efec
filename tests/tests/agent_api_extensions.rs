//! Issue 34, acceptance 3 and 6: the API extended from inside the cluster, by pods on a real
//! agent. An operator (the official Python client, in a pod, with its ServiceAccount bound by
//! a Role to exactly what it needs) watches a custom resource of this test's own definition,
//! makes a Deployment owned by each and writes its status; garbage collection removes the
//! Deployment with its owner, and deleting the definition deletes every custom resource. A
//! pod behind a Service serves a mutating and a validating admission webhook over TLS (a
//! certificate for the Service's name from a CA of this test, that CA as the `caBundle`); their
//! failures, a timeout and then no endpoint at all, follow each webhook's `failurePolicy`.
//!
//! The cluster's agent runs in this machine's network namespace, so the controller (which calls
//! webhooks) reaches pod IPs on the agent's bridge: a webhook's `clientConfig.service` resolves
//! through the Service's EndpointSlices to the server pod's IP and target port, as upstream's
//! API server does. Pods reach the controller at its host's address
//! (`controller_on_all_addresses`), as in-cluster clients need.

use std::path::Path;
use std::time::Duration;

use berth_tests::fixtures::python::{
    HTTPS_SERVER_FILE, HTTPS_SERVER_PY, https_server_pod, push_python_image, python_pod, tls_secret,
};
use berth_tests::objects::{configmap, namespace};
use berth_tests::pki::serving_certificate;
use berth_tests::{Cluster, ClusterConfig, Req};
use serde_json::{Value, json};

const KUBECTL_1_33: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";
const OPERATOR_PY: &str = include_str!("../python/webapp_operator.py");
const ADMISSION_PY: &str = include_str!("../python/admission_webhook.py");

const STARTUP: Duration = Duration::from_secs(120);
const SETTLE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The operator.

const APPS_NS: &str = "webapps";
const WEBAPPS: &str = "/apis/example.berth.test/v1/namespaces/webapps/webapps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/webapps/deployments";

const WEBAPP_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: webapps.example.berth.test
spec:
  group: example.berth.test
  scope: Namespaced
  names: {plural: webapps, singular: webapp, kind: WebApp}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [image]
            properties:
              image: {type: string}
              replicas: {type: integer, minimum: 0, default: 1}
          status:
            type: object
            properties:
              deployment: {type: string}
              observedGeneration: {type: integer}
              phase: {type: string}
"#;

/// Exactly what the operator calls: watch its WebApps, write their status, read and create
/// Deployments.
fn operator_rbac() -> Vec<Value> {
    let rbac = "rbac.authorization.k8s.io/v1";
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "webapp-operator", "namespace": APPS_NS}}),
        json!({"apiVersion": rbac, "kind": "Role",
               "metadata": {"name": "webapp-operator", "namespace": APPS_NS},
               "rules": [
                   {"apiGroups": ["example.berth.test"], "resources": ["webapps"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["example.berth.test"], "resources": ["webapps/status"],
                    "verbs": ["update", "patch"]},
                   {"apiGroups": ["apps"], "resources": ["deployments"],
                    "verbs": ["create", "get", "list"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding",
               "metadata": {"name": "webapp-operator", "namespace": APPS_NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "webapp-operator"},
               "subjects": [{"kind": "ServiceAccount", "name": "webapp-operator",
                             "namespace": APPS_NS}]}),
    ]
}

fn webapp(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "example.berth.test/v1", "kind": "WebApp",
           "metadata": {"name": name, "namespace": APPS_NS},
           "spec": {"image": "nginx:1.14.2", "replicas": replicas}})
}

/// Applies the definition and waits until its resources are served.
fn establish(c: &Cluster) {
    c.kubectl().apply_stdin(WEBAPP_CRD);
    c.wait_for(SETTLE, "webapps to be served", || {
        let r = c.api().get(WEBAPPS);
        if r.status == 200 {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
}

/// Waits until the operator made `name`'s Deployment, owned by the WebApp, with the WebApp's
/// pods available, and wrote the WebApp's status; returns the Deployment.
fn wait_deployed(c: &Cluster, name: &str) -> Value {
    let owner = c
        .get(&format!("{WEBAPPS}/{name}"))
        .unwrap_or_else(|| panic!("no webapp {name}"));
    let deployment = c.wait_for(STARTUP, &format!("{name}'s Deployment available"), || {
        let d = c
            .get(&format!("{DEPLOYMENTS}/{name}"))
            .ok_or_else(|| format!("no Deployment yet\n{}", operator_log(c)))?;
        if d["status"]["availableReplicas"] == 1 {
            Ok(d)
        } else {
            Err(d["status"].to_string())
        }
    });
    assert_eq!(
        deployment["metadata"]["ownerReferences"],
        json!([{"apiVersion": "example.berth.test/v1", "kind": "WebApp", "name": name,
                "uid": owner["metadata"]["uid"], "controller": true,
                "blockOwnerDeletion": true}]),
        "{deployment}"
    );
    let status = c.wait_for(SETTLE, &format!("{name}'s status"), || {
        let w = c.get(&format!("{WEBAPPS}/{name}")).unwrap_or_default();
        if w["status"]["phase"] == "Deployed" {
            Ok(w["status"].clone())
        } else {
            Err(format!("{}\n{}", w["status"], operator_log(c)))
        }
    });
    assert_eq!(
        status,
        json!({"deployment": name, "observedGeneration": 1, "phase": "Deployed"})
    );
    deployment
}

fn operator_log(c: &Cluster) -> String {
    c.logs_of(APPS_NS, "operator", None, &["--tail=20"])
        .stdout
        .to_string()
}

fn wait_gone(c: &Cluster, path: &str, what: &str) {
    c.wait_for(SETTLE, what, || match c.get(path) {
        None => Ok(()),
        Some(o) => Err(o["metadata"].clone()),
    });
}

#[test]
fn an_operator_in_a_pod_deploys_for_each_custom_resource_and_owners_take_their_objects_along() {
    let c = Cluster::start_with(ClusterConfig {
        controller_on_all_addresses: true,
        ..ClusterConfig::agents(1)
    });
    push_python_image(c.registry(), c.scratch());
    let api = c.api();
    api.create("/api/v1/namespaces", &namespace(APPS_NS));
    establish(&c);
    for object in operator_rbac() {
        c.apply(&object);
    }
    api.create(
        &format!("/api/v1/namespaces/{APPS_NS}/configmaps"),
        &configmap("operator", &[("webapp_operator.py", OPERATOR_PY)]),
    );
    let mut operator = python_pod("operator", "operator", &["webapp_operator.py"]);
    operator["spec"]["serviceAccountName"] = json!("webapp-operator");
    api.create(&format!("/api/v1/namespaces/{APPS_NS}/pods"), &operator);
    c.wait_for_pod_phase(APPS_NS, "operator", "Running", STARTUP);

    c.apply(&webapp("shop", 1));
    c.apply(&webapp("blog", 1));
    let shop = wait_deployed(&c, "shop");
    wait_deployed(&c, "blog");
    let selector = "app.kubernetes.io/name=shop";
    assert_eq!(c.live_pods(APPS_NS, selector).len(), 1);
    let log = operator_log(&c);
    println!("operator's log:\n{log}");
    assert!(
        log.contains("created deployment shop") && log.contains("created deployment blog"),
        "{log}"
    );

    // The owner deleted, garbage collection takes its Deployment, its ReplicaSet and pods.
    c.kubectl().ok(&["delete", "webapp", "shop", "-n", APPS_NS]);
    wait_gone(
        &c,
        &format!("{DEPLOYMENTS}/shop"),
        "shop's Deployment collected",
    );
    c.wait_for(SETTLE, "shop's pods collected", || {
        let pods = c.live_pods(APPS_NS, selector);
        if pods.is_empty() {
            Ok(())
        } else {
            Err(pods.len())
        }
    });
    let shop_uid = shop["metadata"]["uid"].as_str().unwrap_or_default();
    let replica_sets = c.list(&format!(
        "/apis/apps/v1/namespaces/{APPS_NS}/replicasets?labelSelector={selector}"
    ));
    assert!(
        replica_sets
            .iter()
            .all(|rs| !rs["metadata"]["ownerReferences"]
                .to_string()
                .contains(shop_uid)),
        "{replica_sets:?}"
    );

    // Deleting the definition deletes every WebApp first (and with them their Deployments);
    // defined again, it finds none.
    c.kubectl().ok(&[
        "delete",
        "crd",
        "webapps.example.berth.test",
        "--timeout=60s",
    ]);
    let gone = c
        .kubectl()
        .fails(&["get", "crd", "webapps.example.berth.test"]);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.describe());
    wait_gone(
        &c,
        &format!("{DEPLOYMENTS}/blog"),
        "blog's Deployment collected",
    );
    establish(&c);
    let list = api.get_ok(WEBAPPS);
    assert_eq!(list["items"], json!([]), "{list}");
}

// ---------------------------------------------------------------------------------------------
// The webhooks.

const HOOK_NS: &str = "hook-system";
const HOOKED_NS: &str = "hooked";
const SERVICE_DNS_NAME: &str = "hook-svc.hook-system.svc";
const REFUSE_ANNOTATION: &str = "webhook.example.com/refuse";
const REFUSAL: &str = "pods annotated webhook.example.com/refuse are not welcome";
const SERVER_PORT: u16 = 8443;

/// A webhook reached through Service `hook-svc` at `path`, for pod creations in `hooked`.
fn webhook(name: &str, path: &str, ca_bundle: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"service": {"namespace": HOOK_NS, "name": "hook-svc", "path": path},
                         "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": HOOKED_NS}},
    });
    berth_tests::objects::merge(&mut w, &extra);
    w
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": hooks})
}

fn pod(name: &str, labels: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": HOOKED_NS, "labels": labels,
                        "annotations": annotations},
           "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "busybox:1.28",
                                    "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}]}})
}

/// Waits until a server-side dry run of `probe` is refused by a webhook.
fn wait_refused(c: &Cluster, what: &str, probe: &Value) {
    c.wait_for(SETTLE, what, || {
        let r = c.kubectl().run_stdin(
            &["create", "--dry-run=server", "-f", "-"],
            &probe.to_string(),
        );
        // A refusal counts only when a webhook made it.
        let by_webhook =
            r.stderr.contains("admission webhook") || r.stderr.contains("calling webhook");
        if !r.success() && by_webhook {
            Ok(())
        } else {
            Err(r.describe())
        }
    });
}

#[test]
fn webhooks_served_by_a_pod_behind_a_service_mutate_validate_and_fail_by_their_policy() {
    let c = Cluster::start(1);
    push_python_image(c.registry(), c.scratch());
    let api = c.api();
    let kubectl = c.kubectl().with_binary(Path::new(KUBECTL_1_33));
    for ns in [HOOK_NS, HOOKED_NS] {
        api.create("/api/v1/namespaces", &namespace(ns));
    }

    // The server: its certificate for the Service's name, its scripts, itself and its Service.
    let cert = serving_certificate("webhook-test-ca", &[SERVICE_DNS_NAME]);
    let ca = cert.ca_bundle();
    let in_hook_ns = |kind: &str| format!("/api/v1/namespaces/{HOOK_NS}/{kind}");
    api.create(
        &in_hook_ns("secrets"),
        &tls_secret("hook-tls", &cert.cert_pem, &cert.key_pem),
    );
    api.create(
        &in_hook_ns("configmaps"),
        &configmap(
            "hook-server",
            &[
                (HTTPS_SERVER_FILE, HTTPS_SERVER_PY),
                ("admission_webhook.py", ADMISSION_PY),
            ],
        ),
    );
    api.create(
        &in_hook_ns("pods"),
        &https_server_pod(
            "hook-server",
            &json!({"app": "hook"}),
            "hook-server",
            "hook-tls",
            "admission_webhook",
            SERVER_PORT,
        ),
    );
    api.create(
        &in_hook_ns("services"),
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook-svc"},
                "spec": {"selector": {"app": "hook"},
                         "ports": [{"name": "https", "port": 443, "targetPort": SERVER_PORT}]}}),
    );
    c.wait_for_pod_ready(HOOK_NS, "hook-server", STARTUP);

    c.apply(&configuration(
        "MutatingWebhookConfiguration",
        "add-label",
        vec![webhook(
            "label.webhooks.example.com",
            "/mutate",
            &ca,
            json!({"objectSelector": {"matchLabels": {"inject": "yes"}}}),
        )],
    ));
    c.apply(&configuration(
        "ValidatingWebhookConfiguration",
        "refuse-annotated",
        vec![webhook(
            "refuse.webhooks.example.com",
            "/validate",
            &ca,
            json!({}),
        )],
    ));
    let refused = pod("refused", json!({}), json!({REFUSE_ANNOTATION: "please"}));
    wait_refused(&c, "the validating webhook in force", &refused);

    // The validating webhook refuses with its own message, through kubectl and the API.
    let r = kubectl.fails_stdin(&["create", "-f", "-"], &refused.to_string());
    let denial =
        format!("admission webhook \"refuse.webhooks.example.com\" denied the request: {REFUSAL}");
    assert!(r.stderr.contains(&denial), "{}", r.describe());
    let reply = api.send(Req::post(
        format!("/api/v1/namespaces/{HOOKED_NS}/pods"),
        &refused,
    ));
    assert_eq!(reply.status, 403, "{}", reply.describe());
    assert_eq!(
        reply.json()["message"],
        json!(denial),
        "{}",
        reply.describe()
    );

    // The mutating webhook labels the pods its object selector matches, and only those.
    kubectl.ok_stdin(
        &["create", "-f", "-"],
        &pod("injected", json!({"inject": "yes"}), json!({})).to_string(),
    );
    kubectl.ok_stdin(
        &["create", "-f", "-"],
        &pod("plain", json!({"inject": "no"}), json!({})).to_string(),
    );
    let label = |name: &str| {
        kubectl.ok(&[
            "get",
            "pod",
            name,
            "-n",
            HOOKED_NS,
            "-o",
            "jsonpath={.metadata.labels.webhook-added}",
        ])
    };
    assert_eq!(label("injected"), "yes");
    assert_eq!(label("plain"), "");

    // Slower than its timeout: Fail refuses with upstream's message, Ignore admits.
    c.apply(&configuration(
        "ValidatingWebhookConfiguration",
        "slow",
        vec![
            webhook(
                "slow-fail.webhooks.example.com",
                "/slow",
                &ca,
                json!({"timeoutSeconds": 1, "failurePolicy": "Fail",
                       "objectSelector": {"matchLabels": {"slow": "fail"}}}),
            ),
            webhook(
                "slow-ignore.webhooks.example.com",
                "/slow",
                &ca,
                json!({"timeoutSeconds": 1, "failurePolicy": "Ignore",
                       "objectSelector": {"matchLabels": {"slow": "ignore"}}}),
            ),
        ],
    ));
    let slow_fail = pod("slow-fail", json!({"slow": "fail"}), json!({}));
    wait_refused(&c, "the slow webhook in force", &slow_fail);
    let r = kubectl.fails_stdin(&["create", "-f", "-"], &slow_fail.to_string());
    assert!(
        r.stderr.contains(
            "Internal error occurred: failed calling webhook \"slow-fail.webhooks.example.com\""
        ) && r.stderr.contains("context deadline exceeded"),
        "{}",
        r.describe()
    );
    kubectl.ok_stdin(
        &["create", "-f", "-"],
        &pod("slow-ignore", json!({"slow": "ignore"}), json!({})).to_string(),
    );
    kubectl.ok(&[
        "delete",
        "validatingwebhookconfiguration",
        "slow",
        "refuse-annotated",
    ]);
    kubectl.ok(&["delete", "mutatingwebhookconfiguration", "add-label"]);

    // The server's pod gone, its Service has no endpoint: Fail refuses, Ignore admits.
    c.apply(&configuration(
        "ValidatingWebhookConfiguration",
        "down",
        vec![
            webhook(
                "down-fail.webhooks.example.com",
                "/validate",
                &ca,
                json!({"failurePolicy": "Fail",
                       "objectSelector": {"matchLabels": {"down": "fail"}}}),
            ),
            webhook(
                "down-ignore.webhooks.example.com",
                "/validate",
                &ca,
                json!({"failurePolicy": "Ignore",
                       "objectSelector": {"matchLabels": {"down": "ignore"}}}),
            ),
        ],
    ));
    // In force while the server still answers: it refuses the annotated pod itself.
    wait_refused(
        &c,
        "the down configuration in force",
        &pod(
            "probe",
            json!({"down": "fail"}),
            json!({REFUSE_ANNOTATION: "please"}),
        ),
    );
    c.delete_pod(HOOK_NS, "hook-server");
    c.wait_pod_gone(HOOK_NS, "hook-server", SETTLE);
    c.wait_for(SETTLE, "hook-svc without a ready endpoint", || {
        let slices = c.list(&format!(
            "/apis/discovery.k8s.io/v1/namespaces/{HOOK_NS}/endpointslices?labelSelector=kubernetes.io/service-name=hook-svc"
        ));
        let ready = slices
            .iter()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["conditions"]["ready"] != false)
            .count();
        if ready == 0 { Ok(()) } else { Err(slices) }
    });
    let r = kubectl.fails_stdin(
        &["create", "-f", "-"],
        &pod("down-fail", json!({"down": "fail"}), json!({})).to_string(),
    );
    assert!(
        r.stderr.contains(
            "Internal error occurred: failed calling webhook \"down-fail.webhooks.example.com\""
        ) && r
            .stderr
            .contains("no endpoints available for service \"hook-system/hook-svc\""),
        "{}",
        r.describe()
    );
    kubectl.ok_stdin(
        &["create", "-f", "-"],
        &pod("down-ignore", json!({"down": "ignore"}), json!({})).to_string(),
    );
}
