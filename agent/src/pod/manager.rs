//! The pods of this node: watches the pods bound to it into the [`PodCache`], and runs one
//! [`PodWorker`] pass per pod uid on the shared reconcile runtime, woken by pod changes,
//! container exits, probe changes and a periodic resync. A pod that is gone gets a last pass
//! that removes what is left of it, after which its worker is dropped. Containers found in
//! containerd are judged only once the pods bound here have been listed: before that, a pod
//! whose containers run (an agent restarted after its node was marked Unknown) would look gone.

use super::backend::ManagerBackend;
use super::cache::PodCache;
use super::config_objects::{OnChange, Watched};
use super::events::Recorder;
use super::labels;
use super::ports::ApiClient;
use super::worker::{Context, NodeSide, Pass, PodWorker};
use crate::config::Config;
use crate::image::ImageService;
use crate::metrics::AgentMetrics;
use crate::metrics::instrumented::{TimedNetwork, TimedRuntime};
use crate::network::Network;
use crate::network::dns::ClusterDns;
use crate::runtime::{Runtime, RuntimeEvent};
use berth_api::client::{Client, ListParams, ResumingWatch, WatchEvent};
use berth_api::k8s_openapi::api::core::v1::Pod;
use berth_api::reconcile::{self, Outcome, Queue};
use berth_api::resource;
use futures::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the pods of this node see of it: its address and allocatable resources.
#[derive(Debug, Clone)]
pub struct NodeResources {
    pub host_ip: String,
    /// The cluster DNS pods are given (`ClusterFirst`).
    pub dns: ClusterDns,
    pub cpus: u32,
    pub memory_bytes: i64,
    /// The pods' cgroups (`kubepods` and its QoS tiers).
    pub cgroups: Arc<dyn crate::node::qos_cgroups::PodCgroups>,
}

/// Everything the manager's tasks share.
struct Shared {
    config: Config,
    client: Client,
    runtime: Runtime,
    network: Arc<Network>,
    queue: Queue<String>,
    pods: Arc<PodCache>,
    cx: Arc<Context>,
    workers: Mutex<HashMap<String, Arc<PodWorker>>>,
    /// The pods bound here have been listed once: a container without a pod is an orphan.
    listed: AtomicBool,
}

impl Shared {
    /// The pod's worker, made on first use.
    fn worker(&self, uid: &str) -> Arc<PodWorker> {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        workers
            .entry(uid.to_string())
            .or_insert_with(|| {
                let (queue, key) = (self.queue.clone(), uid.to_string());
                let wake = Arc::new(move || queue.add(key.clone()));
                Arc::new(PodWorker::new(uid, self.cx.clone(), wake))
            })
            .clone()
    }

