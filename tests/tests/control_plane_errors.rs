//! Acceptance area 5: bad input is answered with Kubernetes' status code and a `Status` whose
//! message names the problem, nothing is stored, and the server keeps serving. Raw HTTPS checks
//! the codes; kubectl checks what a user sees.

use berth_tests::client::Method;
use berth_tests::objects::{configmap, failure_status, rv};
use berth_tests::wait::wait_for;
use berth_tests::{Api, Controller, Next, Reply, Req, secs};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// Requires `reply` to be a Failure `Status` with `code`/`reason` whose message contains every
/// one of `needles`; then that `path` is absent and the server still answers.
fn rejected(
    c: &Controller,
    api: &Api,
    reply: &Reply,
    code: u16,
    reason: &str,
    needles: &[&str],
    path: &str,
) {
    reply.failure_naming(code, reason, needles, || c.log_tail());
    nothing_stored(c, api, path);
}

/// The HTTP code and Status reason of a refusal.
const INVALID: (u16, &str) = (422, "Invalid");
const BAD_REQUEST: (u16, &str) = (400, "BadRequest");

/// Posts `body` to `collection` as the admin and requires the refusal [`rejected`] checks, the
/// object's path being the collection's (without a query) and the body's `metadata.name`.
fn post_refused(
    c: &Controller,
    collection: &str,
    body: &Value,
    (code, reason): (u16, &str),
    needles: &[&str],
) -> Reply {
    let api = c.admin_api();
    let reply = api.send(Req::post(collection, body));
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!(
        "{}/{name}",
        collection.split('?').next().unwrap_or_default()
    );
    rejected(c, &api, &reply, code, reason, needles, &path);
    reply
}

/// `path` answers 404 NotFound and the server still serves reads.
fn nothing_stored(c: &Controller, api: &Api, path: &str) {
    let after = api.get(path);
    assert_eq!(
        after.status,
        404,
        "nothing may be stored at {path}:\n{}\n{}",
        after.describe(),
        c.log_tail()
    );
    failure_status(&after.json(), 404, "NotFound")
        .unwrap_or_else(|e| panic!("{e}: {}", after.describe()));
    still_serving(c, api);
}

/// `kubectl apply` of the Deployment `yaml` (named `name`) fails naming each of `needles`, and
/// stores nothing.
#[track_caller]
fn apply_refused(c: &Controller, api: &Api, yaml: &str, needles: &[&str], name: &str) {
    let r = c.kubectl().fails_stdin(&["apply", "-f", "-"], yaml);
    for needle in needles {
        r.assert_stderr_has(needle);
    }
    nothing_stored(c, api, &format!("{DEPLOYS}/{name}"));
}

fn still_serving(c: &Controller, api: &Api) {
    let ready = api.get("/readyz");
    assert_eq!(
        ready.status,
        200,
        "the server must keep serving: {}\n{}",
        ready.describe(),
        c.log_tail()
    );
    api.get_ok("/api/v1/namespaces/default");
}

fn deployment(name: &str, replicas: i64, selector: Value, template_labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]}
            }
        }
    })
}

#[test]
fn a_missing_object_is_404_not_found_with_a_status() {
    let c = Controller::start();
    let api = c.admin_api();
    let reply = api.get(&format!("{CMS}/nope"));
    assert_eq!(reply.status, 404, "{}", reply.describe());
    let message = failure_status(&reply.json(), 404, "NotFound").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(message, "configmaps \"nope\" not found");
    let r = c.kubectl_fails(&["get", "configmap", "nope"]);
    r.assert_stderr_has("Error from server (NotFound): configmaps \"nope\" not found");
}

