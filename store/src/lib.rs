//! The revisioned object store: one global revision, compare-and-swap writes, a bounded
//! history of events for watches, durable through a [`Backend`] before a write is acknowledged.
//!
//! Reads are served from memory (every object is held as its serialized JSON plus a small index
//! of labels and selectable fields); writes are ordered, committed to the backend in groups (one
//! fsync per group, see `group_commit`), then published to memory and to watchers. Watch registration and publication happen under the
//! same lock, so a watcher sees every event after its starting revision exactly once.

pub mod etcd;
mod group_commit;
mod index;
mod label_set;
mod lock;
mod redb_file;
pub mod snapshot;

pub use etcd::EtcdConfig;
pub use group_commit::Linger;
pub use index::ObjectIndex;
pub use label_set::{LabelSet, intern as intern_labels};
pub use lock::StoreLock;
pub use redb_file::{FileRead, RedbBackend, create_restored, read_objects};

use bytes::Bytes;
use group_commit::{Pipeline, Queued};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, RwLock};
use tokio::sync::broadcast;

/// An object's stored JSON, allocated to its exact length: it is held for as long as the
/// version is current, and the serializer's doubling buffer left up to half of it unused (a
/// third of the heap with 10,000 pods, see the README's heap profile).
pub(crate) fn encode(obj: &Value) -> Result<Bytes, serde_json::Error> {
    Ok(Bytes::from(serde_json::to_vec(obj)?.into_boxed_slice()))
}

/// A store revision; an object's `resourceVersion` is the revision of its last write.
pub type Revision = u64;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object already exists")]
    AlreadyExists,
    #[error("object not found")]
    NotFound,
    #[error(
        "the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict,
    #[error("too old resource version: {requested} ({oldest})")]
    Compacted {
        requested: Revision,
        oldest: Revision,
    },
    #[error("store backend: {0}")]
    Backend(String),
    /// The store cannot be reached (e.g. etcd has lost its quorum); nothing was written.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A write was sent and its answer lost (the member died, the request timed out): it may
    /// or may not have been applied. Never reported as a success.
    #[error("the write's outcome is unknown: {0}")]
    OutcomeUnknown(String),
    /// The store's disk is (nearly) full: only deletions are accepted until space is freed.
    #[error("{0}")]
    NoSpace(String),
    #[error("encoding object: {0}")]
    Encode(#[from] serde_json::Error),
}

impl StoreError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Backend(_)
                | StoreError::Unavailable(_)
                | StoreError::OutcomeUnknown(_)
                | StoreError::NoSpace(_)
        )
    }
}

/// One stored object.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub revision: Revision,
    /// The object's JSON, with `metadata.resourceVersion` equal to `revision`.
    pub data: Bytes,
    pub index: Arc<ObjectIndex>,
}

impl StoredObject {
    /// Parses the object's JSON.
    pub fn value(&self) -> Result<Value, StoreError> {
        Ok(serde_json::from_slice(&self.data)?)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A change to one key, as watchers see it.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    pub revision: Revision,
    pub event_type: EventType,
    pub key: Arc<str>,
    /// The object after the change (for a deletion: its last state, at the deletion revision).
    pub object: StoredObject,
    /// The index of the object before the change (for selector transitions in watches).
    pub prev_index: Option<Arc<ObjectIndex>>,
    /// The object's JSON before the change, beside `prev_index`: selectors on fields the
    /// index does not keep (custom resources' selectable fields) read it. Only for the keys
    /// the store keeps it for ([`Store::keep_previous_data_for`]).
    pub prev_data: Option<Bytes>,
}

/// What the backend returns at startup.
#[derive(Debug, Default)]
pub struct Loaded {
    pub revision: Revision,
    pub compacted: Revision,
    pub objects: Vec<(String, Bytes)>,
    /// Retained events, oldest first: (revision, type, key, object bytes).
    pub events: Vec<(Revision, EventType, String, Bytes)>,
}

/// One durable write.
#[derive(Debug)]
pub struct Commit<'a> {
    pub revision: Revision,
    pub key: &'a str,
    pub event_type: EventType,
    /// New bytes (for a deletion: the object's last state, kept in the event log).
    pub data: &'a [u8],
}

