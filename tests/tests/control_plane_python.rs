//! Acceptance area 8: the official Python `kubernetes` client (run by
//! `tests/python/client_check.py`) loads the admin kubeconfig, reads the version
//! (`get_code()`), lists and watches pods, creates a Deployment (whose fresh `status` is an
//! object), reads it back and scales it, and creates a Service. The interpreter is `$BERTH_PYTHON`, default
//! `/opt/berth-venv/bin/python`; if it or the module is missing the test fails, saying how to
//! install it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth_tests::Controller;
use berth_tests::process::run;
use berth_tests::seeds::seed;
use serde_json::{Value, json};

const DEFAULT_PYTHON: &str = "/opt/berth-venv/bin/python";
const INSTALL: &str =
    "python3 -m venv /opt/berth-venv && /opt/berth-venv/bin/pip install kubernetes";

/// The interpreter, checked to exist and to import `kubernetes`.
fn python() -> PathBuf {
    let py = std::env::var_os("BERTH_PYTHON")
        .map_or_else(|| PathBuf::from(DEFAULT_PYTHON), PathBuf::from);
    if !py.is_file() {
        panic!(
            "the Python interpreter {} does not exist. Install it with `{INSTALL}` \
             (or point BERTH_PYTHON at a python that has the `kubernetes` package)",
            py.display()
        );
    }
    let mut cmd = Command::new(&py);
    cmd.args(["-c", "import kubernetes; print(kubernetes.__version__)"]);
    let r = run(cmd, None, Duration::from_secs(60));
    if !r.success() {
        panic!(
            "{} cannot import the `kubernetes` package. Install it with `{} -m pip install kubernetes` \
             (CI: `{INSTALL}`)\n{}",
            py.display(),
            py.display(),
            r.describe()
        );
    }
    py
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join("client_check.py")
}

#[test]
fn the_python_client_lists_pods_and_creates_a_deployment() {
    let py = python();
    let c = Controller::start();
    c.apply_stdin(&seed("nginx.pod").text);

    let mut cmd = Command::new(&py);
    cmd.arg(script())
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["--namespace", "default", "--deployment", "python-check"]);
    let r = run(cmd, None, Duration::from_secs(120));
    let context = || format!("{}\n{}", r.describe(), c.log_tail());
    assert!(r.success(), "client_check.py failed\n{}", context());
    let summary: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("summary is not JSON ({e})\n{}", context()));
    assert!(
        summary.get("errors").is_none(),
        "Python client calls failed: {:#}\n{}",
        summary["errors"],
        context()
    );

    assert_eq!(
        summary["list_pods"]["names"],
        json!(["nginx"]),
        "{}",
        context()
    );
    assert!(
        summary["list_pods"]["resource_version"].is_string(),
        "{}",
        context()
    );
    assert_eq!(
        summary["watch_pods"].get(0),
        Some(&json!(["ADDED", "nginx"])),
        "a watch without resourceVersion starts with the existing pods\n{}",
        context()
    );

    let created = &summary["create_deployment"];
    assert_eq!(created["name"], "python-check", "{}", context());
    assert_eq!(created["replicas"], 2, "{}", context());
    assert_eq!(created["image"], "nginx:1.14.2", "{}", context());
    assert_eq!(created["generation"], 1, "{}", context());
    assert_eq!(
        created["strategy"],
        "RollingUpdate",
        "the default strategy\n{}",
        context()
    );
    assert!(
        created["uid"].as_str().is_some_and(|u| !u.is_empty()),
        "{}",
        context()
    );
    assert_eq!(
        summary["read_deployment"]["uid"],
        created["uid"],
        "{}",
        context()
    );
    assert_eq!(summary["scale_deployment"], 3, "{}", context());
    assert!(
        summary["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.")),
        "{}",
        context()
    );
    assert_eq!(created["status_is_object"], true, "{}", context());
    assert_eq!(created["ready_replicas"], Value::Null, "{}", context());
    assert_eq!(
        summary["create_service"]["type"],
        "ClusterIP",
        "{}",
        context()
    );
    assert!(
        summary["create_service"]["cluster_ip"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.43.")),
        "{}",
        context()
    );

    let out = c.kubectl_ok(&[
        "get",
        "deploy",
        "python-check",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(out, "3");
}
