//! Shared informers: one cache per resource type, fed by list + watch from a [`Source`],
//! started on first use and shared by every controller and the scheduler (the only readers of
//! the store outside the API handlers and the registry). Objects are decoded once and shared
//! ([`Object`]); subscribers get every change as a [`Delta`] in order, the current contents
//! first; a watch that lags or hits compaction relists and reports the difference.
//!
//! Read-your-writes: a controller's key is released only once the informers it reads have
//! caught up with the source's revision at the end of its pass ([`Informer::wait_for`]), so the
//! next pass of a key sees every write the previous one made (what upstream's expectations
//! guard against, without counting).

mod cache;
mod object;
mod source;
#[cfg(test)]
mod tests;

pub use berth_store::{LabelSet, intern_labels};
pub use cache::{
    BY_CONTROLLER, BY_LABEL, BY_NAMESPACE, BY_NODE, Delta, DeltaType, IndexFn, ORPHANS_BY_NAMESPACE,
};
pub use object::{Object, ObjectKey, OwnerRef, Revision, View};
pub use source::{Batch, Change, Listed, Source, SourceError, SourceWatch, WatchEnd};

use berth_shared::reconcile::Outcome;
use berth_shared::resource::ResourceType;
use cache::Cache;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Changes applied and delivered per trip to the blocking pool.
const BATCH: usize = 512;
/// Batches with fewer changes than this are applied without leaving the async worker (moving
/// a worker's tasks to another thread costs more than a few decodes).
const INLINE_BATCH: usize = 32;
/// Wait before listing again after the source failed.
const RELIST_BACKOFF: Duration = Duration::from_millis(200);

/// A subscriber: told every change, in order, batch by batch.
pub type Handler = Arc<dyn Fn(&[Delta]) + Send + Sync>;

/// The informer of one resource type.
pub struct Informer {
    rt: &'static ResourceType,
    cache: RwLock<Cache>,
    /// Held while a batch is applied and delivered, and while a subscriber joins, so every
    /// subscriber sees one ordered sequence of changes.
    delivery: Mutex<Vec<Handler>>,
    /// The highest revision the cache reflects (events of other types included).
    seen: watch::Sender<Revision>,
    synced: watch::Sender<bool>,
    lists: AtomicU64,
}

impl Informer {
    fn new(rt: &'static ResourceType) -> Informer {
        Informer {
            rt,
            cache: RwLock::new(Cache::new()),
            delivery: Mutex::new(Vec::new()),
            seen: watch::channel(0).0,
            synced: watch::channel(false).0,
            lists: AtomicU64::new(0),
        }
    }

