//! Observing a pod: its container attempts from containerd (by label), its sandbox, its image
//! pulls, start errors and probe results, as the planner's [`Observed`].

use super::{PodWorker, WorkerError, all_containers, host_network};
use crate::network::{ProcessNetwork, Record};
use crate::pod::labels::{self, LABEL_IMAGE_ID, LABEL_SPEC_IMAGE, LABEL_TERMINATION_LOG};
use crate::pod::model::{
    Attempt, ContainerId, Observed, ObservedContainer, ProbeResults, START_ERROR_EXIT_CODE,
    START_ERROR_REASON, Sandbox, StartError, State, Termination,
};
use crate::pod::prober;
use crate::pod::sandbox::{SandboxFacts, judge_sandbox};
use crate::runtime::{ContainerInfo, TaskState};
use berth_api::k8s_openapi::api::core::v1::Pod;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What one observation found.
pub(crate) struct Observation {
    /// The planner's (and the status generator's) view.
    pub observed: Observed,
    /// The pod's containers as the runtime lists them.
    pub infos: Vec<ContainerInfo>,
    /// The netns new containers join: the ready sandbox's (`None` for host-network pods and
    /// while there is no ready sandbox).
    pub netns: Option<PathBuf>,
}

impl PodWorker {
    /// Observes what exists for the pod now.
    pub(super) async fn observe(
        &self,
        pod: &Pod,
        now: Timestamp,
    ) -> Result<Observation, WorkerError> {
        let uid = self.uid.as_str();
        let infos: Vec<ContainerInfo> = self.cx.runtime.list_pod(uid).await?;
        let mut containers: BTreeMap<String, ObservedContainer> = BTreeMap::new();
        let local = self.local();
        let probe_results = self
            .probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for info in &infos {
            let spec = all_containers(pod)
                .into_iter()
                .find(|c| Some(c.name.as_str()) == labels::container_name(&info.labels));
            let probes = probe_results
                .get(info.id.as_str())
                .copied()
                .unwrap_or_else(|| spec.as_ref().map(prober::initial).unwrap_or_default());
            let failed =
                labels::container_name(&info.labels).and_then(|name| local.start_errors.get(name));
            if let Some((name, attempt)) = attempt_of(info, probes, failed) {
                containers.entry(name).or_default().attempts.push(attempt);
            }
        }
        for c in all_containers(pod) {
            let entry = containers.entry(c.name.clone()).or_default();
            let pull = local.pulls.get(&c.name).cloned().unwrap_or_default();
            entry.image = if local.fresh_pull_failures.contains(&c.name) {
                pull
            } else {
                pull.backing_off(&c.image.clone().unwrap_or_default(), now)
            };
            entry.start_error = local.start_errors.get(&c.name).cloned();
        }
        let labelled = infos
            .iter()
            .filter_map(|i| labels::sandbox_attempt(&i.labels))
            .max();
        let host_network = host_network(pod);
        let (network, running) = if host_network {
            Default::default()
        } else {
            let network = self.cx.network.observe(uid).await?;
            let mut running: Vec<ProcessNetwork> = Vec::new();
            for info in &infos {
                if let TaskState::Running { pid, .. } = info.state {
                    running.push(self.cx.network.observe_process(pid).await);
                }
            }
            (network, running)
        };
        let host_ip = self.cx.node.host_ip.clone();
        let sandbox = judge_sandbox(&SandboxFacts {
            host_network,
            host_ip: &host_ip,
            attempt: local.sandbox_attempt.or(labelled),
            network: &network,
            running: &running,
        });
        let netns = match (&sandbox, network.record) {
            (Sandbox::Ready { .. }, Record::Complete(r)) => Some(r.netns_path),
            _ => None,
        };
        Ok(Observation {
            observed: Observed {
                sandbox,
                containers,
                host_ips: vec![host_ip],
                eviction: local.eviction.clone(),
                crash_loop: self.cx.node.crash_loop,
            },
            infos,
            netns,
        })
    }
}