#[test]
fn malformed_json_and_yaml_are_400_bad_request() {
    let c = Controller::start();
    let api = c.admin_api();
    let truncated: &[u8] =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad-json"},"data":{"#;
    let yaml: &[u8] =
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad-yaml\n data: [unclosed\n";
    for (content_type, body, name) in [
        ("application/json", truncated, "bad-json"),
        ("application/yaml", yaml, "bad-yaml"),
    ] {
        let reply = api.send(Req::new(Method::POST, CMS).raw(content_type, body.to_vec()));
        reply.failure_naming(400, "BadRequest", &[], || c.log_tail());
        nothing_stored(&c, &api, &format!("{CMS}/{name}"));
    }

    // kubectl refuses broken YAML itself; the server is untouched either way.
    let r = c.kubectl().fails_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad-yaml\n data: [\n",
    );
    assert!(r.stderr.to_lowercase().contains("yaml"), "{}", r.describe());
    nothing_stored(&c, &api, &format!("{CMS}/bad-yaml"));
}

#[test]
fn an_unknown_kind_is_refused() {
    let c = Controller::start();
    let api = c.admin_api();
    // A resource the server does not have.
    let frobnicator = json!({"apiVersion": "v1", "kind": "Frobnicator", "metadata": {"name": "f"}});
    let frobnicators = "/api/v1/namespaces/default/frobnicators";
    post_refused(&c, frobnicators, &frobnicator, (404, "NotFound"), &[]);
    // A body of an unknown kind sent to a real collection.
    post_refused(&c, CMS, &frobnicator, BAD_REQUEST, &["Frobnicator"]);
    still_serving(&c, &api);
}

#[test]
fn a_wrong_api_version_is_400_bad_request() {
    let c = Controller::start();
    let api = c.admin_api();
    let mut body = deployment("wrong-version", 1, json!({"app": "x"}), json!({"app": "x"}));
    body["apiVersion"] = "apps/v2".into();
    post_refused(&c, DEPLOYS, &body, BAD_REQUEST, &["apps/v2"]);
    still_serving(&c, &api);
}

/// kubectl apply of a type the server does not serve: against kube-apiserver kubectl answers
/// `no matches for kind "K" in version "V"`. It validates first, and when the OpenAPI v3
/// document of the group-version lacks the kind it falls back to `/openapi/v2`; a server without
/// one makes kubectl fail with "failed to download openapi", which names nothing.
fn kubectl_names_the_unknown_type(c: &Controller, yaml: &str, kind: &str, version: &str) {
    let r = c.kubectl().fails_stdin(&["apply", "-f", "-"], yaml);
    let want = format!("no matches for kind \"{kind}\" in version \"{version}\"");
    assert!(
        r.stderr.contains(&want),
        "kubectl should say `{want}`, as it does against kube-apiserver\n{}\n{}",
        r.describe(),
        c.log_tail()
    );
    still_serving(c, &c.admin_api());
}

#[test]
fn kubectl_names_an_unknown_kind() {
    let c = Controller::start();
    let yaml = "apiVersion: v1\nkind: Frobnicator\nmetadata:\n  name: f\n";
    kubectl_names_the_unknown_type(&c, yaml, "Frobnicator", "v1");
}

#[test]
fn kubectl_names_a_wrong_api_version() {
    let c = Controller::start();
    let yaml = "apiVersion: apps/v2\nkind: Deployment\nmetadata:\n  name: wrong-version\n";
    kubectl_names_the_unknown_type(&c, yaml, "Deployment", "apps/v2");
}

#[test]
fn missing_required_fields_are_422_invalid_naming_the_fields() {
    let c = Controller::start();
    let api = c.admin_api();
    let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hollow"}, "spec": {"replicas": 1}});
    let reply = post_refused(
        &c,
        DEPLOYS,
        &body,
        INVALID,
        &["spec.selector", "spec.template"],
    );
    let causes = reply.json()["details"]["causes"].clone();
    assert!(
        causes
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["field"] == "spec.selector")),
        "details.causes should list spec.selector: {causes}"
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {}});
    post_refused(&c, PODS, &pod, INVALID, &["spec.containers"]);

    let yaml =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: hollow\nspec:\n  replicas: 1\n";
    apply_refused(&c, &api, yaml, &["is invalid", "spec.selector"], "hollow");
}

