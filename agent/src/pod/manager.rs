//! The pods of this node: watches the pods bound to it, keeps their latest objects, runs one
//! worker pass per pod uid on the shared reconcile runtime (woken by pod changes, container
//! exits, probe changes and a periodic resync), and cleans up after pods that are gone. Also
//! answers the agent server's questions (log files, exec) about these pods.

use super::model::{ImagePull, ProbeResults, Sandbox, StartError};
use super::worker::{
    LABEL_CONTAINER, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTART,
};
use crate::config::Config;
use crate::image::ImageService;
use crate::network::Network;
use crate::network::dns::ClusterDns;
use crate::runtime::{ContainerId, ExecIo, Runtime, RuntimeEvent, TaskState};
use crate::server::{Backend, ExecRequest, ExecStreams, LogTarget};
use berth_shared::client::{Client, ListParams, WatchEvent};
use berth_shared::k8s_openapi::api::core::v1::Pod;
use berth_shared::reconcile::{self, Queue};
use berth_shared::resource;
use futures::StreamExt;
use futures::future::BoxFuture;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Per-pod state that lives only in the agent (rebuilt from containerd and the API after a
/// restart, or harmlessly lost: image pull back-offs, start errors, the sandbox handle).
#[derive(Debug, Clone, Default)]
pub struct Local {
    pub pulls: BTreeMap<String, ImagePull>,
    pub start_errors: BTreeMap<String, StartError>,
    pub sandbox: Option<Sandbox>,
    /// Pull failures not yet reported: the status shows `ErrImagePull` once before the
    /// back-off turns it into `ImagePullBackOff`.
    pub fresh_pull_failures: std::collections::BTreeSet<String>,
}

type Probers = HashMap<
    String,
    (
        String,
        tokio::task::JoinHandle<()>,
        Arc<std::sync::atomic::AtomicBool>,
    ),
>;

/// Everything a worker pass uses.
pub struct Shared {
    pub config: Config,
    pub client: Client,
    pub runtime: Runtime,
    pub images: ImageService,
    pub network: Network,
    pub host_ip: String,
    pub dns: ClusterDns,
    pub events: Arc<super::events::Recorder>,
    pub facts_cpus: u32,
    pub facts_memory: i64,
    pub queue: Queue<String>,
    pub probes: super::prober::Results,
    pub probers: Mutex<Probers>,
    pods: Mutex<HashMap<String, Pod>>,
    local: Mutex<HashMap<String, Local>>,
}

impl Shared {
    pub fn local(&self, uid: &str) -> Local {
        self.local
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
            .unwrap_or_default()
    }

    pub fn local_mut(&self, uid: &str, f: impl FnOnce(&mut Local)) {
        let mut map = self.local.lock().unwrap_or_else(|e| e.into_inner());
        f(map.entry(uid.to_string()).or_default());
    }

    /// Keeps a newer version of a pod (e.g. the answer to a status write).
    pub fn remember(&self, pod: Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        let newer = |old: &Pod| {
            let rv = |p: &Pod| {
                p.metadata
                    .resource_version
                    .as_deref()
                    .and_then(|r| r.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            rv(&pod) >= rv(old)
        };
        if pods.get(&uid).is_none_or(newer) {
            pods.insert(uid, pod);
        }
    }

    pub fn forget(&self, uid: &str) {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.local
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        let mut probers = self.probers.lock().unwrap_or_else(|e| e.into_inner());
        probers.retain(|_, (u, h, _)| {
            if u == uid {
                h.abort();
            }
            u != uid
        });
    }

    fn pod(&self, uid: &str) -> Option<Pod> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
    }

    fn find(&self, ns: &str, name: &str) -> Option<Pod> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(ns)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }
}

/// What the pods of this node see of it: its address and allocatable resources.
#[derive(Debug, Clone)]
pub struct NodeResources {
    pub host_ip: String,
    pub cpus: u32,
    pub memory_bytes: i64,
}

/// The pod manager.
pub struct PodManager {
    shared: Arc<Shared>,
}

/// The server's view of the pod manager, attached once the manager exists.
#[derive(Default)]
pub struct ManagerBackend {
    manager: OnceLock<Arc<PodManager>>,
}

impl ManagerBackend {
    pub fn attach(&self, m: Arc<PodManager>) {
        let _ = self.manager.set(m);
    }
}

impl PodManager {
    pub fn new_backend() -> Arc<ManagerBackend> {
        Arc::new(ManagerBackend::default())
    }

    pub fn new(
        config: Config,
        client: Client,
        runtime: Runtime,
        images: ImageService,
        network: Network,
        node: NodeResources,
    ) -> PodManager {
        let events = Arc::new(super::events::Recorder::new(
            client.clone(),
            config.node_name.clone(),
        ));
        PodManager {
            shared: Arc::new(Shared {
                config,
                client,
                runtime,
                images,
                network,
                host_ip: node.host_ip,
                dns: ClusterDns {
                    servers: Vec::new(),
                    domain: "cluster.local".to_string(),
                },
                events,
                facts_cpus: node.cpus,
                facts_memory: node.memory_bytes,
                queue: Queue::new(),
                probes: Arc::new(Mutex::new(HashMap::<String, ProbeResults>::new())),
                probers: Mutex::new(HashMap::new()),
                pods: Mutex::new(HashMap::new()),
                local: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Runs until `shutdown`. Containers keep running when the agent stops.
    pub async fn run(&self, shutdown: CancellationToken) {
        let shared = self.shared.clone();
        let s = shared.clone();
        let workers = tokio::spawn(reconcile::run(
            shared.queue.clone(),
            8,
            shutdown.clone(),
            "pod-worker",
            move |uid: String| {
                let s = s.clone();
                async move {
                    let pod = s.pod(&uid);
                    match pod {
                        Some(pod) => s.reconcile(&uid, pod).await,
                        None => s.finish(&uid).await.map(|()| reconcile::Outcome::Done),
                    }
                }
            },
        ));
        tokio::spawn(watch_runtime(shared.clone(), shutdown.clone()));
        tokio::spawn(resync(shared.clone(), shutdown.clone()));
        watch_pods(shared.clone(), shutdown.clone()).await;
        let _ = workers.await;
    }
}

/// Lists and watches the pods bound to this node; a vanished pod's uid is queued so its
/// worker cleans up.
async fn watch_pods(s: Arc<Shared>, shutdown: CancellationToken) {
    let Some(pods_rt) = resource::by_plural("", "v1", "pods") else {
        return;
    };
    let params = ListParams {
        field_selector: Some(format!("spec.nodeName={}", s.config.node_name)),
        ..ListParams::default()
    };
    while !shutdown.is_cancelled() {
        let list = match s.client.list::<Pod>(pods_rt, None, &params).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "listing pods failed");
                tokio::select! { _ = tokio::time::sleep(Duration::from_secs(1)) => continue, _ = shutdown.cancelled() => return }
            }
        };
        let listed: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let known: Vec<String> = s
            .pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        for uid in known.iter().filter(|u| !listed.contains(u)) {
            s.pods.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
            s.queue.add(uid.clone());
        }
        for p in list.items {
            if let Some(uid) = p.metadata.uid.clone() {
                s.remember(p);
                s.queue.add(uid);
            }
        }
        let mut watch = match s
            .client
            .watch::<Pod>(pods_rt, None, &params, &list.resource_version)
            .await
        {
            Ok(w) => w,
            Err(_) => continue,
        };
        loop {
            let next = tokio::select! { n = watch.next() => n, _ = shutdown.cancelled() => return };
            match next {
                Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
                    if let Some(uid) = p.metadata.uid.clone() {
                        s.remember(p);
                        s.queue.add(uid);
                    }
                }
                Some(Ok(WatchEvent::Deleted(p))) => {
                    if let Some(uid) = p.metadata.uid.clone() {
                        s.pods
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&uid);
                        s.queue.add(uid);
                    }
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "pod watch ended; relisting");
                    break;
                }
                None => break,
            }
        }
    }
}

