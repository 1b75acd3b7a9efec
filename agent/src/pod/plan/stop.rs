//! Stopping: the pod-wide kill (apps first, sidecars after in reverse order), probe-failure
//! and superseded-attempt kills, the end of a finished or deleted pod, and removal of old
//! attempts.
//!
//! Planner: pure, no I/O.

use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::Container;

use super::{Action, KillReason, KillTarget, Planner, PodKillReason};
use crate::pod::model::{
    Attempt, MIN_GRACE, RestartPolicy, Sandbox, State, is_sidecar, seconds, termination_grace,
};

impl Planner<'_> {
    /// Stop, clean up and (for a deletion) remove the pod.
    pub(super) fn terminate(&mut self, reason: PodKillReason, grace: Duration) {
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
            let evicted = self.pod.status.as_ref().is_some_and(|s| {
                s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted")
            });
            if reason == PodKillReason::Evicted || evicted {
                self.actions.push(Action::RemoveEmptyDirs);
            }
        }
    }

    /// `KillPod` for every running attempt, or `None` when nothing runs.
    pub(super) fn kill_pod(&self, reason: PodKillReason, grace: Duration) -> Option<Action> {
        let kill = self.pod_kill(reason, grace);
        match &kill {
            Action::KillPod { apps, sidecars, .. } if apps.is_empty() && sidecars.is_empty() => {
                None
            }
            _ => Some(kill),
        }
    }

    /// `KillPod` for every running attempt (none, possibly).
    pub(super) fn pod_kill(&self, reason: PodKillReason, grace: Duration) -> Action {
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
        Action::KillPod {
            reason,
            grace,
            apps,
            sidecars,
        }
    }

    /// Keep one dead attempt of each container name besides a running one (the kubelet's
    /// `maxPerPodContainer` = 1: the newest dead attempt is `lastState`, what `kubectl logs
    /// --previous` reads, or the state of a container in back-off); remove older dead ones.
    pub(super) fn collect_garbage(&mut self) {
        for c in self.observed.containers.values() {
            let mut dead: Vec<&Attempt> = c
                .attempts
                .iter()
                .filter(|a| matches!(a.state, State::Terminated(_)))
                .collect();
            dead.sort_by_key(|a| std::cmp::Reverse(a.restart_index));
            for a in dead.into_iter().skip(1) {
                self.actions
                    .push(Action::RemoveContainer { id: a.id.clone() });
            }
        }
    }

    /// Older attempts still running beside a newer one.
    pub(super) fn superseded(&self) -> Vec<Action> {
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

    /// Kill for a failed liveness/startup probe, with the probe's grace period if it sets one.
    pub(super) fn probe_kill(&self, c: &Container, a: &Attempt, reason: KillReason) -> Action {
        let (probe, what) = match reason {
            KillReason::StartupFailed => (c.startup_probe.as_ref(), "startup"),
            _ => (c.liveness_probe.as_ref(), "liveness"),
        };
        let grace = probe
            .and_then(|p| p.termination_grace_period_seconds)
            .map_or(termination_grace(self.spec), seconds);
        let restarts = is_sidecar(c) || self.policy != RestartPolicy::Never;
        self.kill(
            c,
            a,
            reason,
            format!("failed {what} probe"),
            restarts,
            grace,
        )
    }

    /// Kill of an attempt whose image was updated in place; it is replaced whatever the
    /// restart policy.
    pub(super) fn definition_kill(&self, c: &Container, a: &Attempt) -> Action {
        let grace = termination_grace(self.spec);
        let what = "definition changed".to_string();
        self.kill(c, a, KillReason::DefinitionChanged, what, true, grace)
    }

    /// `KillContainer` with upstream's `Killing` message: `Container app failed liveness probe,
    /// will be restarted`, `Init container log failed startup probe`.
    fn kill(
        &self,
        c: &Container,
        a: &Attempt,
        reason: KillReason,
        what: String,
        restarts: bool,
        grace: Duration,
    ) -> Action {
        let message = if is_sidecar(c) {
            format!("Init container {} {what}", c.name)
        } else if restarts {
            format!("Container {} {what}, will be restarted", c.name)
        } else {
            format!("Container {} {what}", c.name)
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
}