/// Durable storage under the in-memory store.
pub trait Backend: Send + Sync + 'static {
    fn load(&self) -> Result<Loaded, StoreError>;
    /// Commits a group of writes (in revision order) atomically, then drops retained events at
    /// or below `compact_to`; returns only once all of it is durable.
    fn commit(&self, batch: &[Commit<'_>], compact_to: Option<Revision>) -> Result<(), StoreError>;
    /// Bytes still free where the backend writes (`None`: not known or not bounded).
    fn available_bytes(&self) -> Option<u64> {
        None
    }
}

/// Free space kept for deletions: with less than this free on the store's filesystem, creates
/// and updates are refused and deletions still go through (etcd's `NOSPACE` alarm, which
/// leaves deletes and compaction working), so a full disk can be cleaned up through the API.
pub const DELETE_RESERVE: u64 = 8 << 20;

/// Preconditions of a write (compare-and-swap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Create: the key must not exist.
    Absent,
    /// Update or delete: the key must exist at exactly this revision.
    Revision(Revision),
    /// Update or delete: the key must exist, at any revision.
    Exists,
}

struct State {
    revision: Revision,
    compacted: Revision,
    objects: BTreeMap<Arc<str>, StoredObject>,
    history: VecDeque<Arc<StoreEvent>>,
}

/// A watch registration: the retained events after the starting revision, then live ones.
pub struct Watch {
    pub backlog: Vec<Arc<StoreEvent>>,
    pub live: broadcast::Receiver<Arc<StoreEvent>>,
}

/// The store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    writer: Writer,
    state: RwLock<State>,
    events: broadcast::Sender<Arc<StoreEvent>>,
    history_limit: usize,
    /// The revision readers see, for waiting until a write is visible.
    visible: tokio::sync::watch::Sender<Revision>,
    /// Whether the last durable write failed (a full disk), and how often writes failed.
    health: std::sync::Mutex<WriteHealth>,
    /// The keys whose events keep the object's previous JSON (unset: every key's).
    keeps_previous: std::sync::OnceLock<fn(&str) -> bool>,
}

/// The state of the store's durable writes, for `/readyz` and `/metrics`.
#[derive(Debug, Default, Clone)]
pub struct WriteHealth {
    /// Why the last commit failed; `None` once a commit succeeds again.
    pub failing: Option<String>,
    /// Commits that failed since the start.
    pub failures: u64,
    /// Commits that succeeded since the start (each a group of writes).
    pub commits: u64,
    /// The writes those commits made durable.
    pub committed_writes: u64,
    /// The time those commits took, made durable and visible: committed writes over it is
    /// how many writes a second the store's commit loop could take if never idle (embedded
    /// store only; etcd commits on its own).
    pub commit_seconds: f64,
}

/// Who orders and persists writes.
enum Writer {
    /// This process: revisions are assigned here, made durable by the backend in groups.
    Local {
        backend: Box<dyn Backend>,
        pipeline: Pipeline,
    },
    /// etcd: revisions are etcd's, writes are its transactions; memory follows its watch.
    Etcd(Box<etcd::Etcd>),
}

/// Events kept for live watchers between their reads. Each slot keeps an object version alive
/// until it is overwritten, so the ring is small: a watcher that falls further behind catches
/// up from the history (`Store::watch` from its last revision) instead.
const LIVE_RING: usize = 4096;

/// Compaction runs in batches so the event log is not trimmed on every write.
const COMPACT_BATCH: usize = 256;

