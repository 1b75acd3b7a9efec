//! Agent acceptance 4: init containers and sidecars. Init containers run one after another to
//! completion (each appends to a shared emptyDir, the app prints it); a failing init container
//! blocks the app containers, shows as `Init:Error` / `Init:CrashLoopBackOff`, and is retried
//! until it passes (restartPolicy Always) or fails the pod (Never); a sidecar (an init container
//! with `restartPolicy: Always`) starts before the app and stops after it.

use std::time::Duration;

use berth_tests::pod_reading::{
    condition, container_status, phase, restart_count, terminated, time,
};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container};
use berth_tests::{Cluster, Table, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

fn mount(mut container: Value, volume: &str, path: &str) -> Value {
    container["volumeMounts"] = json!([{"name": volume, "mountPath": path}]);
    container
}

fn status_column(c: &Cluster, pod: &str) -> String {
    let out = c.kubectl().ok(&["get", "pod", pod]);
    Table::parse(&out)
        .ok()
        .and_then(|t| t.cell(pod, "STATUS").map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn init_containers_run_in_order_and_a_sidecar_brackets_the_app() {
    let (c, node) = Cluster::start_one();
    let mut sidecar = mount(
        sh_container(
            "sidecar",
            &format!("echo sidecar >> /work/log; {SLEEP_FOREVER}"),
        ),
        "work",
        "/work",
    );
    sidecar["restartPolicy"] = json!("Always");
    c.apply(&bound_pod(
        "ordered",
        &node,
        json!({
            "restartPolicy": "Never",
            "volumes": [{"name": "work", "emptyDir": {}}],
            "initContainers": [
                mount(sh_container("first", "sleep 1; echo first >> /work/log"), "work", "/work"),
                mount(sh_container("second", "test -f /work/log && echo second >> /work/log"), "work", "/work"),
                sidecar,
            ],
            "containers": [
                mount(sh_container("app", "sleep 2; cat /work/log; sleep 2"), "work", "/work"),
            ],
        }),
    ));
    let pod = c.wait_for_pod_phase("default", "ordered", "Succeeded", START);

    let logs = c.logs_of("default", "ordered", Some("app"), &[]);
    assert!(logs.success(), "{}", logs.describe());
    assert_eq!(logs.stdout, "first\nsecond\nsidecar\n");
    assert_eq!(condition(&pod, "Initialized"), Some("True"));

    let term = |name: &str| {
        let cs = container_status(&pod, name).unwrap_or_else(|| panic!("no status for {name}"));
        terminated(cs)
            .unwrap_or_else(|| panic!("{name} is not terminated: {cs:#}"))
            .clone()
    };
    let (first, second, sidecar, app) =
        (term("first"), term("second"), term("sidecar"), term("app"));
    for (name, t) in [("first", &first), ("second", &second), ("app", &app)] {
        assert_eq!(t["exitCode"], 0, "{name}: {t:#}");
        assert_eq!(t["reason"], "Completed", "{name}: {t:#}");
    }
    let at =
        |t: &Value, field: &str| time(&t[field]).unwrap_or_else(|| panic!("no {field}: {t:#}"));
    assert!(
        at(&first, "finishedAt") <= at(&second, "startedAt"),
        "first before second"
    );
    assert!(
        at(&second, "finishedAt") <= at(&sidecar, "startedAt"),
        "second before the sidecar"
    );
    assert!(
        at(&sidecar, "startedAt") <= at(&app, "startedAt"),
        "the sidecar starts first"
    );
    assert!(
        at(&sidecar, "finishedAt") >= at(&app, "finishedAt"),
        "the sidecar stops last"
    );
}

#[test]
fn a_failing_init_container_blocks_the_app_and_is_retried() {
    let (c, node) = Cluster::start_one();
    let gate = c.scratch().join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    let gated = |name: &str, policy: &str| {
        bound_pod(
            name,
            &node,
            json!({
                "restartPolicy": policy,
                "volumes": [{"name": "gate", "hostPath": {"path": gate.to_string_lossy()}}],
                "initContainers": [
                    mount(sh_container("gate", "test -f /gate/open"), "gate", "/gate"),
                ],
                "containers": [sh_container("app", SLEEP_FOREVER)],
            }),
        )
    };
    c.apply(&gated("retried", "Always"));
    c.apply(&gated("given-up", "Never"));

    // restartPolicy Always: the init container is retried with back-off; the app waits.
    let mut seen = Vec::new();
    c.wait_pod(
        "default",
        "retried",
        START,
        "a retried init container in back-off",
        |p| {
            let init = container_status(p, "gate").ok_or("no init status")?;
            let app = container_status(p, "app");
            if app.is_some_and(|a| !a["state"]["running"].is_null() || restart_count(a) > 0) {
                panic!("the app container ran before its init container passed: {p:#}");
            }
            if phase(p) != "Pending" || condition(p, "Initialized") == Some("True") {
                panic!("a blocked pod must be Pending and not Initialized: {p:#}");
            }
            let status = status_column(&c, "retried");
            if !seen.contains(&status) {
                seen.push(status.clone());
            }
            if restart_count(init) >= 1 && status == "Init:CrashLoopBackOff" {
                Ok(())
            } else {
                Err(format!(
                    "init restarts {}, STATUS {status}",
                    restart_count(init)
                ))
            }
        },
    );
    assert!(
        seen.iter()
            .all(|s| s.starts_with("Init:") || s == "Pending"),
        "STATUS values seen: {seen:?}"
    );
    let app = c.pod("default", "retried").unwrap();
    let app = container_status(&app, "app")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        app.is_null() || app["state"]["waiting"]["reason"] == "PodInitializing",
        "{app:#}"
    );

    // restartPolicy Never: one failure fails the pod.
    let failed = c.wait_for_pod_phase("default", "given-up", "Failed", START);
    let init = container_status(&failed, "gate").unwrap();
    assert_eq!(restart_count(init), 0);
    assert_eq!(
        terminated(init).map(|t| t["reason"].clone()),
        Some(json!("Error"))
    );
    assert_eq!(status_column(&c, "given-up"), "Init:Error");

    // Once the gate opens, the next retry passes and the app starts.
    std::fs::write(gate.join("open"), "").unwrap();
    let pod = c.wait_for_pod_ready("default", "retried", secs(60));
    let init = container_status(&pod, "gate").unwrap();
    assert_eq!(
        terminated(init).map(|t| t["reason"].clone()),
        Some(json!("Completed"))
    );
    assert_eq!(condition(&pod, "Initialized"), Some("True"));
}
