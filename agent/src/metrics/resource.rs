//! The kubelet's resource metrics endpoint (`/metrics/resource`): cumulative CPU time and the
//! memory working set of the node, of each pod and of each running container, read from their
//! cgroups and written with upstream's metric names, help texts and sample timestamps. This is
//! what metrics-server scrapes from a kubelet, and what the controller's metrics API scrapes
//! from an agent.

use super::exposition::Text;
use crate::pod::labels;
use crate::runtime::cgroup::{self, Usage};
use crate::runtime::{ContainerInfo, TaskState, spec};
use jiff::Timestamp;

/// One running container and what its cgroup has used.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSample {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub started_at: Timestamp,
    pub usage: Usage,
}

/// One pod (the parent cgroup of its containers) and what it has used.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSample {
    pub namespace: String,
    pub pod: String,
    pub usage: Usage,
}

/// Everything one scrape read, at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    pub at: Timestamp,
    pub node: Usage,
    pub pods: Vec<PodSample>,
    pub containers: Vec<ContainerSample>,
}

/// Reads the node's, the pods' and the running containers' cgroups (containers as listed by
/// the runtime in containerd namespace `namespace`).
pub fn read(namespace: &str, infos: &[ContainerInfo], at: Timestamp) -> Scrape {
    let mut containers = Vec::new();
    let mut pods: Vec<PodSample> = Vec::new();
    for info in infos {
        let TaskState::Running { started_at, .. } = info.state else {
            continue;
        };
        let (Some(uid), Some(name)) = (
            labels::pod_uid(&info.labels),
            labels::container_name(&info.labels),
        ) else {
            continue;
        };
        let label = |k: &str| info.labels.get(k).cloned().unwrap_or_default();
        let (pod_ns, pod) = (
            label(labels::LABEL_POD_NAMESPACE),
            label(labels::LABEL_POD_NAME),
        );
        // The cgroup recorded at creation (the QoS layout, or the older `/<ns>/pod<uid>`);
        // the pod's is its parent.
        let path = info
            .labels
            .get(crate::runtime::labels::CGROUP)
            .cloned()
            .unwrap_or_else(|| {
                spec::cgroups_path(namespace, Some(&format!("pod{uid}")), info.id.as_str())
            });
        let pod_path = path
            .rsplit_once('/')
            .map_or_else(|| format!("/{namespace}/pod{uid}"), |(p, _)| p.to_string());
        containers.push(ContainerSample {
            namespace: pod_ns.clone(),
            pod: pod.clone(),
            container: name.to_string(),
            started_at,
            usage: cgroup::usage(&path),
        });
        if !pods.iter().any(|p| p.namespace == pod_ns && p.pod == pod) {
            pods.push(PodSample {
                namespace: pod_ns,
                pod,
                usage: cgroup::usage(&pod_path),
            });
        }
    }
    Scrape {
        at,
        node: cgroup::node_usage(),
        pods,
        containers,
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A family's name, type and help text, as upstream writes them.
struct Family(&'static str, &'static str, &'static str);

const CONTAINER_CPU: Family = Family(
    "container_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
);
const CONTAINER_MEMORY: Family = Family(
    "container_memory_working_set_bytes",
    "gauge",
    "[STABLE] Current working set of the container in bytes",
);
const CONTAINER_START: Family = Family(
    "container_start_time_seconds",
    "gauge",
    "[STABLE] Start time of the container since unix epoch in seconds",
);
const NODE_CPU: Family = Family(
    "node_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
);
const NODE_MEMORY: Family = Family(
    "node_memory_working_set_bytes",
    "gauge",
    "[STABLE] Current working set of the node in bytes",
);
const POD_CPU: Family = Family(
    "pod_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
);
const POD_MEMORY: Family = Family(
    "pod_memory_working_set_bytes",
    "gauge",
    "[STABLE] Current working set of the pod in bytes",
);
const SCRAPE_ERROR: Family = Family(
    "scrape_error",
    "gauge",
    "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise",
);

/// One sample to write: its label values and its value (`None`: it could not be read).
type Row = (Vec<String>, Option<f64>);

/// Writes family `f` with a sample per readable row; returns whether a row was unreadable.
fn family(t: &mut Text, f: &Family, labels: &[&str], rows: Vec<Row>, ts: Option<i64>) -> bool {
    let Family(name, kind, help) = *f;
    t.family(name, kind, help);
    let mut unreadable = false;
    for (values, value) in rows {
        match value {
            Some(v) => t.sample(name, labels, &values, v, ts),
            None => unreadable = true,
        }
    }
    unreadable
}

/// The scrape in the text format, families in upstream's (alphabetical) order. A value that
/// could not be read is left out and `scrape_error` is 1, as the kubelet reports it.
pub fn render(s: &Scrape) -> String {
    let ts = Some(s.at.as_millisecond());
    let mut t = Text::default();
    let c_labels = ["container", "namespace", "pod"];
    let p_labels = ["namespace", "pod"];
    let c_values =
        |c: &ContainerSample| vec![c.container.clone(), c.namespace.clone(), c.pod.clone()];
    let cpu = |u: &Usage| u.cpu_ns.map(seconds);
    let memory = |u: &Usage| u.working_set.map(|b| b as f64);
    let containers = |value: fn(&Usage) -> Option<f64>| -> Vec<Row> {
        let row = |c: &ContainerSample| (c_values(c), value(&c.usage));
        s.containers.iter().map(row).collect()
    };
    let pods = |value: fn(&Usage) -> Option<f64>| -> Vec<Row> {
        let row = |p: &PodSample| (vec![p.namespace.clone(), p.pod.clone()], value(&p.usage));
        s.pods.iter().map(row).collect()
    };
    let node = |value: fn(&Usage) -> Option<f64>| -> Vec<Row> { vec![(vec![], value(&s.node))] };

    let mut error = false;
    error |= family(&mut t, &CONTAINER_CPU, &c_labels, containers(cpu), ts);
    error |= family(&mut t, &CONTAINER_MEMORY, &c_labels, containers(memory), ts);
    let Family(name, kind, help) = CONTAINER_START;
    t.family(name, kind, help);
    for c in &s.containers {
        let start = c.started_at.as_millisecond() as f64 / 1e3;
        let at = Some(c.started_at.as_millisecond());
        t.sample(name, &c_labels, &c_values(c), start, at);
    }
    error |= family(&mut t, &NODE_CPU, &[], node(cpu), ts);
    error |= family(&mut t, &NODE_MEMORY, &[], node(memory), ts);
    error |= family(&mut t, &POD_CPU, &p_labels, pods(cpu), ts);
    error |= family(&mut t, &POD_MEMORY, &p_labels, pods(memory), ts);
    let scrape_error = vec![(vec![], Some(if error { 1.0 } else { 0.0 }))];
    family(&mut t, &SCRAPE_ERROR, &[], scrape_error, None);
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    fn usage(cpu_ns: Option<u64>, working_set: Option<u64>) -> Usage {
        Usage {
            cpu_ns,
            working_set,
        }
    }

    #[test]
    fn a_scrape_is_written_with_upstreams_names_and_timestamps() {
        let s = Scrape {
            at: at(1_700_000_000_123),
            node: usage(Some(2_500_000_000), Some(1024)),
            pods: vec![PodSample {
                namespace: "default".into(),
                pod: "web".into(),
                usage: usage(Some(1_000_000_000), Some(4096)),
            }],
            containers: vec![ContainerSample {
                namespace: "default".into(),
                pod: "web".into(),
                container: "nginx".into(),
                started_at: at(1_699_999_990_000),
                usage: usage(Some(750_000_000), Some(2048)),
            }],
        };
        let text = render(&s);
        for line in [
            "container_cpu_usage_seconds_total{container=\"nginx\",namespace=\"default\",pod=\"web\"} 0.75 1700000000123",
            "container_memory_working_set_bytes{container=\"nginx\",namespace=\"default\",pod=\"web\"} 2048 1700000000123",
            "container_start_time_seconds{container=\"nginx\",namespace=\"default\",pod=\"web\"} 1699999990 1699999990000",
            "node_cpu_usage_seconds_total 2.5 1700000000123",
            "node_memory_working_set_bytes 1024 1700000000123",
            "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 1 1700000000123",
            "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 4096 1700000000123",
            "scrape_error 0",
            "# TYPE container_cpu_usage_seconds_total counter",
            "# TYPE pod_memory_working_set_bytes gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn a_value_that_cannot_be_read_is_left_out_and_flagged() {
        let s = Scrape {
            at: at(0),
            node: usage(Some(1), None),
            pods: vec![],
            containers: vec![],
        };
        let text = render(&s);
        assert!(!text.contains("\nnode_memory_working_set_bytes "), "{text}");
        assert!(text.ends_with("scrape_error 1\n"), "{text}");
    }
}