impl Store {
    /// Opens the store over a backend, keeping at most `history_limit` events for watches.
    pub fn open(backend: Box<dyn Backend>, history_limit: usize) -> Result<Store, StoreError> {
        let loaded = backend.load()?;
        let mut objects = BTreeMap::new();
        for (key, data) in loaded.objects {
            let obj = decode_stored(data)?;
            objects.insert(Arc::<str>::from(key), obj);
        }
        let mut history = VecDeque::new();
        let mut compacted = loaded.compacted;
        for (revision, event_type, key, data) in loaded.events {
            let object = decode_stored(data)?;
            history.push_back(Arc::new(StoreEvent {
                revision,
                event_type,
                key: Arc::from(key),
                object,
                prev_index: None,
                prev_data: None,
            }));
        }
        while history.len() > history_limit.max(1) {
            if let Some(ev) = history.pop_front() {
                compacted = ev.revision;
            }
        }
        let state = State {
            revision: loaded.revision,
            compacted,
            objects,
            history,
        };
        let writer = Writer::Local {
            backend,
            pipeline: Pipeline::new(loaded.revision),
        };
        Ok(Store::assemble(writer, state, history_limit))
    }

    /// Opens the store on etcd: loads every object under the configured prefix, then follows
    /// etcd's watch. Blocking.
    pub fn open_etcd(config: EtcdConfig, history_limit: usize) -> Result<Store, StoreError> {
        etcd::open(config, history_limit)
    }

