//! Ephemeral containers (`kubectl debug`): the kubelet's rule in `computePodActions` — each is
//! started once, as soon as the pod's sandbox is ready (initialization need not be complete),
//! and never again: one with any attempt on the node is left alone, whatever became of it.
//! One with a `targetContainerName` joins that container's PID namespace, so it waits while
//! the target has not started yet; once the target ran and stopped, the start goes ahead and
//! fails with the reason the status then shows.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{Container, PodSpec};

use super::Planner;
use crate::pod::model::{State, ephemeral_containers};

impl Planner<'_> {
    /// The ephemeral containers to start this pass.
    pub(super) fn plan_ephemeral(&self) -> Vec<Container> {
        let spec: &PodSpec = self.spec;
        let targets = spec
            .ephemeral_containers
            .iter()
            .flatten()
            .map(|e| e.target_container_name.as_deref().filter(|t| !t.is_empty()));
        ephemeral_containers(spec)
            .into_iter()
            .zip(targets)
            .filter(|(c, _)| {
                self.observed
                    .container(&c.name)
                    .is_none_or(|o| o.attempts.is_empty())
            })
            .filter(|(_, target)| {
                target.is_none_or(|t| {
                    self.observed
                        .latest(t)
                        .is_some_and(|a| !matches!(a.state, State::Waiting { .. }))
                })
            })
            .map(|(c, _)| c)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use berth_api::k8s_openapi::api::core::v1::{EphemeralContainer, Pod};

    use super::super::{Action, PodKillReason, plan_pod};
    use crate::pod::model::fixtures::*;
    use crate::pod::model::{Attempt, ContainerKind, Observed, Sandbox};
    use crate::pod::status::pod_status;

    fn debug_pod(target: Option<&str>) -> Pod {
        let mut pod = pod("Always", vec![], vec![container("app")]);
        if let Some(spec) = pod.spec.as_mut() {
            spec.ephemeral_containers = Some(vec![EphemeralContainer {
                name: "debugger".into(),
                image: Some("busybox:1.28".into()),
                target_container_name: target.map(String::from),
                stdin: Some(true),
                ..EphemeralContainer::default()
            }]);
        }
        pod
    }

    fn seen(attempts: Vec<Attempt>) -> Observed {
        Observed {
            sandbox: Sandbox::Ready {
                attempt: 0,
                ips: vec!["10.42.0.5".into()],
            },
            ..pulled(observed(attempts), &["app", "debugger"])
        }
    }

    fn ephemeral_starts(pod: &Pod, o: &Observed) -> Vec<(String, u32)> {
        plan_pod(pod, o, t(1000))
            .actions
            .into_iter()
            .filter_map(|a| match a {
                Action::StartContainer {
                    name,
                    kind: ContainerKind::Ephemeral,
                    restart_index,
                    ..
                } => Some((name, restart_index)),
                _ => None,
            })
            .collect()
    }

    /// What the case is, the target, what the node has, which ephemeral starts are planned.
    type Case<'a> = (&'a str, Option<&'a str>, Vec<Attempt>, Vec<(String, u32)>);

    #[test]
    fn an_ephemeral_container_starts_once_and_is_never_restarted() {
        let table: Vec<Case> = vec![
            (
                "added to a running pod: started",
                None,
                vec![running("app", 0, 10)],
                vec![("debugger".into(), 0)],
            ),
            (
                "already running: nothing to do",
                None,
                vec![running("app", 0, 10), running("debugger", 0, 20)],
                vec![],
            ),
            (
                "exited with an error under restartPolicy Always: not restarted",
                None,
                vec![running("app", 0, 10), exited("debugger", 0, 1, 30)],
                vec![],
            ),
            (
                "exited with success: not restarted",
                None,
                vec![running("app", 0, 10), exited("debugger", 0, 0, 30)],
                vec![],
            ),
            (
                "target running: started in its PID namespace",
                Some("app"),
                vec![running("app", 0, 10)],
                vec![("debugger".into(), 0)],
            ),
            (
                "target not started yet: waits",
                Some("app"),
                vec![created("app", 0)],
                vec![],
            ),
            (
                "target gone: the start goes ahead and its failure is reported",
                Some("app"),
                vec![exited("app", 0, 1, 30)],
                vec![("debugger".into(), 0)],
            ),
        ];
        for (what, target, attempts, want) in table {
            let pod = debug_pod(target);
            assert_eq!(ephemeral_starts(&pod, &seen(attempts)), want, "{what}");
        }
    }

    #[test]
    fn an_ephemeral_container_starts_before_initialization_is_complete() {
        let mut pod = debug_pod(None);
        if let Some(spec) = pod.spec.as_mut() {
            spec.init_containers = Some(vec![container("setup")]);
        }
        let o = Observed {
            sandbox: Sandbox::Ready {
                attempt: 0,
                ips: vec![],
            },
            ..pulled(
                observed(vec![running("setup", 0, 10)]),
                &["setup", "app", "debugger"],
            )
        };
        assert_eq!(ephemeral_starts(&pod, &o), vec![("debugger".into(), 0)]);
    }

    #[test]
    fn ephemeral_statuses_follow_their_attempts_and_leave_phase_and_readiness_alone() {
        let pod = debug_pod(None);
        let table: Vec<(&str, Vec<Attempt>, &str)> = vec![
            ("not started yet", vec![running("app", 0, 10)], "waiting"),
            (
                "running",
                vec![running("app", 0, 10), running("debugger", 0, 20)],
                "running",
            ),
            (
                "exited with an error",
                vec![running("app", 0, 10), exited("debugger", 0, 1, 30)],
                "terminated",
            ),
        ];
        for (what, attempts, want) in table {
            let status = pod_status(&pod, &seen(attempts), t(1000));
            let statuses = status.ephemeral_container_statuses.unwrap_or_default();
            let [e] = statuses.as_slice() else {
                panic!("{what}: {statuses:?}");
            };
            let state = serde_json::to_value(&e.state).unwrap_or_default();
            assert!(state.get(want).is_some(), "{what}: {state}");
            assert!(!e.ready, "{what}");
            assert_eq!(e.restart_count, 0, "{what}");
            assert_eq!(status.phase.as_deref(), Some("Running"), "{what}");
            let ready = status.conditions.unwrap_or_default();
            let ready = ready
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.as_str());
            assert_eq!(ready, Some("True"), "{what}");
            let apps = status.container_statuses.unwrap_or_default();
            assert_eq!(apps.len(), 1, "{what}: not among the app containers");
        }
    }

    #[test]
    fn a_running_ephemeral_container_is_stopped_with_the_pod() {
        let pod = deleted(debug_pod(None), 30);
        let o = seen(vec![running("app", 0, 10), running("debugger", 0, 20)]);
        let actions = plan_pod(&pod, &o, t(1000)).actions;
        let Some(Action::KillPod { reason, apps, .. }) = actions.first() else {
            panic!("{actions:?}");
        };
        assert_eq!(*reason, PodKillReason::Deleted);
        let names: Vec<&str> = apps.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["app", "debugger"]);
    }
}
