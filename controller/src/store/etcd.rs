//! The etcd store backend, for several controllers sharing one cluster state: revisions are
//! etcd's (`mod_revision` is an object's `resourceVersion`), every write is one transaction
//! comparing the key's `mod_revision` with the revision the write was checked against, and the
//! store's memory is a cache fed by one etcd watch of the prefix (as the API server's watch
//! cache is), so lists and watches are served from memory as with the embedded store.
//!
//! Objects are stored without `metadata.resourceVersion` (it is the key's `mod_revision`, set
//! when the cache decodes them). A write returns once the cache holds it, so a read after a
//! write in the same controller sees it; [`Etcd::sync`] gives the same to a read after a write
//! anywhere. The client runs on a runtime of its own, so blocking callers (the store's writes
//! are called from blocking threads) never need a Tokio context.

use super::{
    EventType, ObjectIndex, Precondition, Revision, State, Store, StoreError, StoreEvent,
    StoredObject, check_precondition, set_resource_version,
};
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType as EtcdEventType, GetOptions, KeyValue,
    TxnOp, TxnOpResponse, WatchOptions,
};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Where and how to reach etcd (k3s's `--datastore-*` flags).
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// `http://` or `https://` URLs of the members.
    pub endpoints: Vec<String>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Every key is this prefix followed by the store key.
    pub prefix: String,
    /// How often history older than the previous run is compacted (the API server's 5 min).
    pub compaction_interval: Duration,
}

impl EtcdConfig {
    pub fn new(endpoints: Vec<String>) -> EtcdConfig {
        EtcdConfig {
            endpoints,
            ca_file: None,
            cert_file: None,
            key_file: None,
            prefix: "/berth".to_string(),
            compaction_interval: Duration::from_secs(300),
        }
    }
}

/// Objects per range request while loading.
const PAGE: i64 = 500;
/// How long one etcd request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write or a consistent read waits for the cache to catch up.
const CATCH_UP: Duration = Duration::from_secs(10);

/// The etcd side of a [`Store`].
pub(super) struct Etcd {
    runtime: Runtime,
    client: Client,
    prefix: String,
}

/// A runtime dropped without blocking (the store may be dropped inside another runtime).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|r| r.handle())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// Runs `fut` on the etcd runtime and blocks the calling thread (any thread) for its result.
fn run<T: Send + 'static>(
    runtime: &Runtime,
    fut: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    let handle = runtime
        .handle()
        .ok_or_else(|| unavailable("the etcd client is shut down"))?;
    futures::executor::block_on(handle.spawn(fut)).map_err(unavailable)?
}

async fn timed<T>(
    fut: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(unavailable(e)),
        Err(_) => Err(unavailable("etcd request timed out")),
    }
}

/// The first key after every key starting with `prefix`.
fn range_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An object as etcd holds it: its JSON without `resourceVersion`.
fn stored_bytes(obj: &Value) -> Result<Vec<u8>, StoreError> {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    Ok(serde_json::to_vec(&obj)?)
}

/// An object as the cache holds it: its JSON with `resourceVersion` set to `revision`.
fn decode(data: &[u8], revision: Revision) -> Result<StoredObject, StoreError> {
    let mut value: Value = serde_json::from_slice(data)?;
    set_resource_version(&mut value, revision);
    Ok(StoredObject {
        revision,
        index: Arc::new(ObjectIndex::of(&value)),
        data: Bytes::from(serde_json::to_vec(&value)?),
    })
}

fn revision_of(kv: &KeyValue) -> Revision {
    kv.mod_revision().max(0) as Revision
}

/// Store keys and object JSON.
pub type Objects = Vec<(Arc<str>, Bytes)>;

/// A client on a runtime of its own, for the one-shot commands (snapshots, restores).
fn connect(config: &EtcdConfig) -> Result<(Runtime, Client), StoreError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("etcd")
        .enable_all()
        .build()
        .map_err(|e| StoreError::Backend(format!("etcd runtime: {e}")))?;
    let runtime = Runtime(Some(runtime));
    let options = connect_options(config)?;
    let endpoints = config.endpoints.clone();
    let client = run(&runtime, async move {
        Client::connect(endpoints, Some(options))
            .await
            .map_err(unavailable)
    })?;
    Ok((runtime, client))
}

fn key_prefix(config: &EtcdConfig) -> String {
    format!("{}/", config.prefix.trim_end_matches('/'))
}

