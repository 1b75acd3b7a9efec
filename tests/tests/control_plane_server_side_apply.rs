//! Server-side apply as upstream, with the real kubectl 1.27 and 1.33: a second manager
//! applying another value of a field gets a 409 naming the first (kubectl prints upstream's
//! conflict text), `--force-conflicts` takes the field, a field removed from an applier's
//! manifest disappears unless another manager shares it, and `kubectl diff --server-side`
//! shows exactly the change without making it.

use std::path::Path;
use std::time::Duration;

use berth_tests::client::Req;
use berth_tests::{Controller, Kubectl, Run};
use serde_json::{Value, json};

/// The kubectl releases the acceptance names, oldest and newest.
const KUBECTLS: [(&str, &str); 2] = [
    ("127", "/usr/lib/google-cloud-sdk/bin/kubectl.1.27"),
    ("133", "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"),
];

/// Each of [`KUBECTLS`] for `c`, with its minor version.
fn kubectls(c: &Controller) -> impl Iterator<Item = (&'static str, Kubectl)> + '_ {
    KUBECTLS
        .iter()
        .map(|(minor, bin)| (*minor, c.kubectl().with_binary(Path::new(bin))))
}

fn deployment(name: &str, replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: web
        image: {image}
"
    )
}

fn configmap(name: &str, data: &[(&str, &str)]) -> String {
    let mut y = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n");
    for (k, v) in data {
        y.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    y
}

fn get(c: &Controller, what: &str) -> Value {
    let out = c.kubectl_ok(&["get", what, "-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: {e}\n{out}"))
}

/// The managers whose entry holds `path` (a pointer into `fieldsV1`, e.g. `/f:spec/f:replicas`).
fn owners(obj: &Value, path: &str) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["fieldsV1"].pointer(path).is_some())
        .filter_map(|e| e["manager"].as_str().map(String::from))
        .collect()
}

/// `kubectl apply --server-side` of `yaml` as field manager `manager`, with `extra` flags.
fn apply_as(k: &Kubectl, manager: &str, extra: &[&str], yaml: &str) -> Run {
    let manager = format!("--field-manager={manager}");
    let mut args = vec!["apply", "--server-side", manager.as_str(), "-f", "-"];
    args.extend_from_slice(extra);
    k.run_stdin(&args, yaml)
}

#[test]
fn a_second_applier_conflicts_and_force_conflicts_takes_the_field() {
    let c = Controller::start();
    for (minor, k) in kubectls(&c) {
        let name = format!("ssa-conflict-{minor}");
        let apply = |manager: &str, extra: &[&str], yaml: &str| apply_as(&k, manager, extra, yaml);
        let out = apply("one", &[], &deployment(&name, 2, "nginx:1.14.2"));
        assert!(out.success(), "kubectl {minor}: {}", out.describe());
        assert_eq!(
            out.stdout.trim(),
            format!("deployment.apps/{name} serverside-applied")
        );

        // Another manager, another value: refused with upstream's words, nothing written.
        let refused = apply("two", &[], &deployment(&name, 3, "nginx:1.14.2"));
        assert!(
            !refused.success(),
            "kubectl {minor}: {}",
            refused.describe()
        );
        assert!(
            refused
                .stderr
                .contains("Apply failed with 1 conflict: conflict with \"one\": .spec.replicas"),
            "kubectl {minor}: {}",
            refused.describe()
        );
        assert!(
            refused
                .stderr
                .contains("Please review the fields above--they currently have other managers"),
            "kubectl {minor} did not take it for an apply conflict: {}",
            refused.describe()
        );
        let d = get(&c, &format!("deploy/{name}"));
        assert_eq!(d["spec"]["replicas"], 2, "kubectl {minor}: {d}");

        // The same value another manager applies is shared, not a conflict.
        let shared = apply("two", &[], &deployment(&name, 2, "nginx:1.14.2"));
        assert!(shared.success(), "kubectl {minor}: {}", shared.describe());
        let d = get(&c, &format!("deploy/{name}"));
        assert_eq!(owners(&d, "/f:spec/f:replicas"), ["one", "two"], "{d}");

        // Forced, the field is the second manager's alone.
        let forced = apply(
            "two",
            &["--force-conflicts"],
            &deployment(&name, 3, "nginx:1.14.2"),
        );
        assert!(forced.success(), "kubectl {minor}: {}", forced.describe());
        let d = get(&c, &format!("deploy/{name}"));
        assert_eq!(d["spec"]["replicas"], 3, "kubectl {minor}: {d}");
        assert_eq!(owners(&d, "/f:spec/f:replicas"), ["two"], "{d}");
        // The first manager keeps the rest of what it applied.
        let image = "/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"web\"}/f:image";
        assert_eq!(owners(&d, image), ["one", "two"], "{d}");
    }
}