    /// The pod is gone and cleaned up: drop its object and its worker (and so its probers).
    fn forget(&self, uid: &str) {
        self.pods.forget(uid);
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    /// One pass for `uid`: the worker's, or its clean-up when the pod is gone.
    async fn reconcile(&self, uid: &str) -> Result<Outcome, super::worker::WorkerError> {
        let worker = self.worker(uid);
        let pass = match self.pods.get(uid) {
            Some(pod) => {
                let op = if pod.metadata.deletion_timestamp.is_some() {
                    "kill"
                } else {
                    "sync"
                };
                let start = std::time::Instant::now();
                let pass = worker.reconcile(pod).await;
                let m = &self.cx.metrics;
                m.pod_worker.observe(&[op], start.elapsed().as_secs_f64());
                if let Err(e) = &pass {
                    let transient = if e.is_transient() { "true" } else { "false" };
                    m.pod_worker_errors.inc(&[transient]);
                }
                pass?
            }
            // Not listed yet: whether the pod exists is not known.
            None if !self.listed.load(Ordering::SeqCst) => {
                return Ok(Outcome::RequeueAfter(Duration::from_secs(1)));
            }
            None => {
                worker.finish().await?;
                Pass::Finished
            }
        };
        Ok(match pass {
            Pass::RequeueAfter(d) => Outcome::RequeueAfter(d),
            Pass::Finished => {
                self.forget(uid);
                Outcome::Done
            }
        })
    }
}

/// The pod manager.
pub struct PodManager {
    shared: Arc<Shared>,
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
        let events = Arc::new(Recorder::new(client.clone(), config.node_name.clone()));
        let pods = Arc::new(PodCache::default());
        let queue = Queue::new();
        let network = Arc::new(network);
        let metrics = Arc::new(AgentMetrics::default());
        let cx = Arc::new(Context {
            runtime: Arc::new(TimedRuntime {
                inner: Arc::new(runtime.clone()),
                metrics: metrics.clone(),
            }),
            network: Arc::new(TimedNetwork {
                inner: network.clone(),
                metrics: metrics.clone(),
            }),
            metrics,
            images: Arc::new(images),
            api: Arc::new(ApiClient {
                client: client.clone(),
                pods: pods.clone(),
                config_maps: Watched::new(
                    client.clone(),
                    resource::CONFIG_MAPS,
                    wake_referrers(&pods, &queue, false),
                ),
                secrets: Watched::new(
                    client.clone(),
                    resource::SECRETS,
                    wake_referrers(&pods, &queue, true),
                ),
            }),
            events,
            node: NodeSide {
                root_dir: config.host.root_dir.clone(),
                log_dir: config.log_dir.clone(),
                host_ip: node.host_ip.clone(),
                dns: node.dns.clone(),
                cpus: node.cpus,
                memory_bytes: node.memory_bytes,
                // The server the agent reached at start (the variables are fixed when a
                // container is made).
                api_endpoint: super::api_access::endpoint(
                    &client.server(),
                    &node.host_ip,
                    crate::node::host::internal_ip(None).as_deref(),
                ),
                security: super::host_security::observe(
                    &config.host.root_dir,
                    config.seccomp_default,
                    &config.allowed_unsafe_sysctls,
                ),
                crash_loop: config.crash_loop_backoff,
            },
            clock: Arc::new(jiff::Timestamp::now),
            cgroups: node.cgroups.clone(),
        });
        PodManager {
            shared: Arc::new(Shared {
                config,
                client,
                runtime,
                network,
                queue,
                pods,
                cx,
                workers: Mutex::new(HashMap::new()),
                listed: AtomicBool::new(false),
            }),
        }
    }

    /// The latest objects of this node's pods (for the log/exec backend).
    pub(super) fn pods(&self) -> &PodCache {
        &self.shared.pods
    }

    pub(super) fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    pub(super) fn metrics(&self) -> &AgentMetrics {
        &self.shared.cx.metrics
    }

    pub(super) fn log_dir(&self) -> &Path {
        &self.shared.config.log_dir
    }

    /// The uids of the pods bound here, once they have been listed (for the garbage
    /// collector: before that, a pod not known yet would look gone).
    pub fn listed_pods(&self) -> Option<std::collections::BTreeSet<String>> {
        self.shared
            .listed
            .load(Ordering::SeqCst)
            .then(|| self.shared.pods.uids().into_iter().collect())
    }