#[test]
fn a_selector_that_does_not_match_the_template_is_422() {
    let c = Controller::start();
    let body = deployment("mismatch", 1, json!({"app": "a"}), json!({"app": "b"}));
    let needles = [
        "spec.template.metadata.labels",
        "`selector` does not match template `labels`",
    ];
    post_refused(&c, DEPLOYS, &body, INVALID, &needles);
}

#[test]
fn an_invalid_name_is_422_naming_metadata_name() {
    let c = Controller::start();
    let api = c.admin_api();
    let reply = api.send(Req::post(CMS, &configmap("Bad_Name", &[])));
    assert_eq!(reply.status, 422, "{}", reply.describe());
    let message = failure_status(&reply.json(), 422, "Invalid").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        message.contains("metadata.name") && message.contains("Bad_Name"),
        "{message}"
    );
    still_serving(&c, &api);
    let list = api.get_ok(CMS);
    assert!(
        !list.to_string().contains("Bad_Name"),
        "an invalid name must not be stored: {list}"
    );
    let r = c.kubectl_fails(&["create", "configmap", "Bad_Name"]);
    assert!(r.stderr.contains("metadata.name"), "{}", r.describe());
}

#[test]
fn negative_replicas_are_422_naming_spec_replicas() {
    let c = Controller::start();
    let body = deployment("negative", -1, json!({"app": "n"}), json!({"app": "n"}));
    post_refused(&c, DEPLOYS, &body, INVALID, &["spec.replicas"]);
}

#[test]
fn duplicate_container_names_are_422() {
    let c = Controller::start();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "twins"}, "spec": {"containers": [
        {"name": "app", "image": "busybox:1.28"}, {"name": "app", "image": "busybox:1.28"}]}});
    let needles = ["spec.containers[1].name", "Duplicate value"];
    post_refused(&c, PODS, &pod, INVALID, &needles);
}

#[test]
fn an_unknown_field_under_strict_field_validation_is_400() {
    let c = Controller::start();
    let api = c.admin_api();
    let mut body = configmap("strict", &[("a", "1")]);
    body["bogus"] = json!(1);
    let strict = format!("{CMS}?fieldValidation=Strict");
    post_refused(
        &c,
        &strict,
        &body,
        BAD_REQUEST,
        &["unknown field \"bogus\""],
    );

    // kubectl apply validates strictly by default: a misspelt nested field is named.
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: typo\nspec:\n  selector:\n    matchLabels:\n      app: t\n  template:\n    metadata:\n      labels:\n        app: t\n    spec:\n      containers:\n      - name: t\n        image: nginx:1.14.2\n        imagePullPolicyy: Always\n";
    apply_refused(&c, &api, yaml, &["imagePullPolicyy"], "typo");
}