/// The attempt a container record stands for, by its labels and task state; `None` for a
/// container without a name label or without a task record. `failed` is the start error the
/// worker kept for the container's name, if any.
///
/// A worker creates and starts a container within one pass and observes only between passes,
/// so a container that exists without a started task is a failed start (or one an agent crash
/// cut short): it is reported as containerd's CRI reports it, terminated with exit code 128 and
/// reason `StartError` at its creation time (started at the epoch), so it counts as a run and the next start waits out
/// the crash-loop back-off like any exit.
fn attempt_of(
    info: &ContainerInfo,
    probes: ProbeResults,
    failed: Option<&StartError>,
) -> Option<(String, Attempt)> {
    let l = &info.labels;
    let name = labels::container_name(l)?.to_string();
    let state = match &info.state {
        TaskState::Created => State::Terminated(Termination {
            exit_code: START_ERROR_EXIT_CODE,
            reason: START_ERROR_REASON.into(),
            signal: None,
            // containerd's CRI reports a start time of 0 for a task that never started, which
            // the kubelet writes as the Unix epoch (kubectl: `Started: Thu, 01 Jan 1970`).
            started_at: Some(Timestamp::UNIX_EPOCH),
            finished_at: info.created_at,
            message: failed
                .filter(|e| !e.is_config_error())
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the container was created but its task never started".into()),
        }),
        TaskState::Running { started_at, .. } => State::Running {
            started_at: *started_at,
        },
        TaskState::Exited(e) => {
            let message = l
                .get(LABEL_TERMINATION_LOG)
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|m| m.chars().take(4096).collect())
                .unwrap_or_default();
            let reason = if e.oom_killed {
                "OOMKilled"
            } else if e.code == 0 {
                "Completed"
            } else {
                "Error"
            };
            State::Terminated(Termination {
                exit_code: e.code,
                reason: reason.into(),
                signal: None,
                started_at: Some(e.started_at),
                finished_at: e.finished_at,
                message,
            })
        }
        TaskState::NotFound => return None,
    };
    Some((
        name,
        Attempt {
            id: ContainerId::new(info.id.to_string()),
            restart_index: labels::restart_index(l).unwrap_or(0),
            sandbox_attempt: labels::sandbox_attempt(l).unwrap_or(0),
            image: info.image.clone(),
            image_id: l.get(LABEL_IMAGE_ID).cloned().unwrap_or_default(),
            spec_image: l.get(LABEL_SPEC_IMAGE).cloned().unwrap_or_default(),
            state,
            backoff: labels::backoff(l),
            probes,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::labels::AttemptLabels;
    use crate::pod::restart::Backoff;
    use std::path::Path;

    fn created_container(restart: u32, at: Timestamp) -> ContainerInfo {
        let labels = AttemptLabels {
            pod_uid: "u1",
            pod_name: "web",
            pod_namespace: "default",
            container: "app",
            restart,
            sandbox: 0,
            spec_image: "busybox:1.28",
            image_id: String::new(),
            termination_log: Path::new("/nonexistent/termination-log"),
            backoff: Some(Backoff::initial(at)),
        }
        .to_labels();
        ContainerInfo {
            id: crate::runtime::ContainerId::new("u1-app-s0-r1").unwrap(),
            image: "docker.io/library/busybox:1.28".into(),
            labels,
            state: TaskState::Created,
            created_at: at,
            log_path: None,
        }
    }

    #[test]
    fn a_container_whose_task_never_started_is_a_start_error_that_counts_as_a_run() {
        let at = Timestamp::from_second(1_700_000_000).unwrap();
        let failed = StartError {
            reason: "RunContainerError".into(),
            message: "exec: \"nope\": executable file not found in $PATH".into(),
            at,
            backoff: None,
        };
        let table: Vec<(&str, Option<&StartError>, &str)> = vec![
            (
                "the worker kept the failure: its message",
                Some(&failed),
                "exec: \"nope\": executable file not found in $PATH",
            ),
            (
                "after an agent restart: a generic message, still a failed start",
                None,
                "the container was created but its task never started",
            ),
        ];
        for (what, error, message) in table {
            let info = created_container(1, at);
            let (name, attempt) = attempt_of(&info, ProbeResults::default(), error).unwrap();
            assert_eq!(name, "app", "{what}");
            assert_eq!(attempt.restart_index, 1, "{what}");
            assert_eq!(attempt.backoff, Some(Backoff::initial(at)), "{what}");
            assert_eq!(
                attempt.state,
                State::Terminated(Termination {
                    exit_code: 128,
                    reason: "StartError".into(),
                    signal: None,
                    started_at: Some(Timestamp::UNIX_EPOCH),
                    finished_at: at,
                    message: message.into(),
                }),
                "{what}"
            );
        }
    }
}
