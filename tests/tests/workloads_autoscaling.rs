//! Issue 15, autoscaling on real usage: a Deployment whose pods busy-loop against a 100m CPU
//! request is autoscaled by the seed's `kubectl autoscale deployment/... --min=2 --max=5
//! --cpu-percent=50` up to 5 replicas, and, once the loops stop, back to 2 after the
//! scale-down stabilization window (shortened with `behavior`); `kubectl get hpa` and
//! `describe hpa` show upstream's columns, conditions and events. The seed's autoscaling/v1
//! ReplicaSet autoscaler acts on its ReplicaSet. Real agent, containerd, kubectl.

use std::path::Path;
use std::time::Duration;

use berth_tests::kinds::HPA_COLUMNS;
use berth_tests::pod_specs::sh_container;
use berth_tests::seeds::SEED_HPA;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, Table, secs};
use serde_json::{Value, json};

const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31";

/// Busy-loops until `/ctl/stop` exists, then idles until SIGTERM.
const BURN_UNTIL_STOPPED: &str =
    "trap 'exit 0' TERM; while [ ! -e /ctl/stop ]; do :; done; while true; do sleep 1; done";

/// Waits until the object at `path` asks for `want` replicas.
fn wait_replicas(c: &Cluster, path: &str, want: i64, timeout: Duration, what: &str) {
    c.wait_for(timeout, what, || match replicas(c, path) {
        Some(n) if n == want => Ok(()),
        other => Err(other),
    });
}

fn replicas(c: &Cluster, path: &str) -> Option<i64> {
    c.get(path)
        .and_then(|d| d.pointer("/spec/replicas").and_then(Value::as_i64))
}

#[test]
fn a_busy_deployment_is_scaled_up_to_the_maximum_and_back_to_the_minimum_when_idle() {
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec![
            "--metric-resolution".into(),
            "3s".into(),
            "--horizontal-pod-autoscaler-sync-period".into(),
            "3s".into(),
        ],
        ..ClusterConfig::agents(1)
    });
    let ctl = c.scratch().join("ctl");
    std::fs::create_dir_all(&ctl).expect("a scratch directory");
    let mut burner = sh_container("burn", BURN_UNTIL_STOPPED);
    // One busy loop each; the limit keeps five of them from taking the whole test machine.
    burner["resources"] = json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}});
    burner["volumeMounts"] = json!([{"name": "ctl", "mountPath": "/ctl"}]);
    c.apply(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "burner"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "burner"}},
            "template": {
                "metadata": {"labels": {"app": "burner"}},
                "spec": {
                    "containers": [burner],
                    "volumes": [{"name": "ctl", "hostPath": {"path": ctl.to_string_lossy()}}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }));
    let deployment = "/apis/apps/v1/namespaces/default/deployments/burner";
    let k = c.kubectl().with_binary(Path::new(KUBECTL));
    k.ok(&[
        "autoscale",
        "deployment/burner",
        "--min=2",
        "--max=5",
        "--cpu-percent=50",
    ]);
    // A short scale-down window so the test need not wait upstream's five minutes.
    k.ok(&[
        "patch",
        "hpa",
        "burner",
        "--type=merge",
        "-p",
        r#"{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":15}}}}"#,
    ]);

    wait_replicas(
        &c,
        deployment,
        5,
        secs(180),
        "the autoscaler to scale the burners to 5",
    );
    let hpa = c.wait_for(secs(60), "the autoscaler's status to say 5", || {
        let h = c
            .get("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/burner")
            .unwrap_or_default();
        if h.pointer("/status/desiredReplicas") == Some(&json!(5)) {
            Ok(h)
        } else {
            Err(h.get("status").cloned())
        }
    });
    let utilization = hpa
        .pointer("/status/currentMetrics/0/resource/current/averageUtilization")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("current CPU utilization in {hpa}"));
    assert!(
        utilization > 50,
        "busy loops measure {utilization}% of request"
    );
    assert!(hpa.pointer("/status/lastScaleTime").is_some(), "{hpa}");
    let out = k.ok(&["get", "hpa", "burner"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(table.headers, HPA_COLUMNS);
    assert_eq!(table.values("REFERENCE"), ["Deployment/burner"]);
    let targets = table.values("TARGETS").join("");
    assert!(
        targets.starts_with("cpu: ") && targets.ends_with("%/50%"),
        "{out}"
    );
    let described = k.ok(&["describe", "hpa", "burner"]);
    for want in [
        "Reference:",
        "Deployment/burner",
        "Min replicas:",
        "AbleToScale",
        "ScalingActive",
        "ValidMetricFound",
        "ScalingLimited",
        "SuccessfulRescale",
        "New size: 5; reason: cpu resource utilization (percentage of request) above target",
    ] {
        assert!(described.contains(want), "{want} in:\n{described}");
    }

    // The loops stop: after the 15 s window the autoscaler goes back to its minimum.
    std::fs::write(ctl.join("stop"), b"").expect("the stop file");
    wait_replicas(
        &c,
        deployment,
        2,
        secs(180),
        "the autoscaler to scale the idle pods to 2",
    );
    c.wait_for(secs(60), "the scale-down's event", || {
        let d = k.ok(&["describe", "hpa", "burner"]);
        ok_if(
            d.contains("New size: 2; reason: All metrics below target"),
            d,
        )
    });
}

#[test]
fn the_seeds_v1_autoscaler_brings_its_replicaset_to_its_minimum() {
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec![
            "--horizontal-pod-autoscaler-sync-period".into(),
            "2s".into(),
        ],
        ..ClusterConfig::agents(1)
    });
    let mut idle = sh_container(
        "php-redis",
        "trap 'exit 0' TERM; while true; do sleep 1; done",
    );
    idle["resources"] = json!({"requests": {"cpu": "100m"}});
    c.apply(&json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "frontend", "labels": {"app": "guestbook", "tier": "frontend"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"tier": "frontend"}},
            "template": {"metadata": {"labels": {"tier": "frontend"}},
                         "spec": {"containers": [idle], "terminationGracePeriodSeconds": 0}},
        },
    }));
    c.kubectl().ok_stdin(&["apply", "-f", "-"], SEED_HPA);
    let rs = "/apis/apps/v1/namespaces/default/replicasets/frontend";
    wait_replicas(
        &c,
        rs,
        3,
        secs(60),
        "the ReplicaSet raised to the autoscaler's minimum",
    );
    c.wait_for(secs(90), "three frontend pods running", || {
        let ready = c
            .get(rs)
            .and_then(|r| r.pointer("/status/readyReplicas").and_then(Value::as_i64));
        if ready == Some(3) { Ok(()) } else { Err(ready) }
    });
    let v1 = c
        .get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/frontend-scaler")
        .expect("the autoscaler in v1");
    assert_eq!(v1["status"]["desiredReplicas"], 3, "{v1}");
    let events = c.kubectl().ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=frontend-scaler",
    ]);
    assert!(
        events.contains("New size: 3; reason: Current number of replicas below Spec.MinReplicas"),
        "{events}"
    );
}
