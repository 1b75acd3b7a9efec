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

mod cache;
mod members;

use super::{
    ObjectIndex, Precondition, Revision, State, Store, StoreError, StoredObject,
    check_precondition, set_resource_version,
};
use bytes::Bytes;
use etcd_client::{Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, TxnOp, TxnOpResponse};
use members::{Failure, Members, REQUEST_TIMEOUT};
use serde_json::Value;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
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
/// How long a write or a consistent read waits for the cache to catch up.
const CATCH_UP: Duration = Duration::from_secs(10);

/// The etcd side of a [`Store`].
pub(super) struct Etcd {
    runtime: Runtime,
    members: Members,
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
        data: crate::encode(&value)?,
    })
}

fn revision_of(kv: &KeyValue) -> Revision {
    kv.mod_revision().max(0) as Revision
}

/// Store keys and object JSON.
pub type Objects = Vec<(Arc<str>, Bytes)>;

/// A client per member on a runtime of its own.
fn connect(config: &EtcdConfig) -> Result<(Runtime, Members), StoreError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("etcd")
        .enable_all()
        .build()
        .map_err(|e| StoreError::Backend(format!("etcd runtime: {e}")))?;
    let runtime = Runtime(Some(runtime));
    let options = connect_options(config)?;
    let endpoints = config.endpoints.clone();
    let members = run(&runtime, async move {
        Members::connect(&endpoints, &options).await
    })?;
    Ok((runtime, members))
}

fn key_prefix(config: &EtcdConfig) -> String {
    format!("{}/", config.prefix.trim_end_matches('/'))
}

/// Every object under the configured prefix at one revision (a linearizable read), as the
/// cache would hold them (with `resourceVersion`): what a snapshot of an etcd store holds.
/// Blocking.
pub fn dump(config: &EtcdConfig) -> Result<(Revision, Objects), StoreError> {
    let (runtime, members) = connect(config)?;
    let prefix = key_prefix(config);
    let (revision, objects) = run(
        &runtime,
        async move { cache::load(&members, &prefix).await },
    )?;
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
    let (runtime, members) = connect(config)?;
    let prefix = key_prefix(config);
    let mut writes = Vec::with_capacity(objects.len());
    for (key, data) in objects {
        let value: Value = serde_json::from_slice(data)?;
        let key = format!("{prefix}{}", key.as_ref().trim_start_matches('/'));
        writes.push((key, stored_bytes(&value)?));
    }
    run(&runtime, async move {
        let options = GetOptions::new().with_prefix().with_count_only();
        let existing = members.get(prefix.clone(), Some(options)).await?;
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
            // A lost answer leaves keys behind: the retry then finds them and refuses.
            let resp = members
                .write(|mut c| {
                    let txn = txn.clone();
                    async move { c.txn(txn).await }
                })
                .await
                .map_err(Failure::into_store_error)?;
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
    let (runtime, members) = connect(&config)?;
    let prefix = key_prefix(&config);
    let (revision, objects) = {
        let (members, prefix) = (members.clone(), prefix.clone());
        run(
            &runtime,
            async move { cache::load(&members, &prefix).await },
        )?
    };
    let (compacted, history) = {
        let (members, prefix) = (members.clone(), prefix.clone());
        // When the newest object was written at `revision`, that event surely comes; else
        // (a deletion, or a write outside the prefix) it may never: wait briefly for it.
        let newest = objects.values().map(|o| o.revision).max().unwrap_or(0);
        let wait = if newest == revision {
            REQUEST_TIMEOUT
        } else {
            Duration::from_secs(1)
        };
        run(&runtime, async move {
            Ok(cache::recent_history(&members, &prefix, revision, history_limit, wait).await)
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
            members: members.clone(),
            prefix: prefix.clone(),
        })),
        state,
        history_limit,
    );
    let weak = Arc::downgrade(&store.inner);
    handle.spawn(cache::follow(weak.clone(), members.clone(), prefix));
    handle.spawn(cache::compact(weak, members, config.compaction_interval));
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

/// etcd's newest revision (a linearizable read of nothing but the header).
async fn newest_revision(members: &Members, prefix: &str) -> Result<Revision, StoreError> {
    let options = GetOptions::new().with_prefix().with_count_only();
    let resp = members.get(prefix, Some(options)).await?;
    Ok(resp.header().map(|h| h.revision()).unwrap_or(0).max(0) as Revision)
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
        let members = self.members.clone();
        let prefix = self.prefix.clone();
        let store = store.clone();
        async move {
            let revision = newest_revision(&members, &prefix).await?;
            if store.current_revision() >= revision {
                return Ok(());
            }
            // Every revision of a dedicated etcd is an event under the prefix, which the
            // watch brings (a newest revision outside the prefix is never reached: 503).
            store.caught_up(revision).await
        }
    }

    /// The key's current state in etcd (a linearizable read, from any member that answers).
    pub(super) fn fetch(&self, key: &str) -> Result<Option<StoredObject>, StoreError> {
        let members = self.members.clone();
        let key = self.key(key);
        run(&self.runtime, async move {
            let resp = members.get(key, None).await?;
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
            data: crate::encode(&obj)?,
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
            data: crate::encode(&obj)?,
        })
    }

    /// One compare-and-swap write (`data`: the new value; `None`: delete), checked against the
    /// cache's version first and, when etcd's differs, against etcd's. Returns the write's
    /// revision and the version it replaced, once the cache has applied it.
    ///
    /// The compare is always on etcd's `mod_revision` of the version checked, so a write is
    /// applied only over exactly that version, whatever the cache says. A transaction whose
    /// answer was lost is never taken for a success: the key is read back, and if it still
    /// holds the version compared against the transaction is sent again (the compare lets at
    /// most one of the two apply); if it moved on, nobody can tell whose write that was, and
    /// the caller gets [`StoreError::OutcomeUnknown`] (504, as upstream answers a timed-out
    /// write). (Comparing the bytes read back with ours once acknowledged a write of a
    /// competing client that wrote the same bytes: an acknowledged update lost.)
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
            let members = self.members.clone();
            let outcome = run(&self.runtime, async move {
                Ok(members
                    .write(|mut c| {
                        let txn = txn.clone();
                        async move { c.txn(txn).await }
                    })
                    .await)
            })?;
            let resp = match outcome {
                Ok(resp) => resp,
                Err(Failure::Ambiguous(e)) => {
                    // Applied or not: the key's version tells only whether it is still the one
                    // compared against.
                    let now = self.fetch(key)?;
                    let unchanged =
                        now.as_ref().map(|n| n.revision) == prev.as_ref().map(|p| p.revision);
                    if unchanged && ambiguous_retries < 2 {
                        ambiguous_retries += 1;
                        continue;
                    }
                    return Err(if unchanged {
                        StoreError::Unavailable(e)
                    } else {
                        StoreError::OutcomeUnknown(e)
                    });
                }
                Err(other) => return Err(other.into_store_error()),
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
                let members = self.members.clone();
                let prefix = self.prefix.clone();
                run(&self.runtime, async move {
                    newest_revision(&members, &prefix).await
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