    fn assemble(writer: Writer, state: State, history_limit: usize) -> Store {
        let (events, _) = broadcast::channel(LIVE_RING);
        let (visible, _) = tokio::sync::watch::channel(state.revision);
        Store {
            inner: Arc::new(Inner {
                writer,
                state: RwLock::new(state),
                events,
                history_limit: history_limit.max(1),
                visible,
                health: std::sync::Mutex::new(WriteHealth::default()),
                keeps_previous: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Lets writes under some prefixes wait for company before their commit (see
    /// [`Linger`]); `None` commits every write at once. The embedded store only: etcd batches
    /// on its own.
    pub fn set_linger(&self, linger: Option<Linger>) {
        if let Writer::Local { pipeline, .. } = &self.inner.writer {
            pipeline.set_linger(linger);
        }
    }

    /// Keeps an event's previous JSON ([`StoreEvent::prev_data`]) only for the keys `keep`
    /// accepts. Watches read it only for fields the index does not hold (custom resources'
    /// selectable fields), and each one is a whole older version of an object that the watch
    /// history would otherwise hold on to (thousands of them: the history keeps 10,000 events
    /// by default). Unset, every event keeps it; set once, later calls are ignored.
    pub fn keep_previous_data_for(&self, keep: fn(&str) -> bool) {
        let _ = self.inner.keeps_previous.set(keep);
    }

    /// Whether writes go to etcd (several controllers may share it).
    pub fn is_shared(&self) -> bool {
        matches!(self.inner.writer, Writer::Etcd(_))
    }

    /// Waits until this store's memory holds every write acknowledged anywhere before the
    /// call (a consistent read, as an unset `resourceVersion` asks for). Immediate for the
    /// embedded store, whose memory is the authority.
    pub async fn sync(&self) -> Result<(), StoreError> {
        match &self.inner.writer {
            Writer::Local { .. } => Ok(()),
            Writer::Etcd(etcd) => etcd.sync(self).await,
        }
    }

    /// [`Store::sync`] for blocking callers.
    pub fn sync_blocking(&self) -> Result<(), StoreError> {
        match &self.inner.writer {
            Writer::Local { .. } => Ok(()),
            Writer::Etcd(etcd) => etcd.sync_blocking(self),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn current_revision(&self) -> Revision {
        self.read().revision
    }

    /// The oldest revision a watch may start from.
    pub fn compacted_revision(&self) -> Revision {
        self.read().compacted
    }

    pub fn get(&self, key: &str) -> Option<StoredObject> {
        self.read().objects.get(key).cloned()
    }

    /// The newest version of `key`, counting a write still queued for durability (`None` if the
    /// newest write deletes it). What a read-modify-write starts from: its compare-and-swap is
    /// checked against queued writes, so starting from the durable version would conflict with
    /// a write that is merely waiting for its fsync; its own write then queues behind that one
    /// (and fails with it). Readers use [`Store::get`].
    pub fn latest(&self, key: &str) -> Option<StoredObject> {
        let pipeline = match &self.inner.writer {
            Writer::Local { pipeline, .. } => pipeline,
            // etcd's version (the cache may lag other controllers' writes).
            Writer::Etcd(etcd) => return etcd.fetch(key).unwrap_or_else(|_| self.get(key)),
        };
        let queue = pipeline.lock();
        match queue.pending(key) {
            Some(queued) => queued,
            None => self.get(key),
        }
    }

    /// All objects whose key starts with `prefix`, from `start_after` (exclusive) on, at most
    /// `limit` of them; with the revision they are consistent at and whether more remain.
    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        filter: impl Fn(&StoredObject) -> bool,
    ) -> (Revision, Vec<StoredObject>, Option<Arc<str>>) {
        let state = self.read();
        let lower: Bound<&str> = match start_after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Included(prefix),
        };
        let mut out = Vec::new();
        let mut last_key = None;
        let mut more = None;
        for (key, obj) in state.objects.range::<str, _>((lower, Bound::Unbounded)) {
            if !key.starts_with(prefix) {
                break;
            }
            if !filter(obj) {
                continue;
            }
            if let Some(l) = limit
                && out.len() >= l
            {
                more = last_key.clone();
                break;
            }
            out.push(obj.clone());
            last_key = Some(key.clone());
        }
        (state.revision, out, more)
    }

    /// Every object (key, JSON) and the revision they are consistent at: one read of the
    /// published state, so a write acknowledged before the call is in it.
    pub fn snapshot(&self) -> (Revision, Vec<(Arc<str>, Bytes)>) {
        let state = self.read();
        let objects = state
            .objects
            .iter()
            .map(|(k, o)| (k.clone(), o.data.clone()))
            .collect();
        (state.revision, objects)
    }

    /// Number of objects under each prefix in `prefixes`.
    pub fn count(&self, prefix: &str) -> usize {
        let state = self.read();
        state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .count()
    }

    /// Registers a watch for every event after `from`.
    pub fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
        let state = self.read();
        if from < state.compacted {
            return Err(StoreError::Compacted {
                requested: from,
                oldest: state.compacted,
            });
        }
        let backlog = state
            .history
            .iter()
            .filter(|e| e.revision > from)
            .cloned()
            .collect();
        let live = self.inner.events.subscribe();
        Ok(Watch { backlog, live })
    }

    /// Writes `obj` at `key` (create or update, per `pre`), setting its
    /// `metadata.resourceVersion` to the new revision. Blocking: call from a blocking context.
    pub fn put(
        &self,
        key: &str,
        obj: Value,
        pre: Precondition,
    ) -> Result<StoredObject, StoreError> {
        self.put_returning(key, obj, pre).map(|(stored, _)| stored)
    }

    /// [`Store::put`], also giving back the object as written (with its new
    /// `metadata.resourceVersion`): what a write's reply carries, without parsing the stored
    /// bytes back (the embedded store; etcd's answer is parsed).
    pub fn put_returning(
        &self,
        key: &str,
        obj: Value,
        pre: Precondition,
    ) -> Result<(StoredObject, Value), StoreError> {
        if let Writer::Etcd(etcd) = &self.inner.writer {
            let stored = etcd.put(self, key, obj, pre)?;
            let value = stored.value()?;
            return Ok((stored, value));
        }
        if let Some(why) = self.low_on_space() {
            return Err(StoreError::NoSpace(why));
        }
        self.write(key, pre, |prev, revision| {
            let mut obj = obj;
            set_resource_version(&mut obj, revision);
            let event_type = if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            Ok((event_type, obj))
        })
    }

    /// Deletes `key` (per `pre`); the watchers' DELETED event carries `last` (the object's final
    /// state, e.g. with its deletionTimestamp) at the deletion revision.
    pub fn delete(
        &self,
        key: &str,
        pre: Precondition,
        last: Option<Value>,
    ) -> Result<StoredObject, StoreError> {
        if let Writer::Etcd(etcd) = &self.inner.writer {
            return etcd.delete(self, key, pre, last);
        }
        self.write(key, pre, |prev, revision| {
            let Some(prev) = prev else {
                return Err(StoreError::NotFound);
            };
            let mut obj = match last {
                Some(v) => v,
                None => prev.value()?,
            };
            set_resource_version(&mut obj, revision);
            Ok((EventType::Deleted, obj))
        })
        .map(|(stored, _)| stored)
    }

    /// One write: checks `pre` against the newest version (queued or durable), lets `make` build
    /// the object at the next revision, queues it and returns once it is durable and published.
    fn write(
        &self,
        key: &str,
        pre: Precondition,
        make: impl FnOnce(Option<&StoredObject>, Revision) -> Result<(EventType, Value), StoreError>,
    ) -> Result<(StoredObject, Value), StoreError> {
        let Writer::Local { pipeline, .. } = &self.inner.writer else {
            return Err(StoreError::Backend("local write on a shared store".into()));
        };
        let mut queue = pipeline.lock();
        let prev = match queue.pending(key) {
            Some(queued) => queued,
            None => self.get(key),
        };
        check_precondition(pre, prev.as_ref())?;
        let revision = queue.assigned + 1;
        let (event_type, obj) = make(prev.as_ref(), revision)?;
        let data = encode(&obj)?;
        let stored = StoredObject {
            revision,
            index: Arc::new(ObjectIndex::of(&obj)),
            data,
        };
        let ticket = queue.push(Arc::from(key), event_type, stored.clone(), prev);
        pipeline
            .settle(queue, ticket, |batch| self.flush(batch))
            .map_err(StoreError::Backend)?;
        Ok((stored, obj))
    }

    /// Makes a batch durable, then visible to readers and watchers; on failure returns the
    /// message and the last durable revision.
    fn flush(&self, batch: &[Queued]) -> Result<(), (String, Revision)> {
        let Writer::Local { backend, .. } = &self.inner.writer else {
            return Err((
                "local flush on a shared store".into(),
                self.current_revision(),
            ));
        };
        let started = std::time::Instant::now();
        let compact_to = self.compaction_point(&self.read(), batch.len());
        let commits: Vec<Commit<'_>> = batch
            .iter()
            .map(|w| Commit {
                revision: w.revision,
                key: &w.key,
                event_type: w.event_type,
                data: &w.stored.data,
            })
            .collect();
        if let Err(e) = backend.commit(&commits, compact_to) {
            let why = match e {
                StoreError::Backend(m) => m,
                other => other.to_string(),
            };
            tracing::error!(error = %why, writes = batch.len(), "store: a commit failed; its writes are refused");
            let mut health = self.inner.health.lock().unwrap_or_else(|e| e.into_inner());
            health.failing = Some(why.clone());
            health.failures += 1;
            return Err((why, self.current_revision()));
        }
        let recovered = self
            .inner
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failing
            .take()
            .is_some();
        if recovered {
            tracing::info!("store: commits succeed again");
        }
        self.publish(batch, compact_to);
        let mut health = self.inner.health.lock().unwrap_or_else(|e| e.into_inner());
        health.commits += 1;
        health.committed_writes += batch.len() as u64;
        health.commit_seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// Whether durable writes fail now (and why), and how many failed so far.
    pub fn write_health(&self) -> WriteHealth {
        let mut health = self
            .inner
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if health.failing.is_none() {
            health.failing = self.low_on_space();
        }
        health
    }

    /// Why creates and updates are refused now: less than [`DELETE_RESERVE`] free.
    fn low_on_space(&self) -> Option<String> {
        let Writer::Local { backend, .. } = &self.inner.writer else {
            return None;
        };
        let free = backend.available_bytes()?;
        (free < DELETE_RESERVE).then(|| {
            format!(
                "the store's disk is full ({} KiB free, {} MiB kept for deletions): only deletions are accepted until space is freed",
                free >> 10,
                DELETE_RESERVE >> 20
            )
        })
    }

    /// Where to compact once `adding` more events are retained: in batches, so the event log
    /// is not trimmed on every write.
    fn compaction_point(&self, state: &State, adding: usize) -> Option<Revision> {
        let retained = state.history.len() + adding;
        if retained > self.inner.history_limit + COMPACT_BATCH {
            let drop = retained - self.inner.history_limit;
            // Events older than the history are dropped; if the batch alone overflows it, the
            // point falls inside the batch.
            match state.history.get(drop - 1) {
                Some(e) => Some(e.revision),
                None => Some(state.revision + (drop - state.history.len()) as Revision),
            }
        } else {
            None
        }
    }

    fn publish(&self, batch: &[Queued], compact_to: Option<Revision>) {
        let events = batch.iter().map(|w| StoreEvent {
            revision: w.revision,
            event_type: w.event_type,
            key: w.key.clone(),
            object: w.stored.clone(),
            prev_index: w.prev.as_ref().map(|p| p.index.clone()),
            prev_data: w.prev.as_ref().map(|p| p.data.clone()),
        });
        self.apply(events, compact_to);
    }

    /// Makes events visible: to readers (the objects), to watchers (the history and the live
    /// channel), then to writers waiting for their revision; drops history at or below
    /// `compact_to`.
    fn apply(&self, events: impl IntoIterator<Item = StoreEvent>, compact_to: Option<Revision>) {
        let mut state = self.inner.state.write().unwrap_or_else(|e| e.into_inner());
        let keeps_previous = self.inner.keeps_previous.get();
        for mut event in events {
            if keeps_previous.is_some_and(|keep| !keep(&event.key)) {
                event.prev_data = None;
            }
            state.revision = state.revision.max(event.revision);
            match event.event_type {
                EventType::Deleted => {
                    state.objects.remove(&event.key);
                }
                _ => {
                    state
                        .objects
                        .insert(event.key.clone(), event.object.clone());
                }
            }
            let event = Arc::new(event);
            state.history.push_back(event.clone());
            // No receivers is fine: nobody is watching.
            let _ = self.inner.events.send(event);
        }
        if let Some(to) = compact_to {
            while state.history.front().is_some_and(|e| e.revision <= to) {
                state.history.pop_front();
            }
            state.compacted = state.compacted.max(to);
        }
        let revision = state.revision;
        drop(state);
        self.inner.visible.send_replace(revision);
    }
}

fn check_precondition(pre: Precondition, prev: Option<&StoredObject>) -> Result<(), StoreError> {
    match (pre, prev) {
        (Precondition::Absent, Some(_)) => Err(StoreError::AlreadyExists),
        (Precondition::Absent, None) => Ok(()),
        (_, None) => Err(StoreError::NotFound),
        (Precondition::Revision(r), Some(p)) if p.revision != r => Err(StoreError::Conflict),
        _ => Ok(()),
    }
}

fn set_resource_version(obj: &mut Value, revision: Revision) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "resourceVersion".to_string(),
            Value::String(revision.to_string()),
        );
    }
}

fn decode_stored(data: Bytes) -> Result<StoredObject, StoreError> {
    let value: Value = serde_json::from_slice(&data)?;
    let revision = value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(StoredObject {
        revision,
        index: Arc::new(ObjectIndex::of(&value)),
        data,
    })
}

#[cfg(test)]
mod tests;
