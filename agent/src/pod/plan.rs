//! The pod worker's decision core (pure): from the pod and what the worker observed, the next
//! safe step — the kubelet's `computePodActions` (v1.31, sidecars on) without side effects.
//!
//! Planner: pure, no I/O.
//!
//! Each pass returns the actions to apply in order, ending with `ReportStatus` (write
//! [`pod_status`](super::status::pod_status) for the same observation). Kills and starts never
//! share a pass: a container killed for a failed probe is restarted by a later pass, through
//! the same restart rules and back-off as any exited container. The worker re-observes and
//! plans again after applying, and at the latest at the `WaitUntil` time.
//!
//! The order of a pod's life:
//! 1. sandbox (`CreateSandbox`); a broken one (see [`sandbox`](super::sandbox)) is killed
//!    (`KillPod` for `SandboxChanged`) and torn down in one pass, as the kubelet's
//!    `KillPod` stops the sandbox with the containers, and made anew by the next; the
//!    containers then start in it with their restart counts one higher;
//! 2. init containers one at a time in spec order, each to success before the next; sidecars
//!    (init containers with `restartPolicy: Always`) started in order, the next init container
//!    starting once the sidecar has started (its startup probe, if any, succeeded);
//! 3. app containers, all at once, after initialization; ephemeral containers once each,
//!    whenever they are added (see [`ephemeral`]);
//! 4. restarts per the rules in [`restart`](super::restart), probe-failure kills;
//! 5. completion: when no app container runs or will run again, the sidecars are stopped
//!    (`KillPod`), the phase becomes terminal and the sandbox is torn down;
//! 6. deletion: `KillPod` with the deletion's grace period, then `ReportStatus`, removal of the
//!    containers, `TeardownSandbox` and `DeletePod` (the API object, grace 0).

use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec};
use jiff::Timestamp;

use super::model::{
    ContainerId, ContainerKind, ImagePull, MIN_GRACE, Observed, ObservedContainer, RestartPolicy,
    Sandbox, State, after, deletion, kind_of_init, termination_grace,
};
use super::restart::{
    Backoff, CrashLoop, Failure, INITIAL_BACKOFF, crash_loop, last_failure, should_restart,
};
use super::status::{active_deadline, is_terminal, pod_status};
use crate::probe::policy::ProbeResult;

