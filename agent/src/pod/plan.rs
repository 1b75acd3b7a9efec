//! The pod worker's decision core (pure): from the pod and what the worker observed, the next
//! safe step — the kubelet's `computePodActions` (v1.31, sidecars on) without side effects.
//!
//! Each pass returns the actions to apply in order, ending with `ReportStatus` (write
//! [`pod_status`](super::status::pod_status) for the same observation). Kills and starts never
//! share a pass: a container killed for a failed probe is restarted by a later pass, through
//! the same restart rules and back-off as any exited container. The worker re-observes and
//! plans again after applying, and at the latest at the `WaitUntil` time.
//!
//! The order of a pod's life:
//! 1. sandbox (`CreateSandbox`; a broken one is killed and torn down first);
//! 2. init containers one at a time in spec order, each to success before the next; sidecars
//!    (init containers with `restartPolicy: Always`) started in order, the next init container
//!    starting once the sidecar has started (its startup probe, if any, succeeded);
//! 3. app containers, all at once, after initialization;
//! 4. restarts per the rules in [`restart`](super::restart), probe-failure kills;
//! 5. completion: when no app container runs or will run again, the sidecars are stopped
//!    (`KillPod`), the phase becomes terminal and the sandbox is torn down;
//! 6. deletion: `KillPod` with the deletion's grace period, then `ReportStatus`, removal of the
//!    containers, `TeardownSandbox` and `DeletePod` (the API object, grace 0).

use std::time::Duration;

use berth_shared::k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec};
use jiff::Timestamp;

use super::model::{
    Attempt, ContainerId, ContainerKind, ImagePull, MIN_GRACE, Observed, ObservedContainer,
    RestartPolicy, Sandbox, State, deletion, is_sidecar, kind_of_init, seconds, termination_grace,
};
use super::restart::{Backoff, CrashLoop, crash_loop, should_restart};
use super::status::{active_deadline, is_terminal, pod_status};
use crate::probe::policy::ProbeResult;

/// The steps of one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPlan {
    pub actions: Vec<Action>,
}

/// One step for the worker to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Set up the sandbox (network namespace + CNI, or host network) as generation `attempt`.
    CreateSandbox { attempt: u32 },
    /// Make the container's image present, applying its `imagePullPolicy`.
    PullImage { container: String },
    /// Create and start the container (then its postStart hook). The new attempt records
    /// `restart_index` and `backoff` (as labels) for later passes.
    StartContainer {
        name: String,
        kind: ContainerKind,
        restart_index: u32,
        backoff: Option<Backoff>,
    },
    /// Stop one container: preStop hook (if `pre_stop`), then SIGTERM (or the image's
    /// STOPSIGNAL), SIGKILL once `grace` has passed since the kill began (plus a one-off 2 s if
    /// the preStop hook overran). `message` is the `Killing` event's.
    KillContainer {
        name: String,
        id: ContainerId,
        reason: KillReason,
        message: String,
        grace: Duration,
        pre_stop: bool,
    },
    /// Remove an old, stopped attempt from the runtime.
    RemoveContainer { id: ContainerId },
    /// Stop every running container of the pod with one `grace` budget: the `apps` together
    /// first (each with its preStop hook), then the `sidecars` one after another in the order
    /// given (reverse spec order).
    KillPod {
        reason: PodKillReason,
        grace: Duration,
        apps: Vec<KillTarget>,
        sidecars: Vec<KillTarget>,
    },
    /// Remove the sandbox: network namespace, veth, IP allocation, files.
    TeardownSandbox,
    /// Delete the pod object from the API with grace period 0 (and the pod's UID as
    /// precondition).
    DeletePod,
    /// Nothing to do before this time (back-off ends, retry due, active deadline).
    WaitUntil(Timestamp),
    /// Write the pod status.
    ReportStatus,
}

