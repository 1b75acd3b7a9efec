//! The eviction manager's loop and one pass of it (upstream's `synchronize`): observe →
//! judge → local storage limits → node-level reclaim → rank → evict one pod.

use super::config::{Settings, Threshold};
use super::reclaim::{self, NodeReclaim, Step};
use super::thresholds::{self, State};
use super::usage::{Measure, uid};
use super::{NodePods, Observer, Signals, local_storage, message, rank};
use crate::node::pressure::{Pressures, Signal};
use crate::pod::model::Eviction;
use berth_api::k8s_openapi::api::core::v1::Pod;
use jiff::Timestamp;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[cfg(test)]
mod tests;

/// How long the manager waits for an evicted pod to stop, and how often it looks.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
const CLEANUP_POLL: Duration = Duration::from_secs(1);
/// Upstream's grace for hard-threshold and local-storage evictions (raised to the agent's
/// 2 s minimum when the containers are killed).
const IMMEDIATE_GRACE: Duration = Duration::from_secs(1);

/// The pods port, attached once the pod manager runs.
pub type PodsSlot = Arc<OnceLock<Arc<dyn NodePods>>>;

/// The eviction manager.
pub struct Manager {
    settings: Settings,
    state: State,
    observer: Arc<dyn Observer>,
    reclaim: Arc<dyn NodeReclaim>,
    pods: PodsSlot,
    pressures: watch::Sender<Pressures>,
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl Manager {
    pub fn new(
        settings: Settings,
        observer: Arc<dyn Observer>,
        reclaim: Arc<dyn NodeReclaim>,
        pods: PodsSlot,
    ) -> (Manager, watch::Receiver<Pressures>) {
        let (tx, rx) = watch::channel(Pressures::default());
        let m = Manager {
            settings,
            state: State::default(),
            observer,
            reclaim,
            pods,
            pressures: tx,
            clock: Arc::new(Timestamp::now),
        };
        (m, rx)
    }

    #[cfg(test)]
    fn with_clock(mut self, clock: Arc<dyn Fn() -> Timestamp + Send + Sync>) -> Self {
        self.clock = clock;
        self
    }

    /// Runs passes until `shutdown`: after an eviction it waits for the pod to stop, otherwise
    /// for the housekeeping interval.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let evicted = self.synchronize().await;
            let wait = async {
                match &evicted {
                    Some(uid) => self.wait_for_cleanup(uid).await,
                    None => tokio::time::sleep(self.settings.interval).await,
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    async fn wait_for_cleanup(&self, uid: &str) {
        let Some(pods) = self.pods.get() else { return };
        let deadline = tokio::time::Instant::now() + CLEANUP_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(CLEANUP_POLL).await;
            if pods.stopped(uid).await {
                tracing::info!(pod = uid, "eviction manager: pod cleaned up");
                return;
            }
        }
        tracing::info!(
            pod = uid,
            "eviction manager: timed out waiting for the pod to stop"
        );
    }

    /// Observes and judges the signals only (the node's pressures at start).
    pub async fn observe_pressures(&mut self) -> Pressures {
        let signals = self.observer.signals().await;
        self.judge(&signals).pressures
    }

    fn judge(&mut self, signals: &Signals) -> thresholds::Verdict {
        let now = (self.clock)();
        let verdict = self.state.judge(
            &self.settings.thresholds,
            &signals.observed,
            self.settings.transition_period,
            now,
        );
        let changed = self.pressures.send_if_modified(|p| {
            let changed = *p != verdict.pressures;
            *p = verdict.pressures;
            changed
        });
        if changed {
            tracing::info!(pressures = ?verdict.pressures, observed = ?signals.observed, "node pressure changed");
        }
        verdict
    }

    /// One pass; returns the uid of the pod it evicted, if any.
    pub async fn synchronize(&mut self) -> Option<String> {
        let signals = self.observer.signals().await;
        let verdict = self.judge(&signals);
        let pods_port = self.pods.get()?.clone();
        let pods = pods_port.active_pods();
        // Reading a pod's usage costs a snapshot usage call per container and a walk of its
        // logs and emptyDirs: only pods with local storage limits need it on a quiet node.
        let limited: Vec<Pod> = pods
            .iter()
            .filter(|p| local_storage::is_limited(p))
            .cloned()
            .collect();
        let usages = self.observer.usage(&limited).await;
        for pod in &limited {
            let Some(u) = usages.get(uid(pod)) else {
                continue;
            };
            if let Some(why) = local_storage::breach(pod, u, signals.dedicated_imagefs)
                && !rank::is_critical(pod)
            {
                let e = Eviction {
                    message: why,
                    grace: IMMEDIATE_GRACE,
                    disruption_condition: false,
                };
                return Some(evict(pods_port.as_ref(), pod, e).await);
            }
        }
        let t = *verdict.to_reclaim.first()?;
        // Ranking needs every pod's usage.
        let usages = self.observer.usage(&pods).await;
        tracing::info!(
            resource = t.signal.resource(),
            "eviction manager: attempting to reclaim"
        );
        if self.reclaim_node_level(t.signal, &signals).await {
            tracing::info!(
                resource = t.signal.resource(),
                "eviction manager: able to reduce resource pressure without evicting pods"
            );
            return None;
        }
        let measure = measure(t.signal, signals.dedicated_imagefs);
        let mut ranked: Vec<&Pod> = pods.iter().collect();
        rank::rank(t.signal, measure, &mut ranked, &usages);
        for pod in ranked {
            if rank::is_critical(pod) {
                tracing::warn!(
                    pod = uid(pod),
                    "eviction manager: cannot evict a critical pod"
                );
                continue;
            }
            let e = Eviction {
                message: message::node_low(
                    t.signal,
                    pod,
                    usages.get(uid(pod)),
                    &verdict.to_reclaim,
                    &signals.observed,
                ),
                grace: self.grace(&t, pod),
                disruption_condition: true,
            };
            return Some(evict(pods_port.as_ref(), pod, e).await);
        }
        tracing::info!("eviction manager: unable to evict any pods from the node");
        None
    }

    /// Hard: upstream's immediate grace; soft: `--eviction-max-pod-grace-period`, no longer
    /// than the pod's own grace period.
    fn grace(&self, t: &Threshold, pod: &Pod) -> Duration {
        if t.is_hard() {
            return IMMEDIATE_GRACE;
        }
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let secs = self.settings.max_pod_grace_seconds.min(own).max(0);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// Node-level reclaim for `signal`; true when, observed again, no threshold is met
    /// any more (minimum reclaims included).
    async fn reclaim_node_level(&mut self, signal: Signal, before: &Signals) -> bool {
        let steps = reclaim::steps(signal, before.dedicated_imagefs);
        if steps.is_empty() {
            return false;
        }
        let needed: i64 = self
            .settings
            .thresholds
            .iter()
            .filter(|t| t.signal == signal)
            .filter_map(|t| {
                before
                    .observed
                    .get(&t.signal)
                    .map(|o| thresholds::shortfall(t, o))
            })
            .max()
            .unwrap_or(0);
        for step in steps {
            let result = match step {
                Step::DeadContainers => self.reclaim.delete_dead_containers().await,
                Step::UnusedImages => {
                    let bytes = u64::try_from(needed).unwrap_or(0);
                    self.reclaim.free_image_space(bytes).await
                }
            };
            match result {
                Ok(freed) => tracing::info!(?step, freed, "eviction manager: reclaimed"),
                Err(e) => tracing::info!(?step, error = %e, "eviction manager: reclaim failed"),
            }
        }
        let after = self.observer.signals().await;
        thresholds::met(&self.settings.thresholds, &after.observed, true).is_empty()
    }
}

/// What a disk signal counts of a pod: with a dedicated image filesystem the node signals
/// count logs and volumes, the image signals the writable layers; otherwise everything.
fn measure(signal: Signal, dedicated_imagefs: bool) -> Measure {
    if !dedicated_imagefs {
        return Measure::ALL;
    }
    match signal {
        Signal::ImageFsAvailable | Signal::ImageFsInodesFree => Measure {
            rootfs: true,
            logs: false,
            volumes: false,
        },
        _ => Measure {
            rootfs: false,
            logs: true,
            volumes: true,
        },
    }
}

async fn evict(pods: &dyn NodePods, pod: &Pod, e: Eviction) -> String {
    let uid = uid(pod).to_string();
    tracing::info!(
        pod = %format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default()),
        message = %e.message,
        "eviction manager: evicting pod"
    );
    pods.evict(&uid, e).await;
    uid
}
