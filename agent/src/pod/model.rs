//! What a pod worker observed about one pod on this node — sandbox, container attempts, probe
//! results, image pulls — as plain data, plus the few readings of the pod spec that the planner
//! and the status generator share.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use berth_shared::k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
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

/// The last failure to create or start a container (`CreateContainerConfigError`,
/// `CreateContainerError`, `RunContainerError`, …); cleared by the worker on a good start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartError {
    pub reason: String,
    pub message: String,
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
    /// Recorded but broken (for example its network namespace vanished with a reboot).
    NotReady { attempt: u32 },
}

/// What the worker observed about one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub sandbox: Sandbox,
    /// By container name (init, sidecar and app containers share one namespace of names).
    pub containers: BTreeMap<String, ObservedContainer>,
    /// The node's addresses, for `hostIP`/`hostIPs`.
    pub host_ips: Vec<String>,
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
