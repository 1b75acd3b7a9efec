//! The agent's metrics, read as an operator would: `kubectl get --raw` through the API's
//! `nodes/{node}/proxy`, parsed by a Prometheus text-format parser. `/metrics/resource` reports
//! a busy container's CPU time as its cgroup counts it; `/metrics` has the pod start histogram,
//! the probe counts, the containerd and CNI call latencies and the running pods.

use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::{Cluster, secs};
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;
use std::path::PathBuf;

fn scrape(c: &Cluster, node: &str, path: &str) -> Scrape {
    let text = c
        .kubectl()
        .ok(&["get", "--raw", &format!("/api/v1/nodes/{node}/proxy{path}")]);
    Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .unwrap_or_else(|e| panic!("{path} does not parse: {e}\n{text}"))
}

fn find<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    s.samples
        .iter()
        .find(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => *x,
        other => panic!("not a number: {other:?}"),
    }
}

/// The pod's CPU time as its cgroup counts it now (cgroup v1 `cpuacct.usage` or v2 `cpu.stat`),
/// in seconds.
fn cgroup_cpu_seconds(containerd_namespace: &str, uid: &str) -> f64 {
    let v1: PathBuf = [
        "/sys/fs/cgroup/cpuacct",
        containerd_namespace,
        &format!("pod{uid}"),
        "cpuacct.usage",
    ]
    .iter()
    .collect();
    if let Ok(t) = std::fs::read_to_string(&v1) {
        return t.trim().parse::<f64>().expect("cpuacct.usage is a number") / 1e9;
    }
    let v2: PathBuf = [
        "/sys/fs/cgroup",
        containerd_namespace,
        &format!("pod{uid}"),
        "cpu.stat",
    ]
    .iter()
    .collect();
    let stat = std::fs::read_to_string(&v2).unwrap_or_else(|e| panic!("{}: {e}", v2.display()));
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("usage_usec in cpu.stat")
        / 1e6
}

#[test]
fn the_agents_metrics_show_real_usage_pod_starts_and_probes() {
    let c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    let mut burner = sh_container("burn", "while :; do :; done");
    burner["resources"] = json!({"requests": {"cpu": "100m"}});
    burner["readinessProbe"] = json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
    c.apply(&bound_pod(
        "burner",
        &node,
        json!({"containers": [burner], "terminationGracePeriodSeconds": 0}),
    ));
    let pod = c.wait_for_pod_phase("default", "burner", "Running", secs(90));
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let ns = c.agent(0).namespace().to_string();
    let of_burner = [
        ("namespace", "default"),
        ("pod", "burner"),
        ("container", "burn"),
    ];

    // Over the same window, the container's CPU time as reported grows as its cgroup's does.
    let read = |c: &Cluster| {
        let s = scrape(c, &node, "/metrics/resource");
        let cpu =
            find(&s, "container_cpu_usage_seconds_total", &of_burner).map(|x| number(&x.value));
        (cpu, cgroup_cpu_seconds(&ns, &uid))
    };
    let (first, cg_first) = read(&c);
    let first = first.expect("the burner's CPU time is reported");
    let (second, cg_second) = c.wait_for(secs(30), "two more CPU seconds", || {
        let (cpu, cg) = read(&c);
        match cpu {
            Some(cpu) if cpu - first >= 2.0 => Ok((cpu, cg)),
            other => Err(other),
        }
    });
    let (reported, counted) = (second - first, cg_second - cg_first);
    assert!(
        (reported - counted).abs() <= 0.2 * counted,
        "reported {reported:.3} s of CPU, the cgroup counted {counted:.3} s"
    );
    let s = scrape(&c, &node, "/metrics/resource");
    for metric in [
        "container_memory_working_set_bytes",
        "container_start_time_seconds",
    ] {
        assert!(find(&s, metric, &of_burner).is_some(), "{metric}");
    }
    let pod_cpu = find(&s, "pod_cpu_usage_seconds_total", &of_burner[..2]).expect("pod CPU");
    assert!(
        number(&pod_cpu.value) >= second,
        "the pod's cgroup holds its container's"
    );
    for metric in [
        "node_cpu_usage_seconds_total",
        "node_memory_working_set_bytes",
    ] {
        let v = find(&s, metric, &[]).map(|x| number(&x.value));
        assert!(v.is_some_and(|v| v > 0.0), "{metric}: {v:?}");
    }
    assert_eq!(
        find(&s, "scrape_error", &[]).map(|x| number(&x.value)),
        Some(0.0)
    );

    // The agent's own metrics.
    let own = c.wait_for(secs(30), "a successful readiness probe counted", || {
        let s = scrape(&c, &node, "/metrics");
        let probed = find(
            &s,
            "prober_probe_total",
            &[
                ("pod", "burner"),
                ("probe_type", "Readiness"),
                ("result", "successful"),
            ],
        )
        .is_some();
        if probed { Ok(s) } else { Err("not yet") }
    });
    let start = find(&own, "kubelet_pod_start_sli_duration_seconds", &[])
        .unwrap_or_else(|| panic!("no pod start histogram: {:?}", own.samples));
    let Value::Histogram(buckets) = &start.value else {
        panic!("not a histogram: {start:?}");
    };
    let total = buckets.iter().map(|b| b.count).fold(0.0, f64::max);
    assert!(total >= 1.0, "the burner's start is counted: {buckets:?}");
    assert_eq!(
        find(&own, "kubelet_running_pods", &[]).map(|x| number(&x.value)),
        Some(1.0)
    );
    for op in ["create_container", "start_container"] {
        let timed = find(
            &own,
            "kubelet_runtime_operations_duration_seconds",
            &[("operation_type", op)],
        );
        assert!(timed.is_some(), "containerd's {op} is timed");
    }
    let cni = find(
        &own,
        "kubelet_network_plugin_operations_duration_seconds",
        &[("operation_type", "set_up_pod")],
    );
    assert!(cni.is_some(), "the CNI set-up is timed");
}
