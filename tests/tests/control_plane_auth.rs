//! Acceptance area 7: authentication. No credentials, a client certificate from another CA, or
//! an unknown bearer token get 401 on the API (and nothing is written); the health endpoints and
//! `/version` answer anyone; the admin kubeconfig (and only a credentialed one) works.

use berth_tests::objects::{configmap, failure_status};
use berth_tests::pki::{client_cert_user, foreign_client_identity, write_kubeconfig};
use berth_tests::{Api, Controller, Credentials, Req};
use serde_json::json;
use std::time::Duration;

fn unauthorized(c: &Controller, api: &Api, req: Req) {
    let line = req.line();
    let reply = api.try_send(req).unwrap_or_else(|e| {
        panic!(
            "want HTTP 401 for {line}, got a transport error: {e}\n(a server that refuses \
             unknown client certificates during the TLS handshake fails here: like \
             kube-apiserver, it should request but not require a client certificate, verify it \
             after the handshake and answer 401)\n{}",
            c.log_tail()
        )
    });
    assert_eq!(reply.status, 401, "{}", reply.describe());
    failure_status(&reply.json(), 401, "Unauthorized")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
}

/// Every check that a credential-less or wrongly-credentialed client is shut out.
fn shut_out(c: &Controller, api: &Api) {
    unauthorized(c, api, Req::get("/api/v1/pods"));
    unauthorized(c, api, Req::get("/api/v1/namespaces/default/configmaps"));
    unauthorized(
        c,
        api,
        Req::get("/apis/apps/v1/namespaces/default/deployments"),
    );
    unauthorized(c, api, Req::get("/api"));
    unauthorized(c, api, Req::get("/metrics"));
    unauthorized(
        c,
        api,
        Req::get("/api/v1/namespaces/default/configmaps?watch=true"),
    );
    unauthorized(
        c,
        api,
        Req::post(
            "/api/v1/namespaces/default/configmaps",
            &configmap("intruder", &[]),
        ),
    );
    let admin = c.admin_api();
    let after = admin.get("/api/v1/namespaces/default/configmaps/intruder");
    assert_eq!(
        after.status,
        404,
        "an unauthenticated write must not be stored: {}",
        after.describe()
    );
}

#[test]
fn requests_without_credentials_get_401() {
    let c = Controller::start();
    shut_out(&c, &c.anonymous_api());
}

#[test]
fn a_client_certificate_from_another_ca_gets_401() {
    let c = Controller::start();
    // Same subject as the admin (CN admin, O system:masters): only the CA differs.
    let identity = foreign_client_identity("admin", "system:masters");
    shut_out(&c, &c.api_with(Credentials::ClientCert(identity.clone())));

    let kubeconfig = c.scratch().join("foreign.kubeconfig");
    write_kubeconfig(
        &kubeconfig,
        c.url(),
        &c.ca_pem(),
        client_cert_user(&identity),
    );
    let r = c
        .kubectl()
        .with_kubeconfig(&kubeconfig)
        .fails(&["get", "pods"]);
    // kubectl ≥ 1.26 words a 401 during discovery as upstream clusters show it: "You must be
    // logged in to the server (the server has asked for the client to provide credentials)".
    r.assert_stderr_has("You must be logged in to the server");
}

#[test]
fn an_unknown_bearer_token_gets_401() {
    let c = Controller::start();
    shut_out(&c, &c.api_with(Credentials::Bearer("not-a-token".into())));
}

#[test]
fn health_and_version_answer_without_credentials() {
    let c = Controller::start();
    let api = c.anonymous_api();
    for path in ["/healthz", "/readyz", "/livez"] {
        let reply = api.get(path);
        assert_eq!(reply.status, 200, "{}", reply.describe());
        assert_eq!(reply.body.trim(), "ok", "{}", reply.describe());
    }
    let version = api.get_ok("/version");
    let git = version["gitVersion"].as_str().unwrap_or_default();
    assert!(
        git.starts_with("v1.34.") && git.contains("+berth"),
        "{version:#}"
    );
    assert_eq!(version["major"], "1");
    assert_eq!(version["minor"], "34");
    // The dispatcher's own probe.
    assert_eq!(api.get("/version?timeout=5s").status, 200);
    // The Python client's `VersionApi().get_code()` adds a slash; upstream answers the same.
    assert_eq!(api.get_ok("/version/"), version);
}

#[test]
fn the_admin_credentials_work_and_kubectl_without_them_is_refused() {
    let c = Controller::start();
    let admin = c.admin_api();
    let pods = admin.get_ok("/api/v1/pods");
    assert_eq!(pods["kind"], "PodList", "{pods:#}");
    // Each controller's work queue, under upstream's metric names. The controllers start after
    // the store is ready (and, on etcd, after winning the leader Lease), so their queues are
    // registered shortly after the API answers.
    let series = [
        "workqueue_depth{name=\"replicaset\"}",
        "workqueue_adds_total{name=\"node-ipam\"}",
        "workqueue_retries_total{name=\"deployment\"}",
        "workqueue_work_duration_seconds_count{name=\"garbage-collector\"}",
    ];
    c.wait_for(
        Duration::from_secs(20),
        "every work queue in /metrics",
        || {
            let metrics = admin.get("/metrics");
            assert_eq!(metrics.status, 200, "{}", metrics.describe());
            assert!(
                metrics.body.contains("# TYPE "),
                "Prometheus text format expected: {}",
                metrics.describe()
            );
            match series.iter().find(|s| !metrics.body.contains(*s)) {
                None => Ok(()),
                Some(missing) => Err(format!("{missing} missing: {}", metrics.describe())),
            }
        },
    );
    admin.create(
        "/api/v1/namespaces/default/configmaps",
        &configmap("admin-made", &[]),
    );

    let out = c.kubectl_ok(&["get", "configmap", "admin-made", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/admin-made");

    // A user with a token the server does not know (with no credentials at all kubectl would
    // prompt for a username after the 401).
    let stranger = c.scratch().join("stranger.kubeconfig");
    write_kubeconfig(
        &stranger,
        c.url(),
        &c.ca_pem(),
        json!({"token": "not-a-token"}),
    );
    let r = c
        .kubectl()
        .with_kubeconfig(&stranger)
        .fails(&["get", "configmaps"]);
    assert!(r.stderr.contains("Unauthorized"), "{}", r.describe());
}
