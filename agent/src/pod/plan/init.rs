//! Init containers and sidecars: the kubelet's `computeInitContainerActions` (v1.31, sidecars
//! on) over the attempts of the current sandbox.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{Container, PodSpec};

use super::{Action, KillReason, Planner};
use crate::pod::model::{RestartPolicy, State, is_sidecar};
use crate::probe::policy::ProbeResult;

/// What the init containers need this pass.
#[derive(Default)]
pub(super) struct InitPlan<'a> {
    pub(super) kills: Vec<Action>,
    pub(super) starts: Vec<&'a Container>,
    pub(super) initialized: bool,
    pub(super) failed: bool,
}

impl<'a> Planner<'a> {
    /// The kubelet's `computeInitContainerActions`, over the attempts of the current sandbox.
    /// Walks the init containers from the last one back, so that completed init containers the
    /// runtime no longer has do not run again.
    pub(super) fn plan_init(&self, sandbox_attempt: u32) -> InitPlan<'a> {
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
                    if a.outdated(c) {
                        plan.kills.push(self.definition_kill(c, a));
                    } else if c.liveness_probe.is_some()
                        && a.probes.liveness == ProbeResult::Failure
                    {
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
}
