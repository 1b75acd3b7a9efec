//! Following a cluster-scoped collection in the store for a controller: every object's name
//! once from a list, then the name of every changed object from the store's events; a watcher
//! that falls behind starts over from a fresh list (level-triggered: names only, never state).

use crate::store::Store;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Calls `on_name` for every object under `prefix` (`/core/nodes/`), now and on every change,
/// until `shutdown`.
pub async fn names(
    store: &Store,
    prefix: &str,
    shutdown: &CancellationToken,
    on_name: impl Fn(String),
) {
    while !shutdown.is_cancelled() {
        let (rev, items, _) = store.list(prefix, None, None, |_| true);
        for item in items {
            if let Some(name) = item.index.field("metadata.name") {
                on_name(name);
            }
        }
        let Ok(watch) = store.watch(rev) else {
            continue;
        };
        let feed = |key: &str| {
            if let Some(name) = key.strip_prefix(prefix) {
                on_name(name.to_string());
            }
        };
        for ev in &watch.backlog {
            feed(&ev.key);
        }
        let mut live = watch.live;
        loop {
            tokio::select! {
                r = live.recv() => match r {
                    Ok(ev) => feed(&ev.key),
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                },
                _ = shutdown.cancelled() => return,
            }
        }
    }
}
