//! What a pod worker observed about one pod on this node — sandbox, container attempts, probe
//! results, image pulls — as plain data, plus the few readings of the pod spec that the planner
//! and the status generator share.
//!
//! Planner: pure, no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};
use jiff::Timestamp;

use super::restart::Backoff;
use crate::probe::policy::ProbeResult;

/// The runtime's id of one container attempt (a containerd container id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerId(String);

impl ContainerId {
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The form the API shows in `containerID`: `containerd://<id>`.
    pub fn uri(&self) -> String {
        format!("containerd://{}", self.0)
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which list of the pod spec a container comes from, and how it behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// `initContainers[]` without `restartPolicy: Always`: runs once, to success, in order.
    Init,
    /// `initContainers[]` with `restartPolicy: Always`: started in order, kept running.
    Sidecar,
    /// `containers[]`.
    App,
    /// `ephemeralContainers[]`: started once, never restarted, no probes, not part of the
    /// pod's readiness or phase.
    Ephemeral,
}

/// The state of one container attempt as the runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Created but not started (or not yet started): the runtime's "created".
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started_at: Timestamp,
    },
    Terminated(Termination),
}

/// How a container attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    pub exit_code: i32,
    /// `Completed`, `Error`, `OOMKilled`, …
    pub reason: String,
    pub signal: Option<i32>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    /// The termination message (from `terminationMessagePath` or the log tail).
    pub message: String,
}

impl Termination {
    /// Exit code 0 and not killed for memory: the only way a run counts as a success.
    pub fn succeeded(&self) -> bool {
        self.exit_code == 0 && self.reason != "OOMKilled"
    }
}

/// The three probe results of one attempt; `Unknown` until the prober has decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeResults {
    pub startup: ProbeResult,
    pub liveness: ProbeResult,
    pub readiness: ProbeResult,
}

/// One run of a container: a runtime container with its restart index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub id: ContainerId,
    /// 0 for the first run; becomes the status's `restartCount` while this is the latest run.
    pub restart_index: u32,
    /// The sandbox generation the attempt ran in (see [`Sandbox`]).
    pub sandbox_attempt: u32,
    /// The image as the runtime resolved it (`docker.io/library/nginx:1.14.2`).
    pub image: String,
    /// The image's digest reference (`docker.io/library/nginx@sha256:…`).
    pub image_id: String,
    /// The spec's `image` the attempt was created from (kept as a label; empty if unknown).
    pub spec_image: String,
    pub state: State,
    /// The crash-loop back-off this attempt was started under (`None` for a first start);
    /// the worker keeps it with the container (a label) so it survives an agent restart.
    pub backoff: Option<Backoff>,
    pub probes: ProbeResults,
}

impl Attempt {
    pub fn is_running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    /// Whether the container's image was updated in place since this attempt was created
    /// (the one spec change a running pod allows): such an attempt must be replaced.
    pub fn outdated(&self, spec: &Container) -> bool {
        !self.spec_image.is_empty() && spec.image.as_deref() != Some(self.spec_image.as_str())
    }

    pub fn termination(&self) -> Option<&Termination> {
        match &self.state {
            State::Terminated(t) => Some(t),
            _ => None,
        }
    }
}

/// Why an image pull failed, spelled as the waiting reason the API shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullFailure {
    ErrImagePull,
    ImagePullBackOff,
    ErrImageNeverPull,
    InvalidImageName,
}

impl PullFailure {
    pub fn reason(self) -> &'static str {
        match self {
            Self::ErrImagePull => "ErrImagePull",
            Self::ImagePullBackOff => "ImagePullBackOff",
            Self::ErrImageNeverPull => "ErrImageNeverPull",
            Self::InvalidImageName => "InvalidImageName",
        }
    }
}

/// The image for a container's next start. The worker resets it to `NotPulled` whenever it
/// wants the pull policy applied again (for example before each start with `Always`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ImagePull {
    #[default]
    NotPulled,
    Pulling,
    Pulled,
    Failed {
        reason: PullFailure,
        message: String,
        /// The pull back-off after this failure; the next try is due at its end.
        backoff: Backoff,
    },
}