/// Every object under the configured prefix at one revision (a linearizable read), as the
/// cache would hold them (with `resourceVersion`): what a snapshot of an etcd store holds.
/// Blocking.
pub fn dump(config: &EtcdConfig) -> Result<(Revision, Objects), StoreError> {
    let (runtime, client) = connect(config)?;
    let prefix = key_prefix(config);
    let (revision, objects) = run(&runtime, async move { load(client, &prefix).await })?;
    Ok((
        revision,
        objects.into_iter().map(|(k, o)| (k, o.data)).collect(),
    ))
}

/// Puts `objects` (store keys and JSON) under the configured prefix, which must be empty:
/// a restore. Objects keep their uids; etcd gives them new revisions. Blocking.
pub fn restore<K: AsRef<str>>(
    config: &EtcdConfig,
    objects: &[(K, Bytes)],
) -> Result<Revision, StoreError> {
    /// Puts per transaction, under etcd's default `--max-txn-ops` (128).
    const BATCH: usize = 100;
    let (runtime, mut client) = connect(config)?;
    let prefix = key_prefix(config);
    let mut writes = Vec::with_capacity(objects.len());
    for (key, data) in objects {
        let value: Value = serde_json::from_slice(data)?;
        let key = format!("{prefix}{}", key.as_ref().trim_start_matches('/'));
        writes.push((key, stored_bytes(&value)?));
    }
    run(&runtime, async move {
        let options = GetOptions::new().with_prefix().with_count_only();
        let existing = timed(client.get(prefix.clone(), Some(options))).await?;
        if existing.count() > 0 {
            return Err(StoreError::Backend(format!(
                "etcd already holds {} keys under {prefix}: a snapshot is restored only into an empty prefix",
                existing.count()
            )));
        }
        let mut revision = 0;
        for chunk in writes.chunks(BATCH) {
            // Each key must still be absent: a concurrent writer makes the restore fail.
            let compares: Vec<Compare> = chunk
                .iter()
                .map(|(k, _)| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                .collect();
            let puts: Vec<TxnOp> = chunk
                .iter()
                .map(|(k, v)| TxnOp::put(k.clone(), v.clone(), None))
                .collect();
            let txn = etcd_client::Txn::new().when(compares).and_then(puts);
            let resp = timed(client.txn(txn)).await?;
            if !resp.succeeded() {
                return Err(StoreError::Backend(
                    "a key appeared under the prefix during the restore".into(),
                ));
            }
            revision = resp
                .header()
                .map(|h| h.revision().max(0) as Revision)
                .unwrap_or(0);
        }
        Ok(revision)
    })
}

/// Opens the store: connects, loads every object at one revision, starts the watch and the
/// compactor.
pub(super) fn open(config: EtcdConfig, history_limit: usize) -> Result<Store, StoreError> {
    if config.endpoints.is_empty() {
        return Err(StoreError::Backend("no etcd endpoint given".into()));
    }
    let (runtime, client) = connect(&config)?;
    let prefix = key_prefix(&config);
    let (revision, objects) = {
        let (client, prefix) = (client.clone(), prefix.clone());
        run(&runtime, async move { load(client, &prefix).await })?
    };
    let (compacted, history) = {
        let (client, prefix) = (client.clone(), prefix.clone());
        // When the newest object was written at `revision`, that event surely comes; else
        // (a deletion, or a write outside the prefix) it may never: wait briefly for it.
        let newest = objects.values().map(|o| o.revision).max().unwrap_or(0);
        let wait = if newest == revision {
            REQUEST_TIMEOUT
        } else {
            Duration::from_secs(1)
        };
        run(&runtime, async move {
            Ok(recent_history(client, &prefix, revision, history_limit, wait).await)
        })?
    };
    let state = State {
        revision,
        compacted,
        objects,
        history,
    };
    let handle = runtime
        .handle()
        .cloned()
        .ok_or_else(|| unavailable("the etcd client is shut down"))?;
    let store = Store::assemble(
        super::Writer::Etcd(Box::new(Etcd {
            runtime,
            client: client.clone(),
            prefix: prefix.clone(),
        })),
        state,
        history_limit,
    );
    let weak = Arc::downgrade(&store.inner);
    handle.spawn(follow(weak.clone(), client.clone(), prefix));
    handle.spawn(compact(weak, client, config.compaction_interval));
    Ok(store)
}

fn connect_options(config: &EtcdConfig) -> Result<ConnectOptions, StoreError> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3))
        .with_keep_alive_while_idle(true)
        .with_require_leader(true);
    let read = |p: &PathBuf| {
        std::fs::read(p).map_err(|e| StoreError::Backend(format!("{}: {e}", p.display())))
    };
    let tls_wanted = config.endpoints.iter().any(|e| e.starts_with("https://"));
    if tls_wanted || config.ca_file.is_some() || config.cert_file.is_some() {
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &config.ca_file {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(read(ca)?));
        }
        match (&config.cert_file, &config.key_file) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            _ => {
                return Err(StoreError::Backend(
                    "--datastore-certfile and --datastore-keyfile go together".into(),
                ));
            }
        }
        options = options.with_tls(tls);
    }
    Ok(options)
}

