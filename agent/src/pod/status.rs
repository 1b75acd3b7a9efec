//! Pod status generation (pure): phase, conditions and container statuses from the pod and
//! what the worker observed, following the kubelet's `generateAPIPodStatus` (v1.31) and the
//! Pod Lifecycle seed.
//!
//! Planner: pure, no I/O.
//!
//! Interpretations, where the seed and upstream differ or upstream needs memory we do not keep:
//! - "On deletion, the Pod automatically puts itself into an unready state" (seed): once
//!   `deletionTimestamp` is set every container reports `ready: false`.
//! - A pull failure shows the reason the worker recorded (`ErrImagePull` from the pass that
//!   tried, `ImagePullBackOff` afterwards; see `ImagePull`).

use std::collections::BTreeMap;

use berth_api::k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use jiff::Timestamp;

use super::model::{
    Attempt, ContainerKind, ImagePull, Observed, ObservedContainer, RestartPolicy, Sandbox, State,
    after, ephemeral_containers, kind_of_init, seconds, whole_seconds,
};
use super::restart::{CrashLoop, crash_loop, go_duration, should_restart};

mod backoff;
mod conditions;
mod phase;

pub use backoff::{BackOffEvent, backoff_events};

use conditions::conditions;
use phase::{has_initialized, phase};

pub const PENDING: &str = "Pending";
pub const RUNNING: &str = "Running";
pub const SUCCEEDED: &str = "Succeeded";
pub const FAILED: &str = "Failed";
/// The reason of a pod the node evicted.
pub const EVICTED: &str = "Evicted";

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
    // Ephemeral containers are reported beside the others but count for neither the phase
    // nor the conditions.
    let old_ephemeral = by_name(old.ephemeral_container_statuses.as_deref());
    let ephemeral: Vec<_> = ephemeral_containers(spec)
        .iter()
        .map(|c| {
            let old = old_ephemeral.get(c.name.as_str()).copied();
            ctx.container_status(c, ContainerKind::Ephemeral, old)
        })
        .collect();

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
    // The kubelet's eviction: Failed with reason Evicted, unless the pod had already finished.
    let evicted = observed
        .eviction
        .as_ref()
        .filter(|_| !is_terminal(&old_phase));
    if let Some(e) = evicted {
        phase = FAILED.into();
        reason = Some(EVICTED.into());
        message = Some(e.message.clone());
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
    let mut conditions = conditions(
        &ctx,
        old.conditions.as_deref().unwrap_or_default(),
        &all,
        &phase,
    );
    if let Some(e) = evicted.filter(|e| e.disruption_condition)
        && !conditions.iter().any(|c| c.type_ == "DisruptionTarget")
    {
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("TerminationByKubelet".into()),
            message: Some(e.message.clone()),
            last_transition_time: Some(Time(whole_seconds(now))),
            ..PodCondition::default()
        });
    }
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
        ephemeral_container_statuses: (!ephemeral.is_empty()).then_some(ephemeral),
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
            Some(State::Terminated(t)) => {
                should_restart(kind, self.policy, t)
                    || (kind == ContainerKind::App && latest.is_some_and(|a| a.outdated(c)))
            }
        };
        let observed = observed.filter(|_| due)?;
        if let Some((attempt, exit)) = observed.latest_terminated()
            && let CrashLoop::BackOff { delay, .. } = crash_loop(
                attempt.backoff,
                exit.finished_at,
                self.now,
                self.observed.crash_loop,
            )
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
            ContainerKind::Ephemeral => false,
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

fn pod_ips(ctx: &Ctx<'_>) -> Option<Vec<PodIP>> {
    let host_network = ctx.spec.host_network == Some(true);
    let ips = match &ctx.observed.sandbox {
        Sandbox::Ready { ips, .. } if !ips.is_empty() => ips,
        _ if host_network && !ctx.observed.host_ips.is_empty() => &ctx.observed.host_ips,
        _ => return None,
    };
    Some(ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect())
}