/// Container exits wake their pod's worker; a resync wakes every pod.
async fn watch_runtime(s: Arc<Shared>, shutdown: CancellationToken) {
    let events = s.runtime.events();
    futures::pin_mut!(events);
    loop {
        let ev = tokio::select! { e = events.next() => e, _ = shutdown.cancelled() => return };
        match ev {
            Some(RuntimeEvent::TaskExit { id, .. } | RuntimeEvent::TaskOom { id }) => {
                if let Ok(list) = s.runtime.list().await
                    && let Some(uid) = list
                        .iter()
                        .find(|c| c.id == id)
                        .and_then(|c| c.labels.get(LABEL_POD_UID))
                {
                    s.queue.add(uid.clone());
                }
            }
            Some(_) => enqueue_all(&s).await,
            None => return,
        }
    }
}

/// Every known pod and every pod uid found in containerd or the network state.
async fn enqueue_all(s: &Shared) {
    let mut uids: Vec<String> = s
        .pods
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .cloned()
        .collect();
    if let Ok(list) = s.runtime.list().await {
        uids.extend(
            list.iter()
                .filter_map(|c| c.labels.get(LABEL_POD_UID).cloned()),
        );
    }
    if let Ok(net) = s.network.list().await {
        uids.extend(net);
    }
    uids.sort();
    uids.dedup();
    for u in uids {
        s.queue.add(u);
    }
}