    /// The pods bound here that still run or will: not finished, not being deleted, not
    /// already evicted (the eviction manager's active pods).
    pub fn active_pods(&self) -> Vec<Pod> {
        let evicting: Vec<String> = {
            let workers = self
                .shared
                .workers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            workers
                .iter()
                .filter(|(_, w)| w.is_evicted())
                .map(|(uid, _)| uid.clone())
                .collect()
        };
        self.shared
            .pods
            .uids()
            .into_iter()
            .filter(|uid| !evicting.contains(uid))
            .filter_map(|uid| self.shared.pods.get(&uid))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !super::status::is_terminal(phase.unwrap_or_default())
            })
            .collect()
    }

    /// Evicts the pod with uid `uid` through its worker (see [`PodWorker::evict`]).
    pub async fn evict(&self, uid: &str, eviction: super::model::Eviction) {
        let Some(pod) = self.shared.pods.get(uid) else {
            return;
        };
        self.shared.worker(uid).evict(&pod, eviction).await;
    }

    /// Whether the pod is cleaned up: none of its containers runs any more and its emptyDirs
    /// are freed (what the kubelet's eviction manager waits for before the next eviction).
    pub async fn stopped(&self, uid: &str) -> bool {
        let empty_dirs = super::volumes::pod_dir(&self.shared.config.host.root_dir, uid)
            .join("volumes")
            .join("empty-dir");
        if empty_dirs.exists() {
            return false;
        }
        match self.shared.runtime.list().await {
            Ok(list) => !list.iter().any(|c| {
                labels::pod_uid(&c.labels) == Some(uid)
                    && matches!(c.state, crate::runtime::TaskState::Running { .. })
            }),
            Err(_) => false,
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
                async move { s.reconcile(&uid).await }
            },
        ));
        tokio::spawn(watch_runtime(shared.clone(), shutdown.clone()));
        tokio::spawn(resync(shared.clone(), shutdown.clone()));
        watch_pods(shared.clone(), shutdown.clone()).await;
        let _ = workers.await;
    }
}
/// Wakes the pods that refer to a ConfigMap (or Secret) that changed, so their volumes are
/// rewritten now.
fn wake_referrers(pods: &Arc<PodCache>, queue: &Queue<String>, secret: bool) -> OnChange {
    let (pods, queue) = (pods.clone(), queue.clone());
    Arc::new(move |ns: &str, name: &str| {
        for uid in pods.uids() {
            let Some(pod) = pods.get(&uid) else { continue };
            if pod.metadata.namespace.as_deref() != Some(ns) {
                continue;
            }
            let (cms, secrets) = super::config_objects::referenced(&pod);
            if (if secret { secrets } else { cms }).contains(name) {
                queue.add(uid);
            }
        }
    })
}

/// Lists and watches the pods bound to this node; a vanished pod's uid is queued so its
/// worker cleans up. The watch resumes from its last resourceVersion when it breaks (its
/// server died: the client moves to another); only a `410 Gone` relists. A failed request
/// never forgets a pod: only a list that succeeded without it, or its DELETED event, does.
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
        let known = s.pods.uids();
        for uid in known.iter().filter(|u| !listed.contains(u)) {
            s.pods.forget(uid);
            s.queue.add(uid.clone());
        }
        for p in list.items {
            if let Some(uid) = p.metadata.uid.clone() {
                s.pods.remember(p);
                s.queue.add(uid);
            }
        }
        if !s.listed.swap(true, Ordering::SeqCst) {
            enqueue_all(&s).await;
        }
        let mut watch = ResumingWatch::<Pod>::new(
            s.client.clone(),
            pods_rt,
            None,
            params.clone(),
            &list.resource_version,
        );
        loop {
            let next = tokio::select! { n = watch.next() => n, _ = shutdown.cancelled() => return };
            match next {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => {
                    if let Some(uid) = p.metadata.uid.clone() {
                        s.pods.remember(p);
                        s.queue.add(uid);
                    }
                }
                Ok(WatchEvent::Deleted(p)) => {
                    if let Some(uid) = p.metadata.uid.clone() {
                        s.pods.forget(&uid);
                        s.queue.add(uid);
                    }
                }
                Ok(WatchEvent::Bookmark(_)) => {}
                Err(e) => {
                    tracing::info!(error = %e, "pod watch cannot resume; relisting");
                    break;
                }
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
                if let Ok(l) = s.runtime.labels(&id).await
                    && let Some(uid) = labels::pod_uid(&l)
                {
                    s.queue.add(uid.to_string());
                }
            }
            Some(_) => enqueue_all(&s).await,
            None => return,
        }
    }
}

/// Every known pod and, once the pods have been listed, every pod uid found in containerd or
/// the network state.
async fn enqueue_all(s: &Shared) {
    let mut uids: Vec<String> = s.pods.uids();
    if !s.listed.load(Ordering::SeqCst) {
        uids.into_iter().for_each(|u| s.queue.add(u));
        return;
    }
    if let Ok(list) = s.runtime.list().await {
        uids.extend(
            list.iter()
                .filter_map(|c| labels::pod_uid(&c.labels).map(str::to_string)),
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
