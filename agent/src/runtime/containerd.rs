//! containerd gRPC calls for the container lifecycle: connect, create, start, kill, status,
//! wait, remove and list (with log-copier adoption).
//!
//! Pitfalls this file handles (see notes/containerd.md): every request carries the
//! `containerd-namespace` header; the rootfs mounts must be passed to Tasks.Create (1.6 does
//! not look them up); stdout and stderr are both set whenever any stdio is; the FIFO readers
//! exist before the shim opens them; the snapshot is prepared under a lease until the
//! container record holds it; NotFound from Snapshots.Remove after Containers.Delete is fine
//! (GC may have been first).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use containerd_client::services::v1::container::Runtime as ContainerRuntime;
use containerd_client::services::v1::snapshots::{
    MountsRequest, PrepareSnapshotRequest, RemoveSnapshotRequest,
};
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateTaskRequest, DeleteContainerRequest,
    DeleteTaskRequest, GetContainerRequest, GetRequest, KillRequest, ListContainersRequest,
    ListTasksRequest, StartRequest, UpdateContainerRequest, WaitRequest,
};
use containerd_client::tonic::metadata::{AsciiMetadataValue, MetadataValue};
use containerd_client::tonic::transport::Channel;
use containerd_client::tonic::{Code, Request, Status};
use containerd_client::types::v1::{Process, Status as ProcessStatus};
use jiff::Timestamp;
use prost_types::{Any, FieldMask};

use super::fifo::{self, FifoSource};
use super::logs::{self, Copier, LogFile};
use super::{
    ContainerConfig, ContainerId, ContainerInfo, ExitInfo, RuntimeError, RuntimeOptions, TaskState,
    cgroup, devices, labels, spec,
};

const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
const RUNC_V2: &str = "io.containerd.runc.v2";
const SIGKILL: u32 = 9;

/// The connection plus the per-process state shared by all clones of a `Runtime`.
pub(crate) struct Connection {
    pub(crate) channel: Channel,
    pub(crate) ns: AsciiMetadataValue,
    pub(crate) opts: RuntimeOptions,
    copiers: Mutex<HashMap<String, Copier>>,
    /// The OCI `process` object of each container's spec, the base of its execs.
    pub(crate) exec_bases: Mutex<HashMap<String, serde_json::Value>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The copiers belong to this connection: a fresh Runtime (after an agent restart, or
        // in a test simulating one) adopts the containers and copies their output itself.
        if let Ok(copiers) = self.copiers.lock() {
            for c in copiers.values() {
                c.abort();
            }
        }
    }
}

/// Maps a gRPC status to a runtime error; `what` names the object for NotFound/AlreadyExists.
pub(crate) fn grpc_error(op: &'static str, what: &str, status: Status) -> RuntimeError {
    let message = status.message().to_string();
    match status.code() {
        Code::NotFound => RuntimeError::NotFound {
            what: format!("{what} ({op}: {message})"),
        },
        Code::AlreadyExists => RuntimeError::AlreadyExists {
            what: what.to_string(),
        },
        code => RuntimeError::Containerd {
            op,
            message: format!("{code:?}: {message}"),
            // tonic reports a broken connection as Unknown "transport error"; other
            // Unknowns are containerd's own failures (e.g. runc refusing a spec).
            transient: matches!(
                code,
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::ResourceExhausted
                    | Code::Cancelled
            ) || (code == Code::Unknown && message.contains("transport error")),
        },
    }
}

pub(crate) fn timestamp(ts: Option<prost_types::Timestamp>) -> Option<Timestamp> {
    let ts = ts?;
    if ts.seconds <= 0 && ts.nanos <= 0 {
        return None;
    }
    Timestamp::new(ts.seconds, ts.nanos).ok()
}