mod ephemeral;
mod init;
mod stop;

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
    /// Free the pod's emptyDirs: it was evicted and nothing of it runs any more.
    RemoveEmptyDirs,
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
    /// The container's image was updated in place.
    DefinitionChanged,
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
    /// The node's eviction manager evicted the pod (the phase is `Failed`, reason `Evicted`).
    Evicted,
    /// The sandbox broke: stop everything before making a new one. The worker records the
    /// `SandboxChanged` event for it (even when nothing was left running to stop).
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
    } else if let Some(e) = &observed.eviction {
        // Evicted: killed with the eviction's grace (the kubelet's override), never less
        // than the minimum.
        p.terminate(PodKillReason::Evicted, e.grace.max(MIN_GRACE));
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

    fn run(&mut self) {
        self.collect_garbage();
        match &self.observed.sandbox {
            Sandbox::NotReady { .. } => {
                // Never repaired around running containers: they would keep the old, broken
                // namespace. Stop them, remove the sandbox; the next pass makes a new one.
                let kill = self.pod_kill(PodKillReason::SandboxChanged, self.grace());
                self.actions.push(kill);
                self.actions.push(Action::TeardownSandbox);
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
        let ephemeral = self.plan_ephemeral();
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
        for c in &ephemeral {
            self.start(c, ContainerKind::Ephemeral);
        }
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
                        // An updated container runs again whatever the restart policy.
                        if should_restart(ContainerKind::App, self.policy, t) || a.outdated(c) {
                            starts.push(c);
                        }
                    }
                    State::Running { .. } => {
                        let p = a.probes;
                        let started = c.startup_probe.is_none() || p.startup.is_success();
                        if a.outdated(c) {
                            kills.push(self.definition_kill(c, a));
                        } else if started
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

    /// Start `c` if its back-off and image allow it now; otherwise pull or wait. The back-off
    /// runs from the container's last failure ([`last_failure`]): an exit, a task that never
    /// started, or a container that could not be created all walk the same 10 s → 5 min curve.
    fn start(&mut self, c: &Container, kind: ContainerKind) {
        let none = ObservedContainer::default();
        let observed = self.observed.container(&c.name).unwrap_or(&none);
        let entry = observed.latest().and_then(|a| a.backoff);
        let backoff = match last_failure(observed) {
            Some(Failure::Crash { entry, at }) => {
                match crash_loop(entry, at, self.now, self.observed.crash_loop) {
                    CrashLoop::BackOff { until, .. } => {
                        self.wake_at(until);
                        return;
                    }
                    CrashLoop::StartNow { backoff } => Some(backoff),
                }
            }
            Some(Failure::Config { at }) => {
                let due = after(at, INITIAL_BACKOFF);
                if self.now < due {
                    self.wake_at(due);
                    return;
                }
                entry
            }
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

#[cfg(test)]
mod tests {
    use berth_api::k8s_openapi::api::core::v1::{
        Lifecycle, LifecycleHandler, PodReadinessGate, Probe, SleepAction,
    };

    use super::super::model::fixtures::*;
    use super::super::model::{
        Attempt, ProbeResults, PullFailure, SandboxFault, StartError, Termination,
    };
    use super::*;
    use crate::probe::policy::ProbeResult::{Failure, Success, Unknown};

    const NOW: i64 = 1000;

    fn plan(pod: &Pod, observed: &Observed) -> Vec<Action> {
        plan_pod(pod, observed, t(NOW)).actions
    }

    fn start(name: &str, kind: ContainerKind, restart_index: u32) -> Action {
        Action::StartContainer {
            name: name.into(),
            kind,
            restart_index,
            backoff: None,
        }
    }

    /// The app container `app` started as attempt `restart_index` after `backoff`.
    fn restart_app(restart_index: u32, backoff: Option<Backoff>) -> Action {
        Action::StartContainer {
            name: "app".into(),
            kind: ContainerKind::App,
            restart_index,
            backoff,
        }
    }

    /// The plan of a container in back-off with an older dead attempt: that attempt `id` goes,
    /// then the worker waits until `until`.
    fn gc_then_wait(id: &str, until: i64) -> Vec<Action> {
        vec![
            Action::RemoveContainer {
                id: ContainerId::new(id),
            },
            Action::WaitUntil(t(until)),
            Action::ReportStatus,
        ]
    }

    /// A back-off entry of `delay` seconds opened at `since`.
    fn entry(delay: u64, since: i64) -> Option<Backoff> {
        Some(Backoff {
            delay: Duration::from_secs(delay),
            since: t(since),
        })
    }

    fn started(actions: &[Action]) -> Vec<(&str, u32)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::StartContainer {
                    name,
                    restart_index,
                    ..
                } => Some((name.as_str(), *restart_index)),
                _ => None,
            })
            .collect()
    }

    /// The attempts `actions` remove, in order.
    fn removed(actions: &[Action]) -> Vec<ContainerId> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::RemoveContainer { id } => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    fn pre_stop() -> Option<Lifecycle> {
        Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                sleep: Some(SleepAction { seconds: 1 }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        })
    }

    fn probes(startup: ProbeResult, liveness: ProbeResult, readiness: ProbeResult) -> ProbeResults {
        ProbeResults {
            startup,
            liveness,
            readiness,
        }
    }

    /// `app` running as its first attempt, with these startup, liveness and readiness results.
    fn probed_app(startup: ProbeResult, liveness: ProbeResult, readiness: ProbeResult) -> Observed {
        let probes = probes(startup, liveness, readiness);
        observed(vec![with_probes(running("app", 0, 1), probes)])
    }

    /// An `Always` pod with these init containers (sidecars among them), then `app`.
    fn inits_then_app(init: Vec<Container>) -> Pod {
        pod("Always", init, vec![container("app")])
    }

    // --- sandbox -------------------------------------------------------------------------

    #[test]
    fn a_new_pod_gets_its_sandbox_before_anything_else() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let absent = Observed::default();
        assert_eq!(
            plan(&pod, &absent),
            vec![Action::CreateSandbox { attempt: 0 }, Action::ReportStatus]
        );
    }

    fn assert_no_new_sandbox(pod: &Pod, o: &Observed) {
        let actions = plan(pod, o);
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::CreateSandbox { .. })),
            "{actions:?}"
        );
    }

    /// These attempts, in sandbox 0, whose netns went missing.
    fn in_broken_sandbox(attempts: Vec<Attempt>) -> Observed {
        Observed {
            sandbox: Sandbox::NotReady {
                attempt: 0,
                fault: SandboxFault::NetnsMissing,
            },
            ..observed(attempts)
        }
    }

    /// These attempts, their sandbox torn down.
    fn without_sandbox(attempts: Vec<Attempt>) -> Observed {
        Observed {
            sandbox: Sandbox::Absent,
            ..observed(attempts)
        }
    }

    fn target(name: &str, index: u32) -> KillTarget {
        KillTarget {
            name: name.into(),
            id: ContainerId::new(format!("{name}-{index}")),
            pre_stop: false,
        }
    }

    #[test]
    fn a_broken_sandbox_is_killed_and_torn_down_in_one_pass_whatever_runs_in_it() {
        let pod = pod("Always", vec![sidecar("log")], containers(&["a", "b"]));
        let kill = |apps, sidecars| Action::KillPod {
            reason: PodKillReason::SandboxChanged,
            grace: Duration::from_secs(30),
            apps,
            sidecars,
        };
        let table: Vec<(&str, Vec<Attempt>, Action)> = vec![
            (
                "apps and a sidecar run in it",
                vec![
                    running("log", 0, 5),
                    running("a", 0, 10),
                    running("b", 0, 10),
                ],
                kill(vec![target("a", 0), target("b", 0)], vec![target("log", 0)]),
            ),
            (
                "one app already exited",
                vec![
                    running("log", 0, 5),
                    exited("a", 0, 1, 20),
                    running("b", 0, 10),
                ],
                kill(vec![target("b", 0)], vec![target("log", 0)]),
            ),
            (
                "nothing runs (crash-looping when the netns went): still a SandboxChanged",
                vec![exited("log", 0, 137, 20), exited("a", 0, 1, 20)],
                kill(vec![], vec![]),
            ),
        ];
        for (what, attempts, want_kill) in table {
            let o = pulled(in_broken_sandbox(attempts), &["log", "a", "b"]);
            assert_eq!(
                plan(&pod, &o),
                vec![want_kill, Action::TeardownSandbox, Action::ReportStatus],
                "{what}"
            );
        }
    }

    #[test]
    fn after_a_sandbox_change_a_new_sandbox_is_made_and_the_containers_restart_in_it() {
        let pod = pod("Always", vec![], vec![container("app")]);
        // The pass after the teardown: the killed attempt ran in sandbox 0.
        let killed = pulled(
            without_sandbox(vec![exited("app", 0, 137, NOW - 1)]),
            &["app"],
        );
        assert_eq!(
            plan(&pod, &killed),
            vec![Action::CreateSandbox { attempt: 1 }, Action::ReportStatus]
        );
        // Then the container starts again, its restart count one higher.
        let renewed = Observed {
            sandbox: Sandbox::Ready {
                attempt: 1,
                ips: vec!["10.42.0.9".into()],
            },
            ..killed
        };
        assert_eq!(started(&plan(&pod, &renewed)), vec![("app", 1)]);
    }

    #[test]
    fn a_never_pod_whose_sandbox_broke_is_stopped_and_not_run_again() {
        let pod = pod("Never", vec![], vec![container("app")]);
        let o = in_broken_sandbox(vec![running("app", 0, 10)]);
        assert!(matches!(
            plan(&pod, &o).as_slice(),
            [
                Action::KillPod {
                    reason: PodKillReason::SandboxChanged,
                    ..
                },
                Action::TeardownSandbox,
                Action::ReportStatus
            ]
        ));
        let after = without_sandbox(vec![exited("app", 0, 137, 20)]);
        assert_no_new_sandbox(&pod, &after);
    }

    #[test]
    fn a_deleted_pod_with_a_broken_sandbox_is_stopped_as_a_deletion() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 5);
        let o = in_broken_sandbox(vec![running("app", 0, 10)]);
        assert!(matches!(
            plan(&pod, &o)[0],
            Action::KillPod {
                reason: PodKillReason::Deleted,
                ..
            }
        ));
    }

    #[test]
    fn a_never_pod_that_already_ran_gets_no_new_sandbox() {
        let pod = pod("Never", vec![], containers(&["a", "b"]));
        let o = without_sandbox(vec![exited("a", 0, 137, 20)]);
        assert_no_new_sandbox(&pod, &o);
    }

    // --- init containers -----------------------------------------------------------------

    #[test]
    fn init_containers_start_one_at_a_time_in_spec_order() {
        let pod = inits_then_app(containers(&["i1", "i2"]));
        let o = pulled(observed(vec![]), &["i1", "i2", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("i1", 0)]);
    }

    #[test]
    fn a_running_init_container_is_waited_for() {
        let pod = inits_then_app(containers(&["i1", "i2"]));
        let o = pulled(observed(vec![running("i1", 0, 5)]), &["i1", "i2", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![]);
    }

    #[test]
    fn the_next_init_container_starts_after_the_previous_one_succeeded() {
        let pod = inits_then_app(containers(&["i1", "i2"]));
        let o = pulled(observed(vec![exited("i1", 0, 0, 5)]), &["i1", "i2", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("i2", 0)]);
    }

    #[test]
    fn app_containers_start_together_only_after_every_init_container_succeeded() {
        let pod = pod("Always", containers(&["i1", "i2"]), containers(&["a", "b"]));
        let o = pulled(
            observed(vec![exited("i1", 0, 0, 5), exited("i2", 0, 0, 6)]),
            &["a", "b"],
        );
        assert_eq!(started(&plan(&pod, &o)), vec![("a", 0), ("b", 0)]);
    }

    #[test]
    fn a_failed_init_container_is_restarted_under_always_and_on_failure() {
        for policy in ["Always", "OnFailure"] {
            let pod = pod(policy, vec![container("i1")], vec![container("app")]);
            let o = pulled(observed(vec![exited("i1", 0, 1, 5)]), &["i1", "app"]);
            let actions = plan(&pod, &o);
            assert_eq!(started(&actions), vec![("i1", 1)], "{policy}");
        }
    }

    #[test]
    fn a_failed_init_container_restarts_with_back_off() {
        let pod = pod("OnFailure", vec![container("i1")], vec![container("app")]);
        let second_failure = with_backoff(exited("i1", 1, 1, NOW - 3), 10, NOW - 20);
        let o = pulled(
            observed(vec![exited("i1", 0, 1, NOW - 21), second_failure]),
            &["i1"],
        );
        assert_eq!(plan(&pod, &o), gc_then_wait("i1-0", NOW + 7));
    }

    #[test]
    fn a_failed_init_container_fails_the_pod_under_never() {
        let pod = pod("Never", vec![container("i1")], vec![container("app")]);
        let o = pulled(observed(vec![exited("i1", 0, 1, 5)]), &["i1", "app"]);
        // The phase is Failed, so the pod is finished: nothing starts, the sandbox goes.
        assert_eq!(
            plan(&pod, &o),
            vec![Action::TeardownSandbox, Action::ReportStatus]
        );
    }

    #[test]
    fn an_init_container_killed_for_memory_counts_as_failed_even_with_exit_zero() {
        let pod = pod("OnFailure", vec![container("i1")], vec![container("app")]);
        let mut oom = exited("i1", 0, 0, 5);
        if let State::Terminated(t) = &mut oom.state {
            t.reason = "OOMKilled".into();
        }
        let o = pulled(observed(vec![oom]), &["i1", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("i1", 1)]);
    }

    #[test]
    fn init_containers_run_again_in_a_new_sandbox() {
        let pod = pod("Always", vec![container("i1")], vec![container("app")]);
        let mut o = pulled(
            observed(vec![exited("i1", 0, 0, 5), exited("app", 0, 137, 50)]),
            &["i1", "app"],
        );
        o.sandbox = Sandbox::Ready {
            attempt: 1,
            ips: vec!["10.42.0.9".into()],
        };
        assert_eq!(started(&plan(&pod, &o)), vec![("i1", 1)]);
    }

    #[test]
    fn completed_init_containers_the_runtime_lost_do_not_run_again() {
        let pod = inits_then_app(containers(&["i1", "i2"]));
        let o = pulled(
            observed(vec![exited("i2", 0, 0, 6), running("app", 0, 7)]),
            &["i1"],
        );
        assert_eq!(started(&plan(&pod, &o)), vec![]);
    }

    // --- sidecars --------------------------------------------------------------------------

    /// An `Always` pod with the sidecar `log` (with a liveness and a startup probe as asked),
    /// then `app`.
    fn probed_sidecar_then_app(liveness: bool, startup: bool) -> Pod {
        let log = Container {
            liveness_probe: liveness.then(Probe::default),
            startup_probe: startup.then(Probe::default),
            ..sidecar("log")
        };
        inits_then_app(vec![log])
    }

    #[test]
    fn the_container_after_a_sidecar_starts_once_the_sidecar_runs() {
        let pod = inits_then_app(vec![sidecar("log"), container("i1")]);
        let o = pulled(observed(vec![running("log", 0, 5)]), &["log", "i1", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("i1", 0)]);
    }

    #[test]
    fn a_running_sidecar_does_not_start_the_next_container_twice() {
        let pod = inits_then_app(vec![sidecar("log"), container("i1")]);
        let o = pulled(
            observed(vec![running("log", 0, 5), running("i1", 0, 6)]),
            &["log", "i1", "app"],
        );
        assert_eq!(started(&plan(&pod, &o)), vec![]);
    }

    #[test]
    fn a_sidecar_with_a_startup_probe_holds_the_next_container_until_it_succeeds() {
        let pod = probed_sidecar_then_app(false, true);
        let waiting = with_probes(running("log", 0, 5), probes(Unknown, Unknown, Unknown));
        let o = pulled(observed(vec![waiting]), &["log", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![]);
        let up = with_probes(running("log", 0, 5), probes(Success, Unknown, Unknown));
        let o = pulled(observed(vec![up]), &["log", "app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 0)]);
    }

    #[test]
    fn a_sidecar_failing_its_startup_probe_is_killed() {
        let pod = probed_sidecar_then_app(false, true);
        let failing = with_probes(running("log", 0, 5), probes(Failure, Unknown, Unknown));
        let actions = plan(&pod, &pulled(observed(vec![failing]), &["log", "app"]));
        assert!(
            matches!(&actions[0], Action::KillContainer { name, reason: KillReason::StartupFailed, message, .. }
                if name == "log" && message == "Init container log failed startup probe"),
            "{actions:?}"
        );
    }

    #[test]
    fn a_sidecar_failing_liveness_is_killed() {
        let pod = probed_sidecar_then_app(true, false);
        let failing = with_probes(running("log", 0, 5), probes(Unknown, Failure, Unknown));
        let o = pulled(
            observed(vec![failing, running("app", 0, 6)]),
            &["log", "app"],
        );
        assert!(matches!(
            &plan(&pod, &o)[0],
            Action::KillContainer {
                reason: KillReason::LivenessFailed,
                ..
            }
        ));
    }

    #[test]
    fn an_exited_sidecar_restarts_whatever_the_pod_restart_policy() {
        for policy in ["Never", "OnFailure", "Always"] {
            for code in [0, 1] {
                let pod = pod(policy, vec![sidecar("log")], vec![container("app")]);
                let o = pulled(
                    observed(vec![exited("log", 0, code, 8), running("app", 0, 6)]),
                    &["log", "app"],
                );
                assert_eq!(
                    started(&plan(&pod, &o)),
                    vec![("log", 1)],
                    "{policy} exit {code}"
                );
            }
        }
    }

    #[test]
    fn sidecars_stop_once_the_app_containers_are_done_under_never() {
        let pod = pod(
            "Never",
            vec![sidecar("s1"), sidecar("s2")],
            vec![container("app")],
        );
        let o = observed(vec![
            running("s1", 0, 1),
            running("s2", 0, 2),
            exited("app", 0, 0, 50),
        ]);
        let actions = plan(&pod, &o);
        let Action::KillPod {
            reason,
            sidecars,
            apps,
            ..
        } = &actions[0]
        else {
            panic!("{actions:?}");
        };
        assert_eq!(*reason, PodKillReason::Completed);
        assert!(apps.is_empty());
        let order: Vec<&str> = sidecars.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, vec!["s2", "s1"], "reverse spec order");
    }

    #[test]
    fn sidecars_stop_once_the_app_containers_succeeded_under_on_failure() {
        let pod = pod("OnFailure", vec![sidecar("s1")], vec![container("app")]);
        let o = observed(vec![running("s1", 0, 1), exited("app", 0, 0, 50)]);
        assert!(matches!(
            plan(&pod, &o)[0],
            Action::KillPod {
                reason: PodKillReason::Completed,
                ..
            }
        ));
        // A failed app container restarts instead; the sidecar keeps running.
        let o = pulled(
            observed(vec![running("s1", 0, 1), exited("app", 0, 1, 50)]),
            &["app"],
        );
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 1)]);
    }

    #[test]
    fn a_stopped_sidecar_is_not_restarted_once_the_pod_completed() {
        let pod = pod("Never", vec![sidecar("s1")], vec![container("app")]);
        let o = pulled(
            observed(vec![exited("s1", 0, 143, 60), exited("app", 0, 0, 50)]),
            &["s1"],
        );
        assert_eq!(
            plan(&pod, &o),
            vec![Action::TeardownSandbox, Action::ReportStatus]
        );
    }

    // --- app container restarts --------------------------------------------------------------

    #[test]
    fn app_containers_restart_per_restart_policy() {
        let cases = [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 0, false),
            ("OnFailure", 1, true),
            ("Never", 0, false),
            ("Never", 1, false),
        ];
        for (policy, code, restarts) in cases {
            // A second container keeps the pod alive so the decision is visible.
            let pod = pod(policy, vec![], containers(&["app", "keep"]));
            let o = pulled(
                observed(vec![exited("app", 0, code, NOW - 1), running("keep", 0, 1)]),
                &["app", "keep"],
            );
            let want = if restarts { vec![("app", 1)] } else { vec![] };
            assert_eq!(started(&plan(&pod, &o)), want, "{policy} exit {code}");
        }
    }

    #[test]
    fn the_first_restart_is_immediate_and_opens_a_ten_second_back_off() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let o = pulled(observed(vec![exited("app", 0, 1, NOW - 1)]), &["app"]);
        assert_eq!(
            plan(&pod, &o),
            vec![
                restart_app(1, Some(Backoff::initial(t(NOW)))),
                Action::ReportStatus
            ]
        );
    }

    #[test]
    fn a_crash_looping_container_waits_out_its_back_off_then_doubles_it() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let crashed = with_backoff(exited("app", 1, 1, NOW - 5), 10, NOW - 8);
        let o = pulled(
            observed(vec![exited("app", 0, 1, NOW - 9), crashed.clone()]),
            &["app"],
        );
        // The older dead attempt goes (one dead attempt per container is kept).
        assert_eq!(plan(&pod, &o), gc_then_wait("app-0", NOW + 5));
        let later = plan_pod(&pod, &o, t(NOW + 5)).actions;
        assert_eq!(later[1], restart_app(2, entry(20, NOW + 5)));
    }

    #[test]
    fn a_node_with_a_one_second_restart_cap_restarts_a_crash_looping_container_a_second_later() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let crashed = with_backoff(exited("app", 1, 1, NOW - 1), 10, NOW - 2);
        let mut o = pulled(observed(vec![crashed]), &["app"]);
        o.crash_loop = super::super::restart::CrashLoopBackOff::with_max_restart_period(
            Duration::from_secs(1),
        )
        .unwrap();
        // Exited a second ago under a 10 s entry: the 1 s cap is all it waits.
        assert_eq!(
            plan(&pod, &o),
            vec![restart_app(2, entry(1, NOW)), Action::ReportStatus]
        );
    }
    fn start_error(reason: &str, at: i64, backoff: Option<Backoff>) -> StartError {
        StartError {
            reason: reason.into(),
            message: "boom".into(),
            at: t(at),
            backoff,
        }
    }

    #[test]
    fn a_container_that_fails_to_start_backs_off_like_one_that_exits() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let wait = |s: i64| vec![Action::WaitUntil(t(NOW + s)), Action::ReportStatus];
        let start = |index: u32, backoff: Option<Backoff>| {
            vec![restart_app(index, backoff), Action::ReportStatus]
        };
        /// What, the attempts, the start error kept, the plan.
        type Case<'a> = (&'a str, Vec<Attempt>, Option<StartError>, Vec<Action>);
        let table: Vec<Case> = vec![
            (
                "its task never started, the first time: the restart is immediate",
                vec![start_failed("app", 0, NOW - 1)],
                None,
                start(1, entry(10, NOW)),
            ),
            (
                "its task never started again, inside the 10 s window",
                vec![
                    start_failed("app", 0, NOW - 9),
                    with_backoff(start_failed("app", 1, NOW - 2), 10, NOW - 3),
                ],
                Some(start_error(
                    "RunContainerError",
                    NOW - 2,
                    entry(10, NOW - 3),
                )),
                wait(8),
            ),
            (
                "its task never started, the window has passed: the delay doubles",
                vec![with_backoff(start_failed("app", 1, NOW - 10), 10, NOW - 11)],
                None,
                start(2, entry(20, NOW)),
            ),
            (
                "the container could not be created, the first time",
                vec![],
                Some(start_error("CreateContainerError", NOW - 1, None)),
                start(0, entry(10, NOW)),
            ),
            (
                "the container could not be created again: no attempt, still a back-off",
                vec![],
                Some(start_error(
                    "CreateContainerError",
                    NOW - 2,
                    entry(10, NOW - 3),
                )),
                wait(8),
            ),
            (
                "a create failure after an exit is measured from the later failure",
                vec![exited("app", 0, 1, NOW - 30)],
                Some(start_error(
                    "CreateContainerError",
                    NOW - 15,
                    entry(20, NOW - 16),
                )),
                wait(5),
            ),
            (
                "a config that cannot be made is retried 10 s later, not on the curve",
                vec![],
                Some(start_error(
                    "CreateContainerConfigError",
                    NOW - 3,
                    entry(40, NOW - 50),
                )),
                wait(7),
            ),
            (
                "a config error 10 s old is retried, keeping the entry it had",
                vec![],
                Some(start_error(
                    "CreateContainerConfigError",
                    NOW - 10,
                    entry(40, NOW - 50),
                )),
                start(0, None),
            ),
        ];
        for (what, attempts, error, want) in table {
            let mut o = pulled(observed(attempts), &["app"]);
            o.containers.entry("app".into()).or_default().start_error = error;
            // Older dead attempts are garbage-collected on the way; this is about back-off.
            let got: Vec<Action> = plan(&pod, &o)
                .into_iter()
                .filter(|a| !matches!(a, Action::RemoveContainer { .. }))
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }

    /// Worked example: a command that does not exist, every start failing at once. The
    /// planner's starts come at 0, 0, 10, 30, 70, 150, 310, 610, 910 s: gaps 0, 10, 20, 40,
    /// 80, 160, 300 (capped), 300 — never the retry-at-once loop of a start error without a
    /// back-off.
    #[test]
    fn a_missing_command_restarts_on_the_crash_loop_curve() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let mut o = pulled(observed(vec![]), &["app"]);
        let mut now = t(0);
        let mut starts = Vec::new();
        for _ in 0..40 {
            let mut actions = plan_pod(&pod, &o, now).actions;
            // Old attempts are garbage-collected on the way; drop them as the worker would.
            let app = o.containers.get_mut("app").unwrap();
            actions.retain(|a| match a {
                Action::RemoveContainer { id } => {
                    app.attempts.retain(|x| &x.id != id);
                    false
                }
                _ => true,
            });
            match actions.remove(0) {
                Action::StartContainer {
                    restart_index,
                    backoff,
                    ..
                } => {
                    starts.push(now.as_second() - t(0).as_second());
                    let failed = start_failed("app", restart_index, 0);
                    let failed = Attempt {
                        backoff,
                        state: match failed.state {
                            State::Terminated(x) => State::Terminated(Termination {
                                finished_at: now,
                                ..x
                            }),
                            other => other,
                        },
                        ..failed
                    };
                    o.containers.get_mut("app").unwrap().attempts.push(failed);
                }
                Action::WaitUntil(at) => now = at,
                other => panic!("unexpected {other:?}"),
            }
            if starts.len() == 9 {
                break;
            }
        }
        assert_eq!(starts, vec![0, 0, 10, 30, 70, 150, 310, 610, 910]);
    }

    #[test]
    fn a_created_but_unstarted_attempt_is_replaced_by_a_new_one() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let o = pulled(observed(vec![created("app", 0)]), &["app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 1)]);
    }

    #[test]
    fn restart_count_continues_from_the_old_status_when_the_runtime_lost_the_attempts() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        let status = pod.status.get_or_insert_default();
        status.container_statuses = Some(vec![ContainerStatus {
            name: "app".into(),
            restart_count: 4,
            state: Some(berth_api::k8s_openapi::api::core::v1::ContainerState {
                running: Some(Default::default()),
                ..Default::default()
            }),
            ..ContainerStatus::default()
        }]);
        let o = pulled(observed(vec![]), &["app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 5)]);
    }

    #[test]
    fn a_pod_whose_app_containers_all_finished_has_nothing_to_do_but_report() {
        let pod = pod("OnFailure", vec![], vec![container("app")]);
        let o = observed(vec![exited("app", 0, 0, 50)]);
        // Succeeded: the sandbox goes, the object stays.
        assert_eq!(
            plan(&pod, &o),
            vec![Action::TeardownSandbox, Action::ReportStatus]
        );
        let o = Observed {
            sandbox: Sandbox::Absent,
            ..o
        };
        assert_eq!(plan(&pod, &o), vec![Action::ReportStatus]);
    }

    // --- probes ----------------------------------------------------------------------------

    /// The reason and message of `actions`' first, a container kill.
    fn first_kill(actions: &[Action]) -> (&KillReason, &str) {
        match actions.first() {
            Some(Action::KillContainer {
                reason, message, ..
            }) => (reason, message.as_str()),
            other => panic!("expected a container kill first, got {other:?}"),
        }
    }

    fn probed(liveness: bool, startup: bool) -> Container {
        Container {
            liveness_probe: liveness.then(Probe::default),
            startup_probe: startup.then(Probe::default),
            ..container("app")
        }
    }

    #[test]
    fn a_failed_liveness_probe_kills_the_container_for_a_restart() {
        let pod = pod("Always", vec![], vec![probed(true, false)]);
        let o = probed_app(Unknown, Failure, Success);
        assert_eq!(
            plan(&pod, &o),
            vec![
                Action::KillContainer {
                    name: "app".into(),
                    id: ContainerId::new("app-0"),
                    reason: KillReason::LivenessFailed,
                    message: "Container app failed liveness probe, will be restarted".into(),
                    grace: Duration::from_secs(30),
                    pre_stop: false,
                },
                Action::ReportStatus
            ]
        );
    }

    #[test]
    fn a_probe_kill_uses_the_probes_grace_period_and_runs_pre_stop() {
        let mut c = probed(true, false);
        if let Some(p) = c.liveness_probe.as_mut() {
            p.termination_grace_period_seconds = Some(5);
        }
        c.lifecycle = pre_stop();
        let pod = pod("Always", vec![], vec![c]);
        let o = probed_app(Unknown, Failure, Success);
        assert!(matches!(
            &plan(&pod, &o)[0],
            Action::KillContainer { grace, pre_stop: true, .. } if *grace == Duration::from_secs(5)
        ));
    }

    #[test]
    fn liveness_is_not_acted_on_until_startup_succeeded() {
        let pod = pod("Always", vec![], vec![probed(true, true)]);
        let o = probed_app(Unknown, Failure, Unknown);
        assert_eq!(plan(&pod, &o), vec![Action::ReportStatus]);
    }

    #[test]
    fn a_failed_startup_probe_kills_the_container() {
        let pod = pod("OnFailure", vec![], vec![probed(false, true)]);
        let actions = plan(&pod, &probed_app(Failure, Success, Unknown));
        assert_eq!(
            first_kill(&actions),
            (
                &KillReason::StartupFailed,
                "Container app failed startup probe, will be restarted"
            )
        );
    }

    #[test]
    fn a_failed_liveness_probe_under_never_kills_without_restart() {
        let pod = pod("Never", vec![], vec![probed(true, false)]);
        let actions = plan(&pod, &probed_app(Unknown, Failure, Success));
        assert_eq!(
            first_kill(&actions).1,
            "Container app failed liveness probe"
        );
        let o = pulled(observed(vec![exited("app", 0, 137, NOW - 1)]), &["app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![]);
    }

    #[test]
    fn an_app_container_whose_image_was_updated_is_replaced_whatever_the_policy() {
        let mut c = container("app");
        c.image = Some("busybox:1.36".into());
        let pod = pod("Never", vec![], vec![c, container("keep")]);
        let o = observed(vec![running("app", 0, 1), running("keep", 0, 1)]);
        assert_eq!(
            first_kill(&plan(&pod, &o)),
            (
                &KillReason::DefinitionChanged,
                "Container app definition changed, will be restarted"
            )
        );
        let o = pulled(
            observed(vec![exited("app", 0, 137, NOW - 1), running("keep", 0, 1)]),
            &["app"],
        );
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 1)]);
    }

    #[test]
    fn a_changed_init_container_image_does_not_run_it_again_but_replaces_a_sidecar() {
        let mut init = container("init");
        init.image = Some("busybox:1.36".into());
        let mut log = sidecar("log");
        log.image = Some("busybox:1.36".into());
        let pod = pod("Always", vec![init, log], vec![container("app")]);
        let o = observed(vec![
            exited("init", 0, 0, 1),
            running("log", 0, 2),
            running("app", 0, 3),
        ]);
        let actions = plan(&pod, &o);
        assert!(
            matches!(&actions[0], Action::KillContainer { name, reason: KillReason::DefinitionChanged, message, .. }
                if name == "log" && message == "Init container log definition changed"),
            "{actions:?}"
        );
        assert_eq!(started(&actions), vec![]);
    }

    #[test]
    fn a_readiness_failure_does_not_kill() {
        let c = Container {
            readiness_probe: probe(),
            ..container("app")
        };
        let pod = pod("Always", vec![], vec![c]);
        let o = probed_app(Unknown, Success, Failure);
        assert_eq!(plan(&pod, &o), vec![Action::ReportStatus]);
    }

    // --- images ----------------------------------------------------------------------------

    #[test]
    fn an_image_is_pulled_before_the_container_starts() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let o = observed(vec![]);
        assert_eq!(
            plan(&pod, &o),
            vec![
                Action::PullImage {
                    container: "app".into()
                },
                Action::ReportStatus
            ]
        );
        let mut o = o;
        o.containers.entry("app".into()).or_default().image = ImagePull::Pulling;
        assert_eq!(plan(&pod, &o), vec![Action::ReportStatus]);
    }

    #[test]
    fn a_failed_pull_is_retried_when_its_back_off_ends() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let mut o = observed(vec![]);
        o.containers.entry("app".into()).or_default().image = ImagePull::Failed {
            reason: PullFailure::ErrImagePull,
            message: "not found".into(),
            backoff: Backoff {
                delay: Duration::from_secs(20),
                since: t(NOW - 5),
            },
        };
        assert_eq!(
            plan(&pod, &o),
            vec![Action::WaitUntil(t(NOW + 15)), Action::ReportStatus]
        );
        assert_eq!(
            plan_pod(&pod, &o, t(NOW + 15)).actions[0],
            Action::PullImage {
                container: "app".into()
            }
        );
    }

    // --- deletion and termination ----------------------------------------------------------

    #[test]
    fn deletion_stops_app_containers_first_and_sidecars_after_in_reverse_order() {
        let mut app = container("app");
        app.lifecycle = pre_stop();
        let pod = deleted(
            pod(
                "Always",
                vec![sidecar("s1"), sidecar("s2")],
                vec![app, container("b")],
            ),
            12,
        );
        let o = observed(vec![
            running("s1", 0, 1),
            running("s2", 0, 2),
            running("app", 0, 3),
            running("b", 0, 3),
        ]);
        let target = |name: &str, pre_stop: bool| KillTarget {
            name: name.into(),
            id: ContainerId::new(format!("{name}-0")),
            pre_stop,
        };
        assert_eq!(
            plan(&pod, &o),
            vec![
                Action::KillPod {
                    reason: PodKillReason::Deleted,
                    grace: Duration::from_secs(12),
                    apps: vec![target("app", true), target("b", false)],
                    sidecars: vec![target("s2", false), target("s1", false)],
                },
                Action::ReportStatus
            ]
        );
    }

    #[test]
    fn a_deleted_pod_once_stopped_reports_cleans_up_and_is_removed() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 30);
        let o = observed(vec![exited("app", 0, 1, 10), exited("app", 1, 143, 110)]);
        assert_eq!(
            plan(&pod, &o),
            vec![
                Action::ReportStatus,
                Action::RemoveContainer {
                    id: ContainerId::new("app-0")
                },
                Action::RemoveContainer {
                    id: ContainerId::new("app-1")
                },
                Action::TeardownSandbox,
                Action::DeletePod,
            ]
        );
    }

    #[test]
    fn a_deleted_pod_starts_nothing() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 30);
        let o = Observed {
            sandbox: Sandbox::Absent,
            ..Observed::default()
        };
        assert_eq!(
            plan(&pod, &o),
            vec![Action::ReportStatus, Action::DeletePod]
        );
    }

    #[test]
    fn a_forced_deletion_still_gives_containers_two_seconds() {
        let pod = deleted(pod("Always", vec![], vec![container("app")]), 0);
        let o = observed(vec![running("app", 0, 1)]);
        assert!(matches!(
            &plan(&pod, &o)[0],
            Action::KillPod { grace, .. } if *grace == Duration::from_secs(2)
        ));
    }

    #[test]
    fn the_active_deadline_wakes_the_worker_and_then_stops_the_pod() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        if let Some(spec) = pod.spec.as_mut() {
            spec.active_deadline_seconds = Some(NOW + 60);
        }
        let o = observed(vec![running("app", 0, 1)]);
        assert_eq!(
            plan(&pod, &o),
            vec![Action::WaitUntil(t(NOW + 60)), Action::ReportStatus]
        );
        assert!(matches!(
            plan_pod(&pod, &o, t(NOW + 60)).actions[0],
            Action::KillPod {
                reason: PodKillReason::Terminal,
                ..
            }
        ));
    }

    #[test]
    fn an_evicted_pod_is_killed_with_the_evictions_grace_and_not_restarted() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let mut o = observed(vec![running("app", 0, 1)]);
        o.eviction = Some(crate::pod::model::Eviction {
            message: "The node was low on resource: memory. ".into(),
            grace: Duration::from_secs(1),
            disruption_condition: true,
        });
        match &plan(&pod, &o)[0] {
            Action::KillPod { reason, grace, .. } => {
                assert_eq!(*reason, PodKillReason::Evicted);
                assert_eq!(*grace, MIN_GRACE, "1 s raised to the 2 s minimum");
            }
            other => panic!("{other:?}"),
        }
        let stopped = observed(vec![exited("app", 0, 137, 2)]);
        let mut stopped = stopped;
        stopped.eviction = o.eviction.clone();
        let after = plan(&pod, &stopped);
        assert!(
            started(&after).is_empty(),
            "no restart under restartPolicy Always"
        );
        assert!(after.contains(&Action::RemoveEmptyDirs), "{after:?}");
    }

    #[test]
    fn readiness_gates_do_not_hold_containers_back() {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        if let Some(spec) = pod.spec.as_mut() {
            spec.readiness_gates = Some(vec![PodReadinessGate {
                condition_type: "example.com/lb".into(),
            }]);
        }
        let o = pulled(observed(vec![]), &["app"]);
        assert_eq!(started(&plan(&pod, &o)), vec![("app", 0)]);
    }

    // --- garbage -----------------------------------------------------------------------------

    /// A running container keeps its latest two attempts; one in back-off only its newest
    /// dead one (the one its restart is counted from).
    #[test]
    fn only_the_latest_attempts_of_a_container_are_kept() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let dead = || {
            vec![
                exited("app", 0, 1, 1),
                exited("app", 1, 1, 2),
                exited("app", 2, 1, 3),
            ]
        };
        let cases = [
            ("running", [dead(), vec![running("app", 3, 4)]].concat()),
            ("in back-off", dead()),
        ];
        for (name, attempts) in cases {
            let o = observed(attempts);
            let want = vec![ContainerId::new("app-1"), ContainerId::new("app-0")];
            assert_eq!(removed(&plan(&pod, &o)), want, "{name}");
        }
    }

    #[test]
    fn an_older_attempt_still_running_is_killed() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let o = observed(vec![running("app", 0, 1), running("app", 1, 2)]);
        assert!(matches!(
            &plan(&pod, &o)[0],
            Action::KillContainer { id, reason: KillReason::Superseded, .. } if id.as_str() == "app-0"
        ));
    }

    #[test]
    fn start_helper_matches_plain_first_starts() {
        let pod = pod("Always", vec![], vec![container("app")]);
        let o = pulled(observed(vec![]), &["app"]);
        assert_eq!(plan(&pod, &o)[0], start("app", ContainerKind::App, 0));
    }
}
