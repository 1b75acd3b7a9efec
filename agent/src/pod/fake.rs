//! Recording fakes of the worker's ports, for unit tests: a runtime that keeps containers in
//! memory and exits them on signals, a network, an image store, the API and an event sink.
//! Every write they get goes into one shared, ordered call log (reads are not logged); events
//! go into their own log. Like the kubelet's `FakeRuntime`, state-based: a later pass observes
//! what an earlier one did.

use super::labels;
use super::ports::{ContainerRuntime, EventSink, ImagePuller, PodApi, SandboxNetwork};
use super::worker::{Clock, Context, NodeSide};
use crate::image::{PullError, PullPolicy, PulledImage};
use crate::network::dns::ClusterDns;
use crate::network::{
    NetnsId, NetnsPresence, NetworkError, NetworkFacts, PodNetwork, PodRef, ProcessNetwork, Record,
    RecordedNetwork,
};
use crate::runtime::{
    ContainerConfig, ContainerId, ContainerInfo, ExitInfo, RuntimeError, TaskState,
};
use berth_api::client::ClientError;
use berth_api::k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use futures::future::BoxFuture;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One write a port received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Create(String),
    Start(String),
    Kill(String, i32),
    Remove(String),
    Exec(String),
    SetupNetwork(String),
    TeardownNetwork(String),
    Pull(String),
    WriteStatus,
    DeletePod(String),
}

type Log = Arc<Mutex<Vec<Call>>>;

/// A copy of what the fake API holds under `key`.
fn stored<T: Clone>(objects: &Mutex<BTreeMap<String, T>>, key: &str) -> Option<T> {
    let objects = objects.lock().unwrap_or_else(|e| e.into_inner());
    objects.get(key).cloned()
}

fn push(log: &Log, call: Call) {
    log.lock().unwrap_or_else(|e| e.into_inner()).push(call);
}

/// A container runtime in memory. A signal ends a running task (exit code 128 + signal)
/// unless the test told the runtime to ignore it.
pub struct FakeRuntime {
    log: Log,
    clock: Clock,
    containers: Mutex<BTreeMap<String, ContainerInfo>>,
    /// The configuration each container was created with.
    configs: Mutex<BTreeMap<String, ContainerConfig>>,
    ignored_signals: Mutex<BTreeSet<i32>>,
    changed: tokio::sync::Notify,
    /// Listings of one pod's containers (`list_pod`), the cost of an observation.
    pod_listings: std::sync::atomic::AtomicUsize,
}

impl FakeRuntime {
    fn containers(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ContainerInfo>> {
        self.containers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many times a pod's containers were listed so far.
    pub fn pod_listings(&self) -> usize {
        self.pod_listings.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The container's main process ignores `signal` (as a process without a SIGTERM handler
    /// running as pid 1 does).
    pub fn ignore_signal(&self, signal: i32) {
        self.ignored_signals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(signal);
    }

    /// The container's main process exits with `code` now.
    pub fn exit(&self, id: &str, code: i32) {
        self.end(id, code);
    }

    /// The configuration the container was created with.
    pub fn config(&self, id: &str) -> Option<ContainerConfig> {
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// The labels the container was created with.
    pub fn labels(&self, id: &str) -> BTreeMap<String, String> {
        self.containers()
            .get(id)
            .map(|c| c.labels.clone())
            .unwrap_or_default()
    }

    pub fn is_running(&self, id: &str) -> bool {
        self.containers()
            .get(id)
            .is_some_and(|c| matches!(c.state, TaskState::Running { .. }))
    }

    fn end(&self, id: &str, code: i32) {
        let now = (self.clock)();
        if let Some(c) = self.containers().get_mut(id)
            && let TaskState::Running { started_at, .. } = c.state
        {
            c.state = TaskState::Exited(ExitInfo {
                code,
                started_at,
                finished_at: now,
                oom_killed: false,
            });
        }
        self.changed.notify_waiters();
    }

    fn not_found(id: &ContainerId) -> RuntimeError {
        RuntimeError::NotFound {
            what: format!("container {id}"),
        }
    }
}

impl ContainerRuntime for FakeRuntime {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ContainerInfo>, RuntimeError>> {
        let list = self.containers().values().cloned().collect();
        Box::pin(async move { Ok(list) })
    }

    fn list_pod<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ContainerInfo>, RuntimeError>> {
        self.pod_listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let list = self
            .containers()
            .values()
            .filter(|c| labels::pod_uid(&c.labels) == Some(uid))
            .cloned()
            .collect();
        Box::pin(async move { Ok(list) })
    }

    fn create<'a>(
        &'a self,
        config: &'a ContainerConfig,
    ) -> BoxFuture<'a, Result<ContainerId, RuntimeError>> {
        push(&self.log, Call::Create(config.id.to_string()));
        let info = ContainerInfo {
            id: config.id.clone(),
            image: config.image.name.clone(),
            labels: config.labels.clone(),
            state: TaskState::Created,
            created_at: (self.clock)(),
            log_path: Some(config.log_path.clone()),
        };
        self.containers().insert(config.id.to_string(), info);
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(config.id.to_string(), config.clone());
        Box::pin(async move { Ok(config.id.clone()) })
    }

    fn start<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<u32, RuntimeError>> {
        push(&self.log, Call::Start(id.to_string()));
        let now = (self.clock)();
        let started = match self.containers().get_mut(id.as_str()) {
            Some(c) => {
                c.state = TaskState::Running {
                    pid: 4242,
                    started_at: now,
                };
                Ok(4242)
            }
            None => Err(Self::not_found(id)),
        };
        Box::pin(async move { started })
    }

    fn kill<'a>(
        &'a self,
        id: &'a ContainerId,
        signal: i32,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        push(&self.log, Call::Kill(id.to_string(), signal));
        let ignored = self
            .ignored_signals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&signal);
        if !ignored || signal == 9 {
            self.end(id.as_str(), 128 + signal);
        }
        Box::pin(async { Ok(()) })
    }