    pub fn resource(&self) -> &'static ResourceType {
        self.rt
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Cache> {
        self.cache.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Cache> {
        self.cache.write().unwrap_or_else(|e| e.into_inner())
    }

    fn handlers(&self) -> std::sync::MutexGuard<'_, Vec<Handler>> {
        self.delivery.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Object>> {
        self.read().get(&ObjectKey::new(namespace, name))
    }

    pub fn get_key(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.read().get(key)
    }

    /// A reconciler's pass over the cached object of `key`: `pass` while the object is
    /// cached, [`Outcome::Done`] once it is gone (its deletion was the key's last change).
    pub fn reconcile_cached<E>(
        &self,
        key: &ObjectKey,
        pass: impl FnOnce(Arc<Object>) -> Result<Outcome, E>,
    ) -> Result<Outcome, E> {
        self.get_key(key).map_or(Ok(Outcome::Done), pass)
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<Object>> {
        self.read().all()
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().keys()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The objects of one namespace.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Object>> {
        self.read().by_index(BY_NAMESPACE, namespace)
    }

    /// The objects whose controller has `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<Object>> {
        self.read().by_index(BY_CONTROLLER, uid)
    }

    /// The objects under `value` in index `name` (register custom ones with
    /// [`Informer::add_index`]; [`BY_NODE`] and [`BY_LABEL`] are registered on first use).
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        {
            let c = self.read();
            if c.has_index(name) {
                return c.by_index(name, value);
            }
        }
        let mut c = self.write();
        if let Some(f) = cache::builtin(name) {
            c.add_index(name, f);
        }
        c.by_index(name, value)
    }

    /// Registers an index function (built over what is cached already).
    pub fn add_index(&self, name: &str, func: IndexFn) {
        self.write().add_index(name, func);
    }

    /// Subscribes `handler`: it is told the current contents as additions, then every change.
    pub fn subscribe(&self, handler: Handler) {
        let mut handlers = self.handlers();
        let current: Vec<Delta> = self
            .read()
            .all()
            .into_iter()
            .map(|o| Delta {
                kind: DeltaType::Added,
                object: o,
                old: None,
            })
            .collect();
        if !current.is_empty() {
            handler(&current);
        }
        handlers.push(handler);
    }

    /// Whether the first list has been applied.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list has been applied.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// The revision the cache reflects.
    pub fn seen(&self) -> Revision {
        *self.seen.borrow()
    }

    /// Waits until the cache reflects `revision` (every write up to it).
    pub async fn wait_for(&self, revision: Revision) {
        let mut rx = self.seen.subscribe();
        let _ = rx.wait_for(|s| *s >= revision).await;
    }

    /// How many times the source was listed (the first list and every relist).
    pub fn list_count(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }

    fn deliver(&self, handlers: &[Handler], deltas: &[Delta]) {
        if deltas.is_empty() {
            return;
        }
        for h in handlers {
            h(deltas);
        }
    }

    fn apply_list(&self, listed: Listed) {
        let objects = listed
            .objects
            .into_iter()
            .map(|s| Arc::new(Object::from_stored(s)))
            .collect();
        let handlers = self.handlers();
        let deltas = self.write().replace(objects);
        self.deliver(&handlers, &deltas);
        drop(handlers);
        self.seen.send_modify(|s| *s = (*s).max(listed.revision));
        self.synced.send_replace(true);
    }

    fn apply_batch(&self, batch: Batch) {
        if batch.changes.is_empty() {
            self.seen.send_modify(|s| *s = (*s).max(batch.revision));
            return;
        }
        let handlers = self.handlers();
        let deltas: Vec<Delta> = {
            let mut c = self.write();
            batch
                .changes
                .into_iter()
                .map(|ch| {
                    let kind = match ch.event_type {
                        berth_store::EventType::Added => DeltaType::Added,
                        berth_store::EventType::Modified => DeltaType::Modified,
                        berth_store::EventType::Deleted => DeltaType::Deleted,
                    };
                    c.apply(kind, Arc::new(Object::from_stored(ch.object)))
                })
                .collect()
        };
        self.deliver(&handlers, &deltas);
        drop(handlers);
        self.seen.send_modify(|s| *s = (*s).max(batch.revision));
    }

    /// Lists and watches until `shutdown`, relisting whenever the watch lags or is compacted.
    async fn run(self: Arc<Self>, source: Arc<dyn Source>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            let listed = tokio::select! {
                l = source.list(self.rt) => l,
                _ = shutdown.cancelled() => return,
            };
            let listed = match listed {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(resource = self.rt.plural, error = %e, "informer list failed");
                    tokio::select! {
                        _ = tokio::time::sleep(RELIST_BACKOFF) => continue,
                        _ = shutdown.cancelled() => return,
                    }
                }
            };
            self.lists.fetch_add(1, Ordering::Relaxed);
            let from = listed.revision;
            blocking(|| self.apply_list(listed));
            let mut watch = match source.watch(self.rt, from).await {
                Ok(w) => w,
                Err(e @ SourceError::Compacted { .. }) => {
                    tracing::info!(resource = self.rt.plural, error = %e, "informer relisting");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(resource = self.rt.plural, error = %e, "informer watch failed");
                    tokio::select! {
                        _ = tokio::time::sleep(RELIST_BACKOFF) => continue,
                        _ = shutdown.cancelled() => return,
                    }
                }
            };
            loop {
                let next = tokio::select! {
                    b = watch.next_batch(BATCH) => b,
                    _ = shutdown.cancelled() => return,
                };
                match next {
                    // Most batches hold a few changes, or none (other types' events only move
                    // the revision): applied in place. Only large ones leave the async worker.
                    Ok(batch) if batch.changes.len() < INLINE_BATCH => self.apply_batch(batch),
                    Ok(batch) => blocking(|| self.apply_batch(batch)),
                    Err(WatchEnd::Closed) => return,
                    Err(end) => {
                        tracing::info!(resource = self.rt.plural, reason = %end, "informer relisting");
                        break;
                    }
                }
            }
        }
    }
}

/// Runs blocking or CPU-heavy work (decoding a batch and the subscribers' handlers, a
/// controller's pass) without stalling the other tasks of a multi-threaded runtime; inline on a
/// current-thread runtime (tests on paused time, where it keeps the order of events exact).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The informers of one process, by resource type. Cheap to clone.
#[derive(Clone)]
pub struct Informers {
    inner: Arc<InformersInner>,
}

struct InformersInner {
    source: Arc<dyn Source>,
    shutdown: CancellationToken,
    runtime: tokio::runtime::Handle,
    started: Mutex<HashMap<(&'static str, &'static str), Arc<Informer>>>,
}

impl Informers {
    /// Informers over `source`; each stops when `shutdown` is cancelled. Call from within a
    /// tokio runtime (informers are spawned on it).
    pub fn new(source: Arc<dyn Source>, shutdown: CancellationToken) -> Informers {
        Informers {
            inner: Arc::new(InformersInner {
                source,
                shutdown,
                runtime: tokio::runtime::Handle::current(),
                started: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The informer of `rt`, started on first use.
    pub fn get(&self, rt: &'static ResourceType) -> Arc<Informer> {
        let mut started = self.inner.started.lock().unwrap_or_else(|e| e.into_inner());
        started
            .entry((rt.group, rt.plural))
            .or_insert_with(|| {
                let informer = Arc::new(Informer::new(rt));
                self.inner.runtime.spawn(
                    informer
                        .clone()
                        .run(self.inner.source.clone(), self.inner.shutdown.clone()),
                );
                informer
            })
            .clone()
    }

    /// Every informer started so far.
    pub fn started(&self) -> Vec<Arc<Informer>> {
        self.inner
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The newest revision of the source.
    pub async fn current_revision(&self) -> Result<Revision, SourceError> {
        self.inner.source.current_revision().await
    }

    /// Waits until each of `informers` reflects every write made so far (the read-your-writes
    /// step between two passes of a key); gives up after `limit`.
    pub async fn catch_up(&self, informers: &[Arc<Informer>], limit: Duration) {
        let Ok(revision) = self.current_revision().await else {
            return;
        };
        let all = async {
            for i in informers {
                i.wait_for(revision).await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(limit, all) => if r.is_err() {
                tracing::warn!(revision, "informers did not catch up in time");
            },
            // Stopped informers never catch up: passes in flight at shutdown end at once.
            _ = self.inner.shutdown.cancelled() => {}
        }
    }
}