/// A PATCH's result is decoded once for both checks: a field its kind does not have is a
/// warning by default and a 400 under Strict, through a merge and a strategic-merge patch
/// alike, and a strategic-merge patch of the wrong type is still 422.
#[test]
fn an_unknown_field_in_a_patch_is_a_warning_or_under_strict_a_400() {
    let c = Controller::start();
    let api = c.admin_api();
    api.create(CMS, &configmap("patched", &[("a", "1")]));
    let path = format!("{CMS}/patched");
    for (content_type, key) in [
        ("application/merge-patch+json", "merged"),
        ("application/strategic-merge-patch+json", "strategic"),
    ] {
        let doc = json!({"bogus": 1, "data": {key: "2"}});
        let strict = format!("{path}?fieldValidation=Strict");
        let reply = api.send(Req::patch(&strict, content_type, &doc));
        let got = failure_status(&reply.json(), 400, "BadRequest")
            .unwrap_or_else(|e| panic!("{content_type}: {e}: {}", reply.describe()));
        assert_eq!(got, "strict decoding error: unknown field \"bogus\"");
        assert!(
            api.get_ok(&path)["data"].get(key).is_none(),
            "{content_type}: a refused patch changes nothing"
        );

        let reply = api.send(Req::patch(&path, content_type, &doc));
        assert_eq!(reply.status, 200, "{content_type}: {}", reply.describe());
        assert_eq!(
            reply.warnings,
            ["unknown field \"bogus\""],
            "{content_type}: {}",
            reply.describe()
        );
        assert_eq!(reply.json()["data"][key], "2");
        let reply = api.send(Req::patch(
            format!("{path}?fieldValidation=Ignore"),
            content_type,
            &json!({"bogus": 1}),
        ));
        assert_eq!(reply.status, 200, "{}", reply.describe());
        assert!(reply.warnings.is_empty(), "{:?}", reply.warnings);
    }
    // A Pod's merge patches (whose clean shapes the server remembers, so that a status
    // heartbeat skips the check): a shape with an unknown field warns every time, also after
    // clean patches of other shapes, on the object and on its status.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "shaped"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.28"}]}});
    api.create(PODS, &pod);
    let pod_path = format!("{PODS}/shaped");
    let merge = "application/merge-patch+json";
    for (path, doc, want) in [
        (
            &pod_path,
            json!({"metadata": {"labels": {"a": "1"}}}),
            vec![],
        ),
        (
            &pod_path,
            json!({"metadata": {"labels": {"a": "2"}}, "bogus": 1}),
            vec!["unknown field \"bogus\""],
        ),
        (
            &pod_path,
            json!({"metadata": {"labels": {"a": "3"}}, "bogus": 2}),
            vec!["unknown field \"bogus\""],
        ),
        (
            &pod_path,
            json!({"metadata": {"labels": {"a": "4"}}}),
            vec![],
        ),
        (
            &format!("{pod_path}/status"),
            json!({"status": {"bogus": true}}),
            vec!["unknown field \"status.bogus\""],
        ),
        (
            &format!("{pod_path}/status"),
            json!({"status": {"bogus": false}}),
            vec!["unknown field \"status.bogus\""],
        ),
    ] {
        let reply = api.send(Req::patch(path.as_str(), merge, &doc));
        assert_eq!(reply.status, 200, "{doc}: {}", reply.describe());
        assert_eq!(reply.warnings, want, "{doc}");
    }

    let reply = api.send(Req::patch(
        &path,
        "application/strategic-merge-patch+json",
        &json!({"data": "not a map"}),
    ));
    reply.failure_naming(422, "Invalid", &["cannot restore map from string"], || {
        c.log_tail()
    });
}

#[test]
fn a_body_over_3_mib_is_refused() {
    let c = Controller::start();
    let api = c.admin_api();
    let big = "x".repeat(3 * 1024 * 1024 + 512 * 1024);
    let body = configmap("huge", &[("blob", &big)]);
    let reply = api.try_send(Req::post(CMS, &body)).unwrap_or_else(|e| {
        panic!(
            "want an HTTP 413 (or 400) answer, got a transport error: {e}\n{}",
            c.log_tail()
        )
    });
    assert!(
        reply.status == 413 || reply.status == 400,
        "want 413 Request entity too large (or 400): {}",
        reply.describe()
    );
    assert!(
        !reply.body.trim().is_empty(),
        "the refusal must carry a message: {}",
        reply.describe()
    );
    nothing_stored(&c, &api, &format!("{CMS}/huge"));
}

