//! Issue 29, acceptance 9: the official Python client's own end-to-end suite
//! (`kubernetes/e2e_test` of kubernetes-client/python, not shipped on PyPI) against a real
//! cluster: controller, agent, containerd and the fixture registry. The suite is a measurement
//! of upstream's tests, not ours, so it is not in this tree: the test is ignored unless asked
//! for, and then needs `$BERTH_PYTHON_E2E`, a Python whose `kubernetes` package has the
//! `e2e_test` module and which has `pytest`, and `$BERTH_PYTHON_E2E_DIR`, the client's checkout
//! (the suite reads `kubernetes/e2e_test/test_yaml/` relative to it). The suite's images are
//! plain Docker Hub names, pushed here: `busybox` (the fixture), `nginx` (an httpd serving
//! nginx's own welcome heading, which the port-forward test looks for) and `python` (the
//! host's Debian python3.11 and the standard library a server needs, for `port_server.py`:
//! `berth_tests::fixtures::python`).
//!
//! By default the whole suite runs less `test_create_apiservice_from_yaml_with_conflict`
//! (APIService, `apiregistration.k8s.io`, is not served). `test_metrics_utilities_integration`
//! reads PodMetrics 10 s after its pod runs, which a metrics pipeline at a 15 s resolution (Berth's
//! default, as metrics-server's common setting) has about one run in four: a fresh container is
//! measured from its start only once it is 10 s old, else it needs two scrapes. So the cluster
//! here scrapes every 5 s (`--metric-resolution 5s`): two scrapes always fall within those 10 s,
//! the configuration the suite assumes. `BERTH_PYTHON_E2E_ARGS` replaces the pytest arguments;
//! `BERTH_PYTHON_E2E_HOLD=FILE` writes the kubeconfig's path to FILE and keeps the cluster up
//! while FILE exists, for running the suite by hand.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth_tests::fixtures::python::{SERVER_IMPORTS, python_layers, python_run};
use berth_tests::fixtures::{BUSYBOX, Entry, PATH_ENV, RunConfig, busybox_layer, write_layout};
use berth_tests::process::run;
use berth_tests::{Cluster, ClusterConfig};

/// How long the whole suite may take.
const SUITE_DEADLINE: Duration = Duration::from_secs(1500);

/// The client's checkout: the directory holding `kubernetes/e2e_test/test_yaml`.
fn suite_dir() -> PathBuf {
    let dir = std::env::var_os("BERTH_PYTHON_E2E_DIR").map(PathBuf::from);
    match dir {
        Some(d) if d.join("kubernetes/e2e_test/test_yaml").is_dir() => d,
        _ => panic!(
            "set BERTH_PYTHON_E2E_DIR to a checkout of kubernetes-client/python \
             (a directory with kubernetes/e2e_test/test_yaml)"
        ),
    }
}

fn suite_python() -> PathBuf {
    let py = std::env::var_os("BERTH_PYTHON_E2E").map(PathBuf::from);
    match py {
        Some(p) if p.is_file() => p,
        _ => panic!(
            "set BERTH_PYTHON_E2E to a Python that imports `kubernetes.e2e_test` and `pytest` \
             (copy kubernetes-client/python's kubernetes/e2e_test into its kubernetes package)"
        ),
    }
}

#[test]
#[ignore = "measures upstream's Python e2e suite, which is not in this tree: needs BERTH_PYTHON_E2E"]
fn the_python_clients_own_e2e_suite() {
    let py = suite_python();
    let dir = suite_dir();
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec!["--metric-resolution".into(), "5s".into()],
        ..ClusterConfig::agents(1)
    });
    c.push_fixture(&BUSYBOX, "library/busybox", "latest");
    let images = tempfile::Builder::new()
        .prefix("berth-python-e2e-")
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let nginx = images.path().join("nginx");
    layout(&nginx, nginx_layers(), nginx_run(), "nginx");
    c.registry()
        .push(&nginx, "nginx", "library/nginx", "latest");
    let python = images.path().join("python");
    layout(
        &python,
        python_layers(SERVER_IMPORTS, None),
        python_run(),
        "python",
    );
    c.registry()
        .push(&python, "python", "library/python", "latest");
    let kubeconfig = c.controller().kubeconfig();

    if let Some(hold) = std::env::var_os("BERTH_PYTHON_E2E_HOLD").map(PathBuf::from) {
        std::fs::write(&hold, kubeconfig.display().to_string())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", hold.display()));
        while hold.exists() {
            std::thread::sleep(Duration::from_secs(1)); // not ordering: holding the cluster for a person
        }
        return;
    }

    let mut cmd = Command::new(&py);
    cmd.args(["-m", "pytest"]);
    match std::env::var("BERTH_PYTHON_E2E_ARGS") {
        Ok(args) => cmd.args(args.split_whitespace()),
        Err(_) => cmd.args([
            "-v",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-k",
            "not test_create_apiservice_from_yaml_with_conflict",
            "--pyargs",
            "kubernetes.e2e_test",
        ]),
    };
    cmd.current_dir(&dir).env("KUBECONFIG", &kubeconfig);
    let r = run(cmd, None, SUITE_DEADLINE);
    println!("{}", r.stdout);
    assert!(r.success(), "{}\n{}", r.describe(), c.logs().render());
}

fn layout(dir: &Path, layers: Vec<Vec<Entry>>, run: RunConfig, name: &str) {
    write_layout(
        dir,
        &layers,
        &run,
        &format!("docker.io/library/{name}:latest"),
        name,
    )
    .unwrap_or_else(|e| panic!("cannot write the {name} layout: {e}"));
}

/// `nginx:latest` as the suite reads it: an httpd on port 80 whose page has nginx's own
/// `<h1>Welcome to nginx!</h1>` (the suite's port-forward test looks for exactly that).
fn nginx_layers() -> Vec<Vec<Entry>> {
    let page = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n\
                <body><h1>Welcome to nginx!</h1></body></html>\n";
    vec![
        busybox_layer(),
        vec![
            Entry::dir("www"),
            Entry::file("www/index.html", page, 0o644),
        ],
    ]
}

fn nginx_run() -> RunConfig {
    RunConfig {
        env: vec![PATH_ENV.into()],
        cmd: [
            "sh",
            "-c",
            "trap 'exit 0' TERM; httpd -f -p 80 -h /www & wait",
        ]
        .map(String::from)
        .to_vec(),
        exposed_ports: vec!["80/tcp".into()],
        ..RunConfig::default()
    }
}
