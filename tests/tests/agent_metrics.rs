//! The agent's metrics, read as an operator would: `kubectl get --raw` through the API's
//! `nodes/{node}/proxy`, parsed by a Prometheus text-format parser. `/metrics/resource` reports
//! a busy container's CPU time as its cgroup counts it; `/metrics` has the pod start histogram,
//! the probe counts, the containerd and CNI call latencies and the running pods. The metrics API
//! (`metrics.k8s.io`) reports the CPU rate the cgroup shows over the same window, and
//! `kubectl top` prints it.

use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::{Cluster, ClusterConfig, Table, secs};
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// The pod's cgroup below the agent's root (`/<containerd namespace>`): `pod<uid>` in
/// `kubepods` (Guaranteed) or in its QoS tier, whichever exists in `hierarchy`.
fn pod_cgroup(hierarchy: &str, containerd_namespace: &str, uid: &str) -> Option<PathBuf> {
    ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
        .iter()
        .map(|parent| {
            Path::new(hierarchy)
                .join(containerd_namespace)
                .join(parent)
                .join(format!("pod{uid}"))
        })
        .find(|p| p.is_dir())
}

/// The pod's CPU time as its cgroup counts it now (cgroup v1 `cpuacct.usage` or v2 `cpu.stat`),
/// in seconds.
fn cgroup_cpu_seconds(containerd_namespace: &str, uid: &str) -> f64 {
    if let Some(dir) = pod_cgroup("/sys/fs/cgroup/cpuacct", containerd_namespace, uid)
        && let Ok(t) = std::fs::read_to_string(dir.join("cpuacct.usage"))
    {
        return t.trim().parse::<f64>().expect("cpuacct.usage is a number") / 1e9;
    }
    let v2 = pod_cgroup("/sys/fs/cgroup", containerd_namespace, uid)
        .unwrap_or_else(|| panic!("no cgroup for pod {uid} under /{containerd_namespace}"))
        .join("cpu.stat");
    let stat = std::fs::read_to_string(&v2).unwrap_or_else(|e| panic!("{}: {e}", v2.display()));
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("usage_usec in cpu.stat")
        / 1e6
}

#[test]
fn the_agents_metrics_show_real_usage_pod_starts_and_probes() {
    let (c, node) = Cluster::start_one();
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

/// Reads the pod's cgroup CPU time every 50 ms on a thread of its own, until dropped.
struct CgroupSampler {
    samples: Arc<Mutex<Vec<(i64, f64)>>>,
    stop: Arc<AtomicBool>,
}

impl CgroupSampler {
    fn start(containerd_namespace: &str, uid: &str) -> CgroupSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st, ns, uid) = (
            samples.clone(),
            stop.clone(),
            containerd_namespace.to_string(),
            uid.to_string(),
        );
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .expect("the clock is past 1970")
                    .as_millis() as i64;
                let cpu = cgroup_cpu_seconds(&ns, &uid);
                s.lock().unwrap_or_else(|e| e.into_inner()).push((now, cpu));
                std::thread::park_timeout(Duration::from_millis(50));
            }
        });
        CgroupSampler { samples, stop }
    }

    /// The CPU time at `ms`, interpolated between the samples around it.
    fn at(&self, ms: i64) -> Option<f64> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let i = s.iter().position(|(t, _)| *t >= ms)?;
        let (t1, c1) = s[i];
        let (t0, c0) = *s.get(i.checked_sub(1)?)?;
        Some(c0 + (c1 - c0) * (ms - t0) as f64 / (t1 - t0).max(1) as f64)
    }
}

impl Drop for CgroupSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A CPU quantity in cores (`250m`, `1234n`, `2`).
fn cores(q: &str) -> f64 {
    let (digits, scale) = match q.as_bytes().last() {
        Some(b'n') => (&q[..q.len() - 1], 1e-9),
        Some(b'm') => (&q[..q.len() - 1], 1e-3),
        _ => (q, 1.0),
    };
    digits
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("CPU quantity {q:?}: {e}"))
        * scale
}

