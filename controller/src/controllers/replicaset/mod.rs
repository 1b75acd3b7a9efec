//! The ReplicaSet controller, which also drives ReplicationControllers (upstream runs one
//! implementation for both through an adapter): keeps `spec.replicas` pods of the template,
//! adopts matching orphans and releases pods that stop matching, deletes the worst pods first
//! on scale-down, and writes the status, the `ReplicaFailure` condition and events.
//!
//! A pass reads the set and its pods from the store (by the names the cache indexes: the pods
//! it controls and the unowned ones), plans with [`plan`] and [`status`], and applies through
//! the registry. The registry writes synchronously to the in-memory store and a pass records
//! the pods it created in the cache at once, so the next pass of a key (never concurrent with
//! this one) sees every pod this pass created or deleted: that is what upstream's
//! ControllerExpectations guard against, and why none are kept here.

mod apply;
pub mod cache;
mod parsed;
pub mod plan;
pub mod rank;
pub mod status;
pub mod view;

#[cfg(test)]
mod tests;

use crate::api::error::ApiError;
use crate::events::{EventType, Recorder};
use crate::registry::{Registry, prefix};
use crate::store::{EventType as StoreEventType, StoreEvent};
use berth_shared::reconcile::{self, Outcome, Queue};
use berth_shared::resource::{self, ResourceType};
use cache::{Cache, SetKey};
use parsed::ParsedPods;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use view::{Kind, Pod, Set};

/// Every set gets a pass this often, whatever the events.
pub const RESYNC: Duration = Duration::from_secs(300);
/// Passes of different sets that may run at once.
const WORKERS: usize = 4;

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}")]
    Template(&'static str),
    /// A pod creation failed; the message is the API error, as upstream reports it.
    #[error("{0}")]
    Create(ApiError),
    #[error("unable to delete pods: {0}")]
    Delete(ApiError),
    #[error("resource type {0} is not served")]
    Unserved(&'static str),
}

impl SyncError {
    pub fn is_transient(&self) -> bool {
        match self {
            SyncError::Api(e) | SyncError::Create(e) | SyncError::Delete(e) => e.is_transient(),
            SyncError::Template(_) | SyncError::Unserved(_) => false,
        }
    }
}

fn set_type(kind: Kind) -> Result<&'static ResourceType, SyncError> {
    resource::by_plural(kind.group(), "v1", kind.plural()).ok_or(SyncError::Unserved(kind.kind()))
}

fn pod_type() -> Result<&'static ResourceType, SyncError> {
    resource::by_plural("", "v1", "pods").ok_or(SyncError::Unserved("Pod"))
}

struct Controller {
    registry: Registry,
    cache: Mutex<Cache>,
    parsed: ParsedPods,
    rs_events: Recorder,
    rc_events: Recorder,
}

