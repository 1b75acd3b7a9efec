//! Pod manifests for the agent tests, as JSON (which kubectl reads as YAML): pods bound to a
//! node by `spec.nodeName` (there is no scheduler yet) running the fixture images.

use serde_json::{Value, json};

/// A shell loop that runs until SIGTERM and then exits 0 at once (a bare `sleep` as PID 1
/// ignores SIGTERM and would only die at the end of the grace period).
pub const SLEEP_FOREVER: &str = "trap 'exit 0' TERM; while true; do sleep 1; done";

/// A pod named `name` bound to `node` with the given `spec` (nodeName is added).
pub fn bound_pod(name: &str, node: &str, mut spec: Value) -> Value {
    spec["nodeName"] = Value::from(node);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": name}},
        "spec": spec,
    })
}

/// A container running `script` with `sh -c` in busybox:1.28.
pub fn sh_container(name: &str, script: &str) -> Value {
    json!({
        "name": name,
        "image": "busybox:1.28",
        "command": ["sh", "-c", script],
    })
}

/// A busybox container `main` with volume `data` at `/data` that runs `first` (shell, may be
/// empty), then turns Ready (its probe looks for `/tmp/ready` every second) and runs until
/// SIGTERM.
pub fn ready_data_container(first: &str) -> Value {
    let mut main = sh_container("main", &format!("{first}touch /tmp/ready; {SLEEP_FOREVER}"));
    main["readinessProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/ready"]},
                                     "periodSeconds": 1, "failureThreshold": 1});
    main["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    main
}

/// A pod `ns/name` labelled `labels`, bound to `node`, whose one container `main` runs
/// `script` with `sh -c` in `image`; a one-second grace period, so that it stops at once.
pub fn script_pod(
    ns: &str,
    name: &str,
    node: &str,
    labels: Value,
    image: &str,
    script: &str,
) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": image,
                                 "command": ["sh", "-c", script]}]}})
}

/// A pod bound to `node` with one busybox container `main` running `script`.
pub fn sh_pod(name: &str, node: &str, script: &str) -> Value {
    bound_pod(
        name,
        node,
        json!({"containers": [sh_container("main", script)]}),
    )
}

/// The seeds' `nginx` pod (image `nginx:1.14.2`, containerPort 80), bound to `node`.
pub fn nginx_pod(name: &str, node: &str, image: &str) -> Value {
    bound_pod(
        name,
        node,
        json!({"containers": [{
            "name": "nginx",
            "image": image,
            "ports": [{"containerPort": 80}],
        }]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_bound_by_node_name() {
        let p = sh_pod("p", "node-a", "echo hi");
        assert_eq!(p["spec"]["nodeName"], "node-a");
        assert_eq!(p["spec"]["containers"][0]["command"][2], "echo hi");
        assert_eq!(
            nginx_pod("n", "node-b", "nginx:1.14.2")["spec"]["nodeName"],
            "node-b"
        );
    }
}
