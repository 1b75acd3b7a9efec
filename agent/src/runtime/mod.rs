//! The agent's container runtime: containers, tasks, exec, events and logs through containerd.
//!
//! This module is the public face of the containerd adapter. No containerd or tonic type leaks
//! out of it: callers speak in [`ContainerConfig`], [`TaskState`], [`RuntimeEvent`] and friends.
//! The gRPC calls live in `containerd*.rs`; the OCI runtime spec is built by the pure
//! [`spec`] module; container output is copied from FIFOs into CRI-format log files by `logs`.
//!
//! Everything the agent needs to rebuild its state after a restart is kept in containerd:
//! the caller's labels (pod uid, container name, restart count, hash …) plus a few of ours
//! (`io.berth.runtime.*`: log path, stdio flags, cgroup path, start time). [`Runtime::list`]
//! returns them and reattaches the log copiers of containers that are still running.

mod attach;
mod capabilities;
pub(crate) mod cgroup;
mod containerd;
mod containerd_attach;
mod containerd_content;
mod containerd_events;
mod containerd_exec;
mod containerd_images;
mod containerd_lifecycle;
mod containerd_state;
mod containerd_usage;
mod devices;
pub mod expand;
mod fifo;
mod host_capabilities;
mod host_mounts;
pub mod identity;
mod logs;
mod rootfs_users;
pub mod seccomp;
pub mod spec;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use jiff::Timestamp;

pub use containerd_attach::{AttachControl, AttachHandle, AttachIo, AttachStdin};
pub use containerd_content::{BlobDescriptor, BlobInfo, Lease};
pub use containerd_exec::{ExecControl, ExecHandle, ExecStdin, ExecStream};
pub use containerd_images::ImageRecord;

/// Labels the runtime itself puts on every container (besides the caller's labels).
pub mod labels {
    /// The file the container's stdout/stderr are copied to.
    pub const LOG_PATH: &str = "io.berth.runtime.log-path";
    /// `true` when the container was created with an open stdin.
    pub const STDIN: &str = "io.berth.runtime.stdin";
    /// `true` when the container was created with a terminal.
    pub const TTY: &str = "io.berth.runtime.tty";
    /// `true` when the first attached client's end of input closes the container's stdin.
    pub const STDIN_ONCE: &str = "io.berth.runtime.stdin-once";
    /// The container's cgroup path (relative to each controller's mount point).
    pub const CGROUP: &str = "io.berth.runtime.cgroup";
    /// RFC 3339 time the task was started (set by [`super::Runtime::start`]).
    pub const STARTED_AT: &str = "io.berth.runtime.started-at";
    /// Prefix shared by the labels above.
    pub const PREFIX: &str = "io.berth.runtime.";
}

/// A containerd container id: 1–76 characters of `[A-Za-z0-9_.-]`, starting alphanumeric
/// (containerd's identifier rule).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerId(String);

impl ContainerId {
    /// Validates `id` against containerd's identifier rule.
    pub fn new(id: impl Into<String>) -> Result<Self, RuntimeError> {
        let id = id.into();
        let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        let first_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if !first_ok || id.len() > 76 || !id.chars().all(valid_char) {
            return Err(RuntimeError::InvalidConfig(format!(
                "container id {id:?} must be 1-76 characters of [A-Za-z0-9_.-] starting with a letter or digit"
            )));
        }
        Ok(ContainerId(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The parts of an image's config that shape a container (OCI image config `config` object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// `KEY=value` entries.
    pub env: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// Empty when the image does not set one.
    pub working_dir: String,
    /// `uid`, `uid:gid`, `name` or `name:group`; empty for root.
    pub user: String,
    /// e.g. `SIGQUIT`; `None` means SIGTERM.
    pub stop_signal: Option<String>,
}

/// The image a container runs: its name in containerd, the chain id of its top layer (the
/// snapshot the container's rootfs is prepared on) and its config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerImage {
    /// As stored in containerd, e.g. `docker.io/library/busybox:1.28`.
    pub name: String,
    /// `sha256:…` chain id of the image's last layer.
    pub chain_id: String,
    pub config: ImageConfig,
}

/// How a host path or a fresh filesystem appears in the container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountKind {
    /// A recursive bind mount of `source`.
    Bind,
    /// A fresh tmpfs (`source` is ignored).
    Tmpfs,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub destination: String,
    pub source: String,
    pub kind: MountKind,
    pub read_only: bool,
    /// Extra mount options, e.g. `size=64m` for a tmpfs.
    pub options: Vec<String>,
}

/// cgroup limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// memory.limit_in_bytes (swap is limited to the same value).
    pub memory_limit_bytes: Option<i64>,
    /// cpu.cfs_quota_us
    pub cpu_quota: Option<i64>,
    /// cpu.cfs_period_us
    pub cpu_period: Option<u64>,
    /// cpu.shares
    pub cpu_shares: Option<u64>,
    /// /proc/<pid>/oom_score_adj of the container's processes.
    pub oom_score_adj: Option<i32>,
}

