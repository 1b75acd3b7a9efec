//! Pod status generation (pure): phase, conditions and container statuses from the pod and
//! what the worker observed, following the kubelet's `generateAPIPodStatus` (v1.31) and the
//! Pod Lifecycle seed.
//!
//! Interpretations, where the seed and upstream differ or upstream needs memory we do not keep:
//! - "On deletion, the Pod automatically puts itself into an unready state" (seed): once
//!   `deletionTimestamp` is set every container reports `ready: false`.
//! - A pull failure shows the reason the worker recorded (`ErrImagePull` from the pass that
//!   tried, `ImagePullBackOff` afterwards; see `ImagePull`).

use std::collections::BTreeMap;

use berth_shared::k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use jiff::Timestamp;

use super::model::{
    Attempt, ContainerKind, ImagePull, Observed, ObservedContainer, RestartPolicy, Sandbox, State,
    after, is_sidecar, kind_of_init, seconds, whole_seconds,
};
use super::restart::{CrashLoop, crash_loop, go_duration, should_restart};

pub const PENDING: &str = "Pending";
pub const RUNNING: &str = "Running";
pub const SUCCEEDED: &str = "Succeeded";
pub const FAILED: &str = "Failed";

/// Conditions the kubelet owns; any other condition in the old status is kept as it is.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

pub fn is_terminal(phase: &str) -> bool {
    phase == SUCCEEDED || phase == FAILED
}

/// The status the worker should write for `pod` given what it observed at `now`.
pub fn pod_status(pod: &Pod, observed: &Observed, now: Timestamp) -> PodStatus {
    let old = pod.status.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_ref() else {
        return old;
    };
    let ctx = Ctx {
        pod,
        spec,
        observed,
        now,
        deleting: pod.metadata.deletion_timestamp.is_some(),
        policy: RestartPolicy::of(spec),
    };
    let old_init = by_name(old.init_container_statuses.as_deref());
    let old_app = by_name(old.container_statuses.as_deref());
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ctx.container_status(c, kind_of_init(c), old_init.get(c.name.as_str()).copied()))
        .collect();
    let mut app: Vec<_> = spec
        .containers
        .iter()
        .map(|c| ctx.container_status(c, ContainerKind::App, old_app.get(c.name.as_str()).copied()))
        .collect();
    // Upstream sorts app container statuses by name; init statuses keep spec order.
    app.sort_by(|a, b| a.name.cmp(&b.name));

    let start_time = old.start_time.clone().unwrap_or(Time(whole_seconds(now)));
    // All containers stopped after a deletion: the pod is done, whatever the policy says.
    let terminated_by_deletion = ctx.deleting && !observed.any_running();
    let mut phase = phase(spec, &init, &app, terminated_by_deletion).to_string();
    let old_phase = old.phase.clone().unwrap_or_default();
    if !is_terminal(&phase) && is_terminal(&old_phase) {
        phase = old_phase.clone();
    }
    let (mut reason, mut message) = (None, None);
    if phase == old_phase {
        (reason, message) = (old.reason.clone(), old.message.clone());
    }
    if !is_terminal(&old_phase) && deadline_passed(spec, &start_time, now) {
        phase = FAILED.into();
        reason = Some("DeadlineExceeded".into());
        message = Some("Pod was active on the node longer than the specified deadline".into());
    }
    if terminated_by_deletion {
        if !is_terminal(&phase) {
            phase = FAILED.into();
        }
        if has_initialized(spec, &init, &app) {
            app.iter_mut().for_each(mark_lost_unless_terminated);
        }
    }

    let all: Vec<&ContainerStatus> = init.iter().chain(&app).collect();
    let conditions = conditions(
        &ctx,
        old.conditions.as_deref().unwrap_or_default(),
        &all,
        &phase,
    );
    let pod_ips = pod_ips(&ctx).or(old.pod_ips.clone());
    let host_ips = (!observed.host_ips.is_empty()).then(|| {
        observed
            .host_ips
            .iter()
            .map(|ip| HostIP { ip: ip.clone() })
            .collect::<Vec<_>>()
    });
    PodStatus {
        phase: Some(phase),
        reason,
        message,
        conditions: Some(conditions),
        init_container_statuses: (!init.is_empty()).then_some(init),
        container_statuses: Some(app),
        start_time: Some(start_time),
        pod_ip: pod_ips
            .as_ref()
            .and_then(|ips| ips.first())
            .map(|ip| ip.ip.clone())
            .or(old.pod_ip.clone()),
        pod_ips,
        host_ip: host_ips
            .as_ref()
            .and_then(|ips| ips.first())
            .map(|ip| ip.ip.clone())
            .or(old.host_ip.clone()),
        host_ips: host_ips.or(old.host_ips.clone()),
        ..old
    }
}

