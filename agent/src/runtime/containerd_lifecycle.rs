//! Container lifecycle through containerd: create (lease, snapshot, record), start (stdio
//! FIFOs, log copier, task), kill and remove.
//!
//! Pitfalls handled here (see notes/containerd.md): the rootfs mounts must be passed to
//! Tasks.Create (1.6 does not look them up); stdout and stderr are both set whenever any
//! stdio is; the FIFO readers exist before the shim opens them; the snapshot is prepared
//! under a lease until the container record holds it; NotFound from Snapshots.Remove after
//! Containers.Delete is fine (GC may have been first).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_client::services::v1::container::Runtime as ContainerRuntime;
use containerd_client::services::v1::snapshots::{MountsRequest, PrepareSnapshotRequest};
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateTaskRequest, DeleteContainerRequest,
    DeleteTaskRequest, KillRequest, StartRequest, UpdateContainerRequest, WaitRequest,
};
use containerd_client::tonic::{Code, Request};
use containerd_client::types::v1::Status as ProcessStatus;
use jiff::Timestamp;
use prost_types::{Any, FieldMask};

use super::attach::AttachPoint;
use super::containerd::{Connection, found, grpc_error, label_bool};
use super::fifo::{self, FifoSource};
use super::identity::UserDb;
use super::logs::{self, LogFile};
use super::{ContainerConfig, ContainerId, RuntimeError, devices, labels, spec};

const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
const RUNC_V2: &str = "io.containerd.runc.v2";
const SIGKILL: u32 = 9;

impl Connection {
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
        let held = super::host_capabilities::bounding_set();
        let floor = super::host_capabilities::oom_score_adj_floor(&held);
        let restricted;
        let config = match super::host_capabilities::restrict_oom_score_adj(
            config.resources.oom_score_adj,
            floor,
        ) {
            adj if adj != config.resources.oom_score_adj => {
                tracing::debug!(
                    container = id,
                    ?adj,
                    "OOM score adjustment restricted: no CAP_SYS_RESOURCE"
                );
                let mut c = config.clone();
                c.resources.oom_score_adj = adj;
                restricted = c;
                &restricted
            }
            _ => config,
        };
        super::host_mounts::verify_propagation(config)?;
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
        container_labels.insert(
            labels::STDIN_ONCE.to_string(),
            config.stdin_once.to_string(),
        );
        container_labels.insert(labels::CGROUP.to_string(), cgroups.clone());

        let lease = self.lease_create(Duration::from_secs(3600)).await?;
        let result = async {
            self.prepare_rootfs(config, &lease).await?;
            // The spec needs the image's own user files, read from the prepared root.
            let built = async {
                let users = self.image_users(id).await?;
                let oci = spec::build_with_users(config, &users, &cgroups, &host_devices, &held)?;
                serde_json::to_vec(&oci)
                    .map_err(|e| RuntimeError::InvalidConfig(format!("serialising the spec: {e}")))
            }
            .await;
            let spec_json = match built {
                Ok(json) => json,
                Err(e) => {
                    self.remove_snapshot(id).await;
                    return Err(e);
                }
            };
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

    /// The user database of the prepared snapshot `key` (see [`super::rootfs_users`]).
    async fn image_users(&self, key: &str) -> Result<UserDb, RuntimeError> {
        let mounts = self
            .snapshots()
            .mounts(self.req(MountsRequest {
                snapshotter: self.opts.snapshotter.clone(),
                key: key.to_string(),
            }))
            .await
            .map_err(|s| grpc_error("snapshot mounts", &format!("snapshot {key}"), s))?
            .into_inner()
            .mounts;
        // Beside the stdio directories, and gone again once read.
        let dir = self.opts.state_dir.join(format!("{key}.users"));
        tokio::task::spawn_blocking(move || super::rootfs_users::read_user_db(&mounts, dir))
            .await
            .map_err(|e| {
                RuntimeError::io(
                    "reading the image's users".to_string(),
                    std::io::Error::other(e),
                )
            })?
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
            // An existing task still uses these FIFOs (a second start): leave them.
            if s.code() != Code::AlreadyExists {
                let _ = std::fs::remove_dir_all(&dir);
            }
            return Err(grpc_error("create task", &format!("task {id}"), s));
        }
        let mut log = LogFile::new(log_path, self.opts.log_max_bytes);
        log.create();
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
        // The task runs whatever happens to the label; without it the start time reads as the
        // container's creation time.
        if let Err(e) = self
            .set_label(id.as_str(), labels::STARTED_AT, &started_at.to_string())
            .await
        {
            tracing::warn!(%id, error = %e, "recording the start time failed");
        }
        Ok(pid)
    }

    pub(crate) fn attach_copier(
        &self,
        id: &str,
        log: LogFile,
        stdout: FifoSource,
        stderr: Option<FifoSource>,
        stdin_keeper: Option<tokio::net::unix::pipe::Sender>,
    ) {
        let (point, tee) = AttachPoint::new(stdin_keeper);
        let stdin = point.stdin.clone();
        let exited = self.exit_future(id);
        let exited = async move {
            exited.await;
            // The agent's writer kept the container's stdin open; the process is gone.
            stdin.lock().await.take();
        };
        let copier = logs::spawn_copier(log, stdout, stderr, tee, exited);
        if let Ok(mut points) = self.attach_points.lock() {
            points.insert(id.to_string(), point);
        }
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
            let request = self.req(DeleteTaskRequest {
                container_id: name.to_string(),
            });
            let answer = self.tasks().delete(request).await;
            found(answer, "delete task", &format!("task {id}"))?;
        }
        let (snapshot_key, log_path) = match self.get_container(name).await {
            Ok(c) => (
                Some(c.snapshot_key),
                c.labels.get(labels::LOG_PATH).map(PathBuf::from),
            ),
            Err(e) if e.is_not_found() => (None, None),
            Err(e) => return Err(e),
        };
        if snapshot_key.is_some() {
            let request = self.req(DeleteContainerRequest {
                id: name.to_string(),
            });
            let answer = self.containers().delete(request).await;
            found(answer, "delete container", &format!("container {id}"))?;
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
        if let Ok(mut points) = self.attach_points.lock() {
            points.remove(name);
        }
        let dir = self.stdio_dir(name);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(RuntimeError::io(format!("removing {}", dir.display()), e));
        }
        // The container's logs go with it, rotated files included (the kubelet's log
        // manager `Clean`): `kubectl logs` reads only containers that exist.
        if let Some(log) = log_path {
            logs::remove_log_files(&log)
                .map_err(|e| RuntimeError::io(format!("removing {}", log.display()), e))?;
        }
        Ok(())
    }
}