impl Controller {
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, set: &Set, obj: &Value, t: EventType, reason: &str, message: &str) {
        let recorder = match set.kind {
            Kind::ReplicaSet => &self.rs_events,
            Kind::ReplicationController => &self.rc_events,
        };
        if let Err(e) = recorder.record(obj, t, reason, message) {
            tracing::debug!(error = %e, reason, "recording event");
        }
    }

    /// One pass over one set.
    fn reconcile(&self, key: &SetKey) -> Result<Outcome, SyncError> {
        let _span = tracing::debug_span!("reconcile", controller = "replicaset", %key).entered();
        let rt = set_type(key.kind)?;
        let raw = match self.registry.get(rt, Some(&key.namespace), &key.name) {
            Ok(o) => o.value().map_err(ApiError::from)?,
            Err(ApiError::NotFound { .. }) => return Ok(Outcome::Done),
            Err(e) => return Err(e.into()),
        };
        let set = match Set::from_value(key.kind, &raw) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%key, error = %e, "ignoring set");
                return Ok(Outcome::Done);
            }
        };
        let now = jiff::Timestamp::now();
        let pods = self.observe_pods(key, &set)?;
        let claim = plan::claim(&set, &pods);
        for pod in &claim.release {
            self.apply_release(&set, pod)?;
        }
        let mut claimed = claim.owned.clone();
        for pod in claim.adopt {
            if self.apply_adopt(&set, pod)? {
                claimed.push(pod);
            }
        }
        let per_node = if claimed.len() > usize::try_from(set.replicas).unwrap_or(0) {
            self.observe_pods_per_node(&set, &claimed)?
        } else {
            HashMap::new()
        };
        let failure = match plan::scale(&set, &claimed, &per_node, now) {
            plan::Scale::Steady => None,
            plan::Scale::Create(n) => self.apply_create(&set, &raw, n)?,
            plan::Scale::Delete(victims) => self.apply_delete(&set, &raw, &victims)?,
        };
        let message = failure.as_ref().map(ToString::to_string);
        let new = status::compute(&set, &claimed, message.as_deref(), now);
        if status::needs_write(&set, &new) {
            self.apply_status(&set, &new)?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(status::next_availability_check(&set, &claimed, now)
            .map_or(Outcome::Done, Outcome::RequeueAfter))
    }

    /// The set's candidate pods: those matching its selector, and those the watch saw it
    /// control (which may have stopped matching).
    /// The pods the set controls and the unowned pods its selector matches (what claiming
    /// needs: pods of other controllers are never touched), from the cache's indexes rather
    /// than a scan of every pod in the namespace.
    fn observe_pods(&self, key: &SetKey, set: &Set) -> Result<Vec<Pod>, SyncError> {
        let (owned, orphans) = {
            let cache = self.cache();
            (cache.owned_pods(key), cache.orphan_pods(&set.namespace))
        };
        let prefix = prefix(pod_type()?, Some(&set.namespace));
        let store = self.registry.store();
        let mut pods = Vec::with_capacity(owned.len());
        for (name, is_owned) in owned
            .iter()
            .map(|n| (n, true))
            .chain(orphans.iter().map(|n| (n, false)))
        {
            let Some(item) = store.get(&format!("{prefix}{name}")) else {
                continue;
            };
            if is_owned || set.selector.matches(&item.index.labels) {
                pods.push(
                    self.parsed
                        .view(&set.namespace, &item)
                        .map_err(ApiError::from)?,
                );
            }
        }
        // In name order, as a list would give them: plans must not depend on hash order.
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(pods)
    }

    /// Active pods per node among the pods of the sets sharing this set's controller
    /// (upstream's `getIndirectlyRelatedPods`); for a set without a controller, its own pods
    /// (upstream would rank them all equal; the documented rule — more replicas on the node
    /// go first, RS-16 — is applied instead).
    fn observe_pods_per_node(
        &self,
        set: &Set,
        claimed: &[&Pod],
    ) -> Result<HashMap<String, usize>, SyncError> {
        let Some(uid) = &set.controller_uid else {
            return Ok(rank::pods_per_node(claimed.iter().copied()));
        };
        let selectors = self.cache().related_selectors(&set.namespace, uid);
        let (_, items, _) = self.registry.store().list(
            &prefix(pod_type()?, Some(&set.namespace)),
            None,
            None,
            |o| selectors.iter().any(|s| s.matches(&o.index.labels)),
        );
        let mut related = Vec::with_capacity(items.len());
        for item in items {
            related.push(
                self.parsed
                    .view(&set.namespace, &item)
                    .map_err(ApiError::from)?,
            );
        }
        Ok(rank::pods_per_node(&related))
    }
}