/// The securityContext of a container, resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Security {
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    /// The pod's `supplementalGroups`, then its `fsGroup`.
    pub supplemental_groups: Vec<u32>,
    /// `supplementalGroupsPolicy: Strict`: no groups from the image's `/etc/group`.
    pub strict_supplemental_groups: bool,
    pub privileged: bool,
    pub read_only_root_fs: bool,
    /// Capability names with or without `CAP_`, or `ALL`.
    pub add_capabilities: Vec<String>,
    pub drop_capabilities: Vec<String>,
    /// `Some(false)` sets no_new_privileges.
    pub allow_privilege_escalation: Option<bool>,
    /// The seccomp filter (`seccompProfile`, the agent's `--seccomp-default`).
    pub seccomp: seccomp::Seccomp,
    /// The AppArmor profile to run under (`None`: none).
    pub apparmor_profile: Option<String>,
    /// Namespaced sysctls set in the container's namespaces (the pod's `sysctls`).
    pub sysctls: BTreeMap<String, String>,
}

/// Everything needed to create one container (plain data; the spec is built from it purely).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerConfig {
    pub id: ContainerId,
    pub image: ContainerImage,
    /// Kubernetes `command`: replaces the image's ENTRYPOINT when non-empty.
    pub command: Vec<String>,
    /// Kubernetes `args`: replaces the image's CMD when non-empty.
    pub args: Vec<String>,
    /// The container's environment (added after the image's, same keys replaced). `$(VAR)`
    /// references in command and args are expanded from it.
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    pub mounts: Vec<Mount>,
    /// Path of the pod's network namespace; `None` = the host network.
    pub network_namespace: Option<PathBuf>,
    pub hostname: Option<String>,
    pub resources: Resources,
    pub security: Security,
    pub stdin: bool,
    /// With `stdin`: the first attached client's end of input closes it for good.
    pub stdin_once: bool,
    pub tty: bool,
    /// The PID namespace: a private one, the host's (`hostPID`), or another container's
    /// (an ephemeral container's `targetContainerName`).
    pub pid_namespace: NamespaceMode,
    /// The IPC namespace: a private one or the host's (`hostIPC`).
    pub ipc_namespace: NamespaceMode,
    pub labels: BTreeMap<String, String>,
    /// The file stdout/stderr are written to in CRI format.
    pub log_path: PathBuf,
    /// cgroup parent below the runtime's per-namespace cgroup, e.g. `pod<uid>`; the container's
    /// cgroup is `/<containerd namespace>[/<parent>]/<id>`.
    pub cgroup_parent: Option<String>,
}

impl ContainerConfig {
    /// A container of `image` that asks for nothing more: the image's command and
    /// environment, no mounts, the host network, no limits or security settings, private PID
    /// and IPC namespaces, no labels, its log at `log_path`.
    pub fn new(id: ContainerId, image: ContainerImage, log_path: PathBuf) -> Self {
        ContainerConfig {
            id,
            image,
            command: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            working_dir: None,
            mounts: Vec::new(),
            network_namespace: None,
            hostname: None,
            resources: Resources::default(),
            security: Security::default(),
            stdin: false,
            stdin_once: false,
            tty: false,
            pid_namespace: NamespaceMode::Private,
            ipc_namespace: NamespaceMode::Private,
            labels: BTreeMap::new(),
            log_path,
            cgroup_parent: None,
        }
    }
}

/// Which namespace of one kind a container's processes live in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NamespaceMode {
    /// A new one of its own.
    #[default]
    Private,
    /// The host's (no namespace entry in the spec).
    Host,
    /// The one at this path, e.g. `/proc/<pid>/ns/pid` of another container's process.
    Join(PathBuf),
}

/// How a container's main process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: i32,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// The kernel's OOM killer killed a process of the container (its memory cgroup says so).
    pub oom_killed: bool,
}

