//! The agent's metrics. Its own, at `/metrics` (pod start latency, pod worker passes, image
//! pulls, probe results, containerd and CNI call latencies, running pods and containers), under
//! the kubelet's metric names where the kubelet has one; and the resource usage of the node, its
//! pods and containers, at `/metrics/resource` ([`resource`]).

pub mod exposition;
pub mod instrumented;
pub mod resource;

use exposition::{CounterVec, HistogramVec, Text};

/// The kubelet's pod start buckets, in seconds.
const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];
/// The kubelet's default operation buckets (`metrics.DefBuckets`), in seconds.
const OPERATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Image pull buckets, in seconds.
const PULL_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Containers and pods running on the node, counted when scraped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Running {
    pub pods: usize,
    pub containers: usize,
}

/// The agent's own instruments. One per agent, shared by everything that records.
pub struct AgentMetrics {
    pub pod_start_sli: HistogramVec,
    pub pod_start: HistogramVec,
    pub pod_worker: HistogramVec,
    pub pod_worker_errors: CounterVec,
    pub image_pull: HistogramVec,
    pub image_pulls: CounterVec,
    pub probes: CounterVec,
    pub runtime_operations: HistogramVec,
    pub runtime_errors: CounterVec,
    pub network_operations: HistogramVec,
    pub network_errors: CounterVec,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        AgentMetrics {
            pod_start_sli: HistogramVec::new(
                "kubelet_pod_start_sli_duration_seconds",
                "[BETA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                &[],
                POD_START_BUCKETS,
            ),
            pod_start: HistogramVec::new(
                "kubelet_pod_start_duration_seconds",
                "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
                &[],
                POD_START_BUCKETS,
            ),
            pod_worker: HistogramVec::new(
                "kubelet_pod_worker_duration_seconds",
                "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
                &["operation_type"],
                OPERATION_BUCKETS,
            ),
            pod_worker_errors: CounterVec::new(
                "berth_agent_pod_worker_errors_total",
                "Pod worker passes that ended in an error, by whether the error is transient.",
                &["transient"],
            ),
            image_pull: HistogramVec::new(
                "kubelet_image_pull_duration_seconds",
                "[ALPHA] Duration in seconds to pull an image.",
                &[],
                PULL_BUCKETS,
            ),
            image_pulls: CounterVec::new(
                "berth_agent_image_pulls_total",
                "Image pulls the agent made, by result (success, failure).",
                &["result"],
            ),
            probes: CounterVec::new(
                "prober_probe_total",
                "[ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
                &["container", "namespace", "pod", "probe_type", "result"],
            ),
            runtime_operations: HistogramVec::new(
                "kubelet_runtime_operations_duration_seconds",
                "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
                &["operation_type"],
                OPERATION_BUCKETS,
            ),
            runtime_errors: CounterVec::new(
                "kubelet_runtime_operations_errors_total",
                "[ALPHA] Cumulative number of runtime operation errors by operation type.",
                &["operation_type"],
            ),
            network_operations: HistogramVec::new(
                "kubelet_network_plugin_operations_duration_seconds",
                "[ALPHA] Latency in seconds of network plugin (CNI) operations. Broken down by operation type.",
                &["operation_type"],
                OPERATION_BUCKETS,
            ),
            network_errors: CounterVec::new(
                "kubelet_network_plugin_operations_errors_total",
                "[ALPHA] Cumulative number of network plugin (CNI) operation errors by operation type.",
                &["operation_type"],
            ),
        }
    }
}

impl AgentMetrics {
    /// Everything in the text format, with the running pods and containers counted now.
    pub fn render(&self, running: Running) -> String {
        let mut t = Text::default();
        self.image_pull.render(&mut t);
        t.family(
            "kubelet_running_containers",
            "gauge",
            "[ALPHA] Number of containers currently running",
        );
        t.sample(
            "kubelet_running_containers",
            &["container_state"],
            &["running".to_string()],
            running.containers as f64,
            None,
        );
        t.family(
            "kubelet_running_pods",
            "gauge",
            "[ALPHA] Number of pods that have a running pod sandbox",
        );
        t.sample("kubelet_running_pods", &[], &[], running.pods as f64, None);
        for h in [
            &self.network_operations,
            &self.pod_start,
            &self.pod_start_sli,
            &self.pod_worker,
            &self.runtime_operations,
        ] {
            h.render(&mut t);
        }
        for c in [
            &self.image_pulls,
            &self.network_errors,
            &self.pod_worker_errors,
            &self.probes,
            &self.runtime_errors,
        ] {
            c.render(&mut t);
        }
        t.finish()
    }
}