/// The phase alone (what the planner needs), computed exactly as in [`pod_status`].
pub fn pod_phase(pod: &Pod, observed: &Observed, now: Timestamp) -> String {
    pod_status(pod, observed, now).phase.unwrap_or_default()
}

/// `spec.activeDeadlineSeconds` after `startTime`: the moment the pod is failed.
pub fn active_deadline(spec: &PodSpec, start_time: &Time) -> Option<Timestamp> {
    spec.active_deadline_seconds
        .map(|s| after(start_time.0, seconds(s)))
}

fn deadline_passed(spec: &PodSpec, start_time: &Time, now: Timestamp) -> bool {
    active_deadline(spec, start_time).is_some_and(|d| now >= d)
}

struct Ctx<'a> {
    pod: &'a Pod,
    spec: &'a PodSpec,
    observed: &'a Observed,
    now: Timestamp,
    deleting: bool,
    policy: RestartPolicy,
}

impl Ctx<'_> {
    fn container_status(
        &self,
        c: &Container,
        kind: ContainerKind,
        old: Option<&ContainerStatus>,
    ) -> ContainerStatus {
        let observed = self.observed.container(&c.name);
        let latest = observed.and_then(ObservedContainer::latest);
        let mut status = match (observed, latest) {
            (Some(o), Some(a)) => from_attempt(c, a, o.previous()),
            _ => self.default_status(c, old),
        };
        if let Some((reason, message)) = self.waiting_override(c, kind, observed, latest) {
            if status
                .state
                .as_ref()
                .is_some_and(|s| s.terminated.is_some())
            {
                status.last_state = status.state.take();
            }
            status.state = Some(waiting(reason, message));
        }
        self.set_readiness(c, kind, latest, &mut status);
        status
    }

    /// A container with no attempt on the node: waiting, or what the old status knew.
    fn default_status(&self, c: &Container, old: Option<&ContainerStatus>) -> ContainerStatus {
        let has_init = self
            .spec
            .init_containers
            .as_ref()
            .is_some_and(|i| !i.is_empty());
        let reason = if has_init {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        let mut status = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(reason.into(), String::new())),
            last_state: Some(ContainerState::default()),
            ..ContainerStatus::default()
        };
        let Some(old) = old else {
            return status;
        };
        if old.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
            return old.clone();
        }
        status.restart_count = old.restart_count;
        status.last_state = old.last_state.clone();
        let was_running = old.state.as_ref().is_some_and(|s| s.running.is_some());
        let knows_last_exit = status
            .last_state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some());
        if was_running && !knows_last_exit {
            // It ran and vanished: report it stopped rather than never started.
            status.last_state = Some(ContainerState {
                terminated: Some(lost_termination(
                    "The container could not be located when the pod was deleted.  \
                     The container used to be Running",
                )),
                ..ContainerState::default()
            });
            if !self.deleting {
                status.restart_count += 1;
            }
        }
        status
    }

    /// The waiting reason of a container that is due to (re)start but has not: crash-loop
    /// back-off, image pull failure, or the last start error.
    fn waiting_override(
        &self,
        c: &Container,
        kind: ContainerKind,
        observed: Option<&ObservedContainer>,
        latest: Option<&Attempt>,
    ) -> Option<(String, String)> {
        if self.deleting {
            return None;
        }
        let due = match latest.map(|a| &a.state) {
            None | Some(State::Waiting { .. }) => true,
            Some(State::Running { .. }) => false,
            Some(State::Terminated(t)) => should_restart(kind, self.policy, t),
        };
        let observed = observed.filter(|_| due)?;
        if let Some((attempt, exit)) = observed.latest_terminated()
            && let CrashLoop::BackOff { delay, .. } =
                crash_loop(attempt.backoff, exit.finished_at, self.now)
        {
            let meta = &self.pod.metadata;
            let message = format!(
                "back-off {} restarting failed container={} pod={}_{}({})",
                go_duration(delay),
                c.name,
                meta.name.as_deref().unwrap_or_default(),
                meta.namespace.as_deref().unwrap_or_default(),
                meta.uid.as_deref().unwrap_or_default(),
            );
            return Some(("CrashLoopBackOff".into(), message));
        }
        if let ImagePull::Failed {
            reason, message, ..
        } = &observed.image
        {
            return Some((reason.reason().into(), message.clone()));
        }
        observed
            .start_error
            .as_ref()
            .map(|e| (e.reason.clone(), e.message.clone()))
    }

    /// `started` and `ready`, as the kubelet's prober manager sets them.
    fn set_readiness(
        &self,
        c: &Container,
        kind: ContainerKind,
        latest: Option<&Attempt>,
        status: &mut ContainerStatus,
    ) {
        let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
        let probes = latest.map(|a| a.probes).unwrap_or_default();
        let started = running && (c.startup_probe.is_none() || probes.startup.is_success());
        status.started = Some(started);
        status.ready = match kind {
            ContainerKind::Init => status
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0),
            ContainerKind::Sidecar | ContainerKind::App => {
                started
                    && !self.deleting
                    && (c.readiness_probe.is_none() || probes.readiness.is_success())
            }
        };
    }
}