impl ImagePull {
    /// What a failed pull shows on a pass after the one that tried it: `ErrImagePull` becomes
    /// `ImagePullBackOff` (`Back-off pulling image "<image>"`) while the retry is not yet due,
    /// as the kubelet reports a sync that finds the pull in back-off. The worker applies this
    /// when it observes at the start of a pass, never in the pass that pulled.
    pub fn backing_off(self, image: &str, now: Timestamp) -> Self {
        match self {
            Self::Failed {
                reason: PullFailure::ErrImagePull,
                backoff,
                ..
            } if now < backoff.until() => Self::Failed {
                reason: PullFailure::ImagePullBackOff,
                message: format!("Back-off pulling image {image:?}"),
                backoff,
            },
            other => other,
        }
    }
}

/// The last failure to create or start a container (`CreateContainerConfigError`,
/// `CreateContainerError`, `RunContainerError`, …); cleared by the worker on a good start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartError {
    pub reason: String,
    pub message: String,
    /// When the start failed: the planner's back-off is measured from it.
    pub at: Timestamp,
    /// The crash-loop back-off entry the failed start was made under (the `StartContainer`
    /// action's), so the next failure doubles it.
    pub backoff: Option<Backoff>,
}

/// The waiting reason of a container config that could not be made (a missing ConfigMap,
/// Secret or key): retried on the pod worker's flat period, not on the crash-loop curve.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// The exit code and reason the runtime reports for a container whose task never started
/// (containerd's CRI: `errorStartExitCode`, `errorStartReason`).
pub const START_ERROR_EXIT_CODE: i32 = 128;
pub const START_ERROR_REASON: &str = "StartError";

impl StartError {
    /// Whether the failure was in making the container's config (not a failed run).
    pub fn is_config_error(&self) -> bool {
        self.reason == CREATE_CONTAINER_CONFIG_ERROR
    }
}

/// Everything observed about one container name of the pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedContainer {
    /// Every attempt the runtime still has, in any order.
    pub attempts: Vec<Attempt>,
    pub image: ImagePull,
    pub start_error: Option<StartError>,
}

impl ObservedContainer {
    /// The newest attempt (highest restart index).
    pub fn latest(&self) -> Option<&Attempt> {
        self.attempts.iter().max_by_key(|a| a.restart_index)
    }

    /// The newest attempt before the latest one: the source of `lastState`.
    pub fn previous(&self) -> Option<&Attempt> {
        let latest = self.latest()?;
        self.attempts
            .iter()
            .filter(|a| a.restart_index < latest.restart_index)
            .max_by_key(|a| a.restart_index)
    }

    /// The newest attempt that ran in the given sandbox generation.
    pub fn latest_in(&self, sandbox_attempt: u32) -> Option<&Attempt> {
        self.attempts
            .iter()
            .filter(|a| a.sandbox_attempt == sandbox_attempt)
            .max_by_key(|a| a.restart_index)
    }

    /// The newest attempt that has terminated: what the crash-loop back-off is measured from.
    pub fn latest_terminated(&self) -> Option<(&Attempt, &Termination)> {
        self.attempts
            .iter()
            .filter_map(|a| a.termination().map(|t| (a, t)))
            .max_by_key(|(a, _)| a.restart_index)
    }
}

/// The pod sandbox: network namespace (or host network), hostname, hosts and resolv files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Sandbox {
    #[default]
    Absent,
    /// Set up and usable; `ips` are the pod IPs (the host's for `hostNetwork`).
    Ready { attempt: u32, ips: Vec<String> },
    /// Recorded but broken (for example its network namespace vanished with a reboot): it is
    /// killed and made anew, never repaired around running containers.
    NotReady { attempt: u32, fault: SandboxFault },
}

/// Why a sandbox is not ready (see `pod::sandbox` for how each is found).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxFault {
    /// Its network namespace was deleted.
    NetnsMissing,
    /// Its netns file is there but no namespace is mounted on it any more.
    NetnsNotMounted,
    /// The host end of its veth is gone (the pod's eth0 went with it).
    VethMissing,
    /// A container of the pod runs in another network namespace than the sandbox's.
    ContainerElsewhere,
    /// The pod's address is missing from the namespace its containers run in.
    AddressMissing,
    /// Containers run, but no network is recorded for the pod.
    NoNetwork,
}

