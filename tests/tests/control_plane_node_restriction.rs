//! Issue 9, NodeRestriction: a node credential may set on its own Node only the labels
//! upstream lets a kubelet set (a role label is 403 with upstream's message, a zone label is
//! fine), on create and on update, through the API and through kubectl; it may not change its
//! taints once the Node exists; labels and taints an administrator set are theirs.

use berth_tests::host::unique_suffix;
use berth_tests::join::join_locally;
use berth_tests::objects::failure_status;
use berth_tests::pki::{client_cert_user, write_kubeconfig};
use berth_tests::{Api, Controller, Credentials, Req};
use serde_json::{Value, json};

const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const ROLE: &str = "node-role.kubernetes.io/control-plane";

/// Joins as a fresh node name; returns it and an API client with its credentials.
fn node_client(c: &Controller) -> (String, Api) {
    let name = format!("restricted-{}", unique_suffix());
    let attempt = join_locally(c, &name, "node-secret");
    let api = c.api_with(Credentials::ClientCert(attempt.identity()));
    (name, api)
}

fn node_object(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
    })
}

/// Asserts 403 with exactly `message`.
fn forbidden(api: &Api, req: Req, message: &str) {
    let reply = api.send(req);
    assert_eq!(reply.status, 403, "{}", reply.describe());
    let got = failure_status(&reply.json(), 403, "Forbidden")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()));
    assert_eq!(got, message, "{}", reply.describe());
}

fn labels_patch(labels: Value) -> Value {
    json!({"metadata": {"labels": labels}})
}

#[test]
fn a_node_may_set_kubelet_labels_on_itself_but_not_a_role() {
    let c = Controller::start();
    let (name, node) = node_client(&c);
    let path = format!("/api/v1/nodes/{name}");

    // Registering with a role label: refused, as upstream refuses it.
    forbidden(
        &node,
        Req::post("/api/v1/nodes", &node_object(&name, json!({ROLE: ""}))),
        &format!(
            "nodes \"{name}\" is forbidden: node \"{name}\" is not allowed to set the following \
             labels: {ROLE}"
        ),
    );
    let created = node.send(Req::post(
        "/api/v1/nodes",
        &node_object(
            &name,
            json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "z1"}),
        ),
    ));
    assert_eq!(created.status, 201, "{}", created.describe());

    // Adding it later: the same, with upstream's update message, whatever the patch type.
    let message = format!("nodes \"{name}\" is forbidden: is not allowed to modify labels: {ROLE}");
    for content_type in [MERGE, STRATEGIC] {
        forbidden(
            &node,
            Req::patch(&path, content_type, &labels_patch(json!({ROLE: ""}))),
            &message,
        );
    }
    let mut current = node.get_ok(&path);
    current["metadata"]["labels"][ROLE] = json!("");
    // Unconditional: the IPAM controller may write the podCIDR between the read and the PUT.
    if let Some(meta) = current["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
    }
    forbidden(&node, Req::put(&path, &current), &message);
    forbidden(
        &node,
        Req::patch(
            &path,
            MERGE,
            &labels_patch(json!({"node-restriction.kubernetes.io/pool": "a"})),
        ),
        &format!(
            "nodes \"{name}\" is forbidden: is not allowed to modify labels: \
             node-restriction.kubernetes.io/pool"
        ),
    );

    // What a kubelet may set works.
    let zone = node.send(Req::patch(
        &path,
        MERGE,
        &labels_patch(json!({
            "topology.kubernetes.io/zone": "z2",
            "node.kubernetes.io/instance-type": "big",
            "example.com/gpu": "yes",
        })),
    ));
    assert_eq!(zone.status, 200, "{}", zone.describe());
    let labels = &zone.json()["metadata"]["labels"];
    assert_eq!(labels["topology.kubernetes.io/zone"], "z2", "{labels:#}");
    assert!(labels.get(ROLE).is_none(), "{labels:#}");

    // Through kubectl with the node's credentials: upstream's message reaches the user.
    let kubeconfig = c.scratch().join("node.kubeconfig");
    let identity = {
        let reply = join_locally(&c, &name, "node-secret");
        reply.identity()
    };
    write_kubeconfig(
        &kubeconfig,
        c.url(),
        &c.ca_pem(),
        client_cert_user(&identity),
    );
    let as_node = c.kubectl().with_kubeconfig(&kubeconfig);
    let r = as_node.fails(&["label", "node", &name, &format!("{ROLE}=")]);
    r.assert_stderr_has(&format!("is not allowed to modify labels: {ROLE}"));
    as_node.ok(&[
        "label",
        "node",
        &name,
        "topology.kubernetes.io/zone=z3",
        "--overwrite",
    ]);
}

#[test]
fn a_node_may_not_change_its_taints_nor_an_administrators_labels() {
    let c = Controller::start();
    let (name, node) = node_client(&c);
    let path = format!("/api/v1/nodes/{name}");
    let created = node.send(Req::post("/api/v1/nodes", &node_object(&name, json!({}))));
    assert_eq!(created.status, 201, "{}", created.describe());

    let taints_message =
        format!("nodes \"{name}\" is forbidden: node \"{name}\" is not allowed to modify taints");
    forbidden(
        &node,
        Req::patch(&path, MERGE, &json!({"spec": {"taints": []}})),
        &taints_message,
    );
    forbidden(
        &node,
        Req::patch(
            &path,
            MERGE,
            &json!({"spec": {"taints": [{"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}]}}),
        ),
        &taints_message,
    );

    // The administrator may; the node's status writes are not affected.
    let admin = c.admin_api();
    let untaint = admin.send(Req::patch(
        &path,
        MERGE,
        &json!({"spec": {"taints": null}, "metadata": {"labels": {ROLE: ""}}}),
    ));
    assert_eq!(untaint.status, 200, "{}", untaint.describe());
    let status = node.send(Req::patch(
        format!("{path}/status"),
        MERGE,
        &json!({"status": {"conditions": [{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "message": "ok"}]}}),
    ));
    assert_eq!(status.status, 200, "{}", status.describe());

    // The administrator's role label is left alone by the node's own label changes, and the
    // node may not remove it.
    let zone = node.send(Req::patch(
        &path,
        MERGE,
        &labels_patch(json!({"topology.kubernetes.io/zone": "z1"})),
    ));
    assert_eq!(zone.status, 200, "{}", zone.describe());
    assert_eq!(
        zone.json()["metadata"]["labels"][ROLE],
        "",
        "{}",
        zone.describe()
    );
    forbidden(
        &node,
        Req::patch(&path, MERGE, &labels_patch(json!({ROLE: null}))),
        &format!("nodes \"{name}\" is forbidden: is not allowed to modify labels: {ROLE}"),
    );
    let after = admin.get_ok(&path);
    assert_eq!(after["metadata"]["labels"][ROLE], "", "{after:#}");
    assert!(after["spec"]["taints"].is_null(), "{after:#}");
}