/// Every object under `prefix` at one revision, in pages.
async fn load(
    mut client: Client,
    prefix: &str,
) -> Result<(Revision, BTreeMap<Arc<str>, StoredObject>), StoreError> {
    let end = range_end(prefix);
    let mut objects = BTreeMap::new();
    let mut start = prefix.as_bytes().to_vec();
    let mut revision = 0;
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let resp = timed(client.get(start.clone(), Some(options))).await?;
        if revision == 0 {
            revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        }
        for kv in resp.kvs() {
            let key = kv.key_str().map_err(unavailable)?;
            let Some(key) = key.strip_prefix(prefix.trim_end_matches('/')) else {
                continue;
            };
            objects.insert(Arc::from(key), decode(kv.value(), revision_of(kv))?);
        }
        match (resp.more(), resp.kvs().last()) {
            (true, Some(last)) => {
                start = last.key().to_vec();
                start.push(0);
            }
            _ => break,
        }
    }
    Ok((revision.max(0) as Revision, objects))
}

/// The events of (at most) the last `limit` revisions up to `revision`, read back from etcd:
/// the history a new cache starts with, so that watches resume across a controller's restart
/// as far back as etcd still holds. Best effort: an empty history (compacted at `revision`)
/// when etcd has compacted them or sends nothing for `wait`. Returns the revision the history
/// starts after, and the events.
async fn recent_history(
    mut client: Client,
    prefix: &str,
    revision: Revision,
    limit: usize,
    wait: Duration,
) -> (Revision, VecDeque<Arc<StoreEvent>>) {
    let none = (revision, VecDeque::new());
    let trimmed = prefix.trim_end_matches('/');
    let mut from = revision.saturating_sub(limit as Revision).max(1);
    // A new etcd (revision 1) has no history at all.
    for _ in 0..2 {
        if from > revision || revision <= 1 {
            return none;
        }
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(from as i64);
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(REQUEST_TIMEOUT, client.watch(prefix, Some(options))).await
        else {
            return none;
        };
        let mut compacted = from - 1;
        let mut history = VecDeque::new();
        loop {
            // The history is complete only once an event at or after `revision` arrives (etcd
            // sends a watcher's events in order): progress notifications cannot tell, as an
            // unsynced watcher may get one early. A newest revision outside the prefix (a
            // shared etcd) never arrives here: the cache then starts with no history.
            let resp = match tokio::time::timeout(wait, stream.message()).await {
                Ok(Ok(Some(resp))) => resp,
                _ => return none,
            };
            if resp.canceled() {
                if resp.compact_revision() > 0 {
                    from = resp.compact_revision() as Revision;
                    break;
                }
                return none;
            }
            for ev in resp.events() {
                let rev = ev.kv().map_or(0, revision_of);
                if rev > revision {
                    return (compacted, history);
                }
                match convert(trimmed, ev, |_| None) {
                    Some(e) => history.push_back(Arc::new(e)),
                    None => {
                        // A gap: the history starts after it.
                        history.clear();
                        compacted = rev;
                    }
                }
                if rev == revision {
                    return (compacted, history);
                }
            }
        }
    }
    none
}