#[test]
fn the_metrics_api_reports_the_cgroups_cpu_rate_and_kubectl_top_prints_it() {
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec!["--metric-resolution".into(), "2s".into()],
        ..ClusterConfig::agents(1)
    });
    let node = c.node_name(0).to_string();
    let mut burner = sh_container("burn", "while :; do :; done");
    burner["resources"] = json!({"requests": {"cpu": "100m"}});
    let mut pod = bound_pod(
        "burner",
        &node,
        json!({"containers": [burner], "terminationGracePeriodSeconds": 0}),
    );
    pod["metadata"]["labels"] = json!({"app": "burn"});
    c.apply(&pod);
    let mut idle = bound_pod(
        "idle",
        &node,
        json!({"containers": [sh_container("main", "sleep 3600")], "terminationGracePeriodSeconds": 0}),
    );
    idle["metadata"]["labels"] = json!({"app": "idle"});
    c.apply(&idle);
    let running = c.wait_for_pod_phase("default", "burner", "Running", secs(90));
    c.wait_for_pod_phase("default", "idle", "Running", secs(90));
    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();
    let sampler = CgroupSampler::start(c.agent(0).namespace(), &uid);

    // A PodMetrics whose window the sampler covers: its rate is the cgroup's over that window.
    let path = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burner";
    let (m, counted) = c.wait_for(secs(60), "burner's metrics over a sampled window", || {
        let r = c.kubectl().run(&["get", "--raw", path]);
        let m: serde_json::Value = serde_json::from_str(&r.stdout).map_err(|_| r.describe())?;
        let end = m["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        let window = m["window"]
            .as_str()
            .and_then(|w| w.strip_suffix('s')?.parse::<f64>().ok());
        let (Some(end), Some(window)) = (end, window) else {
            return Err(format!("no timestamp or window: {m}"));
        };
        let end = end.as_millisecond();
        let start = end - (window * 1e3) as i64;
        match (sampler.at(start), sampler.at(end)) {
            (Some(a), Some(b)) => Ok((m.clone(), (b - a) / window)),
            _ => Err(format!("window {start}..{end} not sampled yet")),
        }
    });
    assert_eq!(m["kind"], "PodMetrics");
    assert_eq!(m["containers"][0]["name"], "burn");
    let reported = cores(m["containers"][0]["usage"]["cpu"].as_str().unwrap());
    assert!(
        counted > 0.05 && (reported - counted).abs() <= 0.2 * counted,
        "reported {reported:.3} cores, the cgroup shows {counted:.3} over the same window: {m}"
    );
    assert!(
        m["containers"][0]["usage"]["memory"]
            .as_str()
            .is_some_and(|q| q.ends_with("Ki") || q.parse::<u64>().is_ok())
    );

    // kubectl top, as people use it.
    let out = c
        .kubectl()
        .ok(&["top", "pods", "--containers", "--sort-by=cpu"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(
        t.headers,
        ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"],
        "{out}"
    );
    assert_eq!(t.values("POD"), ["burner", "idle"], "sorted by CPU: {out}");
    let out = c.kubectl().ok(&["top", "pods", "-l", "app=idle"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(t.values("NAME"), ["idle"], "{out}");
    let out = c.kubectl().ok(&["top", "pods", "-A"]);
    assert!(
        Table::parse(&out)
            .unwrap()
            .values("NAMESPACE")
            .contains(&"default"),
        "{out}"
    );
    let out = c.kubectl().ok(&["top", "nodes"]);
    let t = Table::parse(&out).unwrap();
    // The percentage headers are `CPU%` or `CPU(%)` depending on kubectl's version.
    assert_eq!(t.headers[..2], ["NAME", "CPU(cores)"], "{out}");
    assert_eq!(t.headers[3], "MEMORY(bytes)", "{out}");
    let node_cpu = t.cell(&node, "CPU(cores)").map(cores).unwrap_or(0.0);
    assert!(
        node_cpu >= 0.5 * reported,
        "the node's CPU holds the burner's: {out}"
    );
    let missing = c.kubectl().fails(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes/no-such-node",
    ]);
    assert!(
        missing.stderr.contains("NotFound")
            || missing.stdout.contains("nodemetrics.metrics.k8s.io"),
        "{}",
        missing.describe()
    );
}