impl fmt::Display for SandboxFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NetnsMissing => "its network namespace is gone",
            Self::NetnsNotMounted => "its network namespace is no longer mounted",
            Self::VethMissing => "its veth is gone",
            Self::ContainerElsewhere => "a container runs in another network namespace",
            Self::AddressMissing => "the pod address is missing from its network namespace",
            Self::NoNetwork => "containers run without a recorded pod network",
        })
    }
}

/// What the worker observed about one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub sandbox: Sandbox,
    /// By container name (init, sidecar and app containers share one namespace of names).
    pub containers: BTreeMap<String, ObservedContainer>,
    /// The node's addresses, for `hostIP`/`hostIPs`.
    pub host_ips: Vec<String>,
    /// The node's eviction manager ordered the pod evicted.
    pub eviction: Option<Eviction>,
    /// The node's crash-loop curve (`--max-container-restart-period`).
    pub crash_loop: super::restart::CrashLoopBackOff,
}

/// An eviction the node ordered (the kubelet's `TerminatePodAbnormally` with `Evict`): the
/// pod is killed with `grace`, its phase becomes `Failed` with reason `Evicted` and
/// `message`, with a `DisruptionTarget` condition when `disruption_condition`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    pub message: String,
    pub grace: Duration,
    pub disruption_condition: bool,
}

impl Observed {
    pub fn container(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers.get(name)
    }

    pub fn latest(&self, name: &str) -> Option<&Attempt> {
        self.container(name).and_then(ObservedContainer::latest)
    }

    pub fn any_running(&self) -> bool {
        self.containers
            .values()
            .flat_map(|c| &c.attempts)
            .any(Attempt::is_running)
    }
}

/// `spec.restartPolicy`, default `Always`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn of(spec: &PodSpec) -> Self {
        match spec.restart_policy.as_deref() {
            Some("OnFailure") => Self::OnFailure,
            Some("Never") => Self::Never,
            _ => Self::Always,
        }
    }
}

/// An ephemeral container as the container it runs as. What ephemeral containers may not have
/// (ports, probes, lifecycle hooks, resources; validation refuses them) is left out, so it can
/// never reach the runtime or a prober.
pub fn ephemeral_as_container(e: &EphemeralContainer) -> Container {
    Container {
        name: e.name.clone(),
        image: e.image.clone(),
        image_pull_policy: e.image_pull_policy.clone(),
        command: e.command.clone(),
        args: e.args.clone(),
        working_dir: e.working_dir.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        volume_mounts: e.volume_mounts.clone(),
        volume_devices: e.volume_devices.clone(),
        security_context: e.security_context.clone(),
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        tty: e.tty,
        termination_message_path: e.termination_message_path.clone(),
        termination_message_policy: e.termination_message_policy.clone(),
        ..Container::default()
    }
}

/// The pod's ephemeral containers, as containers, in spec order.
pub fn ephemeral_containers(spec: &PodSpec) -> Vec<Container> {
    spec.ephemeral_containers
        .iter()
        .flatten()
        .map(ephemeral_as_container)
        .collect()
}

/// An init container with `restartPolicy: Always` is a sidecar.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

pub fn kind_of_init(container: &Container) -> ContainerKind {
    if is_sidecar(container) {
        ContainerKind::Sidecar
    } else {
        ContainerKind::Init
    }
}

/// Set when the API server has recorded a deletion: when, and with what grace period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub at: Timestamp,
    pub grace: Duration,
}

/// The spec's `terminationGracePeriodSeconds`, default 30 s.
pub fn termination_grace(spec: &PodSpec) -> Duration {
    seconds(spec.termination_grace_period_seconds.unwrap_or(30))
}

/// The pod's deletion, if requested. The grace is `metadata.deletionGracePeriodSeconds` (the API
/// server only ever shortens it), else the spec's; a forced deletion (0) still gets the small
/// grace period the seed promises, the kubelet's 2 s minimum.
pub fn deletion(pod: &Pod) -> Option<Deletion> {
    let at = pod.metadata.deletion_timestamp.as_ref()?.0;
    let spec_grace = pod
        .spec
        .as_ref()
        .map_or(30, |s| s.termination_grace_period_seconds.unwrap_or(30));
    let grace = pod
        .metadata
        .deletion_grace_period_seconds
        .unwrap_or(spec_grace);
    Some(Deletion {
        at,
        grace: seconds(grace).max(MIN_GRACE),
    })
}

