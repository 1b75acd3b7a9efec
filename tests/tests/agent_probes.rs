//! Agent acceptance 3: probes. A failing liveness probe (exec, httpGet) restarts the container
//! with `Unhealthy` and `Killing` events; a failing readiness probe (exec, tcpSocket) takes the
//! pod out of Ready without a restart and a passing one brings it back; a startup probe holds
//! the liveness probe back until it passes.

use std::time::Duration;

use berth_tests::pod_reading::{condition, container_status, last_terminated, restart_count};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);
/// Time for a probe with periodSeconds 1 to notice a change and the agent to act on it.
const REACT: Duration = secs(30);

fn with_probe(mut container: Value, kind: &str, probe: Value) -> Value {
    container[kind] = probe;
    container
}

fn restarted_with_events(c: &Cluster, pod: &str) {
    c.wait_pod("default", pod, REACT, "a restart", |p| {
        let cs = container_status(p, "main").ok_or("no status")?;
        ok_if(
            restart_count(cs) >= 1 && last_terminated(cs).is_some(),
            format!("restartCount {}", restart_count(cs)),
        )
    });
    c.wait_pod_event_reasons("default", pod, &["Unhealthy", "Killing"], REACT);
}

#[test]
fn a_failing_liveness_probe_restarts_the_container() {
    let (c, node) = Cluster::start_one();
    // The first probe waits a second, so it never races the shell making its file or httpd
    // binding its port (a failure threshold of one would restart the container).
    let fast = |p: Value| {
        let mut p = p;
        p["periodSeconds"] = json!(1);
        p["failureThreshold"] = json!(1);
        p["initialDelaySeconds"] = json!(1);
        p
    };
    let exec = with_probe(
        sh_container("main", &format!("touch /tmp/healthy; {SLEEP_FOREVER}")),
        "livenessProbe",
        fast(json!({"exec": {"command": ["cat", "/tmp/healthy"]}})),
    );
    c.apply(&bound_pod(
        "live-exec",
        &node,
        json!({"containers": [exec]}),
    ));
    let http = with_probe(
        sh_container(
            "main",
            "mkdir -p /www; echo ok > /www/healthz; \
             trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait",
        ),
        "livenessProbe",
        fast(json!({"httpGet": {"path": "/healthz", "port": 8080}})),
    );
    c.apply(&bound_pod(
        "live-http",
        &node,
        json!({"containers": [http]}),
    ));
    for pod in ["live-exec", "live-http"] {
        c.wait_for_pod_ready("default", pod, START);
    }
    // Passing probes do nothing.
    c.ensure_for(secs(3), "no restart while the probes pass", || {
        for pod in ["live-exec", "live-http"] {
            let p = c.pod("default", pod).ok_or(pod)?;
            let cs = container_status(&p, "main").ok_or(pod)?;
            if restart_count(cs) != 0 {
                return Err(pod);
            }
        }
        Ok(())
    });

    c.exec_ok("default", "live-exec", None, &["rm", "/tmp/healthy"]);
    c.exec_ok("default", "live-http", None, &["rm", "/www/healthz"]);
    restarted_with_events(&c, "live-exec");
    restarted_with_events(&c, "live-http");
    // The new container creates its file again and stays up.
    for pod in ["live-exec", "live-http"] {
        c.wait_for_pod_ready("default", pod, REACT);
    }
}

