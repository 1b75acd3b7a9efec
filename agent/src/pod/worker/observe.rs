//! Observing a pod: its container attempts from containerd (by label), its sandbox, its image
//! pulls, start errors and probe results, as the planner's [`Observed`].

use super::{PodWorker, WorkerError, all_containers, host_network};
use crate::network::{ProcessNetwork, Record};
use crate::pod::labels::{self, LABEL_IMAGE_ID, LABEL_SPEC_IMAGE, LABEL_TERMINATION_LOG};
use crate::pod::model::{
    Attempt, ContainerId, Observed, ObservedContainer, ProbeResults, Sandbox, State, Termination,
};
use crate::pod::prober;
use crate::pod::sandbox::{SandboxFacts, judge_sandbox};
use crate::runtime::{ContainerInfo, TaskState};
use berth_shared::k8s_openapi::api::core::v1::Pod;
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
        let infos: Vec<ContainerInfo> = self
            .cx
            .runtime
            .list()
            .await?
            .into_iter()
            .filter(|c| labels::pod_uid(&c.labels) == Some(uid))
            .collect();
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
            if let Some((name, attempt)) = attempt_of(info, probes) {
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
            },
            infos,
            netns,
        })
    }
}

/// The attempt a container record stands for, by its labels and task state; `None` for a
/// container without a name label or without a task record.
fn attempt_of(info: &ContainerInfo, probes: ProbeResults) -> Option<(String, Attempt)> {
    let l = &info.labels;
    let name = labels::container_name(l)?.to_string();
    let state = match &info.state {
        TaskState::Created => State::Waiting {
            reason: "ContainerCreating".into(),
            message: String::new(),
        },
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
