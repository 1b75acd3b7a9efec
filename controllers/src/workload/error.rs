//! Why a workload controller's pass failed, and how the runtime retries it: one error type for
//! the ReplicaSet, Deployment, DaemonSet, StatefulSet and Job controllers, whose passes fail
//! the same ways.

use crate::history::write::HistoryError;
use berth_registry::RegistryError;
use berth_shared::reconcile::{ErrorPolicy, Retry};

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    /// A pod (or claim) creation failed; the message is the API's, as upstream reports it.
    #[error("{0}")]
    Create(RegistryError),
    #[error("unable to delete pods: {0}")]
    Delete(RegistryError),
    /// An object the pass writes could not be encoded.
    #[error("encoding a {kind}: {source}")]
    Encode {
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The owner read from the cache is gone, replaced or being deleted: a plan that assumed
    /// its adoptions stops (upstream's `RecheckDeletionTimestamp` error).
    #[error("{0} is gone or being deleted: not adopting")]
    OwnerGone(String),
    /// The template cannot make pods: only a change of the owner helps.
    #[error("{0}")]
    Template(&'static str),
    /// The Job's tracking finalizer could not be taken off a pod.
    #[error("removing the tracking finalizer: {0}")]
    Untrack(RegistryError),
}

impl ErrorPolicy for SyncError {
    fn retry(&self) -> Retry {
        match self {
            SyncError::Api(e) => e.retry(),
            SyncError::History(e) => e.retry(),
            // As upstream: failed pod writes are retried with backoff whatever the cause (a
            // quota or a webhook may clear).
            SyncError::Create(_) | SyncError::Delete(_) | SyncError::Untrack(_) => Retry::Backoff,
            SyncError::Encode { .. } | SyncError::OwnerGone(_) => Retry::Backoff,
            SyncError::Template(_) => Retry::Never,
        }
    }
}