#[test]
fn the_conflict_is_a_409_status_with_upstreams_causes_and_fieldmanager_is_required() {
    let c = Controller::start();
    let api = c.admin_api();
    let url = "/api/v1/namespaces/default/configmaps/ssa-status";
    const APPLY: &str = "application/apply-patch+yaml";
    const MERGE: &str = "application/merge-patch+json";
    let patch = |query: &str, content_type: &str, doc: &Value| {
        Req::patch(format!("{url}{query}"), content_type, doc)
    };
    let apply = |query: &str, data: Value| {
        let doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa-status"}, "data": data});
        patch(query, APPLY, &doc)
    };
    let created = api.expect(apply("?fieldManager=first", json!({"a": "1"})), 201);
    assert_eq!(created["data"]["a"], "1");

    let status = api.expect(apply("?fieldManager=second", json!({"a": "2"})), 409);
    assert_eq!(status["reason"], "Conflict", "{status}");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"first\": .data.a"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"first\"",
            "field": ".data.a"}]),
        "{status}"
    );

    // Upstream's PatchOptions validation: an apply names its manager; only an apply forces.
    let invalid = api.expect(apply("", json!({"a": "2"})), 422);
    assert_eq!(
        invalid["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        "{invalid}"
    );
    let forced_merge = api.expect(
        patch("?force=true", MERGE, &json!({"data": {"a": "3"}})),
        422,
    );
    assert_eq!(
        forced_merge["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        "{forced_merge}"
    );

    // A configuration is of the URL's version and carries no managedFields.
    let mut other_version = json!({"apiVersion": "v2", "kind": "ConfigMap",
        "metadata": {"name": "ssa-status"}, "data": {"a": "1"}});
    let wrong = api.expect(patch("?fieldManager=first", APPLY, &other_version), 400);
    assert_eq!(
        wrong["message"],
        "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
    );
    other_version["apiVersion"] = json!("v1");
    other_version["metadata"]["managedFields"] = json!([]);
    let carried = api.expect(patch("?fieldManager=first", APPLY, &other_version), 400);
    assert_eq!(carried["message"], "metadata.managedFields must be nil");

    // An update (not an apply) takes the applied field without a conflict; the applier then
    // conflicts with the updater, named with its apiVersion as upstream names updaters.
    api.expect(
        patch("?fieldManager=editor", MERGE, &json!({"data": {"a": "9"}})),
        200,
    );
    let status = api.expect(apply("?fieldManager=first", json!({"a": "1"})), 409);
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.a"
    );
}

#[test]
fn a_field_an_applier_stops_applying_goes_unless_another_manager_owns_it() {
    let c = Controller::start();
    for (minor, k) in kubectls(&c) {
        let name = format!("ssa-removal-{minor}");
        let apply = |manager: &str, yaml: &str| {
            let r = apply_as(&k, manager, &[], yaml);
            assert!(r.success(), "kubectl {minor}: {}", r.describe());
        };
        apply(
            "one",
            &configmap(&name, &[("kept", "1"), ("dropped", "2"), ("shared", "3")]),
        );
        apply("two", &configmap(&name, &[("shared", "3")]));
        apply("one", &configmap(&name, &[("kept", "1")]));
        let cm = get(&c, &format!("cm/{name}"));
        assert_eq!(
            cm["data"],
            json!({"kept": "1", "shared": "3"}),
            "kubectl {minor}: `dropped` must go, `shared` stays with its other owner"
        );
        assert_eq!(owners(&cm, "/f:data/f:shared"), ["two"], "{cm}");

        // A keyed list item goes the same way: a container dropped from the manifest.
        let dep = format!("ssa-removal-deploy-{minor}");
        let two_containers = deployment(&dep, 1, "nginx:1.14.2").replace(
            "        image: nginx:1.14.2\n",
            "        image: nginx:1.14.2\n      - name: sidecar\n        image: busybox:1.28\n",
        );
        apply("one", &two_containers);
        let d = get(&c, &format!("deploy/{dep}"));
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        apply("one", &deployment(&dep, 1, "nginx:1.14.2"));
        let d = get(&c, &format!("deploy/{dep}"));
        let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["web"], "kubectl {minor}: {d}");
    }
}

