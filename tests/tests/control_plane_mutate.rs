//! Acceptance area 4: `kubectl scale`, `set image`, `label`, `annotate`, `patch` (strategic,
//! merge, json) and `delete --cascade=background|foreground|orphan` on a ReplicaSet that owns
//! pods through ownerReferences (made by hand: no ReplicaSet controller exists yet).

use std::time::Duration;

use berth_tests::objects::{items, names};
use berth_tests::seeds::seed;
use berth_tests::wait::ok_if;
use berth_tests::{Api, Controller, Req, secs};
use serde_json::{Value, json};

fn jsonpath(c: &Controller, what: &str, path: &str) -> String {
    c.kubectl_ok(&["get", what, "-o", &format!("jsonpath={path}")])
}

#[test]
fn scale_changes_replicas_through_the_scale_subresource() {
    let c = Controller::start();
    for stem in [
        "nginx-deployment.deployment",
        "frontend.replicaset",
        "web.statefulset",
        "nginx.replicationcontroller",
    ] {
        let s = seed(stem);
        c.apply_stdin(&s.text);
        let what = format!("{}/{}", s.kind.to_ascii_lowercase(), s.name);
        let out = c.kubectl_ok(&["scale", &what, "--replicas=5"]);
        assert!(
            out.trim().ends_with(&format!("/{} scaled", s.name)),
            "scale {what}: {out}"
        );
        assert_eq!(
            jsonpath(&c, &what, "{.spec.replicas}"),
            "5",
            "{what} after scale"
        );
    }

    // --current-replicas is a precondition: PUT .../scale with the read resourceVersion.
    let out = c.kubectl_ok(&[
        "scale",
        "deploy/nginx-deployment",
        "--current-replicas=5",
        "--replicas=2",
    ]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment scaled");
    assert_eq!(
        jsonpath(&c, "deploy/nginx-deployment", "{.spec.replicas}"),
        "2"
    );
    let r = c.kubectl_fails(&[
        "scale",
        "deploy/nginx-deployment",
        "--current-replicas=9",
        "--replicas=7",
    ]);
    assert!(r.stderr.contains("9"), "{}", r.describe());
    assert_eq!(
        jsonpath(&c, "deploy/nginx-deployment", "{.spec.replicas}"),
        "2"
    );

    // The Scale object itself, as kubectl and autoscalers read it.
    let scale = c
        .admin_api()
        .get_ok("/apis/apps/v1/namespaces/default/deployments/nginx-deployment/scale");
    assert_eq!(scale["kind"], "Scale", "{scale:#}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1", "{scale:#}");
    assert_eq!(scale["spec"]["replicas"], 2, "{scale:#}");
    assert_eq!(scale["status"]["selector"], "app=nginx", "{scale:#}");
}

#[test]
fn set_image_label_and_annotate_update_the_object() {
    let c = Controller::start();
    c.apply_stdin(&seed("nginx-deployment.deployment").text);
    let d = "deploy/nginx-deployment";
    let field = |path: &str| jsonpath(&c, d, path);

    let out = c.kubectl_ok(&["set", "image", d, "nginx=nginx:1.16.1"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment image updated");
    assert_eq!(
        field("{.spec.template.spec.containers[0].image}"),
        "nginx:1.16.1"
    );
    assert_eq!(field("{.metadata.generation}"), "2");

    let out = c.kubectl_ok(&["label", d, "env=prod"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment labeled");
    assert_eq!(field("{.metadata.labels.env}"), "prod");
    let r = c.kubectl_fails(&["label", d, "env=dev"]);
    assert!(
        r.stderr.contains("--overwrite"),
        "relabelling needs --overwrite:\n{}",
        r.describe()
    );
    c.kubectl_ok(&["label", d, "env=dev", "--overwrite"]);
    assert_eq!(field("{.metadata.labels.env}"), "dev");
    c.kubectl_ok(&["label", d, "env-"]);
    assert_eq!(field("{.metadata.labels.env}"), "");
    let app = field("{.metadata.labels.app}");
    assert_eq!(app, "nginx", "other labels stay");

    let out = c.kubectl_ok(&["annotate", d, "owner=team-a"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment annotated");
    assert_eq!(field("{.metadata.annotations.owner}"), "team-a");
    c.kubectl_ok(&["annotate", d, "owner-"]);
    assert_eq!(field("{.metadata.annotations.owner}"), "");
    let generation = field("{.metadata.generation}");
    assert_eq!(generation, "2", "metadata changes keep the generation");

    // Label pods by selector, too.
    c.apply_stdin(&seed("pod1.pod").text);
    c.apply_stdin(&seed("pod2.pod").text);
    let out = c.kubectl_ok(&["label", "pods", "-l", "tier=frontend", "checked=yes"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert_eq!(
        jsonpath(&c, "pod/pod2", "{.metadata.labels.checked}"),
        "yes"
    );
}

#[test]
fn patch_types_strategic_merge_and_json_have_their_semantics() {
    let c = Controller::start();
    c.apply_stdin(&seed("nginx-deployment.deployment").text);
    let d = "deploy/nginx-deployment";
    let containers = "{.spec.template.spec.containers[*].name}";

    // Strategic merge: containers merge by name, so the sidecar joins nginx.
    let sidecar = r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.28"}]}}}}"#;
    let out = c.kubectl_ok(&["patch", d, "--type", "strategic", "-p", sidecar]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment patched");
    assert_eq!(
        jsonpath(&c, d, containers),
        "nginx sidecar",
        "upstream strategic merge keeps the live items in their order and appends new ones"
    );

    // ... and `$patch: delete` removes one by its key.
    let remove =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}"#;
    c.kubectl_ok(&["patch", d, "--type", "strategic", "-p", remove]);
    assert_eq!(jsonpath(&c, d, containers), "nginx");

    // The same patch again changes nothing.
    let out = c.kubectl_ok(&["patch", d, "--type", "strategic", "-p", remove]);
    assert_eq!(
        out.trim(),
        "deployment.apps/nginx-deployment patched (no change)"
    );

    // JSON merge patch (RFC 7386): lists are replaced whole, null deletes.
    let out = c.kubectl_ok(&["patch", d, "--type", "merge", "-p", sidecar]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment patched");
    assert_eq!(jsonpath(&c, d, containers), "sidecar");
    c.kubectl_ok(&[
        "patch",
        d,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"labels":{"app":null,"merged":"yes"}}}"#,
    ]);
    assert_eq!(jsonpath(&c, d, "{.metadata.labels}"), r#"{"merged":"yes"}"#);

    // JSON patch (RFC 6902), including a failing `test` that must change nothing.
    let ops = r#"[{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/labels/jp","value":"1"}]"#;
    c.kubectl_ok(&["patch", d, "--type", "json", "-p", ops]);
    assert_eq!(jsonpath(&c, d, "{.spec.replicas}"), "4");
    assert_eq!(jsonpath(&c, d, "{.metadata.labels.jp}"), "1");
    // The generation moves with every write of the spec; the status (the controller's) may
    // change meanwhile.
    let generation = jsonpath(&c, d, "{.metadata.generation}");
    let failing = r#"[{"op":"test","path":"/spec/replicas","value":99},{"op":"replace","path":"/spec/replicas","value":1}]"#;
    c.kubectl_fails(&["patch", d, "--type", "json", "-p", failing]);
    assert_eq!(jsonpath(&c, d, "{.spec.replicas}"), "4");
    assert_eq!(
        jsonpath(&c, d, "{.metadata.generation}"),
        generation,
        "a failed patch must not write"
    );
}

const NS: &str = "gc";

/// Creates the `frontend` ReplicaSet in `gc` and three pods it owns, one of which may carry an
/// extra finalizer. Returns the ReplicaSet's uid.
/// The seed's `frontend` ReplicaSet (3 replicas) with the 3 pods its controller creates, each
/// owned through a controller ownerReference; `hold` puts a finalizer on the first of them.
/// Returns the ReplicaSet's uid and the pods' names, sorted.
fn replicaset_with_pods(c: &Controller, api: &Api, hold: Option<&str>) -> (String, Vec<String>) {
    c.kubectl_ok(&["create", "namespace", NS]);
    c.kubectl().ok_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &seed("frontend.replicaset").text,
    );
    let uid = c.kubectl_ok(&[
        "get",
        "rs",
        "frontend",
        "-n",
        NS,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert!(!uid.is_empty(), "the ReplicaSet has no uid");
    let owned = c.wait_for(
        GC_WAIT,
        "the ReplicaSet's 3 pods, owned through ownerReferences",
        || {
            let list = pods(api);
            let owned: Vec<String> = items(&list)
                .iter()
                .filter(|p| {
                    p["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| {
                            refs.iter()
                                .any(|r| r["uid"] == uid.as_str() && r["controller"] == true)
                        })
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
                .collect();
            if owned.len() == 3 && names(&list).len() == 3 {
                Ok(owned)
            } else {
                Err(list)
            }
        },
    );
    let mut owned = owned;
    owned.sort();
    if let Some(finalizer) = hold {
        let path = format!("/api/v1/namespaces/{NS}/pods/{}", owned[0]);
        api.expect(
            Req::patch(
                &path,
                "application/merge-patch+json",
                &json!({"metadata": {"finalizers": [finalizer]}}),
            ),
            200,
        );
    }
    (uid, owned)
}

fn pods(api: &Api) -> Value {
    api.get_ok(&format!("/api/v1/namespaces/{NS}/pods"))
}

fn rs_status(api: &Api) -> u16 {
    api.get(&format!(
        "/apis/apps/v1/namespaces/{NS}/replicasets/frontend"
    ))
    .status
}

const GC_WAIT: Duration = Duration::from_secs(30);

#[test]
fn delete_cascade_background_removes_the_dependents() {
    let c = Controller::start();
    let api = c.admin_api();
    replicaset_with_pods(&c, &api, None);
    let out = c.kubectl_ok(&["delete", "rs", "frontend", "-n", NS, "--cascade=background"]);
    assert_eq!(out.trim(), "replicaset.apps \"frontend\" deleted");
    assert_eq!(rs_status(&api), 404, "the ReplicaSet goes at once");
    c.wait_for(
        GC_WAIT,
        "the garbage collector deletes the ReplicaSet's pods",
        || {
            let left = names(&pods(&api));
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    );
}

#[test]
fn delete_cascade_foreground_removes_the_dependents_before_the_owner() {
    let c = Controller::start();
    let api = c.admin_api();
    // One pod carries a finalizer of ours, so the pods cannot all be gone until we allow it:
    // that makes "the owner waits for its dependents" observable without racing the GC.
    let hold = "berth.test/hold";
    let (_, owned) = replicaset_with_pods(&c, &api, Some(hold));
    let out = c.kubectl_ok(&[
        "delete",
        "rs",
        "frontend",
        "-n",
        NS,
        "--cascade=foreground",
        "--wait=false",
    ]);
    assert_eq!(out.trim(), "replicaset.apps \"frontend\" deleted");

    let rs_path = format!("/apis/apps/v1/namespaces/{NS}/replicasets/frontend");
    c.wait_for(
        GC_WAIT,
        "the unheld pods are deleted and the held one is terminating",
        || {
            let list = pods(&api);
            let left = names(&list);
            let terminating = items(&list)
                .iter()
                .all(|p| p["metadata"]["deletionTimestamp"].is_string());
            ok_if(left == [owned[0].clone()] && terminating, list)
        },
    );
    c.ensure_for(
        secs(2),
        "the ReplicaSet waits, with the foregroundDeletion finalizer",
        || {
            let reply = api.get(&rs_path);
            let rs = reply.json_or_null();
            let waiting = reply.status == 200
                && rs["metadata"]["deletionTimestamp"].is_string()
                && rs["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.contains(&json!("foregroundDeletion")));
            ok_if(waiting, reply.describe())
        },
    );

    let release = json!({"metadata": {"finalizers": null}});
    let pod_path = format!("/api/v1/namespaces/{NS}/pods/{}", owned[0]);
    api.expect(
        Req::patch(&pod_path, "application/merge-patch+json", &release),
        200,
    );
    c.wait_for(
        GC_WAIT,
        "the last pod, then the ReplicaSet, are gone",
        || {
            let left = names(&pods(&api));
            let rs = rs_status(&api);
            ok_if(left.is_empty() && rs == 404, (left, rs))
        },
    );
}

#[test]
fn delete_cascade_orphan_keeps_the_dependents_without_owner_references() {
    let c = Controller::start();
    let api = c.admin_api();
    let (uid, owned) = replicaset_with_pods(&c, &api, None);
    let out = c.kubectl_ok(&["delete", "rs", "frontend", "-n", NS, "--cascade=orphan"]);
    assert_eq!(out.trim(), "replicaset.apps \"frontend\" deleted");
    assert_eq!(rs_status(&api), 404);
    c.wait_for(
        GC_WAIT,
        "the orphaned pods lose their owner reference",
        || {
            let list = pods(&api);
            let owned = items(&list).iter().any(|p| {
                p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()))
            });
            if !owned { Ok(()) } else { Err(list) }
        },
    );
    c.ensure_for(secs(2), "the orphaned pods stay", || {
        let left = names(&pods(&api));
        if left == owned { Ok(()) } else { Err(left) }
    });
}
