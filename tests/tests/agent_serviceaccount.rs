//! In-cluster clients: a container runs the official Python `kubernetes` client with
//! `load_incluster_config()` (the token, CA and namespace the agent projects into
//! `/var/run/secrets/kubernetes.io/serviceaccount`, and the `KUBERNETES_SERVICE_*` variables).
//! It is refused until a RoleBinding grants `view`, then lists the namespace's pods; its token
//! stops working once the pod is deleted.
//!
//! The interpreter and the client come from the host (`$BERTH_PYTHON`, the venv `.ci/run`
//! installs), bind-mounted read-only into a busybox container at the same paths.

use berth_tests::objects::namespace;
use berth_tests::{Cluster, ClusterConfig, Credentials, Req};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const NS: &str = "in-cluster";
const SCRIPT: &str = r#"
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_incluster_config()
ns = open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read()
try:
    pods = client.CoreV1Api().list_namespaced_pod(ns)
    print('OK', ' '.join(sorted(p.metadata.name for p in pods.items)))
except ApiException as e:
    print('STATUS', e.status)
"#;

/// The interpreter, and the directories it needs: its venv, its installation, the libraries.
fn python() -> (String, Vec<String>) {
    let python =
        std::env::var("BERTH_PYTHON").unwrap_or_else(|_| "/opt/berth-venv/bin/python".into());
    let text = berth_tests::fixtures::python::client_python_output(
        "import sys, kubernetes; print(sys.prefix); print(sys.base_prefix)",
    );
    let mut dirs: Vec<String> = ["/usr", "/lib", "/lib64"]
        .iter()
        .filter(|d| Path::new(d).exists())
        .map(|d| d.to_string())
        .collect();
    for prefix in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !dirs
            .iter()
            .any(|d| prefix == d || prefix.starts_with(&format!("{d}/")))
        {
            dirs.push(prefix.to_string());
        }
    }
    (python, dirs)
}

fn pod(python_dirs: &[String]) -> Value {
    let volumes: Vec<Value> = python_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"name": format!("host-{i}"), "hostPath": {"path": d}}))
        .collect();
    let mounts: Vec<Value> = python_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"name": format!("host-{i}"), "mountPath": d, "readOnly": true}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": NS},
           "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "busybox:1.28",
                                    "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                                    "volumeMounts": mounts}],
                    "volumes": volumes}})
}

#[test]
fn an_in_cluster_client_reads_what_rbac_grants_and_loses_its_token_with_its_pod() {
    let (python, dirs) = python();
    let c = Cluster::start_with(ClusterConfig {
        controller_on_all_addresses: true,
        ..ClusterConfig::agents(1)
    });
    let api = c.api();
    api.create("/api/v1/namespaces", &namespace(NS));
    api.create(&format!("/api/v1/namespaces/{NS}/pods"), &pod(&dirs));
    c.wait_for_pod_phase(NS, "client", "Running", Duration::from_secs(60));
    let run_client = || c.exec_ok(NS, "client", None, &[&python, "-c", SCRIPT]);

    // The agent pointed the client at an address of the controller's host the pod reaches
    // (the test's agents talk to the controller over loopback and report 127.0.0.1).
    let env = c.exec_ok(NS, "client", None, &["env"]);
    let host = env
        .lines()
        .find_map(|l| l.strip_prefix("KUBERNETES_SERVICE_HOST="))
        .unwrap_or_else(|| panic!("no KUBERNETES_SERVICE_HOST: {env}"));
    assert!(
        host.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| !ip.is_loopback()),
        "{env}"
    );
    let port = c.controller().port().to_string();
    assert!(
        env.contains(&format!("KUBERNETES_SERVICE_PORT={port}")),
        "{env}"
    );

    assert_eq!(run_client().trim(), "STATUS 403");
    api.create(
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings"),
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "default-views", "namespace": NS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}]}),
    );
    assert_eq!(run_client().trim(), "OK client");

    // The token is bound to the pod: it dies with it.
    let token = c
        .exec_ok(
            NS,
            "client",
            None,
            &["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"],
        )
        .trim()
        .to_string();
    let as_pod = c.controller().api_with(Credentials::Bearer(token));
    assert_eq!(
        as_pod.get(&format!("/api/v1/namespaces/{NS}/pods")).status,
        200
    );
    api.expect(
        Req::delete(format!("/api/v1/namespaces/{NS}/pods/client")),
        200,
    );
    c.wait_for(Duration::from_secs(60), "the pod to be gone", || {
        match c.pod(NS, "client") {
            None => Ok(()),
            Some(p) => Err(p["status"]["phase"].clone()),
        }
    });
    let reply = as_pod.get(&format!("/api/v1/namespaces/{NS}/pods"));
    assert_eq!(reply.status, 401, "{}", reply.describe());
}