    fn wait_exit<'a>(
        &'a self,
        id: &'a ContainerId,
    ) -> BoxFuture<'a, Result<ExitInfo, RuntimeError>> {
        Box::pin(async move {
            loop {
                // Registered before the check, so an exit in between is not missed.
                let mut changed = std::pin::pin!(self.changed.notified());
                changed.as_mut().enable();
                match self.containers().get(id.as_str()).map(|c| c.state.clone()) {
                    Some(TaskState::Exited(e)) => return Ok(e),
                    None => return Err(Self::not_found(id)),
                    Some(_) => {}
                }
                changed.await;
            }
        })
    }

    fn remove<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        push(&self.log, Call::Remove(id.to_string()));
        self.containers().remove(id.as_str());
        self.changed.notify_waiters();
        Box::pin(async { Ok(()) })
    }

    fn exec_output<'a>(
        &'a self,
        id: &'a ContainerId,
        _cmd: &'a [String],
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<(i32, Vec<u8>), RuntimeError>> {
        push(&self.log, Call::Exec(id.to_string()));
        Box::pin(async { Ok((0, Vec::new())) })
    }
}

/// A pod network that hands the pods 10.42.0.5, 10.42.0.6, … in order of setup, each in a
/// netns of its own. Tests break a pod's netns with [`FakeNetwork::delete_netns`].
pub struct FakeNetwork {
    log: Log,
    pods: Mutex<BTreeMap<String, NetworkFacts>>,
    setups: Mutex<u8>,
}

