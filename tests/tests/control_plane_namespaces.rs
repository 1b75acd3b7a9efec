//! Namespaces: a write into a namespace that does not exist is 404; deleting a namespace
//! deletes what is in it (the namespace is Terminating meanwhile, refusing new content), then
//! the namespace itself.

use berth_tests::Controller;
use berth_tests::wait::ok_if;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_write_into_a_missing_namespace_is_not_found() {
    let c = Controller::start();
    let r = c.kubectl().fails(&[
        "create",
        "configmap",
        "cfg",
        "-n",
        "nowhere",
        "--from-literal=k=v",
    ]);
    r.assert_stderr_has("namespaces \"nowhere\" not found");
}

#[test]
fn deleting_a_namespace_deletes_its_content_first() {
    let c = Controller::start();
    c.kubectl_ok(&["create", "namespace", "doomed"]);
    c.kubectl_ok(&[
        "create",
        "configmap",
        "cfg",
        "-n",
        "doomed",
        "--from-literal=k=v",
    ]);
    c.kubectl().apply_stdin(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: doomed\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.14.2\n",
    );
    // Finalizer of ours on the configmap: the namespace must wait for it.
    let finalizers = |value: &str| {
        let patch = format!(r#"{{"metadata":{{"finalizers":{value}}}}}"#);
        c.kubectl_ok(&[
            "patch",
            "configmap",
            "cfg",
            "-n",
            "doomed",
            "--type=merge",
            "-p",
            &patch,
        ]);
    };
    finalizers(r#"["berth.test/hold"]"#);
    c.kubectl_ok(&["delete", "namespace", "doomed", "--wait=false"]);
    c.wait_for(
        WAIT,
        "the namespace is Terminating and its deployment is gone",
        || {
            let phase = c.kubectl_ok(&["get", "ns", "doomed", "-o", "jsonpath={.status.phase}"]);
            let deploys = c.kubectl_ok(&["get", "deploy", "-n", "doomed", "-o", "name"]);
            ok_if(
                phase == "Terminating" && deploys.trim().is_empty(),
                (phase, deploys),
            )
        },
    );
    let refused = c.kubectl().fails(&[
        "create",
        "configmap",
        "late",
        "-n",
        "doomed",
        "--from-literal=k=v",
    ]);
    refused.assert_stderr_has("because it is being terminated");
    finalizers("null");
    c.wait_for(WAIT, "the namespace is gone", || {
        let r = c.kubectl().run(&["get", "ns", "doomed"]);
        ok_if(r.stderr.contains("NotFound"), r.describe())
    });
}
