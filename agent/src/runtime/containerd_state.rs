//! Container state from containerd: one container's task state, waiting for its exit, and
//! the listing that adopts the output of running containers after an agent restart.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_client::services::v1::{
    Container, GetRequest, ListContainersRequest, ListTasksRequest, WaitRequest,
};
use containerd_client::types::v1::{Process, Status as ProcessStatus};
use jiff::Timestamp;

use super::containerd::{Connection, found, grpc_error, timestamp};
use super::fifo::{self, FifoSource};
use super::logs::LogFile;
use super::{ContainerId, ContainerInfo, ExitInfo, RuntimeError, TaskState, cgroup, labels};

/// A containerd filter string literal: `"…"` with `"` and `\\` escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl Connection {
    pub(crate) async fn get_task(&self, id: &str) -> Result<Option<Process>, RuntimeError> {
        let request = self.req(GetRequest {
            container_id: id.to_string(),
            exec_id: String::new(),
        });
        let answer = self.tasks().get(request).await;
        Ok(found(answer, "get task", &format!("task {id}"))?.and_then(|r| r.process))
    }

    /// The state of a container given its record and (maybe) its task.
    fn task_state(container: &Container, task: Option<&Process>) -> TaskState {
        let created_at = timestamp(container.created_at).unwrap_or(Timestamp::UNIX_EPOCH);
        let started_at: Option<Timestamp> = container
            .labels
            .get(labels::STARTED_AT)
            .and_then(|s| s.parse().ok());
        let oom = || {
            container
                .labels
                .get(labels::CGROUP)
                .is_some_and(|cg| cgroup::oom_killed(cg))
        };
        let Some(task) = task else {
            return match started_at {
                None => TaskState::Created,
                Some(started_at) => TaskState::Exited(ExitInfo {
                    code: 137,
                    started_at,
                    finished_at: timestamp(container.updated_at).unwrap_or(started_at),
                    oom_killed: false,
                }),
            };
        };
        let started_at = started_at.unwrap_or(created_at);
        match ProcessStatus::try_from(task.status).unwrap_or(ProcessStatus::Unknown) {
            ProcessStatus::Created => TaskState::Created,
            ProcessStatus::Stopped => TaskState::Exited(ExitInfo {
                code: task.exit_status as i32,
                started_at,
                finished_at: timestamp(task.exited_at).unwrap_or_else(Timestamp::now),
                oom_killed: oom(),
            }),
            ProcessStatus::Running
            | ProcessStatus::Paused
            | ProcessStatus::Pausing
            | ProcessStatus::Unknown => TaskState::Running {
                pid: task.pid,
                started_at,
            },
        }
    }

    pub(crate) async fn status(&self, id: &ContainerId) -> Result<TaskState, RuntimeError> {
        let container = match self.get_container(id.as_str()).await {
            Ok(c) => c,
            Err(e) if e.is_not_found() => return Ok(TaskState::NotFound),
            Err(e) => return Err(e),
        };
        let task = self.get_task(id.as_str()).await?;
        Ok(Self::task_state(&container, task.as_ref()))
    }

    pub(crate) async fn wait_exit(&self, id: &ContainerId) -> Result<ExitInfo, RuntimeError> {
        let resp = self
            .tasks()
            .wait(self.req(WaitRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
            .map_err(|s| grpc_error("wait task", &format!("task {id}"), s))?
            .into_inner();
        let container = self.get_container(id.as_str()).await?;
        let started_at = container
            .labels
            .get(labels::STARTED_AT)
            .and_then(|s| s.parse().ok())
            .or(timestamp(container.created_at))
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let oom_killed = container
            .labels
            .get(labels::CGROUP)
            .is_some_and(|cg| cgroup::oom_killed(cg));
        self.copier_finished(id.as_str(), Duration::from_secs(2))
            .await;
        Ok(ExitInfo {
            code: resp.exit_status as i32,
            started_at,
            finished_at: timestamp(resp.exited_at).unwrap_or_else(Timestamp::now),
            oom_killed,
        })
    }

    pub(crate) async fn copier_finished(&self, id: &str, limit: Duration) {
        let done = self
            .copiers
            .lock()
            .ok()
            .and_then(|c| c.get(id).map(|c| c.done.clone()));
        if let Some(mut done) = done {
            let _ = tokio::time::timeout(limit, done.wait_for(|d| *d)).await;
        }
    }

    pub(crate) async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let containers = self.containers_where(vec![]).await?;
        let tasks: HashMap<String, Process> = self
            .tasks()
            .list(self.req(ListTasksRequest {
                filter: String::new(),
            }))
            .await
            .map_err(|s| grpc_error("list tasks", "tasks", s))?
            .into_inner()
            .tasks
            .into_iter()
            // Tasks.List fills `id` (the container id), not `container_id`.
            .map(|p| (p.id.clone(), p))
            .collect();
        Ok(self.infos(containers, tasks))
    }

    /// The containers labelled `key=value`, each with its task. Cheaper than [`Self::list`]
    /// by as much as the namespace is larger: containerd filters the records, and only these
    /// containers' tasks are asked for (Tasks.List asks every task's shim for its state).
    pub(crate) async fn list_labelled(
        &self,
        key: &str,
        value: &str,
    ) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let filter = format!("labels.{}=={}", quoted(key), quoted(value));
        let containers = self.containers_where(vec![filter]).await?;
        let mut tasks = HashMap::new();
        for c in &containers {
            if let Some(task) = self.get_task(&c.id).await? {
                tasks.insert(c.id.clone(), task);
            }
        }
        Ok(self.infos(containers, tasks))
    }

    async fn containers_where(&self, filters: Vec<String>) -> Result<Vec<Container>, RuntimeError> {
        Ok(self
            .containers()
            .list(self.req(ListContainersRequest { filters }))
            .await
            .map_err(|s| grpc_error("list containers", "containers", s))?
            .into_inner()
            .containers)
    }

    fn infos(
        &self,
        containers: Vec<Container>,
        tasks: HashMap<String, Process>,
    ) -> Vec<ContainerInfo> {
        let mut out = Vec::with_capacity(containers.len());
        for c in containers {
            let task = tasks.get(&c.id);
            let state = Self::task_state(&c, task);
            let log_path = c.labels.get(labels::LOG_PATH).map(PathBuf::from);
            if let (Some(task), Some(log_path)) = (task, log_path.as_ref()) {
                let live = matches!(state, TaskState::Running { .. } | TaskState::Created);
                if live {
                    self.adopt_output(&c.id, task, log_path);
                }
            }
            let Ok(id) = ContainerId::new(c.id.clone()) else {
                continue;
            };
            out.push(ContainerInfo {
                id,
                image: c.image.clone(),
                labels: c.labels.into_iter().collect::<BTreeMap<_, _>>(),
                state,
                created_at: timestamp(c.created_at).unwrap_or(Timestamp::UNIX_EPOCH),
                log_path,
            });
        }
        out
    }

    /// Reopens the FIFOs of a live task nobody in this process copies yet.
    fn adopt_output(&self, id: &str, task: &Process, log_path: &Path) {
        let copying = self
            .copiers
            .lock()
            .map(|c| c.get(id).is_some_and(|c| !*c.done.borrow()))
            .unwrap_or(true);
        if copying || task.stdout.is_empty() {
            return;
        }
        let open = || -> std::io::Result<(FifoSource, Option<FifoSource>)> {
            let stdout = FifoSource::open(Path::new(&task.stdout))?;
            let stderr = if task.stderr.is_empty() {
                None
            } else {
                Some(FifoSource::open(Path::new(&task.stderr))?)
            };
            Ok((stdout, stderr))
        };
        match open() {
            Ok((stdout, stderr)) => {
                let stdin = if task.stdin.is_empty() {
                    None
                } else {
                    fifo::open_sender(Path::new(&task.stdin)).ok()
                };
                let log = LogFile::new(log_path.to_path_buf(), self.opts.log_max_bytes);
                self.attach_copier(id, log, stdout, stderr, stdin);
                tracing::debug!(id, "adopted the output of a running container");
            }
            Err(e) => tracing::warn!(id, error = %e, "cannot reopen the stdio FIFOs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_container_without_task_reads_as_exited_137() {
        let mut c = Container::default();
        let t = Timestamp::from_second(1_700_000_000).unwrap();
        assert_eq!(Connection::task_state(&c, None), TaskState::Created);
        c.labels
            .insert(labels::STARTED_AT.to_string(), t.to_string());
        match Connection::task_state(&c, None) {
            TaskState::Exited(info) => {
                assert_eq!(info.code, 137);
                assert_eq!(info.started_at, t);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
