//! A pod's worker: one pass of observe (containers from containerd by label, the sandbox,
//! image pulls, probe results) → plan ([`plan_pod`]) → apply, then report status, for one pod.
//! Everything the next pass needs is in containerd labels, the network state and the API, so a
//! restarted agent picks up where the last one stopped; what the worker keeps itself ([`Local`])
//! may be lost harmlessly.
//!
//! The worker reaches the world only through the ports of [`Context`], so its passes run
//! against recording fakes in the unit tests (`worker/tests.rs`).

mod admit;
mod claims;
mod config_volumes;
mod observe;
mod probers;
mod pull;
mod sources;
mod start;
mod stop;
#[cfg(test)]
mod tests;
mod tokens;

use super::model::{ImagePull, Observed, Sandbox, StartError};
use super::plan::{Action, PodKillReason, plan_pod};
use super::ports::{ContainerRuntime, EventSink, ImagePuller, PodApi, SandboxNetwork};
use super::{prober, volumes};
use crate::network::dns::ClusterDns;
use berth_api::k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Network(#[from] crate::network::NetworkError),
    #[error(transparent)]
    Client(#[from] berth_api::client::ClientError),
    #[error(transparent)]
    Volume(#[from] volumes::VolumeError),
    #[error(transparent)]
    Cgroup(#[from] crate::node::cgroups::CgroupError),
}

impl WorkerError {
    /// Whether the same pass may succeed later without anything else changing.
    pub fn is_transient(&self) -> bool {
        match self {
            WorkerError::Runtime(e) => e.is_transient(),
            WorkerError::Network(e) => e.is_transient(),
            WorkerError::Client(e) => e.is_transient(),
            WorkerError::Volume(e) => e.is_transient(),
            // A cgroup that cannot be made now (a full or read-only cgroupfs) may be later.
            WorkerError::Cgroup(_) => true,
        }
    }
}

/// Per-pod state that lives only in the agent (rebuilt from containerd and the API after a
/// restart, or harmlessly lost: image pull back-offs, start errors, the sandbox generation).
#[derive(Debug, Clone, Default)]
pub struct Local {
    pub pulls: BTreeMap<String, ImagePull>,
    pub start_errors: BTreeMap<String, StartError>,
    /// The generation of the sandbox this process made, until it is torn down (after a restart
    /// the containers' labels tell it, once one has started in it).
    pub sandbox_attempt: Option<u32>,
    /// Pull failures not yet reported: the status shows `ErrImagePull` once before the
    /// back-off turns it into `ImagePullBackOff`.
    pub fresh_pull_failures: BTreeSet<String>,
    /// Time spent pulling the pod's images (left out of its start latency).
    pub pulling: Duration,
    /// Whether the pod's start was recorded in the start latency metrics.
    pub start_recorded: bool,
    /// The last `FailedMount` message recorded while waiting for claims, and when.
    pub failed_mount: Option<(String, Timestamp)>,
    /// Since when the pod has been waiting for its volumes (none once they are set up).
    pub volumes_waiting_since: Option<Timestamp>,
    /// The pod was refused by this node's admission (sysctls, AppArmor) and its event recorded.
    pub rejected: bool,
    /// The node's eviction manager ordered the pod evicted.
    pub eviction: Option<super::model::Eviction>,
}

/// The node as its pods see it, and where the agent keeps their files.
#[derive(Debug, Clone)]
pub struct NodeSide {
    /// Pod directories (volumes, /etc files, termination logs) live under `<root_dir>/pods`.
    pub root_dir: PathBuf,
    /// Container logs: `<log_dir>/<ns>_<pod>_<uid>/<container>/<restart>.log`.
    pub log_dir: PathBuf,
    pub host_ip: String,
    pub dns: ClusterDns,
    pub cpus: u32,
    pub memory_bytes: i64,
    /// Where pods reach the API (`KUBERNETES_SERVICE_HOST`/`PORT`).
    pub api_endpoint: Option<(String, u16)>,
    /// seccomp default and profile root, AppArmor, allowed sysctls.
    pub security: super::security_profiles::NodeSecurity,
    /// The crash-loop back-off curve (`--max-container-restart-period`).
    pub crash_loop: super::restart::CrashLoopBackOff,
}

/// Wall-clock time, the planner's `now`. The agent uses [`Timestamp::now`]; unit tests tie it
/// to tokio's paused clock so back-offs elapse in virtual time.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What every worker of this node shares: the ports, the node and the clock.
pub struct Context {
    pub runtime: Arc<dyn ContainerRuntime>,
    pub network: Arc<dyn SandboxNetwork>,
    pub images: Arc<dyn ImagePuller>,
    pub api: Arc<dyn PodApi>,
    pub events: Arc<dyn EventSink>,
    pub node: NodeSide,
    pub clock: Clock,
    pub metrics: Arc<crate::metrics::AgentMetrics>,
    /// The pods' cgroups under `kubepods`.
    pub cgroups: Arc<dyn crate::node::qos_cgroups::PodCgroups>,
}

/// How a pass ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Run the next pass after this delay (or sooner, when woken).
    RequeueAfter(Duration),
    /// The pod is gone and everything of it removed: forget the worker.
    Finished,
}

/// The kubelet's message for the `SandboxChanged` event.
pub const SANDBOX_CHANGED: &str = "Pod sandbox changed, it will be killed and re-created.";

/// Wakes the pod's worker (queues its uid); called by its probers on a result change.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A running prober task and the flag that tells it the pod is being deleted.
type Prober = (tokio::task::JoinHandle<()>, Arc<AtomicBool>);

/// The worker of one pod. The reconcile runtime never runs two passes of one pod at once.
pub struct PodWorker {
    uid: String,
    cx: Arc<Context>,
    wake: Wake,
    local: Mutex<Local>,
    /// Probe results by container id, written by the probers.
    probes: prober::Results,
    /// Probers by container id.
    probers: Mutex<HashMap<String, Prober>>,
    /// The pod's ServiceAccount tokens, by need.
    tokens: tokens::Tokens,
    /// When this worker was made (the agent first saw the pod).
    first_seen: Timestamp,
}

impl PodWorker {
    pub fn new(uid: impl Into<String>, cx: Arc<Context>, wake: Wake) -> PodWorker {
        PodWorker {
            uid: uid.into(),
            wake,
            local: Mutex::new(Local::default()),
            probes: prober::Results::default(),
            probers: Mutex::new(HashMap::new()),
            tokens: tokens::Tokens::default(),
            first_seen: (cx.clock)(),
            cx,
        }
    }

    fn local(&self) -> Local {
        self.local.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn local_mut(&self, f: impl FnOnce(&mut Local)) {
        f(&mut self.local.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn now(&self) -> Timestamp {
        (self.cx.clock)()
    }

    /// One pass; `pod` is the latest API object (or the last seen one, marked deleted, when it
    /// vanished).
    pub async fn reconcile(&self, pod: Pod) -> Result<Pass, WorkerError> {
        let uid = self.uid.as_str();
        let now = self.now();
        let seen = self.observe(&pod, now).await?;
        let (observed, infos) = (seen.observed, seen.infos);
        if !self.admit(&pod, &observed).await? {
            return Ok(Pass::RequeueAfter(Duration::from_secs(1)));
        }
        self.sync_probers(&pod, &observed, &infos);
        let mut plan = plan_pod(&pod, &observed, now);
        // As the kubelet waits for attach and mount: nothing starts before the volumes are set
        // up (typed host paths checked or made, claims bound).
        let starts = |a: &Action| {
            matches!(
                a,
                Action::CreateSandbox { .. } | Action::StartContainer { .. }
            )
        };
        let mut waiting_for_volumes = false;
        if pod.metadata.deletion_timestamp.is_none() && plan.actions.iter().any(starts) {
            match self.set_up_volumes(&pod).await {
                Ok(_) => self.local_mut(|l| {
                    l.failed_mount = None;
                    l.volumes_waiting_since = None;
                }),
                Err(why) => {
                    self.failed_mount(&pod, &why).await;
                    plan.actions.retain(|a| !starts(a));
                    waiting_for_volumes = true;
                }
            }
        }
        // As the kubelet's pod container manager: the pod's cgroup (its QoS tier, limits and
        // pid limit) exists before its sandbox and containers. Every pass of a live pod, so a
        // restarted agent counts the running pods into the Burstable shares again (a no-op
        // once known).
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let terminal = matches!(phase, Some("Succeeded" | "Failed"));
        if pod.metadata.deletion_timestamp.is_none() && !terminal {
            self.cx.cgroups.ensure(&pod)?;
        }
        tracing::debug!(pod = %name_of(&pod), actions = ?plan.actions, "plan");
        let mut next = Duration::from_secs(10);
        // Each pass takes one safe step; after a step, the next pass comes right away.
        let progressed = plan
            .actions
            .iter()
            .any(|a| !matches!(a, Action::WaitUntil(_) | Action::ReportStatus));
        if progressed {
            next = Duration::from_millis(20);
        }
        // Whether an action of this pass may have changed what `observed` saw (so the status
        // must come from a fresh look).
        let mut acted = false;
        for action in plan.actions {
            acted |= !matches!(action, Action::WaitUntil(_) | Action::ReportStatus);
            match action {
                Action::CreateSandbox { attempt } => self.create_sandbox(&pod, attempt).await?,
                Action::PullImage { container } => self.pull(&pod, &container, now).await,
                Action::StartContainer {
                    name,
                    restart_index,
                    backoff,
                    ..
                } => {
                    let sandbox = match &observed.sandbox {
                        Sandbox::Ready { attempt, ips } => start::SandboxRef {
                            attempt: *attempt,
                            ip: ips.first().cloned().unwrap_or_default(),
                            netns: seen.netns.clone(),
                        },
                        _ => continue,
                    };
                    self.start(&pod, &name, restart_index, backoff, sandbox)
                        .await;
                }
                Action::KillContainer {
                    name,
                    id,
                    message,
                    grace,
                    pre_stop,
                    ..
                } => {
                    let field = format!("spec.containers{{{name}}}");
                    self.cx
                        .events
                        .record(&pod, false, "Killing", &message, Some(&field))
                        .await;
                    self.kill(&pod, &name, id.as_str(), grace, pre_stop).await;
                }
                Action::RemoveContainer { id } => {
                    if let Ok(id) = crate::runtime::ContainerId::new(id.to_string()) {
                        self.cx.runtime.remove(&id).await?;
                    }
                }
                Action::KillPod {
                    reason,
                    grace,
                    apps,
                    sidecars,
                } => {
                    if reason == PodKillReason::SandboxChanged {
                        if let Sandbox::NotReady { attempt, fault } = &observed.sandbox {
                            tracing::warn!(pod = %name_of(&pod), sandbox = attempt, %fault, "pod sandbox changed; killing the pod and re-creating the sandbox");
                        }
                        self.cx
                            .events
                            .record(&pod, false, "SandboxChanged", SANDBOX_CHANGED, None)
                            .await;
                    }
                    self.kill_pod(&pod, grace, &apps, &sidecars).await
                }
                Action::RemoveEmptyDirs => {
                    volumes::remove_empty_dirs(&self.cx.node.root_dir, uid)?;
                }
                Action::TeardownSandbox => {
                    if !host_network(&pod) {
                        self.cx.network.teardown(uid).await?;
                    }
                    self.local_mut(|l| l.sandbox_attempt = None);
                }
                Action::DeletePod => {
                    match self
                        .cx
                        .api
                        .delete_pod(&ns_of(&pod), &name_of(&pod), uid)
                        .await
                    {
                        Ok(()) => {}
                        Err(e) if e.is_conflict() => {}
                        Err(e) => return Err(e.into()),
                    }
                    self.finish().await?;
                    return Ok(Pass::Finished);
                }
                Action::WaitUntil(t) => {
                    let now = self.now();
                    next = if t > now {
                        let d = now
                            .duration_until(t)
                            .unsigned_abs()
                            .max(Duration::from_millis(100));
                        d.min(Duration::from_secs(10))
                    } else {
                        Duration::from_millis(100)
                    };
                }
                Action::ReportStatus if !acted => {
                    // Nothing done yet in this pass: its own observation is the latest (half
                    // of all passes, each a containerd listing, during a 100-pod rollout).
                    self.report(&pod, &observed).await?;
                    self.local_mut(|l| l.fresh_pull_failures.clear());
                }
                Action::ReportStatus => {
                    // Status from a fresh observation, so what was just done shows at once.
                    let after = self.observe(&pod, self.now()).await?.observed;
                    self.report(&pod, &after).await?;
                    self.local_mut(|l| l.fresh_pull_failures.clear());
                }
            }
        }
        if waiting_for_volumes {
            next = next.min(claims::CLAIM_RETRY);
        }
        self.refresh_config_volumes(&pod).await;
        Ok(Pass::RequeueAfter(next))
    }

    async fn report(&self, pod: &Pod, observed: &Observed) -> Result<(), WorkerError> {
        let status = super::status::pod_status(pod, observed, self.now());
        if pod.status.as_ref() == Some(&status) || pod.metadata.resource_version.is_none() {
            return Ok(());
        }
        let mut updated = pod.clone();
        updated.status = Some(status.clone());
        match self.cx.api.write_status(&updated).await {
            Ok(Some(_)) => {
                self.record_start(pod, &status);
                let entered = super::status::backoff_events(pod, pod.status.as_ref(), &status);
                for e in entered {
                    self.cx
                        .events
                        .record(pod, e.warning, "BackOff", &e.message, Some(&e.field_path))
                        .await;
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            // A newer pod is on its way through the watch; the next pass writes again.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Once per pod, when a status with every container running is written: the pod start
    /// latencies, from the pod's creation (less image pulls) and from this worker's first
    /// look. A pod that was running before this agent started is not counted.
    fn record_start(&self, pod: &Pod, status: &PodStatus) {
        let all_running = |s: Option<&PodStatus>| {
            s.and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| {
                    !cs.is_empty()
                        && cs
                            .iter()
                            .all(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
                })
        };
        if !all_running(Some(status)) || all_running(pod.status.as_ref()) {
            return;
        }
        let local = self.local();
        if local.start_recorded {
            return;
        }
        self.local_mut(|l| l.start_recorded = true);
        let now = self.now();
        let m = &self.cx.metrics;
        if let Some(created) = pod.metadata.creation_timestamp.as_ref() {
            let since = now.duration_since(created.0).as_secs_f64().max(0.0);
            let sli = (since - local.pulling.as_secs_f64()).max(0.0);
            m.pod_start_sli.observe(&[], sli);
        }
        let seen = now.duration_since(self.first_seen).as_secs_f64().max(0.0);
        m.pod_start.observe(&[], seen);
    }

    /// Whether the pod was ordered evicted.
    pub fn is_evicted(&self) -> bool {
        self.local().eviction.is_some()
    }

    /// Evicts the pod (the eviction manager's order): records the `Evicted` event once and
    /// wakes the worker, whose passes then kill the pod with the eviction's grace and report
    /// it `Failed`/`Evicted`.
    pub async fn evict(&self, pod: &Pod, eviction: super::model::Eviction) {
        if self.local().eviction.is_some() {
            return;
        }
        self.cx
            .events
            .record(pod, true, "Evicted", &eviction.message, None)
            .await;
        self.local_mut(|l| l.eviction = Some(eviction));
        (self.wake)();
    }

    /// The pod is gone: remove what is left of it on the host and forget it.
    pub async fn finish(&self) -> Result<(), WorkerError> {
        let uid = self.uid.as_str();
        for info in self.cx.runtime.list_pod(uid).await? {
            self.cx.runtime.remove(&info.id).await?;
            self.probes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(info.id.as_str());
        }
        self.cx.network.teardown(uid).await?;
        volumes::remove(&self.cx.node.root_dir, uid)?;
        // Its containers are gone, and their logs with them: so goes the pod's log directory
        // (the collector's minute sweep is the safety net for what an agent crash leaves).
        if let Err(e) = crate::gc::remove_pod_log_dir(&self.cx.node.log_dir, uid) {
            tracing::warn!(pod = %uid, error = %e, "removing the pod's log directory failed");
        }
        if let Err(e) = self.cx.cgroups.release(uid) {
            // Left for `berth-agent uninstall`; the pod itself is gone.
            tracing::warn!(pod = %uid, error = %e, "removing the pod's cgroup failed");
        }
        self.stop_probers();
        self.local_mut(|l| *l = Local::default());
        self.cx.events.forget(uid);
        Ok(())
    }
}

impl Drop for PodWorker {
    fn drop(&mut self) {
        self.stop_probers();
    }
}

/// Init, app and ephemeral containers (as containers): they share one namespace of names.
fn all_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
                .cloned()
                .chain(super::model::ephemeral_containers(s))
                .collect()
        })
        .unwrap_or_default()
}

/// The `fieldPath` of events about a container name: `spec.ephemeralContainers{debugger}`
/// for an ephemeral container, `spec.containers{web}` otherwise.
fn field_path(pod: &Pod, name: &str) -> String {
    let ephemeral = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|l| l.iter().any(|c| c.name == name));
    if ephemeral {
        format!("spec.ephemeralContainers{{{name}}}")
    } else {
        format!("spec.containers{{{name}}}")
    }
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

pub fn ns_of(pod: &Pod) -> String {
    pod.metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string())
}

pub fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}