#[test]
fn a_put_with_a_stale_resource_version_is_409_conflict() {
    let c = Controller::start();
    let api = c.admin_api();
    let first = api.create(CMS, &configmap("contended", &[("v", "1")]));
    let mut newer = first.clone();
    newer["data"]["v"] = "2".into();
    let second = api.expect(Req::put(format!("{CMS}/contended"), &newer), 200);
    assert!(
        rv(&second) > rv(&first),
        "an update must raise the resourceVersion"
    );

    let mut stale = first.clone();
    stale["data"]["v"] = "stale".into();
    let reply = api.send(Req::put(format!("{CMS}/contended"), &stale));
    reply.failure_naming(409, "Conflict", &["the object has been modified"], || {
        c.log_tail()
    });
    let now = api.get_ok(&format!("{CMS}/contended"));
    assert_eq!(now["data"]["v"], "2", "the stale write must not be stored");
    assert_eq!(rv(&now), rv(&second));

    // Creating an existing name is 409 AlreadyExists.
    let reply = api.send(Req::post(CMS, &configmap("contended", &[])));
    assert_eq!(reply.status, 409, "{}", reply.describe());
    failure_status(&reply.json(), 409, "AlreadyExists")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
    still_serving(&c, &api);
}

/// What a watch from `path` answers first: `Ok(Status)` if it is refused as expired (either way
/// upstream does it: a 200 stream whose first event is an ERROR, or an HTTP 410), `Err` with
/// what it did instead.
fn expired_status(api: &Api, path: &str) -> Result<Value, String> {
    match api.watch(path) {
        Ok(mut watch) => match watch.next(secs(10)) {
            Next::Event(e) if e["type"] == "ERROR" => Ok(e["object"].clone()),
            other => Err(format!("first answer {other:?}\n{}", watch.describe())),
        },
        Err(reply) if reply.status == 410 => Ok(reply.json()),
        Err(reply) => Err(reply.describe()),
    }
}

/// Writes made after `old` before giving up on seeing it expire: the history is 20 events, but
/// a store may trim it in batches.
const COMPACTION_SLACK: usize = 1000;

#[test]
fn a_watch_from_a_compacted_revision_is_410_gone_expired() {
    let c = Controller::start_with(&["--watch-history", "20"]);
    let api = c.admin_api();
    let old = rv(&api.create(CMS, &configmap("churn", &[])));
    let path = format!("{CMS}?watch=true&resourceVersion={old}");
    let mut writes = 0;
    let status = loop {
        for _ in 0..20 {
            writes += 1;
            let patch = json!({"data": {"n": writes.to_string()}});
            let req = Req::patch(
                format!("{CMS}/churn"),
                "application/merge-patch+json",
                &patch,
            );
            api.expect(req, 200);
        }
        match expired_status(&api, &path) {
            Ok(status) => break status,
            Err(seen) if writes >= COMPACTION_SLACK => panic!(
                "a watch from rv {old} still replays after {writes} later writes with \
                 --watch-history 20; want 410 Expired\n{seen}\n{}",
                c.log_tail()
            ),
            Err(_) => {}
        }
    };
    let message =
        failure_status(&status, 410, "Expired").unwrap_or_else(|e| panic!("{e}: {status:#}"));
    assert!(!message.is_empty());
    still_serving(&c, &api);

    // A watch from a recent revision still works.
    let recent = rv(&api.get_ok(&format!("{CMS}/churn")));
    let mut watch = api
        .watch(&format!("{CMS}?watch=true&resourceVersion={recent}"))
        .unwrap_or_else(|r| panic!("{}", r.describe()));
    api.create(CMS, &configmap("after", &[]));
    let e = watch.expect_event(secs(10), "ADDED after");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("after")),
        "{}",
        watch.describe()
    );
}