/// Routes one store event: updates the cache and enqueues the sets it concerns.
fn feed(ctl: &Controller, queue: &Queue<SetKey>, prefixes: &Prefixes, ev: &StoreEvent) {
    let Some(target) = prefixes.classify(&ev.key) else {
        return;
    };
    let Ok(obj) = ev.object.value() else { return };
    let deleted = ev.event_type == StoreEventType::Deleted;
    if deleted && matches!(target, Target::Pod) {
        ctl.parsed.forget(
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
    }
    let cache = &ctl.cache;
    let keys = {
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        match target {
            Target::Set(kind) => vec![c.set_event(kind, &obj, deleted)],
            Target::Pod => c.pod_event(&obj, deleted),
        }
    };
    for k in keys {
        queue.add(k);
    }
}

enum Target {
    Set(Kind),
    Pod,
}

struct Prefixes {
    rs: String,
    rc: String,
    pods: String,
}

impl Prefixes {
    fn new() -> Result<Prefixes, SyncError> {
        Ok(Prefixes {
            rs: prefix(set_type(Kind::ReplicaSet)?, None),
            rc: prefix(set_type(Kind::ReplicationController)?, None),
            pods: prefix(pod_type()?, None),
        })
    }

    fn classify(&self, key: &str) -> Option<Target> {
        if key.starts_with(&self.pods) {
            Some(Target::Pod)
        } else if key.starts_with(&self.rs) {
            Some(Target::Set(Kind::ReplicaSet))
        } else if key.starts_with(&self.rc) {
            Some(Target::Set(Kind::ReplicationController))
        } else {
            None
        }
    }
}

/// Starts the ReplicaSet / ReplicationController controller.
pub fn start(registry: Registry, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let prefixes = match Prefixes::new() {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "replicaset controller not started");
                return;
            }
        };
        let store = registry.store().clone();
        let ctl = Arc::new(Controller {
            rs_events: Recorder::new(registry.clone(), Kind::ReplicaSet.component()),
            rc_events: Recorder::new(registry.clone(), Kind::ReplicationController.component()),
            registry,
            cache: Mutex::new(Cache::default()),
            parsed: ParsedPods::default(),
        });
        let queue: Queue<SetKey> = Queue::new();
        let c = ctl.clone();
        let runner = tokio::spawn(reconcile::run(
            queue.clone(),
            WORKERS,
            shutdown.clone(),
            "replicaset",
            move |key: SetKey| {
                let c = c.clone();
                async move {
                    tokio::task::spawn_blocking(move || c.reconcile(&key))
                        .await
                        .map_err(|e| SyncError::Api(ApiError::Internal(e.to_string())))?
                }
            },
        ));
        let mut resync = tokio::time::interval(RESYNC);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        // List, then watch from the first list's revision (replaying what the later lists
        // already saw converges to the same state); a watcher that falls behind relists.
        while !shutdown.is_cancelled() {
            let mut fresh = Cache::default();
            let (rev, sets, _) = store.list(&prefixes.rs, None, None, |_| true);
            let (_, rcs, _) = store.list(&prefixes.rc, None, None, |_| true);
            let (_, pods, _) = store.list(&prefixes.pods, None, None, |_| true);
            for (kind, items) in [
                (Kind::ReplicaSet, &sets),
                (Kind::ReplicationController, &rcs),
            ] {
                for item in items.iter() {
                    if let Ok(v) = item.value() {
                        fresh.set_event(kind, &v, false);
                    }
                }
            }
            for item in &pods {
                if let Ok(v) = item.value() {
                    fresh.pod_event(&v, false);
                }
            }
            let all = fresh.all_sets();
            *ctl.cache() = fresh;
            ctl.parsed.clear();
            for k in all {
                queue.add(k);
            }
            let watch = match store.watch(rev) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "replicaset controller relisting");
                    continue;
                }
            };
            for ev in &watch.backlog {
                feed(&ctl, &queue, &prefixes, ev);
            }
            let mut live = watch.live;
            loop {
                tokio::select! {
                    r = live.recv() => match r {
                        Ok(ev) => feed(&ctl, &queue, &prefixes, &ev),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "replicaset controller lagged; relisting");
                            break;
                        }
                        Err(_) => return,
                    },
                    _ = resync.tick() => {
                        for k in ctl.cache().all_sets() {
                            queue.add(k);
                        }
                    }
                    _ = shutdown.cancelled() => break,
                }
            }
        }
        let _ = runner.await;
    })
}