#[cfg(test)]
mod tests {
    use berth_api::k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate, PodSpec};

    use super::super::model::fixtures::*;
    use super::super::model::{ProbeResults, PullFailure, StartError};
    use super::super::restart::Backoff;
    use super::*;
    use crate::probe::policy::ProbeResult::{Success, Unknown};

    const NOW: i64 = 1000;

    fn status(pod: &Pod, o: &Observed) -> PodStatus {
        pod_status(pod, o, t(NOW))
    }

    fn cond<'a>(s: &'a PodStatus, type_: &str) -> &'a PodCondition {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} condition in {:?}", s.conditions))
    }

    /// `(status, reason, message)` of a condition, for compact assertions.
    fn summary<'a>(s: &'a PodStatus, type_: &str) -> (&'a str, Option<&'a str>, Option<&'a str>) {
        let c = cond(s, type_);
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref())
    }

    fn app<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no status for {name}"))
    }

    fn waiting_reason<'a>(s: &'a PodStatus, name: &str) -> Option<&'a str> {
        app(s, name)
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .reason
            .as_deref()
    }

    /// The status of a pod whose `app` failed twice and waits out a 20 s back-off.
    fn crash_looping_app() -> PodStatus {
        let pod = pod("Always", vec![], vec![container("app")]);
        let crashed = with_backoff(exited("app", 1, 1, NOW - 5), 20, NOW - 30);
        let failed = exited("app", 0, 1, NOW - 40);
        status(&pod, &observed(vec![failed, crashed]))
    }

    fn readiness(ready: bool) -> ProbeResults {
        ProbeResults {
            readiness: if ready { Success } else { Unknown },
            ..ProbeResults::default()
        }
    }

    // --- phase ---------------------------------------------------------------------------

    #[test]
    fn phase_follows_restart_policy_and_exit_codes() {
        let cases = [
            // policy, app exit code (None = running), phase
            ("Always", None, RUNNING),
            ("Always", Some(0), RUNNING),
            ("Always", Some(1), RUNNING),
            ("OnFailure", Some(0), SUCCEEDED),
            ("OnFailure", Some(1), RUNNING),
            ("Never", Some(0), SUCCEEDED),
            ("Never", Some(1), FAILED),
            ("Never", Some(137), FAILED),
        ];
        for (policy, code, want) in cases {
            let pod = pod(policy, vec![], vec![container("app")]);
            let attempt = match code {
                None => running("app", 0, 1),
                Some(code) => exited("app", 0, code, 5),
            };
            let got = status(&pod, &observed(vec![attempt]));
            assert_eq!(got.phase.as_deref(), Some(want), "{policy} {code:?}");
        }
    }

    #[test]
    fn phase_is_succeeded_only_when_every_app_container_succeeded() {
        let pod = pod("Never", vec![], containers(&["a", "b"]));
        let s = status(
            &pod,
            &observed(vec![exited("a", 0, 0, 5), exited("b", 0, 2, 6)]),
        );
        assert_eq!(s.phase.as_deref(), Some(FAILED));
        let s = status(
            &pod,
            &observed(vec![exited("a", 0, 0, 5), running("b", 0, 6)]),
        );
        assert_eq!(s.phase.as_deref(), Some(RUNNING));
    }

    #[test]
    fn a_pod_is_pending_until_its_containers_were_created() {
        let pod = pod("Always", vec![], containers(&["a", "b"]));
        let s = status(&pod, &observed(vec![running("a", 0, 5)]));
        assert_eq!(s.phase.as_deref(), Some(PENDING));
        assert_eq!(waiting_reason(&s, "b"), Some("ContainerCreating"));
    }

    #[test]
    fn a_crash_looping_container_keeps_the_pod_running() {
        let s = crash_looping_app();
        assert_eq!(s.phase.as_deref(), Some(RUNNING));
    }

    #[test]
    fn a_failed_init_container_fails_the_pod_only_under_never() {
        for (policy, want) in [
            ("Never", FAILED),
            ("OnFailure", PENDING),
            ("Always", PENDING),
        ] {
            let pod = pod(policy, vec![container("init")], vec![container("app")]);
            let s = status(&pod, &observed(vec![exited("init", 0, 1, 5)]));
            assert_eq!(s.phase.as_deref(), Some(want), "{policy}");
        }
    }

    #[test]
    fn sidecars_do_not_count_for_completion() {
        let pod = pod("Never", vec![sidecar("log")], vec![container("app")]);
        let running_sidecar = observed(vec![running("log", 0, 1), exited("app", 0, 0, 50)]);
        assert_eq!(
            status(&pod, &running_sidecar).phase.as_deref(),
            Some(RUNNING)
        );
        let stopped = observed(vec![exited("log", 0, 143, 60), exited("app", 0, 0, 50)]);
        assert_eq!(status(&pod, &stopped).phase.as_deref(), Some(SUCCEEDED));
    }

    #[test]
    fn a_terminal_phase_is_never_left() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.status.get_or_insert_default().phase = Some(FAILED.into());
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert_eq!(s.phase.as_deref(), Some(FAILED));
    }

    #[test]
    fn an_evicted_pod_fails_with_the_evictions_reason_message_and_condition() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let eviction = |condition| crate::pod::model::Eviction {
            message: "The node was low on resource: memory. ".into(),
            grace: std::time::Duration::from_secs(1),
            disruption_condition: condition,
        };
        let mut o = observed(vec![running("app", 0, 1)]);
        o.eviction = Some(eviction(true));
        let s = status(&pod, &o);
        assert_eq!(s.phase.as_deref(), Some(FAILED));
        assert_eq!(s.reason.as_deref(), Some(EVICTED));
        assert_eq!(
            s.message.as_deref(),
            Some("The node was low on resource: memory. ")
        );
        let c = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "DisruptionTarget");
        let c = c.expect("a DisruptionTarget condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some("TerminationByKubelet"))
        );
        o.eviction = Some(eviction(false));
        let s = status(&pod, &o);
        assert!(
            !s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "DisruptionTarget")
        );
        let mut done = pod.clone();
        done.status.get_or_insert_default().phase = Some(SUCCEEDED.into());
        let s = status(&done, &o);
        assert_eq!(
            (s.phase.as_deref(), s.reason.as_deref()),
            (Some(SUCCEEDED), None),
            "a pod that had finished stays so"
        );
    }

    #[test]
    fn the_active_deadline_fails_the_pod_with_deadline_exceeded() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.spec.get_or_insert_default().active_deadline_seconds = Some(NOW);
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert_eq!(s.phase.as_deref(), Some(FAILED));
        assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod was active on the node longer than the specified deadline")
        );
    }

    #[test]
    fn a_deleted_pod_reaches_a_terminal_phase_once_its_containers_stopped() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 30);
        let still_running = observed(vec![running("app", 0, 1)]);
        assert_eq!(status(&pod, &still_running).phase.as_deref(), Some(RUNNING));
        let clean = observed(vec![exited("app", 0, 0, 110)]);
        assert_eq!(status(&pod, &clean).phase.as_deref(), Some(SUCCEEDED));
        let killed = observed(vec![exited("app", 0, 137, 110)]);
        assert_eq!(status(&pod, &killed).phase.as_deref(), Some(FAILED));
    }

    #[test]
    fn a_pod_deleted_before_its_containers_ran_ends_failed_with_unknown_containers() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 30);
        let s = status(&pod, &observed(vec![]));
        assert_eq!(s.phase.as_deref(), Some(FAILED));
        let terminated = app(&s, "app")
            .state
            .as_ref()
            .and_then(|st| st.terminated.clone());
        let t = terminated.expect("terminated");
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (137, Some("ContainerStatusUnknown"))
        );
    }

    // --- conditions ----------------------------------------------------------------------

    #[test]
    fn an_initializing_pod_reports_its_incomplete_and_unready_containers() {
        let pod = pod(
            "Always",
            containers(&["init-a", "init-b"]),
            vec![container("app")],
        );
        let s = status(&pod, &observed(vec![running("init-a", 0, 5)]));
        assert_eq!(s.phase.as_deref(), Some(PENDING));
        assert_eq!(
            summary(&s, "Initialized"),
            (
                "False",
                Some("ContainersNotInitialized"),
                Some("containers with incomplete status: [init-a init-b]")
            )
        );
        assert_eq!(
            summary(&s, "Ready"),
            (
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [app]")
            )
        );
        assert_eq!(summary(&s, "ContainersReady"), summary(&s, "Ready"));
        assert_eq!(waiting_reason(&s, "app"), Some("PodInitializing"));
        assert_eq!(waiting_reason(&s, "init-b"), Some("PodInitializing"));
    }

    #[test]
    fn a_running_pod_with_ready_containers_is_ready() {
        let pod = pod("Always", vec![container("init")], vec![container("app")]);
        let s = status(
            &pod,
            &observed(vec![exited("init", 0, 0, 2), running("app", 0, 3)]),
        );
        let conditions = s.conditions.as_deref().unwrap_or_default();
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            vec![
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled"
            ]
        );
        assert!(
            s.conditions.iter().flatten().all(|c| c.status == "True"),
            "{:?}",
            s.conditions
        );
        assert!(app(&s, "init").ready, "a succeeded init container is ready");
    }

    #[test]
    fn readiness_follows_the_readiness_probe() {
        let mut c = container("app");
        c.readiness_probe = probe();
        let pod = pod("Always", vec![], vec![c]);
        let not_yet = observed(vec![with_probes(running("app", 0, 1), readiness(false))]);
        let s = status(&pod, &not_yet);
        assert!(!app(&s, "app").ready);
        assert_eq!(app(&s, "app").started, Some(true));
        assert_eq!(summary(&s, "Ready").0, "False");
        let ready = observed(vec![with_probes(running("app", 0, 1), readiness(true))]);
        assert_eq!(summary(&status(&pod, &ready), "Ready").0, "True");
    }

    #[test]
    fn a_container_is_not_started_until_its_startup_probe_succeeds() {
        let mut c = container("app");
        c.startup_probe = probe();
        let pod = pod("Always", vec![], vec![c]);
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert_eq!(
            (app(&s, "app").started, app(&s, "app").ready),
            (Some(false), false)
        );
        let up = ProbeResults {
            startup: Success,
            ..ProbeResults::default()
        };
        let s = status(&pod, &observed(vec![with_probes(running("app", 0, 1), up)]));
        assert_eq!(
            (app(&s, "app").started, app(&s, "app").ready),
            (Some(true), true)
        );
    }

    #[test]
    fn a_sidecar_counts_for_readiness_and_its_start_for_initialization() {
        let mut log = sidecar("log");
        log.startup_probe = probe();
        let pod = pod("Always", vec![log], vec![container("app")]);
        let s = status(&pod, &observed(vec![running("log", 0, 1)]));
        assert_eq!(s.phase.as_deref(), Some(PENDING));
        assert_eq!(
            summary(&s, "Initialized").2,
            Some("containers with incomplete status: [log]")
        );
        assert_eq!(
            summary(&s, "ContainersReady").2,
            Some("containers with unready status: [log app]")
        );
    }

    #[test]
    fn readiness_gates_hold_ready_but_not_containers_ready() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.spec.get_or_insert_default().readiness_gates = Some(vec![
            PodReadinessGate {
                condition_type: "example.com/lb".into(),
            },
            PodReadinessGate {
                condition_type: "example.com/dns".into(),
            },
        ]);
        pod.status.get_or_insert_default().conditions = Some(vec![PodCondition {
            type_: "example.com/dns".into(),
            status: "False".into(),
            ..PodCondition::default()
        }]);
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert_eq!(summary(&s, "ContainersReady").0, "True");
        assert_eq!(
            summary(&s, "Ready"),
            (
                "False",
                Some("ReadinessGatesNotReady"),
                Some(
                    "corresponding condition of pod readiness gate \"example.com/lb\" does not exist., \
                     the status of pod readiness gate \"example.com/dns\" is not \"True\", but False"
                )
            )
        );
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].type_,
            "example.com/dns",
            "kept first"
        );
    }

    #[test]
    fn a_succeeded_pod_reports_pod_completed() {
        let pod = pod("Never", vec![container("init")], vec![container("app")]);
        let s = status(
            &pod,
            &observed(vec![exited("init", 0, 0, 2), exited("app", 0, 0, 9)]),
        );
        assert_eq!(summary(&s, "Ready"), ("False", Some("PodCompleted"), None));
        assert_eq!(
            summary(&s, "ContainersReady"),
            ("False", Some("PodCompleted"), None)
        );
        assert_eq!(
            summary(&s, "Initialized"),
            ("True", Some("PodCompleted"), None)
        );
    }

    #[test]
    fn a_failed_pod_reports_pod_failed() {
        let pod = pod("Never", vec![], vec![container("app")]);
        let s = status(&pod, &observed(vec![exited("app", 0, 1, 9)]));
        assert_eq!(summary(&s, "Ready"), ("False", Some("PodFailed"), None));
    }

    #[test]
    fn ready_to_start_containers_follows_the_sandbox() {
        let pod = pod("Always", vec![], vec![container("app")]);
        assert_eq!(
            summary(
                &status(&pod, &Observed::default()),
                "PodReadyToStartContainers"
            )
            .0,
            "False"
        );
        assert_eq!(
            summary(
                &status(&pod, &observed(vec![])),
                "PodReadyToStartContainers"
            )
            .0,
            "True"
        );
    }

    #[test]
    fn transition_times_are_kept_while_a_condition_keeps_its_status() {
        let pod0 = pod("Always", vec![], vec![container("app")]);
        let first = pod_status(&pod0, &observed(vec![running("app", 0, 1)]), t(100));
        let mut pod1 = pod0.clone();
        pod1.status = Some(first);
        let same = pod_status(&pod1, &observed(vec![running("app", 0, 1)]), t(200));
        assert_eq!(
            cond(&same, "Ready").last_transition_time,
            Some(Time(t(100)))
        );
        let crashed = with_backoff(exited("app", 0, 1, 199), 10, 150);
        let changed = pod_status(&pod1, &observed(vec![crashed]), t(200));
        assert_eq!(
            cond(&changed, "Ready").last_transition_time,
            Some(Time(t(200)))
        );
        assert_eq!(
            cond(&changed, "PodScheduled").last_transition_time,
            Some(Time(t(100)))
        );
    }

    #[test]
    fn a_deleted_pod_is_unready_whatever_its_probes_say() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 30);
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert!(!app(&s, "app").ready);
        assert_eq!(summary(&s, "Ready").0, "False");
    }

    // --- container statuses ----------------------------------------------------------------

    #[test]
    fn a_container_status_names_its_runtime_container_and_image() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let s = status(
            &pod,
            &observed(vec![exited("app", 0, 1, 5), running("app", 1, 6)]),
        );
        let c = app(&s, "app");
        assert_eq!(c.container_id.as_deref(), Some("containerd://app-1"));
        assert_eq!(c.image, "docker.io/library/busybox:1.28");
        assert_eq!(c.image_id, "docker.io/library/busybox@sha256:abc");
        assert_eq!(c.restart_count, 1);
        let last = c
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .unwrap();
        assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
        assert_eq!(last.container_id.as_deref(), Some("containerd://app-0"));
        assert!(c.state.as_ref().unwrap().running.is_some());
    }

    #[test]
    fn a_container_in_back_off_waits_with_crash_loop_back_off() {
        let s = crash_looping_app();
        let c = app(&s, "app");
        let waiting = c.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(
            waiting.message.as_deref(),
            Some("back-off 20s restarting failed container=app pod=web_default(u1)")
        );
        let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(last.container_id.as_deref(), Some("containerd://app-1"));
        assert_eq!(c.restart_count, 1);
        assert!(!c.ready);
    }

    #[test]
    fn an_exited_container_past_its_back_off_shows_its_termination() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let crashed = with_backoff(exited("app", 1, 1, NOW - 50), 20, NOW - 80);
        let s = status(&pod, &observed(vec![crashed]));
        assert!(app(&s, "app").state.as_ref().unwrap().terminated.is_some());
    }

    #[test]
    fn a_container_that_will_not_restart_stays_terminated() {
        let pod = pod("Never", vec![], containers(&["app", "b"]));
        let crashed = with_backoff(exited("app", 0, 1, NOW - 5), 10, NOW - 30);
        let s = status(&pod, &observed(vec![crashed, running("b", 0, 1)]));
        assert!(app(&s, "app").state.as_ref().unwrap().terminated.is_some());
    }

    #[test]
    fn image_pull_failures_show_as_the_waiting_reason() {
        let pod = pod("Always", vec![], vec![container("app")]);
        for reason in [
            PullFailure::ErrImagePull,
            PullFailure::ImagePullBackOff,
            PullFailure::ErrImageNeverPull,
            PullFailure::InvalidImageName,
        ] {
            let mut o = observed(vec![]);
            o.containers.entry("app".into()).or_default().image = ImagePull::Failed {
                reason,
                message: "Back-off pulling image \"busybox:1.28\"".into(),
                backoff: Backoff::initial(t(NOW)),
            };
            let s = status(&pod, &o);
            assert_eq!(waiting_reason(&s, "app"), Some(reason.reason()));
            assert_eq!(s.phase.as_deref(), Some(PENDING));
        }
    }

    #[test]
    fn a_task_that_never_started_shows_run_container_error_then_crash_loop_back_off() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let run_error = |at: i64, backoff| StartError {
            reason: "RunContainerError".into(),
            message: "exec: \"nope\": executable file not found in $PATH".into(),
            at: t(at),
            backoff,
        };
        // The pass that failed the first start: its start error shows.
        let mut first = observed(vec![start_failed("app", 0, NOW)]);
        first.containers.get_mut("app").unwrap().start_error = Some(run_error(NOW, None));
        let s = status(&pod, &first);
        assert_eq!(waiting_reason(&s, "app"), Some("RunContainerError"));
        // The second failure opened the window: CrashLoopBackOff, the failure as lastState.
        let second = with_backoff(start_failed("app", 1, NOW - 1), 10, NOW - 1);
        let mut o = observed(vec![start_failed("app", 0, NOW - 2), second]);
        let backoff = Some(Backoff::initial(t(NOW - 1)));
        o.containers.get_mut("app").unwrap().start_error = Some(run_error(NOW - 1, backoff));
        let s = status(&pod, &o);
        assert_eq!(waiting_reason(&s, "app"), Some("CrashLoopBackOff"));
        let c = app(&s, "app");
        let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (last.exit_code, last.reason.as_deref()),
            (128, Some("StartError"))
        );
        assert_eq!(c.restart_count, 1);
    }

    #[test]
    fn a_start_error_shows_as_the_waiting_reason() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let mut o = observed(vec![]);
        o.containers.entry("app".into()).or_default().start_error = Some(StartError {
            reason: "CreateContainerConfigError".into(),
            message: "configmap \"cfg\" not found".into(),
            at: t(NOW),
            backoff: None,
        });
        assert_eq!(
            waiting_reason(&status(&pod, &o), "app"),
            Some("CreateContainerConfigError")
        );
    }

    #[test]
    fn app_statuses_are_sorted_by_name_and_init_statuses_keep_spec_order() {
        let pod = pod(
            "Always",
            containers(&["z-init", "a-init"]),
            containers(&["web", "api"]),
        );
        let s = status(&pod, &observed(vec![]));
        let names = |l: &Option<Vec<ContainerStatus>>| -> Vec<String> {
            l.iter().flatten().map(|c| c.name.clone()).collect()
        };
        assert_eq!(names(&s.container_statuses), vec!["api", "web"]);
        assert_eq!(names(&s.init_container_statuses), vec!["z-init", "a-init"]);
        assert_eq!(
            app(&s, "web").image,
            "busybox:1.28",
            "the spec's image before a run"
        );
    }

    #[test]
    fn a_container_that_vanished_while_running_is_reported_stopped() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.status.get_or_insert_default().container_statuses = Some(vec![ContainerStatus {
            name: "app".into(),
            restart_count: 2,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        let s = status(&pod, &observed(vec![]));
        let c = app(&s, "app");
        assert_eq!(c.restart_count, 3);
        let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (last.exit_code, last.reason.as_deref()),
            (137, Some("ContainerStatusUnknown"))
        );
        assert_eq!(s.phase.as_deref(), Some(RUNNING), "stopped, not pending");
    }

    // --- addresses and kept fields ---------------------------------------------------------

    #[test]
    fn addresses_come_from_the_sandbox_and_the_node_and_outlive_the_sandbox() {
        let mut pod = pod("Never", vec![], vec![container("app")]);
        pod.status.get_or_insert_default().qos_class = Some("BestEffort".into());
        let s = status(&pod, &observed(vec![running("app", 0, 1)]));
        assert_eq!(s.pod_ip.as_deref(), Some("10.42.0.5"));
        assert_eq!(
            s.pod_ips,
            Some(vec![PodIP {
                ip: "10.42.0.5".into()
            }])
        );
        assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
        assert_eq!(
            s.host_ips,
            Some(vec![HostIP {
                ip: "192.168.1.10".into()
            }])
        );
        assert_eq!(s.start_time, Some(Time(t(0))), "kept");
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"), "kept");
        pod.status = Some(s);
        let after_teardown = Observed {
            sandbox: Sandbox::Absent,
            ..observed(vec![exited("app", 0, 0, 9)])
        };
        assert_eq!(
            status(&pod, &after_teardown).pod_ip.as_deref(),
            Some("10.42.0.5")
        );
    }

    #[test]
    fn a_host_network_pod_has_the_node_addresses() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.spec.get_or_insert_default().host_network = Some(true);
        let o = Observed {
            sandbox: Sandbox::Ready {
                attempt: 0,
                ips: vec![],
            },
            ..observed(vec![running("app", 0, 1)])
        };
        assert_eq!(status(&pod, &o).pod_ip.as_deref(), Some("192.168.1.10"));
    }

    #[test]
    fn start_time_is_set_on_first_sight() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        pod.status = None;
        let s = status(&pod, &Observed::default());
        assert_eq!(s.start_time, Some(Time(t(NOW))));
        assert_eq!(s.phase.as_deref(), Some(PENDING));
    }

    #[test]
    fn a_pod_without_spec_keeps_its_status() {
        let mut pod = pod("Always", vec![], vec![]);
        pod.spec = None::<PodSpec>;
        assert_eq!(
            status(&pod, &Observed::default()),
            pod.status.clone().unwrap()
        );
    }
}