/// Feeds the store's memory from one etcd watch of the prefix, resuming after the last
/// revision applied whenever the watch breaks; a resume point etcd has compacted reloads
/// everything and applies the difference.
async fn follow(store: Weak<super::Inner>, mut client: Client, prefix: String) {
    let trimmed = prefix.trim_end_matches('/').to_string();
    loop {
        let Some(inner) = store.upgrade() else { return };
        let from = Store { inner }.current_revision() + 1;
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(from as i64);
        let mut stream = match client.watch(prefix.clone(), Some(options)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "etcd watch failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        loop {
            let resp = match stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "etcd watch broke; resuming");
                    break;
                }
            };
            let Some(inner) = store.upgrade() else { return };
            let store = Store { inner };
            if resp.canceled() {
                if resp.compact_revision() > 0 {
                    tracing::warn!(
                        compacted = resp.compact_revision(),
                        "etcd compacted past the cache; reloading"
                    );
                    if let Err(e) = reload(&store, client.clone(), &prefix).await {
                        tracing::warn!(error = %e, "reloading from etcd failed");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                break;
            }
            // Responses without events (creation, progress) move nothing: etcd 3.4 answers a
            // progress request before the watcher has sent everything up to the revision it
            // names (etcd-io/etcd#15220), so only events count.
            if resp.events().is_empty() {
                continue;
            }
            let events: Vec<StoreEvent> = resp
                .events()
                .iter()
                .filter_map(|ev| event(&store, &trimmed, ev))
                .collect();
            let compact_to = store.compaction_point(&store.read(), events.len());
            store.apply(events, compact_to);
        }
    }
}

/// One etcd watch event as the store's event (`None` for keys outside the store's space or
/// undecodable values, which are logged).
fn event(store: &Store, prefix: &str, ev: &etcd_client::Event) -> Option<StoreEvent> {
    convert(prefix, ev, |key| store.get(key).map(|o| o.data.to_vec()))
}

/// An etcd event as the store's event; `last` gives a deleted key's last state when etcd's
/// previous value is gone.
fn convert(
    prefix: &str,
    ev: &etcd_client::Event,
    last: impl Fn(&str) -> Option<Vec<u8>>,
) -> Option<StoreEvent> {
    let kv = ev.kv()?;
    let key = kv.key_str().ok()?.strip_prefix(prefix)?;
    let revision = revision_of(kv);
    let prev = ev
        .prev_kv()
        .and_then(|p| decode(p.value(), revision_of(p)).ok());
    let (event_type, object) = match ev.event_type() {
        EtcdEventType::Put => {
            let event_type = if kv.create_revision() == kv.mod_revision() {
                EventType::Added
            } else {
                EventType::Modified
            };
            match decode(kv.value(), revision) {
                Ok(obj) => (event_type, obj),
                Err(e) => {
                    tracing::warn!(key, error = %e, "undecodable object in etcd");
                    return None;
                }
            }
        }
        EtcdEventType::Delete => {
            // The deleted object's last state, at the deletion's revision.
            let last = match ev.prev_kv() {
                Some(p) => Some(p.value().to_vec()),
                None => last(key),
            }?;
            (EventType::Deleted, decode(&last, revision).ok()?)
        }
    };
    Some(StoreEvent {
        revision,
        event_type,
        key: Arc::from(key),
        object,
        prev_index: prev.map(|p| p.index.clone()),
    })
}

/// Replaces the cache with a fresh load, as events: what changed since the cache's state.
async fn reload(store: &Store, client: Client, prefix: &str) -> Result<(), StoreError> {
    let (revision, objects) = load(client, prefix).await?;
    let mut events = Vec::new();
    {
        let state = store.read();
        for (key, old) in &state.objects {
            if !objects.contains_key(key) {
                let mut gone = old.clone();
                gone.revision = revision;
                events.push(StoreEvent {
                    revision,
                    event_type: EventType::Deleted,
                    key: key.clone(),
                    object: gone,
                    prev_index: Some(old.index.clone()),
                });
            }
        }
        for (key, new) in objects {
            let prev = state.objects.get(&key);
            if prev.is_some_and(|p| p.revision == new.revision) {
                continue;
            }
            events.push(StoreEvent {
                revision,
                event_type: if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                key,
                object: new,
                prev_index: prev.map(|p| p.index.clone()),
            });
        }
    }
    store.apply(events, None);
    store.advance(revision);
    Ok(())
}

/// Compacts etcd's history every `interval` to the revision seen one interval earlier (the
/// API server's compactor), so every watcher has at least one interval to resume in.
async fn compact(store: Weak<super::Inner>, mut client: Client, interval: Duration) {
    let mut previous: Option<Revision> = None;
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = store.upgrade() else { return };
        let current = Store { inner }.current_revision();
        if let Some(to) = previous.filter(|&to| to > 0) {
            match timed(client.compact(to as i64, None)).await {
                Ok(_) => tracing::debug!(revision = to, "compacted etcd"),
                // Another controller compacted past it already.
                Err(e) => tracing::debug!(revision = to, error = %e, "etcd compaction"),
            }
        }
        previous = Some(current);
    }
}