/// A running container attempt to stop as part of [`Action::KillPod`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillTarget {
    pub name: String,
    pub id: ContainerId,
    pub pre_stop: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillReason {
    LivenessFailed,
    StartupFailed,
    /// An older attempt still running beside the latest one.
    Superseded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodKillReason {
    /// `deletionTimestamp` is set.
    Deleted,
    /// No app container runs or will run again: stop the sidecars so the pod completes.
    Completed,
    /// The phase is terminal (an init container failed under `Never`, the active deadline
    /// passed, …): stop whatever still runs.
    Terminal,
    /// The sandbox broke: stop everything before making a new one.
    SandboxChanged,
}

/// Plans one pass for `pod` (bound to this node) given what was observed at `now`.
pub fn plan_pod(pod: &Pod, observed: &Observed, now: Timestamp) -> PodPlan {
    let Some(spec) = pod.spec.as_ref() else {
        return PodPlan::default();
    };
    let mut p = Planner {
        pod,
        spec,
        observed,
        now,
        policy: RestartPolicy::of(spec),
        actions: Vec::new(),
        wake: None,
    };
    let status = pod_status(pod, observed, now);
    if let Some(deleting) = deletion(pod) {
        p.terminate(PodKillReason::Deleted, deleting.grace);
    } else if is_terminal(status.phase.as_deref().unwrap_or_default()) {
        p.terminate(PodKillReason::Terminal, p.grace());
    } else {
        p.run();
        if let Some(deadline) = status.start_time.and_then(|t| active_deadline(spec, &t)) {
            p.wake_at(deadline);
        }
    }
    p.finish()
}

struct Planner<'a> {
    pod: &'a Pod,
    spec: &'a PodSpec,
    observed: &'a Observed,
    now: Timestamp,
    policy: RestartPolicy,
    actions: Vec<Action>,
    wake: Option<Timestamp>,
}

/// What the init containers need this pass.
#[derive(Default)]
struct InitPlan<'a> {
    kills: Vec<Action>,
    starts: Vec<&'a Container>,
    initialized: bool,
    failed: bool,
}

impl<'a> Planner<'a> {
    fn finish(mut self) -> PodPlan {
        if let Some(at) = self.wake {
            self.actions.push(Action::WaitUntil(at));
        }
        if !self.actions.contains(&Action::ReportStatus) {
            self.actions.push(Action::ReportStatus);
        }
        PodPlan {
            actions: self.actions,
        }
    }

    fn wake_at(&mut self, at: Timestamp) {
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }

    /// The spec's grace period, for kills that are not a deletion.
    fn grace(&self) -> Duration {
        termination_grace(self.spec).max(MIN_GRACE)
    }

    fn container(&self, name: &str) -> Option<(&'a Container, ContainerKind)> {
        let spec: &'a PodSpec = self.spec;
        let init = spec.init_containers.iter().flatten();
        init.map(|c| (c, kind_of_init(c)))
            .chain(spec.containers.iter().map(|c| (c, ContainerKind::App)))
            .find(|(c, _)| c.name == name)
    }

    /// Stop, clean up and (for a deletion) remove the pod.
    fn terminate(&mut self, reason: PodKillReason, grace: Duration) {
        if let Some(kill) = self.kill_pod(reason, grace) {
            self.actions.push(kill);
            return;
        }
        let sandbox_left = self.observed.sandbox != Sandbox::Absent;
        if reason == PodKillReason::Deleted {
            // The final (terminal) status goes out before the object does.
            self.actions.push(Action::ReportStatus);
            for a in self.observed.containers.values().flat_map(|c| &c.attempts) {
                self.actions
                    .push(Action::RemoveContainer { id: a.id.clone() });
            }
            if sandbox_left {
                self.actions.push(Action::TeardownSandbox);
            }
            self.actions.push(Action::DeletePod);
        } else {
            self.collect_garbage();
            if sandbox_left {
                self.actions.push(Action::TeardownSandbox);
            }
        }
    }