/// The shortest grace a container is ever given (kubelet's `minimumGracePeriodInSeconds`).
pub const MIN_GRACE: Duration = Duration::from_secs(2);

pub(crate) fn seconds(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// `t + d`, saturating at the end of time.
pub(crate) fn after(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// How long from `from` to `to`; zero when `to` is earlier.
pub(crate) fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

/// `now` cut to whole seconds, the precision the API stores.
pub(crate) fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// Builders for the planner's and the status generator's table tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use berth_api::k8s_openapi::api::core::v1::{PodStatus, Probe};
    use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    pub fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    /// A run that ended at `t(0)` with `code` and `reason`.
    pub fn exit(code: i32, reason: &str) -> Termination {
        Termination {
            exit_code: code,
            reason: reason.into(),
            signal: None,
            started_at: None,
            finished_at: t(0),
            message: String::new(),
        }
    }

    pub fn container(name: &str) -> Container {
        Container {
            name: name.into(),
            image: Some("busybox:1.28".into()),
            ..Container::default()
        }
    }

    /// Plain containers with these names, in order.
    pub fn containers(names: &[&str]) -> Vec<Container> {
        names.iter().copied().map(container).collect()
    }

    pub fn sidecar(name: &str) -> Container {
        Container {
            restart_policy: Some("Always".into()),
            ..container(name)
        }
    }

    pub fn probe() -> Option<Probe> {
        Some(Probe::default())
    }

    /// The metadata of a pod named `web`.
    pub fn web(namespace: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some("web".into()),
            namespace: Some(namespace.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        }
    }

    /// Pod `web` in `default` (uid `u1`) bound to this node, created at `t(0)`.
    pub fn pod(policy: &str, init: Vec<Container>, apps: Vec<Container>) -> Pod {
        Pod {
            metadata: web("default", "u1"),
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                init_containers: (!init.is_empty()).then_some(init),
                containers: apps,
                node_name: Some("node-a".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                start_time: Some(Time(t(0))),
                ..PodStatus::default()
            }),
        }
    }

    pub fn deleted(mut pod: Pod, grace: i64) -> Pod {
        pod.metadata.deletion_timestamp = Some(Time(t(100)));
        pod.metadata.deletion_grace_period_seconds = Some(grace);
        pod
    }

    fn attempt(name: &str, index: u32, state: State) -> Attempt {
        Attempt {
            id: ContainerId::new(format!("{name}-{index}")),
            restart_index: index,
            sandbox_attempt: 0,
            image: "docker.io/library/busybox:1.28".into(),
            image_id: "docker.io/library/busybox@sha256:abc".into(),
            spec_image: "busybox:1.28".into(),
            state,
            backoff: None,
            probes: ProbeResults::default(),
        }
    }

    pub fn running(name: &str, index: u32, since: i64) -> Attempt {
        attempt(
            name,
            index,
            State::Running {
                started_at: t(since),
            },
        )
    }

    pub fn created(name: &str, index: u32) -> Attempt {
        let state = State::Waiting {
            reason: String::new(),
            message: String::new(),
        };
        attempt(name, index, state)
    }

    pub fn exited(name: &str, index: u32, code: i32, finished: i64) -> Attempt {
        let reason = match code {
            0 => "Completed",
            137 => "OOMKilled",
            _ => "Error",
        };
        attempt(
            name,
            index,
            State::Terminated(Termination {
                exit_code: code,
                reason: reason.into(),
                signal: None,
                started_at: Some(t(finished - 1)),
                finished_at: t(finished),
                message: String::new(),
            }),
        )
    }

    /// An attempt whose task never started (a missing command), as the worker observes it.
    pub fn start_failed(name: &str, index: u32, at: i64) -> Attempt {
        attempt(
            name,
            index,
            State::Terminated(Termination {
                exit_code: START_ERROR_EXIT_CODE,
                reason: START_ERROR_REASON.into(),
                signal: None,
                started_at: None,
                finished_at: t(at),
                message: "exec: \"nope\": executable file not found in $PATH".into(),
            }),
        )
    }

    pub fn with_backoff(mut a: Attempt, delay: u64, since: i64) -> Attempt {
        a.backoff = Some(Backoff {
            delay: Duration::from_secs(delay),
            since: t(since),
        });
        a
    }

    pub fn with_probes(mut a: Attempt, probes: ProbeResults) -> Attempt {
        a.probes = probes;
        a
    }

    /// A ready sandbox (IP 10.42.0.5 on a node at 192.168.1.10) and the given attempts, with
    /// every named container's image already pulled.
    pub fn observed(attempts: Vec<Attempt>) -> Observed {
        let mut o = Observed {
            sandbox: Sandbox::Ready {
                attempt: 0,
                ips: vec!["10.42.0.5".into()],
            },
            host_ips: vec!["192.168.1.10".into()],
            ..Observed::default()
        };
        for a in attempts {
            let name =
                a.id.as_str()
                    .rsplit_once('-')
                    .map_or("", |(n, _)| n)
                    .to_string();
            o.containers.entry(name).or_default().attempts.push(a);
        }
        o
    }

    pub fn pulled(mut o: Observed, names: &[&str]) -> Observed {
        for n in names {
            o.containers.entry((*n).to_string()).or_default().image = ImagePull::Pulled;
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::fixtures::*;
    use super::*;

    #[test]
    fn container_ids_show_as_containerd_uris() {
        assert_eq!(ContainerId::new("abc").uri(), "containerd://abc");
    }

    #[test]
    fn latest_previous_and_per_sandbox_attempts_are_found_by_restart_index() {
        let mut in_new_sandbox = exited("app", 2, 1, 30);
        in_new_sandbox.sandbox_attempt = 1;
        let c = ObservedContainer {
            attempts: vec![
                exited("app", 1, 1, 20),
                in_new_sandbox,
                exited("app", 0, 1, 10),
            ],
            ..ObservedContainer::default()
        };
        assert_eq!(c.latest().map(|a| a.restart_index), Some(2));
        assert_eq!(c.previous().map(|a| a.restart_index), Some(1));
        assert_eq!(c.latest_in(0).map(|a| a.restart_index), Some(1));
        assert_eq!(c.latest_terminated().map(|(a, _)| a.restart_index), Some(2));
    }

    #[test]
    fn a_memory_kill_is_never_a_success() {
        let t = exit;
        assert!(t(0, "Completed").succeeded());
        assert!(!t(0, "OOMKilled").succeeded());
        assert!(!t(1, "Error").succeeded());
    }

    #[test]
    fn deletion_grace_comes_from_the_deletion_then_the_spec_and_is_at_least_two_seconds() {
        let live = pod("Always", vec![], vec![container("app")]);
        assert_eq!(deletion(&live), None);
        let grace = |p: &Pod| deletion(p).map(|d| d.grace.as_secs());
        assert_eq!(grace(&deleted(live.clone(), 12)), Some(12));
        assert_eq!(grace(&deleted(live.clone(), 0)), Some(2));
        let mut spec_only = live.clone();
        spec_only.metadata.deletion_timestamp = Some(Time(t(5)));
        assert_eq!(grace(&spec_only), Some(30));
        if let Some(spec) = spec_only.spec.as_mut() {
            spec.termination_grace_period_seconds = Some(45);
        }
        assert_eq!(grace(&spec_only), Some(45));
    }

    #[test]
    fn a_pull_failure_turns_into_image_pull_back_off_on_later_passes_of_its_window() {
        let failed = ImagePull::Failed {
            reason: PullFailure::ErrImagePull,
            message: "manifest unknown".into(),
            backoff: Backoff::initial(t(0)),
        };
        let shown = failed.clone().backing_off("nginx:nope", t(3));
        assert_eq!(
            shown,
            ImagePull::Failed {
                reason: PullFailure::ImagePullBackOff,
                message: "Back-off pulling image \"nginx:nope\"".into(),
                backoff: Backoff::initial(t(0)),
            }
        );
        assert_eq!(
            failed.clone().backing_off("nginx:nope", t(10)),
            failed,
            "retry due"
        );
        let never = ImagePull::Failed {
            reason: PullFailure::ErrImageNeverPull,
            message: "not present".into(),
            backoff: Backoff::initial(t(0)),
        };
        assert_eq!(never.clone().backing_off("x", t(1)), never);
    }
}