/// The changed lines of a unified diff (`+`/`-`, not the file headers).
fn changed_lines(diff: &str) -> Vec<String> {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .map(String::from)
        .collect()
}

#[test]
fn kubectl_diff_server_side_shows_exactly_the_change_and_writes_nothing() {
    let c = Controller::start();
    for (minor, k) in kubectls(&c) {
        let name = format!("ssa-diff-{minor}");
        k.ok_stdin(
            &["apply", "--server-side", "-f", "-"],
            &deployment(&name, 2, "nginx:1.14.2"),
        );
        let before = get(&c, &format!("deploy/{name}"));

        // The deployment controller writes the status while the rollout starts; a write
        // between kubectl's read and its dry run shows in the diff, so each diff is retried
        // until it is of the object at rest.
        let diff_is = |yaml: String, exit: i32, want: &[&str]| {
            c.wait_for(
                Duration::from_secs(30),
                &format!("kubectl {minor} diff --server-side to show {want:?}"),
                || {
                    let r = k.run_stdin(&["diff", "--server-side", "-f", "-"], &yaml);
                    let mut lines = changed_lines(&r.stdout);
                    lines.sort();
                    if r.status.and_then(|s| s.code()) == Some(exit) && lines == want {
                        Ok(())
                    } else {
                        Err(r.describe())
                    }
                },
            )
        };
        // The same manifest: no difference (exit 0, nothing printed).
        diff_is(deployment(&name, 2, "nginx:1.14.2"), 0, &[]);
        // A changed image: exit 1, and the diff is the image and the generation it bumps.
        diff_is(
            deployment(&name, 2, "nginx:1.16.1"),
            1,
            &[
                "+      - image: nginx:1.16.1",
                "+  generation: 2",
                "-      - image: nginx:1.14.2",
                "-  generation: 1",
            ],
        );

        // A dry run: nothing was written (the deployment controller writes the status
        // meanwhile, so the spec and generation tell).
        let after = get(&c, &format!("deploy/{name}"));
        assert_eq!(
            after["spec"], before["spec"],
            "kubectl {minor}: the diff wrote"
        );
        assert_eq!(after["metadata"]["generation"], 1, "kubectl {minor}");

        // An object that does not exist yet diffs as wholly new, and is not created.
        let fresh = format!("ssa-diff-new-{minor}");
        let new = k.run_stdin(
            &["diff", "--server-side", "-f", "-"],
            &configmap(&fresh, &[("a", "1")]),
        );
        assert_eq!(
            new.status.and_then(|s| s.code()),
            Some(1),
            "kubectl {minor}: {}",
            new.describe()
        );
        let added = changed_lines(&new.stdout);
        assert!(
            added.iter().all(|l| l.starts_with('+'))
                && added.contains(&format!("+  name: {fresh}"))
                && added.contains(&"+  a: \"1\"".to_string()),
            "kubectl {minor}:\n{}",
            new.stdout
        );
        let absent = c.kubectl_run(&["get", "cm", &fresh]);
        assert!(
            !absent.success(),
            "kubectl {minor}: the diff created {fresh}"
        );
    }
}

#[test]
fn a_client_side_applied_object_moves_to_server_side_apply_without_conflicts() {
    let c = Controller::start();
    for (minor, k) in kubectls(&c) {
        let name = format!("ssa-upgrade-{minor}");
        k.ok_stdin(&["apply", "-f", "-"], &deployment(&name, 2, "nginx:1.14.2"));
        // kubectl moves the client-side applier's fields to its server-side manager (a JSON
        // patch of managedFields) before it applies: no conflict with its own past self.
        let out = k.run_stdin(
            &["apply", "--server-side", "-f", "-"],
            &deployment(&name, 3, "nginx:1.14.2"),
        );
        assert!(out.success(), "kubectl {minor}: {}", out.describe());
        let d = get(&c, &format!("deploy/{name}"));
        assert_eq!(d["spec"]["replicas"], 3, "kubectl {minor}: {d}");
        assert_eq!(owners(&d, "/f:spec/f:replicas"), ["kubectl"], "{d}");
    }
}