/// The state of a container's task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// The container exists but its task was not started yet.
    Created,
    Running {
        pid: u32,
        started_at: Timestamp,
    },
    /// The task ended. A started container whose task vanished (for example after a host
    /// reboot) is reported with code 137, like the kubelet's `ContainerStatusUnknown`.
    Exited(ExitInfo),
    /// No such container.
    NotFound,
}

/// One container in the runtime's namespace, as found by [`Runtime::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: ContainerId,
    pub image: String,
    /// All labels, the caller's and the runtime's own (`io.berth.runtime.*`).
    pub labels: BTreeMap<String, String>,
    pub state: TaskState,
    pub created_at: Timestamp,
    pub log_path: Option<PathBuf>,
}

/// What the event stream reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// A container's main process exited.
    TaskExit {
        id: ContainerId,
        code: i32,
        at: Timestamp,
    },
    /// The OOM killer hit a process of the container.
    TaskOom { id: ContainerId },
    /// The subscription broke and was re-established: events may have been missed, relist.
    Resync,
}

/// stdio wanted for an exec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecIo {
    pub stdin: bool,
    pub tty: bool,
}

/// Where and how the runtime connects, and where it keeps its FIFOs.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    pub socket: PathBuf,
    pub namespace: String,
    pub snapshotter: String,
    /// FIFOs for container and exec stdio live here (`<state_dir>/<container id>/…`).
    pub state_dir: PathBuf,
    /// A log file is rotated when it grows past this size.
    pub log_max_bytes: u64,
    /// How long `connect` keeps retrying while the socket is not there yet.
    pub connect_timeout: Duration,
}

impl RuntimeOptions {
    /// Defaults: overlayfs, FIFOs under `/run/berth/<namespace>`, 10 MiB logs, 5 s to connect.
    pub fn new(socket: &Path, namespace: &str) -> Self {
        RuntimeOptions {
            socket: socket.to_path_buf(),
            namespace: namespace.to_string(),
            snapshotter: "overlayfs".to_string(),
            state_dir: PathBuf::from("/run/berth").join(namespace),
            log_max_bytes: 10 * 1024 * 1024,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Errors of the runtime adapter.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot connect to containerd at {socket}: {message}")]
    Connect { socket: String, message: String },
    #[error("containerd {version} is too old (1.6 or later is needed)")]
    UnsupportedVersion { version: String },
    #[error("{what} not found")]
    NotFound { what: String },
    #[error("{what} already exists")]
    AlreadyExists { what: String },
    #[error("invalid container configuration: {0}")]
    InvalidConfig(String),
    /// The pod's settings cannot be honoured for this container and image (an image user
    /// missing from the image, a seccomp profile that is not there …): the kubelet's
    /// `CreateContainerConfigError`, its message as is.
    #[error("{0}")]
    ContainerConfig(String),
    #[error("image {image} is not unpacked (no snapshot {chain_id})")]
    ImageNotUnpacked { image: String, chain_id: String },
    #[error("containerd {op}: {message}")]
    Containerd {
        op: &'static str,
        message: String,
        transient: bool,
    },
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
    #[error("exec did not finish within {0:?}")]
    ExecTimeout(Duration),
}

impl RuntimeError {
    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            RuntimeError::Connect { .. } | RuntimeError::ExecTimeout(_) => true,
            RuntimeError::Containerd { transient, .. } => *transient,
            RuntimeError::Io { .. } => true,
            RuntimeError::UnsupportedVersion { .. }
            | RuntimeError::NotFound { .. }
            | RuntimeError::AlreadyExists { .. }
            | RuntimeError::InvalidConfig(_)
            | RuntimeError::ContainerConfig(_)
            | RuntimeError::ImageNotUnpacked { .. } => false,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, RuntimeError::NotFound { .. })
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        RuntimeError::Io {
            op: op.into(),
            source,
        }
    }
}

/// A connection to containerd in one namespace. Cheap to clone; clones share the connection,
/// the exec-spec cache and the log copiers.
#[derive(Clone)]
pub struct Runtime {
    conn: Arc<containerd::Connection>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("namespace", &self.conn.namespace())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Connects with [`RuntimeOptions::new`] defaults, retrying briefly while the socket is
    /// missing, and checks that containerd is 1.6 or later.
    pub async fn connect(socket: &Path, namespace: &str) -> Result<Runtime, RuntimeError> {
        Self::connect_with(RuntimeOptions::new(socket, namespace)).await
    }

