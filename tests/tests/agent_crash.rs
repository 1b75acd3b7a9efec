//! Agent acceptance 7: crash safety. After `kill -9` of the agent and a restart, every running
//! container is adopted untouched (same container ids, same task PIDs, same restartCounts), a
//! pod deleted while the agent was down is cleaned up (containers gone from containerd, object
//! gone from the API), and a pod created meanwhile starts. A containerd restart is survived as
//! well.

use std::collections::BTreeMap;
use std::time::Duration;

use berth_tests::pod_reading::{container_id, container_status, is_ready, restart_count};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

/// (containerID, restartCount, podIP) of container `main`.
fn identity(pod: &Value) -> (String, u64, String) {
    let cs = container_status(pod, "main").unwrap_or_else(|| panic!("no status: {pod:#}"));
    (
        container_id(cs).unwrap_or_default().to_string(),
        restart_count(cs),
        pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[test]
fn a_restarted_agent_adopts_running_containers_and_catches_up() {
    let mut c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    let marks = c.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    c.apply(&sh_pod("keep-1", &node, SLEEP_FOREVER));
    c.apply(&sh_pod("keep-2", &node, SLEEP_FOREVER));
    c.apply(&sh_pod("doomed", &node, SLEEP_FOREVER));
    // Fails on its first run and stays up on the second: restartCount 1 must survive too.
    let mut twice = sh_container(
        "main",
        &format!("test -f /marks/ran || {{ touch /marks/ran; exit 1; }}; {SLEEP_FOREVER}"),
    );
    twice["volumeMounts"] = json!([{"name": "marks", "mountPath": "/marks"}]);
    c.apply(&bound_pod(
        "restarted-once",
        &node,
        json!({
            "volumes": [{"name": "marks", "hostPath": {"path": marks.to_string_lossy()}}],
            "containers": [twice],
        }),
    ));
    let mut before = BTreeMap::new();
    for pod in ["keep-1", "keep-2", "doomed"] {
        let p = c.wait_for_pod_ready("default", pod, START);
        before.insert(pod, identity(&p));
    }
    // Without a probe its first run is Ready from its start until its exit a moment later, and
    // a status can show that: wait for the run after the restart.
    let p = c.wait_pod(
        "default",
        "restarted-once",
        START,
        "Running and Ready after one restart",
        |pod| match container_status(pod, "main") {
            Some(cs) if is_ready(pod) && restart_count(cs) == 1 => Ok(pod.clone()),
            _ => Err("not Ready after one restart yet".into()),
        },
    );
    before.insert("restarted-once", identity(&p));
    assert_eq!(before["restarted-once"].1, 1, "{before:?}");
    let pids_before = c.running_tasks(0);
    let doomed_id = before["doomed"].0.clone();
    assert!(c.containers(0).contains(&doomed_id));

    c.kill9_agent(0);
    c.delete_pod("default", "doomed");
    c.apply(&sh_pod("newcomer", &node, SLEEP_FOREVER));
    // Nobody runs the newcomer while the agent is down, and the doomed pod's containers stay.
    assert!(c.containers(0).contains(&doomed_id));

    c.restart_agent(0);
    c.wait_for_pod_ready("default", "newcomer", START);
    c.wait_pod_gone("default", "doomed", secs(60));
    c.wait_for(
        secs(30),
        "the doomed pod's container removed from containerd",
        || {
            let ids = c.containers(0);
            if ids.contains(&doomed_id) {
                Err(ids)
            } else {
                Ok(())
            }
        },
    );

    let check_adopted = || -> Result<(), String> {
        let pids = c.running_tasks(0);
        for pod in ["keep-1", "keep-2", "restarted-once"] {
            let p = c.pod("default", pod).ok_or(format!("{pod} is gone"))?;
            let now = identity(&p);
            if now != before[pod] {
                return Err(format!("{pod}: {:?} became {now:?}", before[pod]));
            }
            let id = &now.0;
            if pids.get(id) != pids_before.get(id) {
                return Err(format!(
                    "{pod}: task pid {:?} became {:?}",
                    pids_before.get(id),
                    pids.get(id)
                ));
            }
            if p["status"]["phase"] != "Running" {
                return Err(format!("{pod}: phase {}", p["status"]["phase"]));
            }
        }
        Ok(())
    };
    check_adopted().unwrap_or_else(|e| panic!("{e}\n{}", c.logs().render()));
    c.ensure_for(
        secs(5),
        "the adopted containers stay untouched",
        check_adopted,
    );
}

#[test]
fn a_containerd_restart_is_survived() {
    let mut c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    c.apply(&sh_pod("steady", &node, SLEEP_FOREVER));
    let before = identity(&c.wait_for_pod_ready("default", "steady", START));
    let pids_before = c.running_tasks(0);

    c.restart_containerd();
    c.apply(&sh_pod("after", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "after", START);
    let out = c.exec_ok("default", "steady", None, &["echo", "still-here"]);
    assert_eq!(out, "still-here\n");
    let now = identity(&c.pod("default", "steady").unwrap());
    assert_eq!(now, before, "the container must not be restarted");
    assert_eq!(c.running_tasks(0).get(&now.0), pids_before.get(&now.0));

    // Exits are still noticed through the new connection.
    c.exec_ok("default", "steady", None, &["kill", "1"]);
    c.wait_pod(
        "default",
        "steady",
        secs(60),
        "a restart after the exit",
        |p| {
            let (_, restarts, _) = identity(p);
            ok_if(restarts >= 1, format!("restartCount {restarts}"))
        },
    );
}
