//! The worker's containerd and CNI ports, timed: each call is observed in the agent's
//! operation histograms, and a failed one counted, by operation.

use super::AgentMetrics;
use super::exposition::{CounterVec, HistogramVec};
use crate::network::{NetworkError, NetworkFacts, PodNetwork, PodRef, ProcessNetwork};
use crate::pod::ports::{ContainerRuntime, SandboxNetwork};
use crate::runtime::{ContainerConfig, ContainerId, ContainerInfo, ExitInfo, RuntimeError};
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `f`, recording its duration under `op` in `hist`, and counting it in `errors` if it
/// fails.
async fn timed<T, E>(
    hist: &HistogramVec,
    errors: &CounterVec,
    op: &str,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let start = Instant::now();
    let r = f.await;
    hist.observe(&[op], start.elapsed().as_secs_f64());
    if r.is_err() {
        errors.inc(&[op]);
    }
    r
}

/// A port (`P`: the container runtime or the pod network) whose calls are timed.
pub struct Timed<P: ?Sized> {
    pub inner: Arc<P>,
    pub metrics: Arc<AgentMetrics>,
}

/// A container runtime whose calls are timed.
pub type TimedRuntime = Timed<dyn ContainerRuntime>;
/// A pod network whose CNI calls are timed.
pub type TimedNetwork = Timed<dyn SandboxNetwork>;

/// The histogram and error counter a port's calls are recorded in.
pub trait Operations {
    fn operations(m: &AgentMetrics) -> (&HistogramVec, &CounterVec);
}

impl Operations for dyn ContainerRuntime {
    fn operations(m: &AgentMetrics) -> (&HistogramVec, &CounterVec) {
        (&m.runtime_operations, &m.runtime_errors)
    }
}

impl Operations for dyn SandboxNetwork {
    fn operations(m: &AgentMetrics) -> (&HistogramVec, &CounterVec) {
        (&m.network_operations, &m.network_errors)
    }
}

impl<P: ?Sized + Operations> Timed<P> {
    fn time<'a, T: 'a, E: 'a>(
        &'a self,
        op: &'static str,
        f: BoxFuture<'a, Result<T, E>>,
    ) -> BoxFuture<'a, Result<T, E>> {
        let (hist, errors) = P::operations(&self.metrics);
        Box::pin(timed(hist, errors, op, f))
    }
}

impl ContainerRuntime for TimedRuntime {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ContainerInfo>, RuntimeError>> {
        self.time("list_containers", self.inner.list())
    }
    fn list_pod<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ContainerInfo>, RuntimeError>> {
        // The kubelet's filtered ListContainers is the same operation.
        self.time("list_containers", self.inner.list_pod(uid))
    }
    fn create<'a>(
        &'a self,
        config: &'a ContainerConfig,
    ) -> BoxFuture<'a, Result<ContainerId, RuntimeError>> {
        self.time("create_container", self.inner.create(config))
    }
    fn start<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<u32, RuntimeError>> {
        self.time("start_container", self.inner.start(id))
    }
    fn kill<'a>(
        &'a self,
        id: &'a ContainerId,
        signal: i32,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        self.time("stop_container", self.inner.kill(id, signal))
    }
    fn wait_exit<'a>(
        &'a self,
        id: &'a ContainerId,
    ) -> BoxFuture<'a, Result<ExitInfo, RuntimeError>> {
        // Waiting lasts as long as the container runs: not an operation worth timing.
        self.inner.wait_exit(id)
    }
    fn remove<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        self.time("remove_container", self.inner.remove(id))
    }
    fn exec_output<'a>(
        &'a self,
        id: &'a ContainerId,
        cmd: &'a [String],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(i32, Vec<u8>), RuntimeError>> {
        self.time("exec_sync", self.inner.exec_output(id, cmd, timeout))
    }
}

impl SandboxNetwork for TimedNetwork {
    fn observe<'a>(
        &'a self,
        pod_uid: &'a str,
    ) -> BoxFuture<'a, Result<NetworkFacts, NetworkError>> {
        self.inner.observe(pod_uid)
    }
    fn observe_process(&self, pid: u32) -> BoxFuture<'_, ProcessNetwork> {
        self.inner.observe_process(pid)
    }
    fn setup<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<PodNetwork, NetworkError>> {
        self.time("set_up_pod", self.inner.setup(pod))
    }
    fn teardown<'a>(&'a self, pod_uid: &'a str) -> BoxFuture<'a, Result<(), NetworkError>> {
        self.time("tear_down_pod", self.inner.teardown(pod_uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timed_call_is_observed_and_a_failed_one_counted() {
        let m = AgentMetrics::default();
        let ok: Result<(), RuntimeError> = Ok(());
        timed(
            &m.runtime_operations,
            &m.runtime_errors,
            "start_container",
            async { ok },
        )
        .await
        .ok();
        let failed: Result<(), &str> = Err("no");
        timed(
            &m.runtime_operations,
            &m.runtime_errors,
            "start_container",
            async { failed },
        )
        .await
        .ok();
        let text = m.render(super::super::Running::default());
        assert!(text.contains("kubelet_runtime_operations_duration_seconds_count{operation_type=\"start_container\"} 2\n"), "{text}");
        assert!(
            text.contains(
                "kubelet_runtime_operations_errors_total{operation_type=\"start_container\"} 1\n"
            ),
            "{text}"
        );
    }
}
