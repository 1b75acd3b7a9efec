//! Issue 14, small fidelity fixes against a real controller: a freshly created object of a kind
//! with a status stanza comes back with its zero status (`status: {}` for a Deployment), error
//! `Status` bodies are byte for byte what kube-apiserver writes (field order, trailing newline;
//! success bodies end with the newline too),
//! and a body that is not of the URL's kind is refused with upstream's decode-error wording,
//! which kubectl's own command tests grep for. Ephemeral containers come only through
//! `pods/{name}/ephemeralcontainers`, may not have ports, probes or resources (422 naming the
//! field), and once added are never changed or removed.

use std::path::Path;

use berth_tests::client::Method;
use berth_tests::{Controller, Req};
use serde_json::json;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str) -> serde_json::Value {
    let spec = json!({"containers": [{"name": "c", "image": "busybox:1.28"}]});
    berth_tests::objects::deployment(name, 0, spec)
}

#[test]
fn a_created_deployment_comes_back_with_an_empty_status_object() {
    let c = Controller::start();
    let api = c.admin_api();
    // Whatever status the client sends is replaced by the zero status.
    let mut body = deployment("fresh");
    body["status"] = json!({"readyReplicas": 7});
    let created = api.send(Req::post(DEPLOYS, &body));
    assert_eq!(created.status, 201, "{}", created.describe());
    assert_eq!(
        created.json()["status"],
        json!({}),
        "{}",
        created.describe()
    );
    // Success bodies end as Go's encoder ends them: with a newline.
    assert!(created.body.ends_with("}\n"), "{}", created.describe());
    let read = api.send(Req::get(format!("{DEPLOYS}/fresh")));
    assert!(read.body.ends_with("}\n"), "{}", read.describe());
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "fresh-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"rs": "x"}},
                 "template": {"metadata": {"labels": {"rs": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1.28"}]}}},
    });
    let created = api.send(Req::post(
        "/apis/apps/v1/namespaces/default/replicasets",
        &rs,
    ));
    assert_eq!(created.status, 201, "{}", created.describe());
    assert_eq!(created.json()["status"]["replicas"], json!(0));
}

#[test]
fn error_status_bodies_are_byte_for_byte_kube_apiservers() {
    let c = Controller::start();
    let api = c.admin_api();
    let missing = api.get("/api/v1/namespaces/default/configmaps/nope");
    assert_eq!(
        missing.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"configmaps \\\"nope\\\" not found\",\"reason\":\"NotFound\",\
         \"details\":{\"name\":\"nope\",\"kind\":\"configmaps\"},\"code\":404}\n",
        "{}",
        missing.describe()
    );
    let body = deployment("twice");
    assert_eq!(api.send(Req::post(DEPLOYS, &body)).status, 201);
    let again = api.send(Req::post(DEPLOYS, &body));
    assert_eq!(
        again.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"deployments.apps \\\"twice\\\" already exists\",\"reason\":\"AlreadyExists\",\
         \"details\":{\"name\":\"twice\",\"group\":\"apps\",\"kind\":\"deployments\"},\"code\":409}\n",
        "{}",
        again.describe()
    );
    // The router's own answers too.
    let foo = Method::from_bytes(b"FOO").expect("method");
    let refused = api.send(Req::new(foo, "/version"));
    assert!(
        refused.body.ends_with("\"code\":405}\n"),
        "{}",
        refused.describe()
    );
}

const VALID_POD_YAML: &str = "apiVersion: v1
kind: Pod
metadata:
  name: valid-pod
  labels:
    name: valid-pod
spec:
  containers:
  - name: kubernetes-serve-hostname
    image: registry.k8s.io/serve_hostname
";

#[test]
fn a_body_of_the_wrong_kind_is_refused_as_upstream_words_it() {
    let c = Controller::start();
    let dir = c.scratch().join("wrong-kind");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let yaml = dir.join("valid-pod.yaml");
    std::fs::write(&yaml, VALID_POD_YAML).expect("write pod yaml");
    let json_file = dir.join("valid-pod.json");
    let pod: serde_json::Value = valid_pod_json();
    std::fs::write(&json_file, pod.to_string()).expect("write pod json");
    let path = |p: &Path| p.to_str().expect("UTF-8 path").to_string();
    // kubectl's test/cmd: a pod posted to namespaces, raw (the YAML file goes as it is).
    let k = c.kubectl();
    let raw = k.fails(&["create", "--raw", "/api/v1/namespaces", "-f", &path(&yaml)]);
    raw.assert_stderr_has("the object provided is unrecognized (must be of type Namespace)");
    // The same pod as JSON decodes, and is not a Namespace.
    let as_json = k.fails(&[
        "create",
        "--raw",
        "/api/v1/namespaces",
        "-f",
        &path(&json_file),
    ]);
    assert!(
        as_json
            .stderr
            .contains("cannot be handled as a Namespace: converting (v1.Pod)"),
        "{}",
        as_json.describe()
    );
    assert_eq!(
        c.admin_api().get("/api/v1/namespaces/valid-pod").status,
        404
    );
}

/// The pod of [`VALID_POD_YAML`] as JSON.
fn valid_pod_json() -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "valid-pod", "labels": {"name": "valid-pod"}},
        "spec": {"containers": [
            {"name": "kubernetes-serve-hostname", "image": "registry.k8s.io/serve_hostname"}
        ]},
    })
}