    /// `KillPod` for every running attempt, or `None` when nothing runs.
    fn kill_pod(&self, reason: PodKillReason, grace: Duration) -> Option<Action> {
        let target = |name: &str, a: &Attempt| {
            let pre_stop = self
                .container(name)
                .and_then(|(c, _)| c.lifecycle.as_ref())
                .is_some_and(|l| l.pre_stop.is_some());
            KillTarget {
                name: name.to_string(),
                id: a.id.clone(),
                pre_stop,
            }
        };
        let running = |name: &str| -> Vec<KillTarget> {
            self.observed
                .container(name)
                .into_iter()
                .flat_map(|c| &c.attempts)
                .filter(|a| a.is_running())
                .map(|a| target(name, a))
                .collect()
        };
        let sidecar_names: Vec<&str> = self
            .spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| is_sidecar(c))
            .map(|c| c.name.as_str())
            .collect();
        let apps: Vec<KillTarget> = self
            .observed
            .containers
            .keys()
            .filter(|name| !sidecar_names.contains(&name.as_str()))
            .flat_map(|name| running(name))
            .collect();
        let sidecars: Vec<KillTarget> = sidecar_names
            .iter()
            .rev()
            .flat_map(|name| running(name))
            .collect();
        (!apps.is_empty() || !sidecars.is_empty()).then_some(Action::KillPod {
            reason,
            grace,
            apps,
            sidecars,
        })
    }

    /// Keep the latest two attempts of each container (state and `lastState`); remove older
    /// stopped ones.
    fn collect_garbage(&mut self) {
        for c in self.observed.containers.values() {
            let mut attempts: Vec<&Attempt> = c.attempts.iter().collect();
            attempts.sort_by(|a, b| b.restart_index.cmp(&a.restart_index));
            for a in attempts.into_iter().skip(2).filter(|a| !a.is_running()) {
                self.actions
                    .push(Action::RemoveContainer { id: a.id.clone() });
            }
        }
    }

    fn run(&mut self) {
        self.collect_garbage();
        match &self.observed.sandbox {
            Sandbox::NotReady { .. } => {
                let kill = self.kill_pod(PodKillReason::SandboxChanged, self.grace());
                self.actions.push(kill.unwrap_or(Action::TeardownSandbox));
            }
            Sandbox::Absent => {
                let attempts = self.observed.containers.values().flat_map(|c| &c.attempts);
                if self.policy == RestartPolicy::Never && attempts.clone().next().is_some() {
                    // The pod ran and must not run again: no new sandbox (the phase settles).
                    return;
                }
                let attempt = attempts.map(|a| a.sandbox_attempt + 1).max().unwrap_or(0);
                self.actions.push(Action::CreateSandbox { attempt });
            }
            Sandbox::Ready { attempt, .. } => self.containers(*attempt),
        }
    }

    fn containers(&mut self, sandbox_attempt: u32) {
        let init = self.plan_init(sandbox_attempt);
        if init.failed {
            if let Some(kill) = self.kill_pod(PodKillReason::Terminal, self.grace()) {
                self.actions.push(kill);
            }
            return;
        }
        let mut kills = self.superseded();
        kills.extend(init.kills);
        if !kills.is_empty() {
            self.actions.extend(kills);
            return;
        }
        let mut starts: Vec<(&Container, ContainerKind)> =
            init.starts.iter().map(|c| (*c, kind_of_init(c))).collect();
        if init.initialized {
            let (kills, app_starts, keep) = self.plan_apps();
            if !kills.is_empty() {
                self.actions.extend(kills);
                return;
            }
            if keep == 0 && app_starts.is_empty() {
                // Nothing will run again: stop the sidecars, do not restart them.
                if let Some(kill) = self.kill_pod(PodKillReason::Completed, self.grace()) {
                    self.actions.push(kill);
                }
                return;
            }
            starts.extend(app_starts.into_iter().map(|c| (c, ContainerKind::App)));
        }
        for (c, kind) in starts {
            self.start(c, kind);
        }
    }

    /// Older attempts still running beside a newer one.
    fn superseded(&self) -> Vec<Action> {
        let mut kills = Vec::new();
        for (name, c) in &self.observed.containers {
            let Some(latest) = c.latest() else { continue };
            for a in c
                .attempts
                .iter()
                .filter(|a| a.is_running() && a.id != latest.id)
            {
                kills.push(Action::KillContainer {
                    name: name.clone(),
                    id: a.id.clone(),
                    reason: KillReason::Superseded,
                    message: format!("Container {name} has a newer attempt"),
                    grace: self.grace(),
                    pre_stop: false,
                });
            }
        }
        kills
    }

    /// The kubelet's `computeInitContainerActions`, over the attempts of the current sandbox.
    /// Walks the init containers from the last one back, so that completed init containers the
    /// runtime no longer has do not run again.
    fn plan_init(&self, sandbox_attempt: u32) -> InitPlan<'a> {
        let spec: &'a PodSpec = self.spec;
        let Some(list) = spec.init_containers.as_ref().filter(|l| !l.is_empty()) else {
            return InitPlan {
                initialized: true,
                ..InitPlan::default()
            };
        };
        let latest = |name: &str| {
            self.observed
                .container(name)
                .and_then(|c| c.latest_in(sandbox_attempt))
        };
        // An app container created or running means initialization happened before.
        let mut initialized = self
            .spec
            .containers
            .iter()
            .any(|c| latest(&c.name).is_some_and(|a| !matches!(a.state, State::Terminated(_))));
        let mut plan = InitPlan::default();
        let start = |i: usize, plan: &mut InitPlan<'a>| {
            if let Some(c) = list.get(i)
                && !plan.starts.iter().any(|s| s.name == c.name)
            {
                plan.starts.push(c);
            }
        };
        let mut seen = initialized;
        let last = list.len() - 1;
        for (i, c) in list.iter().enumerate().rev() {
            let sidecar = is_sidecar(c);
            let Some(a) = latest(&c.name) else {
                if seen && sidecar {
                    start(i, &mut plan);
                }
                continue;
            };
            if seen && !sidecar {
                continue;
            }
            match &a.state {
                State::Waiting { .. } => start(i, &mut plan),
                State::Running { .. } if sidecar => {
                    if c.startup_probe.is_some() {
                        match a.probes.startup {
                            ProbeResult::Success => {}
                            ProbeResult::Unknown => {
                                seen = true;
                                continue;
                            }
                            ProbeResult::Failure => {
                                plan.kills
                                    .push(self.probe_kill(c, a, KillReason::StartupFailed));
                                seen = true;
                                continue;
                            }
                        }
                    }
                    if i == last {
                        initialized = true;
                    } else if !seen {
                        start(i + 1, &mut plan);
                    }
                    if c.liveness_probe.is_some() && a.probes.liveness == ProbeResult::Failure {
                        plan.kills
                            .push(self.probe_kill(c, a, KillReason::LivenessFailed));
                    }
                }
                State::Running { .. } => {} // an init container: wait for it to finish
                State::Terminated(_) if sidecar => start(i, &mut plan),
                State::Terminated(t) if !t.succeeded() => {
                    if self.policy == RestartPolicy::Never {
                        return InitPlan {
                            failed: true,
                            ..InitPlan::default()
                        };
                    }
                    start(i, &mut plan);
                }
                State::Terminated(_) => {
                    if i == last {
                        initialized = true;
                    } else {
                        start(i + 1, &mut plan);
                    }
                }
            }
            seen = true;
        }
        if !seen {
            start(0, &mut plan);
        }
        plan.starts
            .sort_by_key(|c| list.iter().position(|l| l.name == c.name));
        plan.initialized = initialized;
        plan
    }

    /// App containers: kills for failed probes, starts due, and how many keep running.
    fn plan_apps(&self) -> (Vec<Action>, Vec<&'a Container>, usize) {
        let spec: &'a PodSpec = self.spec;
        let (mut kills, mut starts, mut keep) = (Vec::new(), Vec::new(), 0);
        for c in &spec.containers {
            match self.observed.latest(&c.name) {
                None => starts.push(c),
                Some(a) => match &a.state {
                    State::Waiting { .. } => starts.push(c),
                    State::Terminated(t) => {
                        if should_restart(ContainerKind::App, self.policy, t) {
                            starts.push(c);
                        }
                    }
                    State::Running { .. } => {
                        let p = a.probes;
                        let started = c.startup_probe.is_none() || p.startup.is_success();
                        if started
                            && c.liveness_probe.is_some()
                            && p.liveness == ProbeResult::Failure
                        {
                            kills.push(self.probe_kill(c, a, KillReason::LivenessFailed));
                        } else if c.startup_probe.is_some() && p.startup == ProbeResult::Failure {
                            kills.push(self.probe_kill(c, a, KillReason::StartupFailed));
                        } else {
                            keep += 1;
                        }
                    }
                },
            }
        }
        (kills, starts, keep)
    }

    /// Kill for a failed liveness/startup probe, with the probe's grace period if it sets one.
    fn probe_kill(&self, c: &Container, a: &Attempt, reason: KillReason) -> Action {
        let (probe, what) = match reason {
            KillReason::StartupFailed => (c.startup_probe.as_ref(), "startup"),
            _ => (c.liveness_probe.as_ref(), "liveness"),
        };
        let grace = probe
            .and_then(|p| p.termination_grace_period_seconds)
            .map_or(termination_grace(self.spec), seconds);
        let message = if is_sidecar(c) {
            format!("Init container {} failed {what} probe", c.name)
        } else if self.policy == RestartPolicy::Never {
            format!("Container {} failed {what} probe", c.name)
        } else {
            format!(
                "Container {} failed {what} probe, will be restarted",
                c.name
            )
        };
        Action::KillContainer {
            name: c.name.clone(),
            id: a.id.clone(),
            reason,
            message,
            grace: grace.max(MIN_GRACE),
            pre_stop: c.lifecycle.as_ref().is_some_and(|l| l.pre_stop.is_some()),
        }
    }

    /// Start `c` if its back-off and image allow it now; otherwise pull or wait.
    fn start(&mut self, c: &Container, kind: ContainerKind) {
        let none = ObservedContainer::default();
        let observed = self.observed.container(&c.name).unwrap_or(&none);
        let entry = observed.latest().and_then(|a| a.backoff);
        let backoff = match observed.latest_terminated() {
            Some((_, exit)) => match crash_loop(entry, exit.finished_at, self.now) {
                CrashLoop::BackOff { until, .. } => {
                    self.wake_at(until);
                    return;
                }
                CrashLoop::StartNow { backoff } => Some(backoff),
            },
            None => entry,
        };
        match &observed.image {
            ImagePull::Pulled => self.actions.push(Action::StartContainer {
                name: c.name.clone(),
                kind,
                restart_index: self.next_restart_index(c, observed),
                backoff,
            }),
            ImagePull::NotPulled => self.actions.push(Action::PullImage {
                container: c.name.clone(),
            }),
            ImagePull::Pulling => {}
            ImagePull::Failed { backoff, .. } => {
                if self.now >= backoff.until() {
                    self.actions.push(Action::PullImage {
                        container: c.name.clone(),
                    });
                } else {
                    self.wake_at(backoff.until());
                }
            }
        }
    }

    /// One more than the latest attempt; without attempts, continue from the old status (the
    /// runtime may have lost them) so `restartCount` never goes back.
    fn next_restart_index(&self, c: &Container, observed: &ObservedContainer) -> u32 {
        if let Some(latest) = observed.latest() {
            return latest.restart_index + 1;
        }
        let status = self.pod.status.as_ref();
        let old: Option<&ContainerStatus> = status
            .into_iter()
            .flat_map(|s| {
                let init = s.init_container_statuses.iter().flatten();
                init.chain(s.container_statuses.iter().flatten())
            })
            .find(|s| s.name == c.name);
        let Some(old) = old else { return 0 };
        let count = u32::try_from(old.restart_count).unwrap_or(0);
        let ran = old
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
            || old
                .last_state
                .as_ref()
                .is_some_and(|s| s.terminated.is_some());
        if ran { count + 1 } else { count }
    }
}