#[test]
fn an_apply_through_the_status_subresource_owns_the_status_alone() {
    let c = Controller::start();
    let api = c.admin_api();
    c.kubectl_ok(&["create", "namespace", "ssa-status-sub"]);
    let url = "/api/v1/namespaces/ssa-status-sub/status?fieldManager=status-writer";
    let doc = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "ssa-status-sub", "labels": {"ignored": "yes"}},
        "status": {"conditions": [{"type": "Custom", "status": "True"}]}});
    let ns = api.expect(Req::patch(url, "application/apply-patch+yaml", &doc), 200);
    assert_eq!(ns["status"]["conditions"][0]["type"], "Custom", "{ns}");
    assert!(ns["metadata"]["labels"].get("ignored").is_none(), "{ns}");
    let entry = ns["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["manager"] == "status-writer")
        .cloned()
        .unwrap_or_else(|| panic!("no entry of status-writer: {ns}"));
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["subresource"], "status");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Custom\"}": {
            ".": {}, "f:status": {}, "f:type": {}}}}}),
        "{ns}"
    );
}

const GATEWAYS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gateways.ssa.berth.example.com
spec:
  group: ssa.berth.example.com
  scope: Namespaced
  names: {plural: gateways, singular: gateway, kind: Gateway}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              listeners:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              hosts:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              args:
                type: array
                items: {type: string}
"#;

fn gateway(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ssa.berth.example.com/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
    )
}

#[test]
fn custom_resources_merge_and_conflict_by_their_schemas_list_types() {
    let c = Controller::start();
    // `kubectl apply --server-side` of the definition itself, as install manifests do.
    c.kubectl()
        .ok_stdin(&["apply", "--server-side", "-f", "-"], GATEWAYS);
    let api = c.admin_api();
    c.wait_for(
        Duration::from_secs(10),
        "the definition established",
        || {
            let crd = api.get_ok(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gateways.ssa.berth.example.com",
            );
            let established = crd["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established { Ok(()) } else { Err(crd) }
        },
    );
    for (minor, k) in kubectls(&c) {
        let name = format!("gw-{minor}");
        let apply = |manager: &str, spec: &str| apply_as(&k, manager, &[], &gateway(&name, spec));
        let ok = |r: Run| {
            assert!(r.success(), "kubectl {minor}: {}", r.describe());
        };
        ok(apply(
            "one",
            "  listeners: [{name: a, port: 80}]\n  hosts: [x.example]\n  args: [p]\n",
        ));
        // Other items of a map list and other values of a set are no conflict.
        ok(apply(
            "two",
            "  listeners: [{name: b, port: 81}]\n  hosts: [y.example]\n",
        ));
        let gw = get(&c, &format!("gateways.ssa.berth.example.com/{name}"));
        assert_eq!(
            gw["spec"]["listeners"],
            json!([{"name": "a", "port": 80}, {"name": "b", "port": 81}]),
            "kubectl {minor}: {gw}"
        );
        assert_eq!(
            gw["spec"]["hosts"],
            json!(["x.example", "y.example"]),
            "{gw}"
        );
        // An atomic list conflicts whole; a map list item's field by its key.
        let atomic = apply("two", "  args: [q]\n");
        assert!(
            atomic
                .stderr
                .contains("Apply failed with 1 conflict: conflict with \"one\": .spec.args"),
            "kubectl {minor}: {}",
            atomic.describe()
        );
        let keyed = apply(
            "two",
            "  listeners: [{name: b, port: 81}, {name: a, port: 99}]\n",
        );
        assert!(
            keyed.stderr.contains(
                "Apply failed with 1 conflict: conflict with \"one\": .spec.listeners[name=\"a\"].port"
            ),
            "kubectl {minor}: {}",
            keyed.describe()
        );
        // The first manager dropping its listener and host removes them, not the others'.
        ok(apply("one", "  args: [p]\n"));
        let gw = get(&c, &format!("gateways.ssa.berth.example.com/{name}"));
        assert_eq!(
            gw["spec"],
            json!({"listeners": [{"name": "b", "port": 81}], "hosts": ["y.example"], "args": ["p"]}),
            "kubectl {minor}: {gw}"
        );
    }
}