/// Every body made from `sample` by putting a hostile value (a string, a number, null, an
/// array, an object) in place of one node of it — each field's value and each array element,
/// at every level — with the object's name kept, so every body is a create of `name`.
fn hostile_variants(sample: &Value) -> Vec<(String, Value)> {
    fn paths(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let p = format!("{at}/{k}");
                    out.push(p.clone());
                    paths(child, &p, out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let p = format!("{at}/{i}");
                    out.push(p.clone());
                    paths(child, &p, out);
                }
            }
            _ => {}
        }
    }
    let mut all = Vec::new();
    paths(sample, "", &mut all);
    let hostile = [
        json!("x"),
        json!(5),
        json!(-1.5),
        Value::Null,
        json!(["x"]),
        json!([1]),
        json!({"x": 1}),
        json!(true),
    ];
    let keep = ["/apiVersion", "/kind", "/metadata", "/metadata/name"];
    let mut out = Vec::new();
    for p in all.iter().filter(|p| !keep.contains(&p.as_str())) {
        for h in &hostile {
            let mut body = sample.clone();
            if let Some(node) = body.pointer_mut(p) {
                *node = h.clone();
                out.push((format!("{p} = {h}"), body));
            }
        }
    }
    out
}

/// Issue 28, acceptance 3: the hostile-input corpus — strings, numbers, nulls, booleans,
/// arrays and objects in place of every node of a valid object of each kind most written
/// (including `containers: ["x"]`, `containers: [1]` and `spec: 5`) — is answered 4xx with a
/// `Status`, never a 5xx; the server keeps serving.
#[test]
fn hostile_values_at_every_level_of_every_kind_are_4xx_never_5xx() {
    let c = Controller::start();
    let api = c.admin_api();
    let container = json!({"name": "c", "image": "busybox:1.28", "command": ["sh", "-c", "true"],
        "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "b"}],
        "volumeMounts": [{"name": "v", "mountPath": "/v"}],
        "resources": {"limits": {"cpu": "1"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}}});
    let pod_spec = json!({"containers": [container], "volumes": [{"name": "v", "emptyDir": {}}],
        "nodeSelector": {"a": "b"}, "tolerations": [{"key": "k", "operator": "Exists"}]});
    let labels = json!({"app": "h"});
    let template = json!({"metadata": {"labels": labels}, "spec": pod_spec});
    let samples = [
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "h", "labels": labels}, "spec": pod_spec}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "h"},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "h"},
                "spec": {"serviceName": "h", "selector": {"matchLabels": labels}, "template": template}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "h"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"},
                "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "h"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "h"}, "data": {"a": "b"}}),
        ),
    ];
    let mut sent = 0;
    let mut server_errors = Vec::new();
    for (collection, sample) in &samples {
        for (what, body) in hostile_variants(sample) {
            let reply = api.send(Req::post(*collection, &body));
            sent += 1;
            if reply.status >= 500 {
                server_errors.push(format!("{collection} {what}: {}", reply.describe()));
            } else if reply.status < 300 {
                // Accepted (a value that is valid there, e.g. a label value): remove it so the
                // next variant is a create again.
                // (A controller may be writing it too: a conflict is retried.)
                let path = format!("{collection}/h?gracePeriodSeconds=0");
                let deleted = wait_for(secs(10), "the accepted object deleted", || {
                    let r = api.send(Req::delete(path.clone()));
                    if r.status < 300 {
                        Ok(r)
                    } else {
                        Err(r.describe())
                    }
                });
                assert!(deleted.status < 300, "{}", deleted.describe());
                wait_for(secs(10), "the accepted object gone", || {
                    match api.get(&format!("{collection}/h")).status {
                        404 => Ok(()),
                        s => Err(s),
                    }
                });
            } else {
                let status = reply.json_or_null();
                assert!(
                    status["kind"] == "Status" && status["code"] == reply.status,
                    "{collection} {what}: not a Status: {}",
                    reply.describe()
                );
            }
        }
    }
    assert!(
        server_errors.is_empty(),
        "{} of {sent} hostile creates answered 5xx:\n{}\n{}",
        server_errors.len(),
        server_errors.join("\n"),
        c.log_tail()
    );
    assert!(sent > 500, "only {sent} variants");
    eprintln!("{sent} hostile creates, none answered 5xx");
    api.get_ok(CMS);
}