#[test]
fn readiness_follows_the_probe_without_restarts() {
    let (c, node) = Cluster::start_one();
    let exec = with_probe(
        sh_container("main", SLEEP_FOREVER),
        "readinessProbe",
        json!({"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1}),
    );
    c.apply(&bound_pod(
        "ready-exec",
        &node,
        json!({"containers": [exec]}),
    ));
    let tcp = with_probe(
        sh_container("main", SLEEP_FOREVER),
        "readinessProbe",
        json!({"tcpSocket": {"port": 8081}, "periodSeconds": 1}),
    );
    c.apply(&bound_pod("ready-tcp", &node, json!({"containers": [tcp]})));

    // The container's `ready` and the pod's Ready and ContainersReady all say `want`; a
    // container that is not ready must still be running.
    let readiness = |p: &Value, want: bool| {
        let cs = container_status(p, "main").ok_or("no status")?;
        let word = if want { "True" } else { "False" };
        if (want || cs["state"]["running"].is_object())
            && cs["ready"] == want
            && condition(p, "Ready") == Some(word)
            && condition(p, "ContainersReady") == Some(word)
        {
            Ok(())
        } else {
            Err(format!(
                "ready={} Ready={:?}",
                cs["ready"],
                condition(p, "Ready")
            ))
        }
    };
    let running_not_ready = |p: &Value| readiness(p, false);
    let ready = |p: &Value| readiness(p, true);
    for pod in ["ready-exec", "ready-tcp"] {
        c.wait_pod(
            "default",
            pod,
            START,
            "running but not Ready",
            running_not_ready,
        );
    }
    c.ensure_for(secs(3), "both stay unready while their probes fail", || {
        for pod in ["ready-exec", "ready-tcp"] {
            let p = c.pod("default", pod).ok_or_else(|| pod.to_string())?;
            running_not_ready(&p).map_err(|e| format!("{pod}: {e}"))?;
        }
        Ok::<(), String>(())
    });

    c.exec_ok("default", "ready-exec", None, &["touch", "/tmp/ready"]);
    c.exec_ok(
        "default",
        "ready-tcp",
        None,
        &["sh", "-c", "httpd -p 8081 -h /tmp"],
    );
    for pod in ["ready-exec", "ready-tcp"] {
        c.wait_pod("default", pod, REACT, "Ready once the probe passes", ready);
    }

    c.exec_ok("default", "ready-exec", None, &["rm", "/tmp/ready"]);
    c.exec_ok("default", "ready-tcp", None, &["killall", "httpd"]);
    for pod in ["ready-exec", "ready-tcp"] {
        c.wait_pod("default", pod, REACT, "unready again", running_not_ready);
    }
    c.exec_ok("default", "ready-exec", None, &["touch", "/tmp/ready"]);
    c.wait_pod("default", "ready-exec", REACT, "Ready again", ready);

    for pod in ["ready-exec", "ready-tcp"] {
        let p = c.pod("default", pod).unwrap();
        let cs = container_status(&p, "main").unwrap();
        assert_eq!(restart_count(cs), 0, "readiness must never restart {pod}");
    }
    let reasons = c.pod_event_reasons("default", "ready-exec");
    assert!(reasons.iter().any(|r| r == "Unhealthy"), "{reasons:?}");
    assert!(!reasons.iter().any(|r| r == "Killing"), "{reasons:?}");
}

#[test]
fn a_startup_probe_holds_liveness_back() {
    let (c, node) = Cluster::start_one();
    let mut main = sh_container("main", SLEEP_FOREVER);
    main["startupProbe"] = json!({"exec": {"command": ["cat", "/tmp/started"]},
                                  "periodSeconds": 1, "failureThreshold": 600});
    // This liveness probe always fails: only the startup probe keeps the container alive.
    main["livenessProbe"] = json!({"exec": {"command": ["cat", "/tmp/never"]},
                                   "periodSeconds": 1, "failureThreshold": 1});
    c.apply(&bound_pod(
        "slow-start",
        &node,
        json!({"containers": [main]}),
    ));
    c.wait_pod(
        "default",
        "slow-start",
        START,
        "running, not started",
        |p| {
            let cs = container_status(p, "main").ok_or("no status")?;
            ok_if(
                cs["state"]["running"].is_object() && cs["started"] == false,
                format!("started={}", cs["started"]),
            )
        },
    );
    c.ensure_for(
        secs(5),
        "no liveness restart before the startup probe passes",
        || {
            let p = c.pod("default", "slow-start").ok_or("gone")?;
            let cs = container_status(&p, "main").ok_or("no status")?;
            ok_if(
                restart_count(cs) == 0 && cs["started"] == false,
                "restarted or started",
            )
        },
    );

    c.exec_ok("default", "slow-start", None, &["touch", "/tmp/started"]);
    restarted_with_events(&c, "slow-start");
    let p = c.pod("default", "slow-start").unwrap();
    let cs = container_status(&p, "main").unwrap();
    assert!(restart_count(cs) >= 1);
}