/// Parses `1.6.20~ds1` / `v1.7.0` into (major, minor).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let v = version.trim_start_matches('v');
    let mut parts = v.split(['.', '-', '~', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn label_bool(labels: &HashMap<String, String>, key: &str) -> bool {
    labels.get(key).is_some_and(|v| v == "true")
}

impl Connection {
    pub(crate) async fn connect(opts: RuntimeOptions) -> Result<Connection, RuntimeError> {
        let ns: AsciiMetadataValue =
            MetadataValue::try_from(opts.namespace.as_str()).map_err(|_| {
                RuntimeError::InvalidConfig(format!(
                    "invalid containerd namespace {:?}",
                    opts.namespace
                ))
            })?;
        let socket = opts.socket.display().to_string();
        let deadline = tokio::time::Instant::now() + opts.connect_timeout;
        let channel = loop {
            match containerd_client::connect(&opts.socket).await {
                Ok(channel) => break channel,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(RuntimeError::Connect {
                        socket,
                        message: format!("{e:?}"),
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let conn = Connection {
            channel,
            ns,
            opts,
            copiers: Mutex::new(HashMap::new()),
            exec_bases: Mutex::new(HashMap::new()),
        };
        let version = conn.version().await?;
        match major_minor(&version) {
            Some((major, minor)) if (major, minor) >= (1, 6) => Ok(conn),
            _ => Err(RuntimeError::UnsupportedVersion { version }),
        }
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.opts.namespace
    }

    /// A request in this connection's namespace.
    pub(crate) fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert("containerd-namespace", self.ns.clone());
        r
    }

    /// A request in this namespace under `lease`.
    pub(crate) fn req_lease<T>(&self, msg: T, lease: &str) -> Result<Request<T>, RuntimeError> {
        let mut r = self.req(msg);
        let value: AsciiMetadataValue = MetadataValue::try_from(lease)
            .map_err(|_| RuntimeError::InvalidConfig(format!("invalid lease id {lease:?}")))?;
        r.metadata_mut().insert("containerd-lease", value);
        Ok(r)
    }

    pub(crate) fn tasks(
        &self,
    ) -> containerd_client::services::v1::tasks_client::TasksClient<Channel> {
        containerd_client::services::v1::tasks_client::TasksClient::new(self.channel.clone())
    }

    pub(crate) fn containers(
        &self,
    ) -> containerd_client::services::v1::containers_client::ContainersClient<Channel> {
        containerd_client::services::v1::containers_client::ContainersClient::new(
            self.channel.clone(),
        )
    }

    pub(crate) fn snapshots(
        &self,
    ) -> containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient<Channel>
    {
        containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient::new(
            self.channel.clone(),
        )
    }

    pub(crate) async fn version(&self) -> Result<String, RuntimeError> {
        let mut client = containerd_client::services::v1::version_client::VersionClient::new(
            self.channel.clone(),
        );
        let resp = client
            .version(Request::new(()))
            .await
            .map_err(|s| grpc_error("version", "version", s))?;
        Ok(resp.into_inner().version)
    }

    pub(crate) async fn get_container(&self, id: &str) -> Result<Container, RuntimeError> {
        let what = format!("container {id}");
        self.containers()
            .get(self.req(GetContainerRequest { id: id.to_string() }))
            .await
            .map_err(|s| grpc_error("get container", &what, s))?
            .into_inner()
            .container
            .ok_or(RuntimeError::NotFound { what })
    }

    pub(crate) async fn create(
        &self,
        config: &ContainerConfig,
    ) -> Result<ContainerId, RuntimeError> {
        let id = config.id.as_str();
        let cgroups = spec::cgroups_path(self.namespace(), config.cgroup_parent.as_deref(), id);
        let host_devices = if config.security.privileged {
            devices::host_devices()
        } else {
            Vec::new()
        };
        let oci = spec::build(config, &cgroups, &host_devices)?;
        let spec_json = serde_json::to_vec(&oci)
            .map_err(|e| RuntimeError::InvalidConfig(format!("serialising the spec: {e}")))?;
        let mut container_labels: HashMap<String, String> = config
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        container_labels.insert(
            labels::LOG_PATH.to_string(),
            config.log_path.display().to_string(),
        );
        container_labels.insert(labels::STDIN.to_string(), config.stdin.to_string());
        container_labels.insert(labels::TTY.to_string(), config.tty.to_string());
        container_labels.insert(labels::CGROUP.to_string(), cgroups);

        let lease = self.lease_create(Duration::from_secs(3600)).await?;
        let result = async {
            self.prepare_rootfs(config, &lease).await?;
            let container = Container {
                id: id.to_string(),
                labels: container_labels,
                image: config.image.name.clone(),
                runtime: Some(ContainerRuntime {
                    name: RUNC_V2.to_string(),
                    options: None,
                }),
                spec: Some(Any {
                    type_url: SPEC_TYPE_URL.to_string(),
                    value: spec_json,
                }),
                snapshotter: self.opts.snapshotter.clone(),
                snapshot_key: id.to_string(),
                ..Default::default()
            };
            let created = self
                .containers()
                .create(self.req_lease(
                    CreateContainerRequest {
                        container: Some(container),
                    },
                    &lease,
                )?)
                .await;
            if let Err(status) = created {
                self.remove_snapshot(id).await;
                return Err(grpc_error(
                    "create container",
                    &format!("container {id}"),
                    status,
                ));
            }
            Ok(())
        }
        .await;
        // Whatever happened, the lease goes: on success the container holds the snapshot.
        if let Err(e) = self.lease_delete(&lease).await {
            tracing::debug!(error = %e, "deleting the create lease failed; it expires by itself");
        }
        result.map(|()| config.id.clone())
    }

    /// Snapshots.Prepare of the container's rw layer on the image's chain id. A leftover
    /// snapshot of an interrupted create (no container record) is replaced.
    async fn prepare_rootfs(
        &self,
        config: &ContainerConfig,
        lease: &str,
    ) -> Result<(), RuntimeError> {
        let id = config.id.as_str();
        for attempt in 0..2 {
            let prepared = self
                .snapshots()
                .prepare(self.req_lease(
                    PrepareSnapshotRequest {
                        snapshotter: self.opts.snapshotter.clone(),
                        key: id.to_string(),
                        parent: config.image.chain_id.clone(),
                        labels: HashMap::new(),
                    },
                    lease,
                )?)
                .await;
            match prepared {
                Ok(_) => return Ok(()),
                Err(s) if s.code() == Code::AlreadyExists && attempt == 0 => {
                    match self.get_container(id).await {
                        Ok(_) => {
                            return Err(RuntimeError::AlreadyExists {
                                what: format!("container {id}"),
                            });
                        }
                        Err(e) if e.is_not_found() => self.remove_snapshot(id).await,
                        Err(e) => return Err(e),
                    }
                }
                Err(s) if s.code() == Code::NotFound => {
                    return Err(RuntimeError::ImageNotUnpacked {
                        image: config.image.name.clone(),
                        chain_id: config.image.chain_id.clone(),
                    });
                }
                Err(s) => return Err(grpc_error("prepare snapshot", &format!("snapshot {id}"), s)),
            }
        }
        Err(RuntimeError::AlreadyExists {
            what: format!("snapshot {id}"),
        })
    }

    async fn remove_snapshot(&self, key: &str) {
        let removed = self
            .snapshots()
            .remove(self.req(RemoveSnapshotRequest {
                snapshotter: self.opts.snapshotter.clone(),
                key: key.to_string(),
            }))
            .await;
        if let Err(s) = removed
            && s.code() != Code::NotFound
        {
            tracing::warn!(key, error = %s.message(), "removing snapshot failed");
        }
    }

    fn stdio_dir(&self, id: &str) -> PathBuf {
        self.opts.state_dir.join(id)
    }

    pub(crate) async fn start(&self, id: &ContainerId) -> Result<u32, RuntimeError> {
        let container = self.get_container(id.as_str()).await?;
        let tty = label_bool(&container.labels, labels::TTY);
        let stdin = label_bool(&container.labels, labels::STDIN);
        let log_path = container
            .labels
            .get(labels::LOG_PATH)
            .map(PathBuf::from)
            .ok_or_else(|| {
                RuntimeError::InvalidConfig(format!("container {id} has no log path label"))
            })?;
        let mounts = self
            .snapshots()
            .mounts(self.req(MountsRequest {
                snapshotter: container.snapshotter.clone(),
                key: container.snapshot_key.clone(),
            }))
            .await
            .map_err(|s| grpc_error("snapshot mounts", &format!("snapshot of {id}"), s))?
            .into_inner()
            .mounts;

        let dir = self.stdio_dir(id.as_str());
        std::fs::create_dir_all(&dir)
            .map_err(|e| RuntimeError::io(format!("creating {}", dir.display()), e))?;
        let stdout_path = dir.join("stdout");
        let stderr_path = dir.join("stderr");
        let stdin_path = dir.join("stdin");
        let io = |e| RuntimeError::io(format!("opening the stdio FIFOs in {}", dir.display()), e);
        fifo::make(&stdout_path).map_err(io)?;
        let stdout = FifoSource::open(&stdout_path).map_err(io)?;
        let stderr = if tty {
            None
        } else {
            fifo::make(&stderr_path).map_err(io)?;
            Some(FifoSource::open(&stderr_path).map_err(io)?)
        };
        let stdin_keeper = if stdin {
            fifo::make(&stdin_path).map_err(io)?;
            Some(fifo::open_sender(&stdin_path).map_err(io)?)
        } else {
            None
        };
        let path_str = |p: &Path| p.display().to_string();
        let created = self
            .tasks()
            .create(self.req(CreateTaskRequest {
                container_id: id.to_string(),
                rootfs: mounts,
                stdin: if stdin {
                    path_str(&stdin_path)
                } else {
                    String::new()
                },
                stdout: path_str(&stdout_path),
                stderr: if tty {
                    String::new()
                } else {
                    path_str(&stderr_path)
                },
                terminal: tty,
                ..Default::default()
            }))
            .await;
        if let Err(s) = created {
            drop((stdout, stderr, stdin_keeper));
            let _ = std::fs::remove_dir_all(&dir);
            return Err(grpc_error("create task", &format!("container {id}"), s));
        }
        let log = LogFile::new(log_path, self.opts.log_max_bytes);
        self.attach_copier(id.as_str(), log, stdout, stderr, stdin_keeper);

        // Taken before Start: a process that exits at once must not end before it began.
        let started_at = Timestamp::now();
        let pid = self
            .tasks()
            .start(self.req(StartRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
            .map_err(|s| grpc_error("start task", &format!("task {id}"), s))?
            .into_inner()
            .pid;
        self.set_label(id.as_str(), labels::STARTED_AT, &started_at.to_string())
            .await?;
        Ok(pid)
    }

    fn attach_copier(
        &self,
        id: &str,
        log: LogFile,
        stdout: FifoSource,
        stderr: Option<FifoSource>,
        stdin_keeper: Option<tokio::net::unix::pipe::Sender>,
    ) {
        let exited = self.exit_future(id);
        let exited = async move {
            exited.await;
            drop(stdin_keeper);
        };
        let copier = logs::spawn_copier(log, stdout, stderr, exited);
        if let Ok(mut copiers) = self.copiers.lock()
            && let Some(old) = copiers.insert(id.to_string(), copier)
        {
            old.abort();
        }
    }

    /// Resolves once the task is gone or has exited; survives containerd restarts.
    fn exit_future(&self, id: &str) -> impl std::future::Future<Output = ()> + Send + 'static {
        let channel = self.channel.clone();
        let ns = self.ns.clone();
        let id = id.to_string();
        async move {
            loop {
                let mut client = containerd_client::services::v1::tasks_client::TasksClient::new(
                    channel.clone(),
                );
                let mut req = Request::new(WaitRequest {
                    container_id: id.clone(),
                    exec_id: String::new(),
                });
                req.metadata_mut()
                    .insert("containerd-namespace", ns.clone());
                match client.wait(req).await {
                    Ok(_) => return,
                    Err(s)
                        if matches!(
                            s.code(),
                            Code::Unavailable | Code::Unknown | Code::Cancelled
                        ) =>
                    {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    Err(_) => return,
                }
            }
        }
    }

    /// Sets one label on the container record.
    pub(crate) async fn set_label(
        &self,
        id: &str,
        key: &str,
        value: &str,
    ) -> Result<(), RuntimeError> {
        let container = Container {
            id: id.to_string(),
            labels: HashMap::from([(key.to_string(), value.to_string())]),
            ..Default::default()
        };
        self.containers()
            .update(self.req(UpdateContainerRequest {
                container: Some(container),
                update_mask: Some(FieldMask {
                    paths: vec![format!("labels.{key}")],
                }),
            }))
            .await
            .map_err(|s| grpc_error("update container", &format!("container {id}"), s))?;
        Ok(())
    }

    pub(crate) async fn kill(&self, id: &ContainerId, signal: i32) -> Result<(), RuntimeError> {
        let signal = u32::try_from(signal)
            .map_err(|_| RuntimeError::InvalidConfig(format!("invalid signal {signal}")))?;
        let killed = self
            .tasks()
            .kill(self.req(KillRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
                signal,
                all: false,
            }))
            .await;
        match killed {
            Ok(_) => Ok(()),
            // No task, or it already finished: nothing left to signal.
            Err(s) if matches!(s.code(), Code::NotFound | Code::FailedPrecondition) => Ok(()),
            Err(s) => Err(grpc_error("kill task", &format!("task {id}"), s)),
        }
    }

    async fn get_task(&self, id: &str) -> Result<Option<Process>, RuntimeError> {
        match self
            .tasks()
            .get(self.req(GetRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
        {
            Ok(resp) => Ok(resp.into_inner().process),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(grpc_error("get task", &format!("task {id}"), s)),
        }
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

    async fn copier_finished(&self, id: &str, limit: Duration) {
        let done = self
            .copiers
            .lock()
            .ok()
            .and_then(|c| c.get(id).map(|c| c.done.clone()));
        if let Some(mut done) = done {
            let _ = tokio::time::timeout(limit, done.wait_for(|d| *d)).await;
        }
    }

    pub(crate) async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let name = id.as_str();
        if let Some(task) = self.get_task(name).await? {
            let status = ProcessStatus::try_from(task.status).unwrap_or(ProcessStatus::Unknown);
            if status != ProcessStatus::Stopped {
                let _ = self
                    .tasks()
                    .kill(self.req(KillRequest {
                        container_id: name.to_string(),
                        exec_id: String::new(),
                        signal: SIGKILL,
                        all: true,
                    }))
                    .await;
                let mut tasks = self.tasks();
                let wait = tasks.wait(self.req(WaitRequest {
                    container_id: name.to_string(),
                    exec_id: String::new(),
                }));
                let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
            }
            match self
                .tasks()
                .delete(self.req(DeleteTaskRequest {
                    container_id: name.to_string(),
                }))
                .await
            {
                Ok(_) => {}
                Err(s) if s.code() == Code::NotFound => {}
                Err(s) => return Err(grpc_error("delete task", &format!("task {id}"), s)),
            }
        }
        let snapshot_key = match self.get_container(name).await {
            Ok(c) => Some(c.snapshot_key),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        if snapshot_key.is_some() {
            match self
                .containers()
                .delete(self.req(DeleteContainerRequest {
                    id: name.to_string(),
                }))
                .await
            {
                Ok(_) => {}
                Err(s) if s.code() == Code::NotFound => {}
                Err(s) => {
                    return Err(grpc_error(
                        "delete container",
                        &format!("container {id}"),
                        s,
                    ));
                }
            }
        }
        let key = snapshot_key
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| name.to_string());
        self.remove_snapshot(&key).await;

        self.copier_finished(name, Duration::from_secs(2)).await;
        if let Ok(mut copiers) = self.copiers.lock()
            && let Some(c) = copiers.remove(name)
        {
            c.abort();
        }
        if let Ok(mut bases) = self.exec_bases.lock() {
            bases.remove(name);
        }
        let dir = self.stdio_dir(name);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(RuntimeError::io(format!("removing {}", dir.display()), e));
        }
        Ok(())
    }

    pub(crate) async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let containers = self
            .containers()
            .list(self.req(ListContainersRequest { filters: vec![] }))
            .await
            .map_err(|s| grpc_error("list containers", "containers", s))?
            .into_inner()
            .containers;
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
        Ok(out)
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
    fn versions_parse_to_major_minor() {
        assert_eq!(major_minor("1.6.20~ds1"), Some((1, 6)));
        assert_eq!(major_minor("v1.7.13"), Some((1, 7)));
        assert_eq!(major_minor("2.0.0-rc.1"), Some((2, 0)));
        assert_eq!(major_minor("garbage"), None);
    }

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
