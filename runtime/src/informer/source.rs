//! The seam between informers and the store: list one resource type at a revision, watch it
//! from a revision (reporting lag and compaction), and tell the newest revision. Implemented
//! here for the embedded store; an etcd-backed store implements the same trait and nothing
//! above the informers changes.

use super::object::Revision;
use berth_registry::prefix;
use berth_shared::resource::ResourceType;
use berth_store::{EventType, Store, StoreError, StoreEvent, StoredObject};
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// Why a source call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    /// The revision asked for is older than the history kept: list again.
    #[error("revision {requested} is compacted (oldest {oldest})")]
    Compacted {
        requested: Revision,
        oldest: Revision,
    },
    #[error("source unavailable: {0}")]
    Unavailable(String),
}

/// Why a watch ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchEnd {
    /// The watcher fell behind the events kept for it: list again.
    #[error("the watch fell behind")]
    Lagged,
    /// The history the watch needed was compacted: list again.
    #[error("the watch's revision was compacted")]
    Compacted,
    /// The source shut down.
    #[error("the source closed")]
    Closed,
}

/// One resource type's objects at one revision.
pub struct Listed {
    pub revision: Revision,
    pub objects: Vec<StoredObject>,
}

/// One change of a watched type.
#[derive(Debug, Clone)]
pub struct Change {
    pub event_type: EventType,
    pub object: StoredObject,
}

/// Changes delivered together, and the revision the watch has reached (which may be past the
/// last change: events of other types move it too).
#[derive(Debug, Default)]
pub struct Batch {
    pub changes: Vec<Change>,
    pub revision: Revision,
}

/// A running watch of one resource type.
pub trait SourceWatch: Send {
    /// Waits for at least one event of the store, then takes what else is ready (at most
    /// `max` changes of this type).
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Batch, WatchEnd>>;
}

/// Where informers read from.
pub trait Source: Send + Sync + 'static {
    fn list(&self, rt: &'static ResourceType) -> BoxFuture<'_, Result<Listed, SourceError>>;
    fn watch(
        &self,
        rt: &'static ResourceType,
        from: Revision,
    ) -> BoxFuture<'_, Result<Box<dyn SourceWatch>, SourceError>>;
    /// The newest revision written.
    fn current_revision(&self) -> BoxFuture<'_, Result<Revision, SourceError>>;
}

impl Source for Store {
    fn list(&self, rt: &'static ResourceType) -> BoxFuture<'_, Result<Listed, SourceError>> {
        let (revision, objects, _) = Store::list(self, &prefix(rt, None), None, None, |_| true);
        Box::pin(async move { Ok(Listed { revision, objects }) })
    }

    fn watch(
        &self,
        rt: &'static ResourceType,
        from: Revision,
    ) -> BoxFuture<'_, Result<Box<dyn SourceWatch>, SourceError>> {
        let result = match Store::watch(self, from) {
            Ok(w) => Ok(Box::new(StoreWatch {
                prefix: prefix(rt, None),
                backlog: w.backlog.into(),
                live: w.live,
            }) as Box<dyn SourceWatch>),
            Err(StoreError::Compacted { requested, oldest }) => {
                Err(SourceError::Compacted { requested, oldest })
            }
            Err(e) => Err(SourceError::Unavailable(e.to_string())),
        };
        Box::pin(async move { result })
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<Revision, SourceError>> {
        let rev = Store::current_revision(self);
        Box::pin(async move { Ok(rev) })
    }
}

/// A watch of the embedded store: its retained events after the starting revision, then the
/// live ones, filtered to one type's key prefix.
struct StoreWatch {
    prefix: String,
    backlog: VecDeque<Arc<StoreEvent>>,
    live: broadcast::Receiver<Arc<StoreEvent>>,
}

impl StoreWatch {
    fn take(&self, batch: &mut Batch, ev: &StoreEvent) {
        batch.revision = batch.revision.max(ev.revision);
        if ev.key.starts_with(&self.prefix) {
            batch.changes.push(Change {
                event_type: ev.event_type,
                object: ev.object.clone(),
            });
        }
    }
}

impl SourceWatch for StoreWatch {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Batch, WatchEnd>> {
        Box::pin(async move {
            let mut batch = Batch::default();
            while batch.changes.len() < max {
                let Some(ev) = self.backlog.pop_front() else {
                    break;
                };
                self.take(&mut batch, &ev);
            }
            if batch.revision == 0 {
                match self.live.recv().await {
                    Ok(ev) => self.take(&mut batch, &ev),
                    Err(RecvError::Lagged(_)) => return Err(WatchEnd::Lagged),
                    Err(RecvError::Closed) => return Err(WatchEnd::Closed),
                }
            }
            while batch.changes.len() < max {
                match self.live.try_recv() {
                    Ok(ev) => self.take(&mut batch, &ev),
                    Err(TryRecvError::Lagged(_)) => return Err(WatchEnd::Lagged),
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
            Ok(batch)
        })
    }
}