#[test]
fn ephemeral_containers_are_added_through_their_subresource_and_never_changed() {
    let c = Controller::start();
    let api = c.admin_api();
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.28"}]}});
    let r = api.send(Req::post(pods, &pod));
    assert_eq!(r.status, 201, "{}", r.describe());
    let sub = format!("{pods}/app/ephemeralcontainers");
    let smp = "application/strategic-merge-patch+json";
    let debugger = json!({"name": "debugger", "image": "busybox:1.28",
                          "targetContainerName": "app", "stdin": true, "tty": true});

    // Editing the pod spec does not add one: the main resource keeps the stored list.
    let r = api.send(Req::patch(
        format!("{pods}/app"),
        smp,
        &json!({"spec": {"ephemeralContainers": [debugger.clone()]}}),
    ));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(
        r.json()["spec"]["ephemeralContainers"].is_null(),
        "{}",
        r.body
    );

    // The subresource adds it (as `kubectl debug` does), defaulted.
    let r = api.send(Req::patch(
        &sub,
        smp,
        &json!({"spec": {"ephemeralContainers": [debugger.clone()]}}),
    ));
    assert_eq!(r.status, 200, "{}", r.describe());
    let added = &r.json()["spec"]["ephemeralContainers"];
    assert_eq!(added[0]["name"], "debugger", "{}", r.body);
    assert_eq!(added[0]["terminationMessagePolicy"], "File", "{}", r.body);
    assert_eq!(api.get_ok(&sub)["spec"]["ephemeralContainers"], *added);

    // Ports, probes and resources are refused, naming the field.
    for (field, extra) in [
        ("ports", json!({"ports": [{"containerPort": 80}]})),
        (
            "readinessProbe",
            json!({"readinessProbe": {"exec": {"command": ["true"]}}}),
        ),
        (
            "resources",
            json!({"resources": {"requests": {"cpu": "100m"}}}),
        ),
    ] {
        let mut second = json!({"name": "second", "image": "busybox:1.28"});
        if let (Some(s), Some(e)) = (second.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let r = api.send(Req::patch(
            &sub,
            smp,
            &json!({"spec": {"ephemeralContainers": [second]}}),
        ));
        assert_eq!(r.status, 422, "{field}: {}", r.describe());
        assert_eq!(
            r.json()["details"]["causes"][0]["field"],
            format!("spec.ephemeralContainers[1].{field}"),
            "{}",
            r.body
        );
        assert!(
            r.body.contains("cannot be set for an Ephemeral Container"),
            "{}",
            r.body
        );
    }

    // Changing or removing it is refused.
    let mut current = api.get_ok(&format!("{pods}/app"));
    current["spec"]["ephemeralContainers"][0]["image"] = json!("busybox:1.36");
    let r = api.send(Req::put(&sub, &current));
    assert_eq!(r.status, 422, "{}", r.describe());
    assert!(
        r.body
            .contains("existing ephemeral containers \\\"debugger\\\" may not be changed"),
        "{}",
        r.body
    );
    let mut current = api.get_ok(&format!("{pods}/app"));
    current["spec"]["ephemeralContainers"] = json!([]);
    let r = api.send(Req::put(&sub, &current));
    assert_eq!(r.status, 422, "{}", r.describe());
    assert!(r.body.contains("may not be removed"), "{}", r.body);
    assert_eq!(
        api.get_ok(&format!("{pods}/app"))["spec"]["ephemeralContainers"],
        *added
    );
}

/// `kubectl get --subresource=scale` prints upstream's Scale columns, and `--subresource=status`
/// the kind's own.
#[test]
fn get_subresource_prints_what_upstream_prints() {
    let c = Controller::start();
    let api = c.admin_api();
    let created = api.send(Req::post(DEPLOYS, &deployment("sub")));
    assert_eq!(created.status, 201, "{}", created.describe());
    let k = c
        .kubectl()
        .with_binary(Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33"));
    let scale =
        berth_tests::Table::parse(&k.ok(&["get", "deployment", "sub", "--subresource=scale"]))
            .expect("a table");
    assert_eq!(scale.headers, ["NAME", "DESIRED", "AVAILABLE", "AGE"]);
    assert_eq!(scale.cell("sub", "DESIRED"), Some("0"));
    let status =
        berth_tests::Table::parse(&k.ok(&["get", "deployment", "sub", "--subresource=status"]))
            .expect("a table");
    assert_eq!(
        status.headers,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
}