async fn resync(s: Arc<Shared>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! { _ = tick.tick() => enqueue_all(&s).await, _ = shutdown.cancelled() => return }
    }
}

impl Backend for ManagerBackend {
    fn log_target(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogTarget, String> {
        let m = self.manager.get().ok_or("the agent is starting")?;
        let p = m
            .shared
            .find(ns, pod)
            .ok_or_else(|| format!("pod {ns}/{pod} not found on this node"))?;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let dir = m
            .shared
            .config
            .log_dir
            .join(format!("{ns}_{pod}_{uid}"))
            .join(container);
        let mut restarts: Vec<u32> = std::fs::read_dir(&dir)
            .map_err(|_| format!("container \"{container}\" in pod \"{pod}\" is waiting to start"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
            .collect();
        restarts.sort_unstable();
        let pick = if previous {
            restarts
                .len()
                .checked_sub(2)
                .map(|i| restarts[i])
                .ok_or_else(|| {
                    format!(
                        "previous terminated container \"{container}\" in pod \"{pod}\" not found"
                    )
                })?
        } else {
            *restarts.last().ok_or_else(|| {
                format!("container \"{container}\" in pod \"{pod}\" is waiting to start")
            })?
        };
        let runtime = m.shared.runtime.clone();
        let (uid2, name) = (uid.clone(), container.to_string());
        let running = Arc::new(move || {
            // Follow ends when this attempt is no longer running.
            let rt = runtime.clone();
            let (uid, name) = (uid2.clone(), name.clone());
            let handle = tokio::runtime::Handle::current();
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    handle.block_on(async {
                        rt.list().await.map(|l| {
                            l.iter().any(|c| {
                                c.labels.get(LABEL_POD_UID) == Some(&uid)
                                    && c.labels.get(LABEL_CONTAINER) == Some(&name)
                                    && c.labels
                                        .get(LABEL_RESTART)
                                        .and_then(|r| r.parse::<u32>().ok())
                                        == Some(pick)
                                    && matches!(c.state, TaskState::Running { .. })
                            })
                        })
                    })
                })
                .join()
                .ok()
                .and_then(Result::ok)
                .unwrap_or(false)
            })
        });
        Ok(LogTarget {
            path: dir.join(format!("{pick}.log")),
            running,
        })
    }

    fn exec(&self, req: ExecRequest) -> BoxFuture<'static, Result<ExecStreams, String>> {
        let m = self.manager.get().cloned();
        Box::pin(async move {
            let m = m.ok_or("the agent is starting")?;
            let list = m.shared.runtime.list().await.map_err(|e| e.to_string())?;
            let target = list
                .iter()
                .filter(|c| {
                    c.labels.get(LABEL_POD_NAMESPACE) == Some(&req.namespace)
                        && c.labels.get(LABEL_POD_NAME) == Some(&req.pod)
                        && c.labels.get(LABEL_CONTAINER) == Some(&req.container)
                        && matches!(c.state, TaskState::Running { .. })
                })
                .max_by_key(|c| {
                    c.labels
                        .get(LABEL_RESTART)
                        .and_then(|r| r.parse::<u32>().ok())
                })
                .ok_or_else(|| format!("container {} is not running", req.container))?;
            let id: ContainerId = target.id.clone();
            let handle = m
                .shared
                .runtime
                .exec(
                    &id,
                    &req.command,
                    ExecIo {
                        stdin: req.stdin,
                        tty: req.tty,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            let control = handle.control.clone();
            let resize_control = handle.control.clone();
            let stdin_control = handle.control.clone();
            let stdout: std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>> = match handle.stdout {
                Some(s) => Box::pin(s),
                None => Box::pin(tokio::io::empty()),
            };
            Ok(ExecStreams {
                stdout,
                stderr: handle
                    .stderr
                    .map(|s| Box::pin(s) as std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>),
                stdin: handle
                    .stdin
                    .map(|s| Box::pin(s) as std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>),
                resize: Some(Box::new(move |w, h| {
                    let c = resize_control.clone();
                    tokio::spawn(async move {
                        let _ = c.resize(w, h).await;
                    });
                })),
                close_stdin: Some(Box::new(move || {
                    let c = stdin_control.clone();
                    tokio::spawn(async move {
                        let _ = c.close_stdin().await;
                    });
                })),
                exit: Box::pin(async move { control.wait().await.map_err(|e| e.to_string()) }),
            })
        })
    }
}