impl FakeNetwork {
    fn pods(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, NetworkFacts>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes the pod's netns behind the agent's back (`ip netns delete`); its record stays.
    pub fn delete_netns(&self, uid: &str) {
        if let Some(facts) = self.pods().get_mut(uid) {
            facts.netns = NetnsPresence::Absent;
        }
    }

    /// The pod's address as recorded, if it has a network.
    pub fn ip(&self, uid: &str) -> Option<String> {
        match &self.pods().get(uid)?.record {
            Record::Complete(r) => Some(r.ip.to_string()),
            _ => None,
        }
    }
}

impl SandboxNetwork for FakeNetwork {
    fn observe<'a>(
        &'a self,
        pod_uid: &'a str,
    ) -> BoxFuture<'a, Result<NetworkFacts, NetworkError>> {
        let facts = self.pods().get(pod_uid).cloned().unwrap_or_default();
        Box::pin(async move { Ok(facts) })
    }

    fn observe_process(&self, _pid: u32) -> BoxFuture<'_, ProcessNetwork> {
        // The fake runtime's processes are not real: no evidence either way.
        Box::pin(async { ProcessNetwork::default() })
    }

    fn setup<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<PodNetwork, NetworkError>> {
        push(&self.log, Call::SetupNetwork(pod.uid.clone()));
        let mut pods = self.pods();
        let existing = match pods.get(&pod.uid) {
            Some(NetworkFacts {
                record: Record::Complete(r),
                netns: NetnsPresence::Mounted(_),
            }) => Some(r.clone()),
            _ => None,
        };
        let recorded = existing.unwrap_or_else(|| {
            let mut n = self.setups.lock().unwrap_or_else(|e| e.into_inner());
            let r = RecordedNetwork {
                netns_path: PathBuf::from(format!("/run/netns/fake-{}-{n}", pod.uid)),
                ip: [10, 42, 0, 5u8.saturating_add(*n)].into(),
                gateway: [10, 42, 0, 1].into(),
                host_veth: Some(true),
            };
            let netns = NetnsPresence::Mounted(NetnsId {
                dev: 4,
                ino: 1000 + u64::from(*n),
            });
            *n = n.saturating_add(1);
            pods.insert(
                pod.uid.clone(),
                NetworkFacts {
                    record: Record::Complete(r.clone()),
                    netns,
                },
            );
            r
        });
        let net = PodNetwork {
            netns_path: recorded.netns_path,
            ip: recorded.ip,
            gateway: recorded.gateway,
        };
        Box::pin(async move { Ok(net) })
    }

    fn teardown<'a>(&'a self, pod_uid: &'a str) -> BoxFuture<'a, Result<(), NetworkError>> {
        push(&self.log, Call::TeardownNetwork(pod_uid.to_string()));
        self.pods().remove(pod_uid);
        Box::pin(async { Ok(()) })
    }
}

/// An image store where every pull succeeds at once.
pub struct FakeImages {
    log: Log,
    present: Mutex<BTreeSet<String>>,
}

fn image(reference: &str) -> PulledImage {
    PulledImage {
        name: reference.to_string(),
        digest: "sha256:0123".to_string(),
        size_bytes: 1024,
        config: Default::default(),
        chain_id: "sha256:4567".to_string(),
        duration: Duration::ZERO,
        already_present: false,
    }
}

impl ImagePuller for FakeImages {
    fn get<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<PulledImage>, PullError>> {
        let present = self
            .present
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(reference);
        Box::pin(async move { Ok(present.then(|| image(reference))) })
    }

    fn pull<'a>(
        &'a self,
        reference: &'a str,
        _policy: PullPolicy,
    ) -> BoxFuture<'a, Result<PulledImage, PullError>> {
        push(&self.log, Call::Pull(reference.to_string()));
        self.present
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(reference.to_string());
        Box::pin(async move { Ok(image(reference)) })
    }
}

/// An API that accepts every write, with the ConfigMaps a test gives it and no Secrets.
pub struct FakeApi {
    log: Log,
    clock: Clock,
    /// Claims by `namespace/name`.
    pub claims: Mutex<BTreeMap<String, PersistentVolumeClaim>>,
    pub volumes: Mutex<BTreeMap<String, PersistentVolume>>,
    /// ConfigMaps by `namespace/name`.
    pub config_maps: Mutex<BTreeMap<String, ConfigMap>>,
    /// ServiceAccount tokens issued so far (each token names its number).
    tokens_issued: std::sync::atomic::AtomicUsize,
}

impl PodApi for FakeApi {
    fn write_status<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, Result<Option<Pod>, ClientError>> {
        push(&self.log, Call::WriteStatus);
        Box::pin(async move { Ok(Some(pod.clone())) })
    }

    fn delete_pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        _uid: &'a str,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        push(&self.log, Call::DeletePod(format!("{namespace}/{name}")));
        Box::pin(async { Ok(()) })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, ClientError>> {
        let cm = stored(&self.config_maps, &format!("{namespace}/{name}"));
        Box::pin(async move { Ok(cm) })
    }