fn by_name(list: Option<&[ContainerStatus]>) -> BTreeMap<&str, &ContainerStatus> {
    list.unwrap_or_default()
        .iter()
        .map(|s| (s.name.as_str(), s))
        .collect()
}

fn from_attempt(c: &Container, a: &Attempt, previous: Option<&Attempt>) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: if a.image.is_empty() {
            c.image.clone().unwrap_or_default()
        } else {
            a.image.clone()
        },
        image_id: a.image_id.clone(),
        container_id: Some(a.id.uri()),
        restart_count: i32::try_from(a.restart_index).unwrap_or(i32::MAX),
        state: Some(api_state(a)),
        last_state: Some(previous.map(api_state).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

fn api_state(a: &Attempt) -> ContainerState {
    let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
    match &a.state {
        State::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: non_empty(reason),
                message: non_empty(message),
            }),
            ..ContainerState::default()
        },
        State::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started_at)),
            }),
            ..ContainerState::default()
        },
        State::Terminated(t) => ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(a.id.uri()),
                exit_code: t.exit_code,
                reason: non_empty(&t.reason),
                message: non_empty(&t.message),
                signal: t.signal,
                started_at: t.started_at.map(Time),
                finished_at: Some(Time(t.finished_at)),
            }),
            ..ContainerState::default()
        },
    }
}

fn waiting(reason: String, message: String) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason),
            message: (!message.is_empty()).then_some(message),
        }),
        ..ContainerState::default()
    }
}

fn lost_termination(message: &str) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: 137,
        reason: Some("ContainerStatusUnknown".into()),
        message: Some(message.into()),
        ..ContainerStateTerminated::default()
    }
}

/// At the end of a deleted pod's life a container still not terminated is reported lost.
fn mark_lost_unless_terminated(status: &mut ContainerStatus) {
    if status
        .state
        .as_ref()
        .is_some_and(|s| s.terminated.is_some())
    {
        return;
    }
    status.state = Some(ContainerState {
        terminated: Some(lost_termination(
            "The container could not be located when the pod was terminated",
        )),
        ..ContainerState::default()
    });
}

fn state_of(s: &ContainerStatus) -> ContainerState {
    s.state.clone().unwrap_or_default()
}

fn last_exit(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref())
}

/// Whether any app container has run (running or terminated): the pod initialized before.
fn any_regular_started(app: &[ContainerStatus]) -> bool {
    app.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    })
}

/// Whether the pod got past initialization at some point (status manager's `hasPodInitialized`).
fn has_initialized(spec: &PodSpec, init: &[ContainerStatus], app: &[ContainerStatus]) -> bool {
    let Some(last) = spec.init_containers.as_ref().and_then(|i| i.last()) else {
        return true;
    };
    let left_waiting = |s: &ContainerStatus| {
        last_exit(s).is_some() || s.state.as_ref().is_none_or(|st| st.waiting.is_none())
    };
    if app.iter().any(left_waiting) {
        return true;
    }
    let Some(s) = init.iter().find(|s| s.name == last.name) else {
        return false;
    };
    let st = state_of(s);
    if is_sidecar(last) {
        return st.running.is_some() && s.started == Some(true);
    }
    let completed = |t: Option<&ContainerStateTerminated>| {
        t.is_some_and(|t| t.reason.as_deref() == Some("Completed"))
    };
    completed(last_exit(s)) || completed(st.terminated.as_ref())
}