    pub async fn connect_with(options: RuntimeOptions) -> Result<Runtime, RuntimeError> {
        let conn = containerd::Connection::connect(options).await?;
        Ok(Runtime {
            conn: Arc::new(conn),
        })
    }

    pub fn namespace(&self) -> &str {
        self.conn.namespace()
    }

    /// The snapshotter images are unpacked into and containers run on.
    pub fn snapshotter(&self) -> &str {
        &self.conn.opts.snapshotter
    }

    /// Where the snapshotter keeps its snapshots (its plugin's exported `root`), the image
    /// filesystem the kubelet's `imagefs` signals watch; `None` if containerd does not say.
    pub async fn snapshotter_root(&self) -> Result<Option<String>, RuntimeError> {
        self.conn.snapshotter_root().await
    }

    /// containerd's version, e.g. `1.6.20~ds1` (for `containerd://<version>` in nodeInfo).
    pub async fn version(&self) -> Result<String, RuntimeError> {
        self.conn.version().await
    }

    /// Prepares the rootfs snapshot on the image's chain id and creates the container record
    /// (labels + OCI spec) under a lease.
    pub async fn create(&self, config: &ContainerConfig) -> Result<ContainerId, RuntimeError> {
        self.conn.create(config).await
    }

    /// Creates the task with stdout/stderr copied to the log file, starts it; returns its pid.
    pub async fn start(&self, id: &ContainerId) -> Result<u32, RuntimeError> {
        self.conn.start(id).await
    }

    /// Sends `signal` to the container's main process; a task that is gone is not an error.
    pub async fn kill(&self, id: &ContainerId, signal: i32) -> Result<(), RuntimeError> {
        self.conn.kill(id, signal).await
    }

    pub async fn status(&self, id: &ContainerId) -> Result<TaskState, RuntimeError> {
        self.conn.status(id).await
    }

    /// Waits until the task exits (and its output reached the log file).
    pub async fn wait_exit(&self, id: &ContainerId) -> Result<ExitInfo, RuntimeError> {
        self.conn.wait_exit(id).await
    }

    /// Deletes the task (killing it if it still runs), the container and its snapshot.
    /// Idempotent.
    pub async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.conn.remove(id).await
    }

    /// Every container in the namespace with its labels and state. Running containers whose
    /// output nobody in this process copies yet get their log copier back (adoption).
    pub async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        self.conn.list().await
    }

    /// One container's labels.
    pub async fn labels(&self, id: &ContainerId) -> Result<BTreeMap<String, String>, RuntimeError> {
        let c = self.conn.get_container(id.as_str()).await?;
        Ok(c.labels.into_iter().collect())
    }

    /// The containers labelled `key=value` (one pod's), as [`Self::list`] describes them.
    pub async fn list_labelled(
        &self,
        key: &str,
        value: &str,
    ) -> Result<Vec<ContainerInfo>, RuntimeError> {
        self.conn.list_labelled(key, value).await
    }

    /// Runs `cmd` in the container with the container's env, cwd and user.
    pub async fn exec(
        &self,
        id: &ContainerId,
        cmd: &[String],
        io: ExecIo,
    ) -> Result<ExecHandle, RuntimeError> {
        containerd_exec::exec(&self.conn, id, cmd, io).await
    }

    /// Attaches to the container's main process: its output from now on and, if asked and the
    /// container has one, its stdin. Fails unless the container runs.
    pub async fn attach(
        &self,
        id: &ContainerId,
        io: AttachIo,
    ) -> Result<AttachHandle, RuntimeError> {
        containerd_attach::attach(&self.conn, id, io).await
    }

    /// Runs `cmd` and returns its exit code and combined stdout+stderr. On timeout the process
    /// is killed and [`RuntimeError::ExecTimeout`] returned.
    pub async fn exec_output(
        &self,
        id: &ContainerId,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<(i32, Vec<u8>), RuntimeError> {
        containerd_exec::exec_output(&self.conn, id, cmd, timeout).await
    }

    /// Task exits and OOM kills in the namespace. The subscription runs in a spawned task; it
    /// reports [`RuntimeEvent::Resync`] each time it is (re-)established — first, and after
    /// containerd went away — so a consumer that relists on Resync misses no exit. The task
    /// ends when the stream is dropped.
    pub fn events(&self) -> impl Stream<Item = RuntimeEvent> + Send + 'static {
        containerd_events::subscribe(&self.conn)
    }
}
