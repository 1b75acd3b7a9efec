//! Runs a container's startup, liveness and readiness probes on their schedule (the state
//! machine is `probe::policy`), publishing results and waking the pod's worker on a change.

use super::model::ProbeResults;
use super::ports::ContainerRuntime;
use crate::probe::policy::{Due, ProbeGate, ProbeKind, ProbeResult, ProbeState, ProbeTiming};
use crate::probe::{ExecProber, Target};
use crate::runtime::ContainerId;
use berth_api::k8s_openapi::api::core::v1::Container;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How much longer than its own timeout a probe may take before the prober gives up on it.
const PROBE_MARGIN: Duration = Duration::from_secs(5);

/// Probe results per container attempt, shared with the worker.
pub type Results = Arc<Mutex<HashMap<String, ProbeResults>>>;

struct Exec {
    runtime: Arc<dyn ContainerRuntime>,
    id: ContainerId,
}

impl ExecProber for Exec {
    type Error = crate::runtime::RuntimeError;
    async fn exec(
        &self,
        _container: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<Option<(i32, Vec<u8>)>, Self::Error> {
        // Spawned, so a prober that gives up on a stuck exec does not cancel it half-made: the
        // runtime still stops the command at its timeout and deletes the exec process.
        let (runtime, id, cmd) = (self.runtime.clone(), self.id.clone(), cmd.to_vec());
        let run = tokio::spawn(async move { runtime.exec_output(&id, &cmd, timeout).await });
        match run.await {
            Ok(Ok(done)) => Ok(Some(done)),
            Ok(Err(crate::runtime::RuntimeError::ExecTimeout(_))) => Ok(None),
            Ok(Err(e)) => Err(e),
            Err(join) => Err(crate::runtime::RuntimeError::Containerd {
                op: "exec",
                message: join.to_string(),
                transient: true,
            }),
        }
    }
}

/// What the prober task needs to know about its container.
pub struct Probed {
    pub runtime: Arc<dyn ContainerRuntime>,
    pub id: ContainerId,
    pub container: Container,
    pub pod_ip: Option<String>,
    pub running_since: jiff::Timestamp,
    pub deleting: Arc<std::sync::atomic::AtomicBool>,
}

fn set(results: &Results, id: &str, kind: ProbeKind, r: ProbeResult) -> bool {
    let mut map = results.lock().unwrap_or_else(|e| e.into_inner());
    let entry = map.entry(id.to_string()).or_default();
    let slot = match kind {
        ProbeKind::Startup => &mut entry.startup,
        ProbeKind::Liveness => &mut entry.liveness,
        ProbeKind::Readiness => &mut entry.readiness,
    };
    let changed = *slot != r;
    *slot = r;
    changed
}

/// The initial results of a fresh attempt (before any probe ran).
pub fn initial(container: &Container) -> ProbeResults {
    let start = |p: &Option<_>, k: ProbeKind| {
        if p.is_some() {
            k.initial()
        } else {
            ProbeResult::Success
        }
    };
    ProbeResults {
        startup: start(&container.startup_probe, ProbeKind::Startup),
        liveness: start(&container.liveness_probe, ProbeKind::Liveness),
        readiness: start(&container.readiness_probe, ProbeKind::Readiness),
    }
}

/// Probes until the task is aborted (the worker aborts it when the attempt stops).
/// `on_failure` gets the `Unhealthy` event message of every failed probe, `on_result` the kind
/// and outcome of every probe run.
pub async fn run(
    p: Probed,
    results: Results,
    wake: impl Fn() + Send + Sync + 'static,
    on_failure: impl Fn(String) + Send + Sync + 'static,
    on_result: impl Fn(ProbeKind, ProbeResult) + Send + Sync + 'static,
) {
    let id = p.id.to_string();
    let mut states: Vec<(ProbeState, berth_api::k8s_openapi::api::core::v1::Probe)> = [
        (ProbeKind::Startup, p.container.startup_probe.clone()),
        (ProbeKind::Liveness, p.container.liveness_probe.clone()),
        (ProbeKind::Readiness, p.container.readiness_probe.clone()),
    ]
    .into_iter()
    .filter_map(|(k, probe)| {
        probe.map(|probe| (ProbeState::new(k, ProbeTiming::of(&probe)), probe))
    })
    .collect();
    {
        let mut map = results.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(id.clone())
            .or_insert_with(|| initial(&p.container));
    }
    let exec = Exec {
        runtime: p.runtime.clone(),
        id: p.id.clone(),
    };
    loop {
        let now = jiff::Timestamp::now();
        let started = states
            .iter()
            .find(|(s, _)| s.kind() == ProbeKind::Startup)
            .is_none_or(|(s, _)| s.result() == ProbeResult::Success);
        let gate = ProbeGate {
            running_since: Some(p.running_since),
            started,
            deleting: p.deleting.load(std::sync::atomic::Ordering::Relaxed),
        };
        let mut next = now + jiff::SignedDuration::from_secs(1);
        let mut changed = false;
        for (state, probe) in states.iter_mut() {
            let due = state.next_due(p.running_since);
            if due <= now {
                match state.gate(gate, now) {
                    Due::Probe => {
                        // A probe that does not come back (a stuck exec, say) must not freeze this
                        // container's probing: past its timeout plus a margin it counts as unknown.
                        let limit = state.timing().timeout + PROBE_MARGIN;
                        let run = crate::probe::run(
                            probe,
                            Target {
                                container: &p.container,
                                pod_ip: p.pod_ip.as_deref(),
                            },
                            &exec,
                        );
                        let outcome = match tokio::time::timeout(limit, run)
                            .await
                            .unwrap_or_else(|_| Err(crate::probe::ProbeError::TimedOut(limit)))
                        {
                            Ok(o) => {
                                if o.result == ProbeResult::Failure {
                                    on_failure(format!(
                                        "{} probe failed: {}",
                                        state.kind().label(),
                                        o.output.trim_end()
                                    ));
                                }
                                o.result
                            }
                            Err(e) => {
                                tracing::debug!(container = %p.id, error = %e, "probe could not run");
                                ProbeResult::Unknown
                            }
                        };
                        tracing::debug!(container = %p.id, kind = state.kind().label(), ?outcome, "probed");
                        on_result(state.kind(), outcome);
                        if let Some(r) = state.record(outcome, jiff::Timestamp::now()) {
                            changed |= set(&results, &id, state.kind(), r);
                        }
                    }
                    Due::Skip | Due::Stop => {
                        changed |= set(&results, &id, state.kind(), state.result());
                    }
                }
            }
            let d = state.next_due(p.running_since);
            if d < next {
                next = d;
            }
        }
        if changed {
            wake();
        }
        let wait = jiff::Timestamp::now()
            .duration_until(next)
            .unsigned_abs()
            .max(Duration::from_millis(50));
        tokio::time::sleep(wait.min(Duration::from_secs(1))).await;
    }
}