    fn secret<'a>(
        &'a self,
        _namespace: &'a str,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, ClientError>> {
        Box::pin(async { Ok(None) })
    }

    fn services<'a>(
        &'a self,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Service>, ClientError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn claim<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolumeClaim>, ClientError>> {
        let found = stored(&self.claims, &format!("{namespace}/{name}"));
        Box::pin(async move { Ok(found) })
    }

    fn persistent_volume<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolume>, ClientError>> {
        let found = stored(&self.volumes, name);
        Box::pin(async move { Ok(found) })
    }

    fn service_account_token<'a>(
        &'a self,
        pod: &'a Pod,
        need: &'a crate::pod::api_access::TokenNeed,
    ) -> BoxFuture<'a, Result<crate::pod::ports::IssuedToken, ClientError>> {
        let n = self
            .tokens_issued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let issued_at = (self.clock)().as_second();
        Box::pin(async move {
            Ok(crate::pod::ports::IssuedToken {
                token: format!(
                    "token-{n}-for-{}-{}",
                    pod.metadata.name.clone().unwrap_or_default(),
                    need.key()
                ),
                issued_at,
                expires_at: issued_at + need.expiration_seconds,
            })
        })
    }
}

/// Events as `(reason, message)`.
#[derive(Default)]
pub struct FakeEvents {
    recorded: Mutex<Vec<(String, String)>>,
}

impl EventSink for FakeEvents {
    fn record<'a>(
        &'a self,
        _pod: &'a Pod,
        _warning: bool,
        reason: &'a str,
        message: &'a str,
        _field_path: Option<&'a str>,
    ) -> BoxFuture<'a, ()> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((reason.to_string(), message.to_string()));
        Box::pin(async {})
    }

    fn forget(&self, _uid: &str) {}
}

/// All the fakes, sharing one call log, a temporary root directory and a clock that follows
/// tokio's (paused) time from the moment they were made.
pub struct Fakes {
    pub runtime: Arc<FakeRuntime>,
    pub network: Arc<FakeNetwork>,
    pub images: Arc<FakeImages>,
    pub api: Arc<FakeApi>,
    pub events: Arc<FakeEvents>,
    pub root: tempfile::TempDir,
    log: Log,
    clock: Clock,
}

impl Fakes {
    pub fn new() -> Fakes {
        let log = Log::default();
        // Wall time starts now (probers compare it with the real clock) and then moves with
        // tokio's clock only.
        let (wall, start) = (Timestamp::now(), tokio::time::Instant::now());
        let clock: Clock = Arc::new(move || {
            wall.saturating_add(start.elapsed())
                .unwrap_or(Timestamp::MAX)
        });
        Fakes {
            runtime: Arc::new(FakeRuntime {
                log: log.clone(),
                clock: clock.clone(),
                containers: Mutex::default(),
                configs: Mutex::default(),
                ignored_signals: Mutex::default(),
                changed: tokio::sync::Notify::new(),
                pod_listings: Default::default(),
            }),
            network: Arc::new(FakeNetwork {
                log: log.clone(),
                pods: Mutex::default(),
                setups: Mutex::default(),
            }),
            images: Arc::new(FakeImages {
                log: log.clone(),
                present: Mutex::default(),
            }),
            api: Arc::new(FakeApi {
                log: log.clone(),
                clock: clock.clone(),
                claims: Mutex::default(),
                volumes: Mutex::default(),
                config_maps: Mutex::default(),
                tokens_issued: Default::default(),
            }),
            events: Arc::new(FakeEvents::default()),
            root: tempfile::tempdir().expect("a temporary directory"),
            log,
            clock,
        }
    }

    /// A worker context over these fakes.
    pub fn context(&self) -> Arc<Context> {
        Arc::new(Context {
            runtime: self.runtime.clone(),
            network: self.network.clone(),
            images: self.images.clone(),
            api: self.api.clone(),
            events: self.events.clone(),
            metrics: Arc::default(),
            node: NodeSide {
                root_dir: self.root.path().join("agent"),
                log_dir: self.root.path().join("logs"),
                host_ip: "192.168.1.10".to_string(),
                dns: ClusterDns {
                    servers: vec!["10.43.0.10".to_string()],
                    domain: "cluster.local".to_string(),
                },
                cpus: 2,
                memory_bytes: 4 << 30,
                api_endpoint: None,
                security: Default::default(),
                crash_loop: Default::default(),
            },
            clock: self.clock.clone(),
            cgroups: Arc::new(crate::node::qos_cgroups::NoCgroups),
        })
    }

    /// The calls since the last `take_calls`, in order.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The reasons of the events recorded so far, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.events().into_iter().map(|(r, _)| r).collect()
    }

    pub fn events(&self) -> Vec<(String, String)> {
        self.events
            .recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