/// What a transaction found when its comparison failed: the key's current state.
fn current_of(resp: &etcd_client::TxnResponse) -> Result<Option<StoredObject>, StoreError> {
    for op in resp.op_responses() {
        if let TxnOpResponse::Get(get) = op
            && let Some(kv) = get.kvs().first()
        {
            return decode(kv.value(), revision_of(kv)).map(Some);
        }
    }
    Ok(None)
}

impl Store {
    /// Moves the revision readers see forward to `revision` with no event (every event up to
    /// it has been applied).
    fn advance(&self, revision: Revision) {
        let mut state = self.inner.state.write().unwrap_or_else(|e| e.into_inner());
        if revision <= state.revision {
            return;
        }
        state.revision = revision;
        drop(state);
        self.inner.visible.send_replace(revision);
    }

    /// Waits until the cache has applied `revision`.
    async fn caught_up(&self, revision: Revision) -> Result<(), StoreError> {
        let mut visible = self.inner.visible.subscribe();
        match tokio::time::timeout(CATCH_UP, visible.wait_for(|&r| r >= revision)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(unavailable("the store is shut down")),
            Err(_) => Err(unavailable(format!(
                "the watch cache did not reach revision {revision}"
            ))),
        }
    }
}

impl Etcd {
    fn key(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key.trim_start_matches('/'))
    }

    /// Waits until the cache holds everything etcd acknowledged before the call.
    pub(super) async fn sync(&self, store: &Store) -> Result<(), StoreError> {
        let handle = self
            .runtime
            .handle()
            .ok_or_else(|| unavailable("the etcd client is shut down"))?;
        handle
            .spawn(self.catch_up(store))
            .await
            .map_err(unavailable)?
    }

    /// [`Etcd::sync`] for blocking callers.
    pub(super) fn sync_blocking(&self, store: &Store) -> Result<(), StoreError> {
        run(&self.runtime, self.catch_up(store))
    }

    fn catch_up(
        &self,
        store: &Store,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let mut client = self.client.clone();
        let prefix = self.prefix.clone();
        let store = store.clone();
        async move {
            let options = GetOptions::new().with_prefix().with_count_only();
            let resp = timed(client.get(prefix, Some(options))).await?;
            let revision = resp.header().map(|h| h.revision()).unwrap_or(0) as Revision;
            if store.current_revision() >= revision {
                return Ok(());
            }
            // Every revision of a dedicated etcd is an event under the prefix, which the
            // watch brings (a newest revision outside the prefix is never reached: 503).
            store.caught_up(revision).await
        }
    }

    /// The key's current state in etcd (a linearizable read).
    pub(super) fn fetch(&self, key: &str) -> Result<Option<StoredObject>, StoreError> {
        let mut client = self.client.clone();
        let key = self.key(key);
        run(&self.runtime, async move {
            let resp = timed(client.get(key, None)).await?;
            match resp.kvs().first() {
                Some(kv) => decode(kv.value(), revision_of(kv)).map(Some),
                None => Ok(None),
            }
        })
    }

    pub(super) fn put(
        &self,
        store: &Store,
        key: &str,
        mut obj: Value,
        pre: Precondition,
    ) -> Result<StoredObject, StoreError> {
        let data = stored_bytes(&obj)?;
        let (revision, _) = self.transact(store, key, pre, Some(data))?;
        set_resource_version(&mut obj, revision);
        Ok(StoredObject {
            revision,
            index: Arc::new(ObjectIndex::of(&obj)),
            data: Bytes::from(serde_json::to_vec(&obj)?),
        })
    }

    pub(super) fn delete(
        &self,
        store: &Store,
        key: &str,
        pre: Precondition,
        last: Option<Value>,
    ) -> Result<StoredObject, StoreError> {
        let (revision, prev) = self.transact(store, key, pre, None)?;
        let mut obj = match (last, prev) {
            (Some(v), _) => v,
            (None, Some(prev)) => prev.value()?,
            (None, None) => return Err(StoreError::NotFound),
        };
        set_resource_version(&mut obj, revision);
        Ok(StoredObject {
            revision,
            index: Arc::new(ObjectIndex::of(&obj)),
            data: Bytes::from(serde_json::to_vec(&obj)?),
        })
    }

    /// One compare-and-swap write (`data`: the new value; `None`: delete), checked against the
    /// cache's version first and, when etcd's differs, against etcd's. Returns the write's
    /// revision and the version it replaced, once the cache has applied it.
    fn transact(
        &self,
        store: &Store,
        key: &str,
        pre: Precondition,
        data: Option<Vec<u8>>,
    ) -> Result<(Revision, Option<StoredObject>), StoreError> {
        let mut prev = store.get(key);
        let mut authoritative = false;
        let mut ambiguous_retries = 0;
        loop {
            if let Err(e) = check_precondition(pre, prev.as_ref()) {
                if authoritative {
                    return Err(e);
                }
                prev = self.fetch(key)?;
                authoritative = true;
                continue;
            }
            let etcd_key = self.key(key);
            let compare = match &prev {
                Some(p) => {
                    Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, p.revision as i64)
                }
                None => Compare::create_revision(etcd_key.clone(), CompareOp::Equal, 0),
            };
            let op = match &data {
                Some(d) => TxnOp::put(etcd_key.clone(), d.clone(), None),
                None => TxnOp::delete(etcd_key.clone(), None),
            };
            let txn = etcd_client::Txn::new()
                .when([compare])
                .and_then([op])
                .or_else([TxnOp::get(etcd_key.clone(), None)]);
            let mut client = self.client.clone();
            let outcome = run(&self.runtime, async move { timed(client.txn(txn)).await });
            let resp = match outcome {
                Ok(resp) => resp,
                Err(e) => {
                    // The transaction may or may not have been applied: read the key to tell.
                    let now = self.fetch(key)?;
                    let prev_revision = prev.as_ref().map(|p| p.revision);
                    let ours = match (&data, &now) {
                        (Some(d), Some(n)) => {
                            n.revision != prev_revision.unwrap_or(0)
                                && stored_bytes(&n.value()?)? == *d
                        }
                        (None, None) => prev.is_some(),
                        _ => false,
                    };
                    if ours {
                        let revision = now.as_ref().map(|n| n.revision);
                        return self.settled(store, revision, prev);
                    }
                    if now.as_ref().map(|n| n.revision) == prev_revision && ambiguous_retries < 2 {
                        ambiguous_retries += 1;
                        continue;
                    }
                    return Err(e);
                }
            };
            if resp.succeeded() {
                let revision = resp.header().map(|h| h.revision().max(0) as Revision);
                return self.settled(store, revision, prev);
            }
            prev = current_of(&resp)?;
            authoritative = true;
        }
    }

    /// A write etcd acknowledged at `revision` (for a deletion whose own revision is unknown,
    /// the cache's next deletion of the key): returned once the cache holds it.
    fn settled(
        &self,
        store: &Store,
        revision: Option<Revision>,
        prev: Option<StoredObject>,
    ) -> Result<(Revision, Option<StoredObject>), StoreError> {
        let revision = match revision {
            Some(r) => r,
            None => {
                let mut client = self.client.clone();
                let prefix = self.prefix.clone();
                run(&self.runtime, async move {
                    let options = GetOptions::new().with_prefix().with_count_only();
                    let resp = timed(client.get(prefix, Some(options))).await?;
                    Ok(resp.header().map(|h| h.revision()).unwrap_or(0).max(0) as Revision)
                })?
            }
        };
        let waiter = store.clone();
        // The write is durable in etcd; a cache that lags only delays visibility.
        if let Err(e) = run(
            &self.runtime,
            async move { waiter.caught_up(revision).await },
        ) {
            tracing::warn!(error = %e, revision, "write acknowledged before the cache caught up");
        }
        Ok((revision, prev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_end_of_a_prefix_is_its_successor() {
        assert_eq!(range_end("/berth/"), b"/berth0".to_vec());
        assert_eq!(range_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn etcd_holds_objects_without_their_resource_version() {
        let obj = serde_json::json!({"metadata": {"name": "a", "resourceVersion": "7"}});
        let bytes = stored_bytes(&obj).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            serde_json::json!({"metadata": {"name": "a"}})
        );
        let back = decode(&bytes, 12).unwrap();
        assert_eq!(back.revision, 12);
        assert_eq!(back.value().unwrap()["metadata"]["resourceVersion"], "12");
    }
}