/// The kubelet's `getPhase`.
fn phase(
    spec: &PodSpec,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
    terminal: bool,
) -> &'static str {
    let find =
        |list: &'_ [ContainerStatus], name: &str| list.iter().find(|s| s.name == name).cloned();
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in spec.init_containers.iter().flatten() {
        let Some(s) = find(init, &c.name) else {
            if is_sidecar(c) {
                unknown += 1;
            } else {
                pending_init += 1;
            }
            continue;
        };
        let st = state_of(&s);
        if is_sidecar(c) {
            // Sidecars never count for completion; they only hold initialization back.
            if st.running.is_some() {
                if s.started != Some(true) {
                    pending_init += 1;
                }
                running += 1;
            } else if st.terminated.is_some() {
            } else if st.waiting.is_some() {
                if last_exit(&s).is_none() {
                    pending_init += 1;
                    waiting += 1;
                }
            } else {
                pending_init += 1;
                unknown += 1;
            }
        } else if let Some(t) = st.terminated.as_ref() {
            failed_init += i32::from(t.exit_code != 0);
        } else if st.waiting.is_some() && last_exit(&s).is_some() {
            failed_init += i32::from(last_exit(&s).is_some_and(|t| t.exit_code != 0));
        } else {
            pending_init += 1;
        }
    }
    for c in &spec.containers {
        let Some(s) = find(app, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = state_of(&s);
        if st.running.is_some() {
            running += 1;
        } else if let Some(t) = st.terminated.as_ref() {
            stopped += 1;
            succeeded += i32::from(t.exit_code == 0);
        } else if st.waiting.is_some() {
            if last_exit(&s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    let policy = RestartPolicy::of(spec);
    if failed_init > 0 && policy == RestartPolicy::Never {
        return FAILED;
    }
    if (pending_init > 0 && !any_regular_started(app)) || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        return match (terminal, policy, stopped == succeeded) {
            (true, _, true) => SUCCEEDED,
            (true, _, false) => FAILED,
            (false, RestartPolicy::Always, _) => RUNNING,
            (false, _, true) => SUCCEEDED,
            (false, RestartPolicy::Never, false) => FAILED,
            (false, RestartPolicy::OnFailure, false) => RUNNING,
        };
    }
    PENDING
}

fn pod_ips(ctx: &Ctx<'_>) -> Option<Vec<PodIP>> {
    let host_network = ctx.spec.host_network == Some(true);
    let ips = match &ctx.observed.sandbox {
        Sandbox::Ready { ips, .. } if !ips.is_empty() => ips,
        _ if host_network && !ctx.observed.host_ips.is_empty() => &ctx.observed.host_ips,
        _ => return None,
    };
    Some(ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect())
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.map(Into::into),
        message,
        ..PodCondition::default()
    }
}

/// Go prints a `[]string` as `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn conditions(
    ctx: &Ctx<'_>,
    old: &[PodCondition],
    all: &[&ContainerStatus],
    phase: &str,
) -> Vec<PodCondition> {
    let mut out: Vec<PodCondition> = old
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    let sandbox_ready = matches!(ctx.observed.sandbox, Sandbox::Ready { .. });
    let containers_ready = containers_ready(ctx.spec, all, phase);
    let ready = pod_ready(ctx.spec, &out, &containers_ready);
    let generated = [
        condition("PodReadyToStartContainers", sandbox_ready, None, None),
        initialized(ctx.spec, all, phase),
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ];
    let now = Time(whole_seconds(ctx.now));
    for mut c in generated {
        let previous = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status);
        c.last_transition_time = Some(
            previous
                .and_then(|o| o.last_transition_time.clone())
                .unwrap_or_else(|| now.clone()),
        );
        out.push(c);
    }
    out
}

fn find<'a>(all: &[&'a ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    all.iter().copied().find(|s| s.name == name)
}

fn containers_ready(spec: &PodSpec, all: &[&ContainerStatus], phase: &str) -> PodCondition {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    let (mut unknown, mut unready) = (Vec::new(), Vec::new());
    for c in sidecars.chain(&spec.containers) {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    const TYPE: &str = "ContainersReady";
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition(TYPE, false, Some("PodCompleted"), None);
    }
    if phase == FAILED {
        return condition(TYPE, false, Some("PodFailed"), None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(
            TYPE,
            false,
            Some("ContainersNotReady"),
            Some(messages.join(", ")),
        )
    }
}

fn pod_ready(
    spec: &PodSpec,
    conditions: &[PodCondition],
    containers_ready: &PodCondition,
) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: "Ready".into(),
            ..containers_ready.clone()
        };
    }
    let mut messages = Vec::new();
    for gate in spec.readiness_gates.iter().flatten() {
        let name = &gate.condition_type;
        match conditions.iter().find(|c| &c.type_ == name) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate \"{name}\" does not exist."
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate \"{name}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(messages.join(", ")),
        )
    }
}

fn initialized(spec: &PodSpec, all: &[&ContainerStatus], phase: &str) -> PodCondition {
    let (mut unknown, mut incomplete) = (Vec::new(), Vec::new());
    for c in spec.init_containers.iter().flatten() {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if is_sidecar(c) && s.started != Some(true) => incomplete.push(c.name.as_str()),
            Some(s) if !is_sidecar(c) && !s.ready => incomplete.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    const TYPE: &str = "Initialized";
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition(TYPE, true, Some("PodCompleted"), None);
    }
    let app: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .filter_map(|c| find(all, &c.name).cloned())
        .collect();
    if any_regular_started(&app) {
        return condition(TYPE, true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(
            TYPE,
            false,
            Some("ContainersNotInitialized"),
            Some(messages.join(", ")),
        )
    }
}
