//! The watch cache's feed from etcd: the first load at one revision, the recent history
//! read back so watches resume across a restart, the one prefix watch that keeps memory
//! current (moving to another member when its stream breaks), the reload after etcd compacted
//! past the cache, and the compactor.

use super::super::{EventType, Revision, Store, StoreError, StoreEvent, StoredObject};
use super::members::{Members, REQUEST_TIMEOUT};
use super::{PAGE, decode, range_end, revision_of, unavailable};
use etcd_client::{EventType as EtcdEventType, GetOptions, WatchOptions};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Every object under `prefix` at one revision, in pages.
pub(super) async fn load(
    members: &Members,
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
        let resp = members.get(start.clone(), Some(options)).await?;
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
pub(super) async fn recent_history(
    members: &Members,
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
        let Ok(Ok(mut stream)) = tokio::time::timeout(
            REQUEST_TIMEOUT,
            members.preferred().watch(prefix, Some(options)),
        )
        .await
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
pub(super) async fn follow(store: Weak<super::super::Inner>, members: Members, prefix: String) {
    let trimmed = prefix.trim_end_matches('/').to_string();
    loop {
        let Some(inner) = store.upgrade() else { return };
        let from = Store { inner }.current_revision() + 1;
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(from as i64);
        let opened = tokio::time::timeout(
            REQUEST_TIMEOUT,
            members.preferred().watch(prefix.clone(), Some(options)),
        )
        .await;
        let mut stream = match opened {
            Ok(Ok(stream)) => stream,
            failed => {
                let error = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_string(),
                };
                tracing::warn!(%error, "etcd watch failed; retrying on the next member");
                members.move_on();
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        loop {
            let resp = match stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "etcd watch broke; resuming on the next member");
                    members.move_on();
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
                    if let Err(e) = reload(&store, &members, &prefix).await {
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
        prev_index: prev.as_ref().map(|p| p.index.clone()),
        prev_data: prev.map(|p| p.data.clone()),
    })
}

/// Replaces the cache with a fresh load, as events: what changed since the cache's state.
async fn reload(store: &Store, members: &Members, prefix: &str) -> Result<(), StoreError> {
    let (revision, objects) = load(members, prefix).await?;
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
                    prev_data: Some(old.data.clone()),
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
                prev_data: prev.map(|p| p.data.clone()),
            });
        }
    }
    store.apply(events, None);
    store.advance(revision);
    Ok(())
}

/// Compacts etcd's history every `interval` to the revision seen one interval earlier (the
/// API server's compactor), so every watcher has at least one interval to resume in.
pub(super) async fn compact(
    store: Weak<super::super::Inner>,
    members: Members,
    interval: Duration,
) {
    let mut previous: Option<Revision> = None;
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = store.upgrade() else { return };
        let current = Store { inner }.current_revision();
        if let Some(to) = previous.filter(|&to| to > 0) {
            let compacted = members
                .read(|mut c| async move { c.compact(to as i64, None).await })
                .await;
            match compacted {
                Ok(_) => tracing::debug!(revision = to, "compacted etcd"),
                // Another controller compacted past it already.
                Err(e) => tracing::debug!(revision = to, error = %e, "etcd compaction"),
            }
        }
        previous = Some(current);
    }
}
